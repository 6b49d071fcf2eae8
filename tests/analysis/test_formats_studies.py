"""The edit formats in the studies: --formats, each case's oracle programs, and the coverage
study's table of output tokens per format."""

from __future__ import annotations

import argparse
import json

import pytest

from analysis import coverage
from analysis.formats import FORMATS, format_argv, format_methods, format_programs, free, method_label, parse_formats
from cad_outlines.edits.formats import apply_format

BEFORE = "".join(f"line {i}\n" for i in range(1, 30))
AFTER = BEFORE.replace("line 7\n", "line seven\n").replace("line 20\n", "")


def test_formats_option():
    assert parse_formats("all") == list(FORMATS) and parse_formats("none") == [] and parse_formats("") == []
    assert parse_formats("udiff,search_replace") == ["search_replace", "udiff"]  # in FORMATS order
    with pytest.raises(SystemExit, match="unknown 'copy'"):
        parse_formats("copy")  # CaD always runs as its own methods
    assert format_argv(list(FORMATS)) == [] and format_argv([]) == ["--formats", "none"]
    assert format_argv(["udiff"]) == ["--formats", "udiff"]
    assert format_methods(["udiff", "str_replace"]) == ["udiff", "udiff_free", "str_replace", "str_replace_free"]
    assert method_label(free("udiff"), {}) == "unified diff, unconstrained"
    assert method_label("regen", {"regen": "full regeneration"}) == "full regeneration"


def test_every_format_writes_the_edit_and_it_applies():
    programs = format_programs(BEFORE, AFTER, list(FORMATS))
    assert set(programs) == set(FORMATS)
    for name, text in programs.items():
        assert apply_format(text, BEFORE, name) == AFTER
    # a line format cannot write a change of the final newline alone: None, not an error
    assert format_programs("a\n", "a", ["udiff", "str_replace"])["udiff"] is None


def test_coverage_counts_each_format_against_the_cad_program(data_dir, tmp_path):
    _, encode = coverage.load_encoder(None)
    one = coverage.case_tally(BEFORE, AFTER, encode, FORMATS)
    assert one.format_cases == dict.fromkeys(FORMATS, 1)
    for name, text in format_programs(BEFORE, AFTER, list(FORMATS)).items():
        assert one.format_tokens[name] == len(encode(text)[0])
        assert one.format_cad_tokens[name] == one.program_tokens
        assert one.format_shorter[name] == int(one.format_tokens[name] < one.program_tokens)
    assert one.numbered_tokens > one.doc_tokens
    pooled = coverage.Tally()
    pooled.add(one)
    pooled.add(one)
    assert pooled.format_tokens == {k: 2 * v for k, v in one.format_tokens.items()}
    table = coverage.format_table({"pooled": pooled}, list(FORMATS))
    assert "| pooled | 2 |" in table and "unified diff (x CaD; shorter than CaD)" in table

    corpus = tmp_path / "tiny.jsonl"
    corpus.write_text(json.dumps({"before": BEFORE, "after": AFTER}) + "\n")
    parser = argparse.ArgumentParser()
    coverage.add_arguments(parser)
    args = parser.parse_args(["--jsonl", str(corpus), "--formats", "udiff", "--out-dir", str(tmp_path)])
    assert coverage.run(args) == 0
    text = (tmp_path / "coverage.md").read_text()
    assert "**Edit formats**" in text and "unified diff (x CaD" in text and "search/replace (x CaD" not in text
    assert "--formats udiff" in text

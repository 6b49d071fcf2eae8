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
    assert set(one.costs) == {"regen", "copy", *FORMATS}
    assert one.costs["regen"].tokens == len(encode(AFTER)[0]) == one.costs["regen"].forwards
    assert one.costs["copy"].tokens == one.program_tokens and one.costs["copy"].chosen is None  # no schedule
    for name, text in format_programs(BEFORE, AFTER, list(FORMATS)).items():
        cost = one.costs[name]
        assert (cost.cases, cost.tokens, cost.cad_tokens) == (1, len(encode(text)[0]), one.program_tokens)
        assert cost.shorter == int(cost.tokens < one.program_tokens)
    assert one.numbered_tokens > one.doc_tokens
    pooled = coverage.Tally()
    pooled.add(one)
    pooled.add(one)
    assert {k: c.tokens for k, c in pooled.costs.items()} == {k: 2 * c.tokens for k, c in one.costs.items()}
    assert pooled.costs["regen"].forwards == 2 * one.costs["regen"].forwards and pooled.costs["udiff"].chosen is None
    from analysis.format_costs import Tracer

    tracer = Tracer(data_dir / "tokenizers/qwen2.5")
    traced = coverage.case_tally(BEFORE, AFTER, encode, ["udiff"], tracer)
    udiff = format_programs(BEFORE, AFTER, ["udiff"])["udiff"]
    assert (traced.costs["udiff"].chosen, traced.costs["udiff"].forwards) == tracer(BEFORE, udiff, "udiff")
    assert traced.costs["udiff"].chosen < traced.costs["udiff"].tokens  # search text forced once unique
    assert traced.costs["regen"].chosen == traced.costs["regen"].tokens + 1  # every token, and the end
    table = coverage.format_table({"pooled": pooled})
    assert "| pooled | unified diff | 2 |" in table

    corpus = tmp_path / "tiny.jsonl"
    corpus.write_text(json.dumps({"before": BEFORE, "after": AFTER}) + "\n")
    parser = argparse.ArgumentParser()
    coverage.add_arguments(parser)
    args = parser.parse_args(["--jsonl", str(corpus), "--formats", "udiff", "--no-trace", "--out-dir", str(tmp_path)])
    assert coverage.run(args) == 0
    text = (tmp_path / "coverage.md").read_text()
    assert "**Edit formats**" in text and "| unified diff |" in text and "search/replace" not in text
    assert "--formats udiff" in text and "No trace" in text


def test_serving_targets_pick_the_fastest_format_that_wrote_every_edit():
    from analysis.serving import MethodResult, format_targets, label

    def result(method, makespan, edits=4):
        return MethodResult(method, makespan, [makespan] * edits, 100, 0, 50, 20, edits)

    results = [result("regen", 50.0), result("cad", 20.0), result("udiff", 12.0), result("udiff_free", 15.0),
               result("search_replace", 5.0, edits=3), result("search_replace_free", 9.0, edits=3)]
    lines = format_targets(results)
    assert label("udiff") in lines[2] and "<= CaD's met" in lines[2] and "<= unconstrained met" in lines[2]
    slow = [r if r.method != "udiff" else result("udiff", 30.0) for r in results]
    line = format_targets(slow)[2]
    assert label("udiff") in line and "<= CaD's missed" in line and "<= unconstrained missed" in line
    assert format_targets([result("regen", 1.0), result("cad", 1.0)]) == []  # no format ran

"""The line-numbers study: what a line's number costs per tokenizer and rendering, and its report."""

from __future__ import annotations

import argparse
import json

import pytest

from analysis import line_numbers

pytestmark = pytest.mark.shared_data

DOC = "".join(f"x = {i}\n" for i in range(1, 13))  # 12 lines, no indentation: numbers of 1 and 2 digits


def test_qwen_pays_exactly_the_digits_for_the_default_and_more_for_the_old_rendering(data_dir):
    count = line_numbers.load_counter(data_dir / "tokenizers/qwen2.5")
    per_line, rows = line_numbers.tokenizer_rows(count, [DOC])
    cost = {name: c for name, c, _ in rows}
    digits = line_numbers.digits_per_line([DOC])
    assert digits == (9 + 2 * 3) / 12
    assert cost[line_numbers.DEFAULT_RENDERING] == pytest.approx(digits)  # "12 x" = "1" "2" " x"
    assert cost["`NNN \\| text`, padded (before issue 31)"] > cost["`N \\| text`"] > cost[line_numbers.DEFAULT_RENDERING]
    assert per_line == pytest.approx(count("Document:\n" + DOC) / 12)


def test_every_candidate_writes_every_full_number():
    for render in line_numbers.RENDERINGS.values():
        shown = render(DOC).splitlines()
        assert [s.split("x")[0].strip(" |:\t") for s in shown] == [str(i) for i in range(1, 13)]


def test_report_on_a_small_corpus_with_both_tokenizer_kinds(data_dir, tmp_path):
    corpus = tmp_path / "tiny.jsonl"
    with corpus.open("w") as f:
        for i, doc in enumerate([DOC, "def f():\n    return 1\n\n\nprint(f())"]):
            f.write(json.dumps({"id": i, "before": doc, "after": doc, "instruction": "keep"}) + "\n")
    parser = argparse.ArgumentParser()
    line_numbers.add_arguments(parser)
    args = parser.parse_args(["--jsonl", str(corpus), "--tokenizers", "Qwen2.5,Llama-2", "--out-dir", str(tmp_path)])
    assert line_numbers.run(args) == 0
    text = (tmp_path / "line_numbers.md").read_text()
    assert "### Qwen2.5" in text and "### Llama-2" in text and "### GPT-2" not in text
    assert "study line-numbers --jsonl" in text and "--tokenizers Qwen2.5,Llama-2" in text
    assert "| all | 2 | 17 |" in text  # the prompt table: both documents, 12 + 5 lines


def test_unknown_tokenizer_is_refused(tmp_path):
    parser = argparse.ArgumentParser()
    line_numbers.add_arguments(parser)
    args = parser.parse_args(["--tokenizers", "Qwen2.5,nope", "--out-dir", str(tmp_path)])
    with pytest.raises(SystemExit, match="unknown nope"):
        line_numbers.run(args)

"""The format-costs study's model-free trace makes the decisions, forced tokens and forwards the decode
loop makes, in every format (the tiny real model and its SentencePiece vocabulary)."""

from __future__ import annotations

import argparse

import pytest

from analysis import format_costs
from cad_outlines.edits.formats import EDIT_FORMATS, oracle_text

DOC = ("Once upon a time there was a cat.\nThe cat liked milk.\nOne day the cat saw a dog.\nThey became friends.\n"
       "The cat liked milk.\nThe end.\n")
AFTER = DOC.replace("saw a dog", "saw a bird").replace("The end.", "The very end.")


@pytest.mark.parametrize("fmt", EDIT_FORMATS)
def test_trace_equals_the_decode_loop(tiny, tmp_path_factory, fmt):
    from cad_outlines.generators.copy_decode import CopyEditor

    editor = CopyEditor(*tiny, cache=tmp_path_factory.mktemp("cache"), format=fmt)
    text = oracle_text(DOC, AFTER, fmt)
    stats = editor.execute(DOC, text).stats
    trace = format_costs.trace_program(fmt, DOC, text, editor.grammar, editor._encoder)
    assert (trace.decisions, trace.forced, trace.forwards) == (
        stats.generated_tokens, stats.fast_forwarded_tokens, stats.total_forwards - stats.forwards["prompt"])
    if fmt != "copy":
        assert 0 < trace.search_decisions < trace.decisions


def test_study_writes_its_table(data_dir, tmp_path):
    parser = argparse.ArgumentParser()
    format_costs.add_arguments(parser)
    args = parser.parse_args(["--dataset", "humanevalfix-python", "--per-bucket", "2", "--formats", "udiff,copy",
                              "--out", str(tmp_path)])
    assert format_costs.run(args) == 0
    report = (tmp_path / "format_costs_humanevalfix_python.md").read_text()
    assert "| udiff | all | 2 |" in report and "decisions / search line" in report

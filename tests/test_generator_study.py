"""The generator study's quick path on two cases of a corpus with a tiny Qwen2 (Qwen2.5
vocabulary): every method reproduces the gold output; forward counts are consistent."""

from __future__ import annotations

import argparse

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from analysis import generator
from analysis.datasets import load_corpus


@pytest.fixture(scope="module")
def setup(data_dir):
    from transformers import PreTrainedTokenizerFast

    from cad_outlines.generators.copy_decode import CopyEditor

    model = generator.build_model(generator.QUICK_CONFIG, "fp32", "cpu", seed=0)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(data_dir / "tokenizers/qwen2.5"))
    return model, tokenizer, CopyEditor(model, tokenizer)


@pytest.mark.parametrize("corpus", ["humanevalfix-js", "editeval"])
def test_every_method_reproduces_the_gold_output(setup, corpus):
    model, tokenizer, editor = setup
    cases = generator.sample_cases(load_corpus(corpus), 2, seed=0)
    assert len(cases) == 2
    for case in cases:
        r = generator.measure_case(model, editor, tokenizer, case, draft=10)  # raises on any mismatch
        runs = r.runs
        gold = r.out_tokens
        assert runs["regen"].forwards == gold  # one per gold token (the last predicts the end token)
        assert 0 < runs["pld"].forwards <= gold
        assert runs["pld"].extra["accepted"] <= runs["pld"].extra["drafted"]
        assert runs["pld"].forwards + runs["pld"].extra["accepted"] == gold
        for m in ("cad_prefill", "cad_skip", "cad_spec"):
            assert runs[m].tokens == r.program_tokens
            f = runs[m].extra["forwards"]
            assert f["prompt"] == 1 and runs[m].forwards == sum(f.values()) - 1
        assert runs["cad_prefill"].extra["copied"] > 0 and runs["cad_skip"].extra["copied"] == 0
        assert runs["cad_spec"].forwards <= runs["cad_prefill"].forwards
        spec = runs["cad_spec"].extra
        assert (spec["forwards"]["decode"] + spec["forwards"]["verify"] + spec["accepted"]
                == runs["cad_prefill"].extra["forwards"]["decode"])


def test_quick_study_writes_its_report(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("CAD_OUTLINES_DATA", str(data_dir))
    parser = argparse.ArgumentParser()
    generator.add_arguments(parser)
    args = parser.parse_args(["--quick", "--dataset", "humanevalfix-python", "--out-dir", str(tmp_path), "--no-plot"])
    assert generator.run(args) == 0
    text = (tmp_path / "generator_quick.md").read_text()
    assert "study generator" in text and "humanevalfix-python" in text and "| pooled | 2 |" in text
    assert len((tmp_path / "generator_quick_cases.csv").read_text().splitlines()) == 3

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
    return model, tokenizer, CopyEditor(model, tokenizer, prompt_cache=1)  # as the study builds it


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
            assert f["prompt"] == (1 if m == "cad_prefill" else 0)  # the others reuse its prompt
            assert runs[m].forwards == sum(f.values()) - f["prompt"]
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
    assert ".png)" not in text  # --no-plot: no figure is drawn, and none is linked


def test_kernel_select_matching_no_row_says_so(tmp_path):
    from analysis.coverage import read_kernel_curves

    csv = tmp_path / "k.csv"
    csv.write_text("config,dtype,device,n,speedup\nqwen2.5-1.5b,bf16,cuda,8,7.0\nqwen2.5-1.5b,bf16,cuda,64,40.0\n")
    assert len(read_kernel_curves(csv, "config=qwen2.5-1.5b,device=cuda")) == 1
    with pytest.raises(SystemExit, match="matches no row"):  # the first key leaves no row: the second is still a column
        read_kernel_curves(csv, "config=qwen2.5-0.5b,device=cuda")
    with pytest.raises(SystemExit, match="no column 'threads'"):
        read_kernel_curves(csv, "config=qwen2.5-0.5b,threads=2")


def test_baseline_prompts_hold_the_plain_document(setup):
    """Regeneration and prompt lookup see the document without line numbers: with numbers,
    every line start breaks the n-gram matches, so prompt lookup needs more forwards."""
    from cad_outlines.edits import number_lines

    model, tokenizer, editor = setup
    import random

    words = ["alpha", "bravo", "delta", "echo", "golf", "hotel", "india", "kilo", "lima", "mike", "oscar", "papa",
             "romeo", "sierra", "tango", "victor", "whiskey", "yankee", "zulu", "orbit", "quartz", "nickel"]
    rng = random.Random(0)
    lines = [f"    {rng.choice(words)}_{rng.choice(words)} = {rng.choice(words)}({rng.choice(words)}.{rng.choice(words)})\n"
             for _ in range(40)]
    before = "".join(lines)
    after = "".join(lines[:17] + ["    changed = True\n"] + lines[18:])
    prompt = generator.regen_prompt(tokenizer, before, "use 71")
    assert before in prompt and number_lines(before) not in prompt
    targets = editor.encode(after) + [tokenizer.eos_token_id]
    numbered = prompt.replace(before, number_lines(before))
    plain_run = generator.run_pld(model, generator.prefill(model, editor.encode_prompt(prompt)), targets,
                                  eos_ids=(tokenizer.eos_token_id,))
    numbered_run = generator.run_pld(model, generator.prefill(model, editor.encode_prompt(numbered)), targets,
                                     eos_ids=(tokenizer.eos_token_id,))
    assert plain_run.forwards < numbered_run.forwards
    assert plain_run.extra["accepted"] > numbered_run.extra["accepted"]


def test_sampled_regeneration_times_strata_and_leaves_the_prompt_as_it_was(setup):
    """The strata estimate times `strata` x 3 real decode steps and counts every gold step; the
    shared prompt's KV cache is only copied, never extended."""
    from cad_outlines.decoding.kv import cache_len

    model, tokenizer, editor = setup
    prompt = generator.prefill(model, editor.encode_prompt("Rewrite this:\nalpha beta gamma\n"))
    targets = editor.encode("alpha beta delta gamma epsilon " * 12) + [tokenizer.eos_token_id]
    run = generator.run_regen_sampled(model, prompt, targets, strata=5, run=4, chunk=16)
    assert run.forwards == len(targets) - 1 and run.extra["timed_steps"] == 20
    assert run.after_prompt_s > 0 and run.prompt_s == prompt.seconds
    assert cache_len(prompt.cache) == len(prompt.ids)
    full = generator.run_regen(model, prompt, targets)
    assert full.forwards == run.forwards and cache_len(prompt.cache) == len(prompt.ids)


def test_sampled_prompt_lookup_follows_the_same_schedule_and_leaves_the_prompt_as_it_was(setup):
    """Prompt lookup's verifies are fixed by the gold tokens alone: the schedule counts every
    forward, draft and acceptance of the run that times them all; the strata estimate times
    `strata` x `run` of them on the real cache and ends where the full run ends."""
    from cad_outlines.decoding.kv import cache_len

    model, tokenizer, editor = setup
    text = "alpha beta delta gamma epsilon zeta " * 10
    prompt = generator.prefill(model, editor.encode_prompt(f"Rewrite this:\n{text}\n"))
    targets = editor.encode(text.replace("delta", "theta")) + [tokenizer.eos_token_id]
    eos = (tokenizer.eos_token_id,)
    steps = generator.pld_schedule(prompt.ids, targets, draft=6, eos_ids=eos)
    assert steps[0].pos == 0 and all(b.pos == a.pos + 1 + a.accepted for a, b in zip(steps, steps[1:]))
    assert steps[-1].pos + 1 + steps[-1].accepted == len(targets) - 1  # the last verify reaches the end token
    full = generator.run_pld(model, prompt, targets, draft=6, eos_ids=eos)
    assert full.forwards == len(steps) and full.extra["timed_forwards"] == len(steps)
    assert full.extra["accepted"] == sum(x.accepted for x in steps) and full.extra["accepted"] > 0
    assert full.forwards + full.extra["accepted"] == len(targets) - 1
    sampled = generator.run_pld(model, prompt, targets, draft=6, eos_ids=eos, strata=3, run=2, chunk=8)
    assert sampled.forwards == full.forwards and sampled.extra["accepted"] == full.extra["accepted"]
    assert sampled.extra["timed_forwards"] == 3 * 2 and sampled.after_prompt_s > 0
    assert cache_len(prompt.cache) == len(prompt.ids)  # only copied
    few = generator.run_pld(model, prompt, targets, draft=6, eos_ids=eos, strata=len(steps))
    assert few.extra["timed_forwards"] == len(steps)  # no more strata than forwards: timed whole


def test_regeneration_is_estimated_only_past_the_full_limit(setup):
    model, tokenizer, editor = setup
    case = generator.warm_up_case(load_corpus("humanevalfix-python"))
    sampled = generator.measure_case(model, editor, tokenizer, case, draft=4, regen_strata=4, regen_full_max=0)
    both = generator.measure_case(model, editor, tokenizer, case, draft=4, regen_strata=4, regen_full_max=10**6)
    assert sampled.runs["regen"].extra["full_s"] is None and sampled.runs["regen"].extra["timed_steps"] == 4 * 8
    assert both.runs["regen"].extra["full_s"] == both.runs["regen"].after_prompt_s
    assert both.runs["regen"].extra["sampled_s"] > 0
    assert "estimate error" in generator.estimate_check_table({"c": [both]})
    pld = generator.measure_case(model, editor, tokenizer, case, draft=4, pld_strata=2, pld_full_max=10**6)
    assert pld.runs["pld"].extra["full_s"] == pld.runs["pld"].after_prompt_s and pld.runs["pld"].extra["sampled_s"]
    table = generator.estimate_check_table({"c": [pld]})
    assert "prompt lookup" in table and "full regeneration" not in table
    only = generator.measure_case(model, editor, tokenizer, case, draft=4, pld_strata=2, pld_full_max=0)
    assert only.runs["pld"].extra["full_s"] is None and 0 < only.runs["pld"].extra["timed_forwards"] <= 2 * 8
    # the CaD runs after the first reuse its numbered prompt, and count its prompt time
    cad = both.runs
    assert cad["cad_skip"].extra["prompt_reused"] == cad["cad_prefill"].extra["prompt_tokens"]
    assert cad["cad_skip"].prompt_s == cad["cad_spec"].prompt_s == cad["cad_prefill"].prompt_s
    assert cad["cad_prefill"].extra["prompt_reused"] == 0


def test_long_corpora_are_sampled_per_length_bucket():
    from analysis.datasets import Corpus, EditCase, length_bucket

    cases = tuple(EditCase(str(i), "x\n" * n, "y\n" * n) for i, n in enumerate([10, 20, 300, 400, 700, 800]))
    sample = generator.sample_cases(Corpus("long", cases, bucketed=True), 1, seed=0)
    assert sorted(length_bucket(c.lines_before) for c in sample) == ["200-500", "500-1,500", "<200"]
    assert generator.sample_cases(Corpus("long", cases, bucketed=True), 1, 0, ["<200"])[0].lines_before < 200
    assert len(generator.sample_cases(Corpus("short", cases), 2, seed=0)) == 2  # not bucketed: per corpus


def test_prompts_keep_special_tokens_and_the_text_tokenization(setup):
    """A chat-template prompt: its markers are the special tokens, the rest is tokenized as
    the same text is anywhere else (so prompt lookup finds the document's n-grams), and
    the whole equals the tokenizer's own encoding."""
    model, tokenizer, editor = setup
    document = "def f(x):\n    return x + 1\n"
    prompt = generator.regen_prompt(tokenizer, document, "add 2")
    assert "<|im_start|>" in prompt
    ids = editor.encode_prompt(prompt)
    assert ids == tokenizer.encode(prompt, add_special_tokens=False)
    start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert ids.count(start) == prompt.count("<|im_start|>") and start not in editor.encode(document)
    doc_ids = editor.encode("\n" + document)[1:]
    assert any(ids[i : i + len(doc_ids)] == doc_ids for i in range(len(ids)))
    assert editor.encode_prompt("no markers here") == editor.encode("no markers here")


def test_bound_check_splits_the_gap_into_context_and_loop(data_dir, monkeypatch):
    """With copies priced as the kernel prices them, the bound at the run's cost is the kernel
    bound (context share 1); pricing them twice as high lowers it; the loop share is CaD over
    the run-cost bound. Timings are made up, so only the arithmetic is under test."""
    from analysis.datasets import EditCase

    from cad_outlines.edits.metrics import KernelCurve

    monkeypatch.setenv("CAD_OUTLINES_DATA", str(data_dir))
    before = "".join(f"value_{i} = compute({i}, scale=2)\n" for i in range(40))
    after = before.replace("value_7 = compute(7, scale=2)", "value_7 = compute(7, scale=3)  # fixed")
    case = EditCase("c", before, after)
    curve = KernelCurve.from_points([(1, 1.0), (1000, 10.0)])
    tally = generator._group_tallies({"c": [generator.CaseResult("c", "c", 0, 0, {}, case)]})["c"]
    copied = sum(tally.copy_tokens)
    step = 0.1
    kernel_price = sum(n / curve(n) for n in tally.copy_tokens) / copied

    def result(price_factor: float, cad_s: float) -> generator.CaseResult:
        regen = generator.Run(1.0, tally.out_tokens * step, tally.out_tokens, tally.out_tokens)
        cad = generator.Run(1.0, cad_s, 10, tally.program_tokens, {
            "model_s_by_kind": {"copy": copied * kernel_price * price_factor * step}, "copied": copied,
            "prompt_tokens": 500})
        return generator.CaseResult("c", "c", tally.out_tokens, tally.program_tokens,
                                    {"regen": regen, "cad_prefill": cad}, case)

    kernel_bound = tally.bounds(curve)[0]
    same = generator.bound_check_table({"c": [result(1.0, tally.out_tokens * step / kernel_bound * 2)]}, curve)
    row = [c.strip() for c in same.splitlines()[2].split("|")[1:-1]]
    assert row[5] == row[6] == f"{kernel_bound:.2f}x"  # the two bounds agree
    assert row[8] == "1.00" and row[9] == "0.50"  # context share 1, CaD at half the bound (rest share)
    dear = generator.bound_check_table({"c": [result(2.0, 1.0)]}, curve)
    row = [c.strip() for c in dear.splitlines()[2].split("|")[1:-1]]
    run_bound = tally.out_tokens / (tally.program_tokens + 2 * kernel_price * copied)
    assert row[6] == f"{run_bound:.2f}x" and float(row[8]) < 1.0
    assert generator.bound_check_table({"c": [result(1.0, 1.0)]}, None) is None

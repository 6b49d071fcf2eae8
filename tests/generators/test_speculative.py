"""Speculative gen bodies: greedy results identical to plain decoding, the sampling rule
exact, oracle programs executed with drafts reproduce their text."""

import json

import numpy as np
import pytest
import torch

from cad_outlines import Copy, oracle_program, parse_program, resolve, split_lines
from cad_outlines.generators.copy_decode import CopyEditor
from cad_outlines.generators.ngram import NgramLookup
from cad_outlines.generators.sampling import Sampling, distribution, verify_rule, verify_token

DOCS = [
    "Once upon a time there was a cat.\nThe cat liked milk.\nOne day the cat saw a dog.\nThey became friends.\n",
    "Tom had a red ball.\nHe played with the ball in the park.\nThe ball was red and big.\n",
    "Lily saw a bird.\nThe bird was sad.\nLily gave the bird some food.\nThe bird was happy.\nThe end.\n",
]
INSTRUCTIONS = ["Make the dog a bird.", "x", "Tell the story again."]


def random_qwen2(seed: int, vocab: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=vocab, max_position_embeddings=1024)
    return Qwen2ForCausalLM(cfg).eval()


def check_same(plain, spec):
    assert spec.program_text == plain.program_text
    assert spec.text == plain.text and spec.complete == plain.complete and spec.stop_reason == plain.stop_reason
    assert spec.stats.generated_tokens == plain.stats.generated_tokens
    s = spec.stats
    assert s.accepted_tokens <= s.drafted_tokens
    assert (s.forwards["verify"] > 0) == (s.drafted_tokens > 0)
    # every generated token came from a decode/copy forward, a verify forward or an accepted draft
    assert s.forwards["decode"] + s.forwards["verify"] <= s.generated_tokens


@pytest.mark.parametrize("doc", range(len(DOCS)))
def test_greedy_speculative_equals_plain_on_the_real_tiny_model(editor, doc):
    accepted = 0
    for instruction in INSTRUCTIONS:
        for mode in ("prefill", "skip"):
            kw = {"max_new_tokens": 60, "copy_mode": mode}
            plain = editor.edit(DOCS[doc], instruction, **kw)
            spec = editor.edit(DOCS[doc], instruction, speculative=10, **kw)
            check_same(plain, spec)
            accepted += spec.stats.accepted_tokens
    assert accepted > 0  # the drafts did something


@pytest.mark.parametrize("seed", range(4))
def test_greedy_speculative_equals_plain_on_random_qwen2(editor, tiny, seed):
    model = random_qwen2(seed, vocab=tiny[1].vocab_size)
    ed = CopyEditor(model, tiny[1], grammar=editor.grammar)
    doc = DOCS[seed % len(DOCS)]
    for k in (1, 4, 10):
        kw = {"max_new_tokens": 50, "monotonic": seed % 2 == 1}
        plain = ed.edit(doc, INSTRUCTIONS[seed % 3], **kw)
        spec = ed.edit(doc, INSTRUCTIONS[seed % 3], speculative=k, **kw)
        check_same(plain, spec)


@pytest.mark.parametrize("seed", range(3))
def test_sampled_speculative_runs_give_valid_programs(editor, seed):
    result = editor.edit(DOCS[0], "Make the dog a bird.", max_new_tokens=50, speculative=6,
                         sampling=Sampling(temperature=0.8, top_p=0.9, seed=seed))
    program = parse_program(result.program_text, partial=not result.complete)
    assert program.ops == result.program.ops
    n = len(split_lines(DOCS[0]))
    assert all(1 <= op.start <= op.end <= n for op in program.ops if isinstance(op, Copy))
    assert resolve(program, DOCS[0], partial=not result.complete) == result.text
    assert result.stats.generated_tokens <= 50


def test_verify_rule_reproduces_the_distribution_exactly():
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        probs = torch.softmax(torch.randn(7, generator=gen, dtype=torch.float64), 0)
        probs[3] = 0  # a masked token
        probs /= probs.sum()
        for d in range(7):
            accept, residual = verify_rule(probs, d)
            mixture = (1 - accept) * residual
            mixture[d] += accept
            torch.testing.assert_close(mixture, probs, rtol=0, atol=1e-12)
            assert residual[d] == 0
    one_hot = torch.zeros(5, dtype=torch.float64)
    one_hot[2] = 1
    assert verify_rule(one_hot, 2)[0] == 1.0


def test_verify_sample_draws_from_the_processed_distribution():
    logits = torch.tensor([2.0, 1.5, 0.3, -1.0, 0.9, 3.0])
    mask = np.array([True, True, True, True, True, False])
    sampling = Sampling(temperature=0.8, top_p=0.95)
    p = distribution(logits, mask, sampling)
    assert p[5] == 0 and p[3] == 0  # masked out; cut by top-p
    gen = torch.Generator().manual_seed(0)
    n = 6000
    for draft in (0, 2, 3, 5):
        counts = np.bincount([verify_token(logits, mask, sampling, gen, draft) for _ in range(n)], minlength=6)
        freq = counts / n
        bound = 5 * np.sqrt(p.numpy() * (1 - p.numpy()) / n) + 1e-9
        assert (np.abs(freq - p.numpy()) <= bound).all(), (draft, freq, p)
    # greedy: the masked argmax whatever the draft
    assert verify_token(logits, mask, Sampling(), gen, 2) == 0


def test_ngram_lookup_prefers_long_matches_and_the_document():
    look = NgramLookup([1, 2, 3, 4, 5, 9, 3, 7, 8])
    look.extend([0, 3])
    assert look.propose(3) == [4, 5, 9]  # 1-gram (3,): leftmost in the document
    look.extend([9, 3])
    assert look.propose(2) == [7, 8]  # 2-gram (9, 3)
    look.extend([6])
    assert look.propose(5) == []  # (6,) only at the end of the written tokens
    look.extend([1, 6])
    assert look.propose(5) == [1, 6]  # (6,) found earlier in the written tokens
    assert look.propose(0) == []


def test_speculative_execution_of_oracle_programs(editor, data_dir):
    rows = (data_dir / "edits/humanevalpack/python/humanevalpack.jsonl").read_text().splitlines()[:12]
    drafted = accepted = 0
    for raw in rows:
        d = json.loads(raw)
        before, after = d["declaration"] + d["buggy_solution"], d["declaration"] + d["canonical_solution"]
        program = oracle_program(before, after).to_text(header=False)
        for mode in ("prefill", "skip"):
            plain = editor.execute(before, program, prompt="Fix the bug.\n<program>", copy_mode=mode)
            spec = editor.execute(before, program, prompt="Fix the bug.\n<program>", copy_mode=mode, speculative=10)
            assert spec.complete and spec.text == after, d["task_id"]
            assert spec.program_text == plain.program_text
            s = spec.stats
            assert s.generated_tokens == plain.stats.generated_tokens
            assert s.forwards["decode"] + s.forwards["verify"] + s.accepted_tokens == plain.stats.forwards["decode"]
            drafted += s.drafted_tokens
            accepted += s.accepted_tokens
    assert 0 < accepted <= drafted


def test_script_with_multibyte_characters(editor):
    doc = "a café\nnaïve ☃ line\nend\n"
    after = "a café\nnaïve ☃☃ line 🙂\nend\n"
    program = oracle_program(doc, after).to_text(header=False)
    for k in (0, 10):
        result = editor.execute(doc, program, prompt="Edit.\n<program>", speculative=k)
        assert result.complete and result.text == after

"""The Copy-as-Decode loop: prefill equivalence, valid programs, cut-offs, copies as
single forwards, streaming."""

import pytest
import torch

from cad_outlines import Copy, parse_program, resolve, split_lines
from cad_outlines.generators.copy_decode import CopyEditor, Sampling
from cad_outlines.decoding.kv import append, crop_cache, new_cache

DOC = "Once upon a time there was a cat.\nThe cat liked milk.\nOne day the cat saw a dog.\nThey became friends.\n"


def random_qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=1000, max_position_embeddings=512)
    return Qwen2ForCausalLM(cfg).eval()


@pytest.mark.parametrize("which", ["qwen2-random", "tiny"])
def test_k_token_prefill_equals_k_single_steps(which, request):
    model = random_qwen2() if which == "qwen2-random" else request.getfixturevalue("tiny")[0]
    gen = torch.Generator().manual_seed(1)
    vocab = model.config.vocab_size
    prefix = torch.randint(0, vocab, (20,), generator=gen).tolist()
    block = torch.randint(0, vocab, (9,), generator=gen).tolist()
    cache = new_cache(model)
    append(model, cache, prefix)
    all_at_once = append(model, cache, block, all_logits=True)
    crop_cache(cache, len(prefix))
    steps = torch.stack([append(model, cache, [t]) for t in block])
    assert torch.allclose(all_at_once, steps, atol=1e-4, rtol=1e-4)


def check_program(result, n_lines):
    program = parse_program(result.program_text, partial=not result.complete)
    assert program.ops == result.program.ops
    for op in program.ops:
        if isinstance(op, Copy):
            assert 1 <= op.start <= op.end <= n_lines, op
    assert resolve(program, result.document, partial=not result.complete) == result.text


@pytest.mark.parametrize("seed", range(6))
def test_sampled_runs_give_valid_programs_and_report_cut_offs(editor, seed):
    result = editor.edit(DOC, "Make the dog a bird.", max_new_tokens=40,
                         sampling=Sampling(temperature=1.0, top_p=0.95, seed=seed), monotonic=seed % 2 == 1)
    check_program(result, len(split_lines(DOC)))
    assert result.stats.generated_tokens <= 40
    if not result.complete:
        assert result.stop_reason == "max_new_tokens" and result.stats.generated_tokens == 40
    if seed % 2:
        ends = [op for op in result.program.ops if isinstance(op, Copy)]
        assert all(b.start > a.end for a, b in zip(ends, ends[1:]))


def test_greedy_is_deterministic(editor):
    a = editor.edit(DOC, "x", max_new_tokens=30)
    b = editor.edit(DOC, "x", max_new_tokens=30)
    assert a.program_text == b.program_text


class Scripted(torch.nn.Module):
    """Wraps a real model (so the KV cache is real) and pushes its logits toward a
    scripted program text: the next token is the longest vocabulary token that the
    script continues with. Needs copy_mode="skip" (the context is then the program)."""

    def __init__(self, model, editor, script: str, prompt_len: int):
        super().__init__()
        self.model, self.editor, self.script, self.prompt_len = model, editor, script.encode(), prompt_len
        self.config = model.config
        self.seen: list[int] = []

    def forward(self, input_ids, **kwargs):
        out = self.model(input_ids=input_ids, **kwargs)
        self.seen.extend(input_ids[0].tolist())
        text = b"".join(self.editor.vocab.token_bytes[t] for t in self.seen[self.prompt_len :])
        rest = self.script[len(text) :] if self.script.startswith(text) else b""
        if rest:
            nxt = self.editor._greedy(rest)[0]
            out.logits[0, -1, nxt] += 1000.0
        return out


def test_scripted_program_completes_with_copies_and_fast_forward(tiny, editor):
    model, tok = tiny
    script = '<copy lines="1-2"/>\n<gen>One day the cat saw a bird.\n</gen>\n<copy lines="4-4"/>\n</program>'
    prompt = "Edit:\n<program>"
    scripted = Scripted(model, editor, script, len(editor.encode(prompt)))
    ed = CopyEditor(scripted, tok, grammar=editor.grammar)
    events = list(ed.stream(DOC, "", prompt=prompt, copy_mode="skip", max_new_tokens=200))
    result = events[-1].result
    assert result.complete and result.stop_reason == "end"
    assert result.program_text == "<program>" + script  # with its header: parse_program reads it whole
    assert [e.kind for e in events if e.op] == ["copy" if isinstance(op, Copy) else "gen" for op in result.program.ops]
    assert all(e.kind == "gen_text" and e.op is None for e in events if e.text and not e.op)
    assert events[-1].kind == "end"
    assert result.text == DOC.replace("a dog", "a bird")
    assert "".join(e.text for e in events) == result.text  # streamed text = the new document
    assert [e.op for e in events if e.op] == list(result.program.ops)
    s = result.stats
    # a forced run after a chosen token enters the cache in that token's forward: no forward of its own
    assert s.fast_forwarded_tokens > 0 and s.forwards["fast_forward"] == 0
    assert s.total_forwards - s.forwards["prompt"] < s.generated_tokens  # the last token needs no forward
    assert result.stats.copied_tokens == 0  # skip mode: copies cost nothing
    assert "+One day the cat saw a bird." in result.diff()


def test_prefill_mode_puts_each_copy_in_one_forward(tiny, editor):
    model, tok = tiny
    calls = []

    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model, self.config = model, model.config

        def forward(self, input_ids, **kwargs):
            calls.append(input_ids.shape[1])
            return self.model(input_ids=input_ids, **kwargs)

    ed = CopyEditor(Counting(), tok, grammar=editor.grammar)
    result = ed.edit(DOC, "x", max_new_tokens=40)
    copies = [op for op in result.program.ops if isinstance(op, Copy)]
    stats = result.stats
    assert stats.total_forwards == len(calls)
    assert stats.forwards["decode"] + stats.forwards["copy"] + stats.forwards["fast_forward"] + 1 == len(calls)
    if copies:
        assert stats.copied_tokens >= sum(op.end - op.start + 1 for op in copies)  # at least a token a line
        assert max(calls[1:]) > 1  # some forward carried many tokens at once


def test_oracle_execution_reproduces_the_gold_text(editor):
    from cad_outlines import oracle_program

    after = DOC.replace("liked milk", "liked fish").replace("a dog", "a bird")
    program = oracle_program(DOC, after)
    for mode in ("prefill", "skip"):
        result = editor.execute(DOC, program.to_text(header=False), copy_mode=mode)
        assert result.complete and result.text == after
        assert result.program == program
        if mode == "prefill":
            assert result.stats.forwards["copy"] >= 1


def test_oracle_execution_of_every_humanevalfix_python_case(editor, data_dir):
    import json

    from cad_outlines import oracle_program

    rows = (data_dir / "edits/humanevalpack/python/humanevalpack.jsonl").read_text().splitlines()
    for raw in rows:
        d = json.loads(raw)
        before, after = d["declaration"] + d["buggy_solution"], d["declaration"] + d["canonical_solution"]
        result = editor.execute(before, oracle_program(before, after).to_text(header=False),
                                prompt="Fix the bug.\n<program>")
        assert result.complete and result.text == after, d["task_id"]
    assert len(rows) == 164


def test_edit_command_reports_a_cut_off_run(small_data, tmp_path, capsys):
    from cad_outlines.cli import main

    doc = tmp_path / "doc.txt"
    doc.write_text(DOC)
    out = tmp_path / "new.txt"
    code = main(["edit", str(doc), "--instruction", "x", "--model", str(small_data / "models/stories260K_hf"),
                 "--max-new-tokens", "5", "--output", str(out)])
    captured = capsys.readouterr()
    assert code == 1 and "INCOMPLETE: --max-new-tokens 5 reached" in captured.err and not out.exists()
    assert "<program>" in captured.out


def test_edit_raises_no_future_warning(editor):
    """The KV cache goes in under the keyword the model's forward takes (transformers' Cache
    API): no deprecation warning from a whole edit, prompt, decode, copy and verify forwards."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        plain = editor.edit(DOC, "Make the dog a bird.", max_new_tokens=20)
        spec = editor.execute(DOC, '<copy lines="1-2"/><gen>One day the cat saw a bird.\n</gen><copy lines="4-4"/>'
                              "</program>", speculative=4)
    assert plain.stats.forwards["prompt"] == 1 and spec.complete
    assert spec.stats.forwards["copy"] == 2


def test_growing_cache_matches_dynamic_cache_through_appends_and_crops():
    """new_cache's layers write into spare room instead of concatenating: the logits of any
    run of appends and crops are exactly those of transformers' DynamicCache."""
    from transformers import DynamicCache

    from cad_outlines.decoding.kv import cache_len

    model = random_qwen2()
    grown, plain = new_cache(model), DynamicCache(config=model.config)
    assert type(grown.layers[0]).__name__ == "GrowingLayer" and isinstance(grown, DynamicCache)
    gen = torch.Generator().manual_seed(3)
    for step in range(40):
        ids = torch.randint(0, 1000, (int(torch.randint(1, 90, (1,), generator=gen)),), generator=gen).tolist()
        assert torch.equal(append(model, grown, ids, all_logits=True), append(model, plain, ids, all_logits=True))
        if step % 3 == 0:
            keep = cache_len(grown) - int(torch.randint(0, len(ids) + 1, (1,), generator=gen))
            crop_cache(grown, keep)
            crop_cache(plain, keep)
        assert cache_len(grown) == cache_len(plain)
    assert cache_len(grown) > 256  # the buffer grew past its first size


def test_chunked_append_equals_one_forward():
    model = random_qwen2()
    gen = torch.Generator().manual_seed(4)
    prefix, block = (torch.randint(0, 1000, (n,), generator=gen).tolist() for n in (30, 50))
    one, chunked = new_cache(model), new_cache(model)
    append(model, one, prefix)
    append(model, chunked, prefix)
    whole = append(model, one, block, all_logits=True)
    parts = append(model, chunked, block, all_logits=True, chunk=16)
    assert parts.shape == whole.shape and torch.allclose(parts, whole, atol=1e-4, rtol=1e-4)
    assert torch.allclose(append(model, one, [5]), append(model, chunked, [5]), atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError):
        append(model, one, [])


def test_long_copies_enter_in_chunks_of_prefill_chunk(tiny, editor):
    model, tok = tiny
    doc = "".join(f"The cat number {i} liked milk.\n" for i in range(30))
    whole = CopyEditor(model, tok, grammar=editor.grammar, prefill_chunk=None)
    chunked = CopyEditor(model, tok, grammar=editor.grammar, prefill_chunk=32)
    program = '<copy lines="1-30"/></program>'
    a, b = whole.execute(doc, program), chunked.execute(doc, program)
    assert a.text == b.text == doc and a.stats.copied_tokens == b.stats.copied_tokens > 64
    assert a.stats.forwards["copy"] == 1
    # the copy forward also carries the tag's last tokens: at least ceil(copied / 32) chunks
    assert b.stats.forwards["copy"] >= -(-b.stats.copied_tokens // 32) > 1
    with pytest.raises(ValueError):
        CopyEditor(model, tok, grammar=editor.grammar, prefill_chunk=0)


def test_clone_cache_is_independent():
    from cad_outlines.decoding.kv import cache_len, clone_cache

    model = random_qwen2()
    a = new_cache(model)
    append(model, a, list(range(10, 40)))
    b = clone_cache(model, a)
    assert cache_len(b) == 30
    tail = [7, 8, 9]
    la = append(model, a, tail, all_logits=True)
    crop_cache(a, 5)  # cutting the original leaves the copy whole
    lb = append(model, b, tail, all_logits=True)
    assert torch.equal(la, lb) and cache_len(b) == 33


def test_prompt_cache_reuses_a_kept_prompt_and_gives_the_same_edit(tiny, editor):
    """With prompt_cache, a second run on the same prompt forwards no prompt token, and a run on
    another instruction forwards only what follows the shared prefix; outputs are those of
    fresh runs."""
    model, tok = tiny
    kept = CopyEditor(model, tok, grammar=editor.grammar, prompt_cache=2)
    program = '<copy lines="1-2"/><gen>The dog liked bones.\n</gen><copy lines="4-4"/></program>'
    fresh = editor.execute(DOC, program, "dog")
    first = kept.execute(DOC, program, "dog")
    again = kept.execute(DOC, program, "dog")
    other = kept.execute(DOC, program, "make the cat a dog")
    assert first.text == again.text == other.text == fresh.text
    assert first.stats.prompt_reused_tokens == 0 and first.stats.forwards["prompt"] == 1
    assert again.stats.prompt_reused_tokens == again.stats.prompt_tokens and again.stats.forwards["prompt"] == 0
    assert 0 < other.stats.prompt_reused_tokens < other.stats.prompt_tokens and other.stats.forwards["prompt"] == 1
    sampled = [kept.edit(DOC, "dog", max_new_tokens=40, sampling=Sampling(temperature=0.0)).program_text
               for _ in range(2)]
    assert sampled[0] == sampled[1] == editor.edit(DOC, "dog", max_new_tokens=40,
                                                    sampling=Sampling(temperature=0.0)).program_text
    assert len(kept._prompts) == 2
    with pytest.raises(ValueError, match="prompt_cache"):
        CopyEditor(model, tok, grammar=editor.grammar, prompt_cache=-1)


def test_gqa_attention_equals_sdpa_over_a_cache_without_copying_it():
    """A model with grouped KV heads switched to gqa_sdpa_forward gives sdpa's logits (up to
    float rounding) for forwards of one and of several tokens over a cache, a first forward
    included; a model without grouping is left on sdpa."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from cad_outlines.decoding.attention import GQA_SDPA, use_gqa_attention

    plain = random_qwen2()
    switched = random_qwen2()
    assert plain.config._attn_implementation == "sdpa"
    assert use_gqa_attention(switched) and switched.config._attn_implementation == GQA_SDPA
    assert use_gqa_attention(switched)  # idempotent
    a, b = new_cache(plain), new_cache(switched)
    gen = torch.Generator().manual_seed(5)
    for n in (40, 1, 7, 2, 64, 1):
        ids = torch.randint(0, 1000, (n,), generator=gen).tolist()
        x, y = append(plain, a, ids, all_logits=True), append(switched, b, ids, all_logits=True)
        assert torch.allclose(x, y, atol=1e-4, rtol=1e-4)
    torch.manual_seed(0)
    ungrouped = Qwen2ForCausalLM(Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                             num_attention_heads=4, num_key_value_heads=4, vocab_size=100)).eval()
    assert not use_gqa_attention(ungrouped) and ungrouped.config._attn_implementation == "sdpa"


def test_small_forwards_on_cuda_run_without_cudnn_attention():
    """attention_backends: on CUDA a forward of up to SMALL_FORWARD_TOKENS tokens runs with sdpa limited
    to flash, memory-efficient and math attention (cuDNN plans per key length), restored afterwards;
    larger forwards and CPU forwards leave PyTorch's flags as they are."""
    from cad_outlines.decoding.attention import SMALL_FORWARD_TOKENS, attention_backends

    before = (torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled(),
              torch.backends.cuda.mem_efficient_sdp_enabled(), torch.backends.cuda.math_sdp_enabled())
    assert before[0], "the test expects PyTorch's default: cuDNN attention allowed"
    with attention_backends(1, torch.device("cuda", 0)):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
        assert torch.backends.cuda.math_sdp_enabled()
    with attention_backends(SMALL_FORWARD_TOKENS, "cuda"):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    for n, device in ((SMALL_FORWARD_TOKENS + 1, torch.device("cuda")), (1, torch.device("cpu")), (1, "cpu")):
        with attention_backends(n, device):
            assert torch.backends.cuda.cudnn_sdp_enabled()
    after = (torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled(),
             torch.backends.cuda.mem_efficient_sdp_enabled(), torch.backends.cuda.math_sdp_enabled())
    assert after == before


def test_every_library_forward_asks_attention_backends_for_its_size(monkeypatch):
    """decoding.kv.forward (every copy, decode step and verify of CopyEditor) enters
    attention_backends with the forward's token count and device."""
    import contextlib

    from cad_outlines.decoding import attention

    seen = []

    def spy(n, device):
        seen.append((n, str(device)))
        return contextlib.nullcontext()

    monkeypatch.setattr(attention, "attention_backends", spy)
    model = random_qwen2()
    cache = new_cache(model)
    append(model, cache, list(range(10, 30)))
    append(model, cache, [7])
    append(model, cache, list(range(40, 60)), chunk=8)
    assert seen == [(20, "cpu"), (1, "cpu"), (8, "cpu"), (8, "cpu"), (4, "cpu")]

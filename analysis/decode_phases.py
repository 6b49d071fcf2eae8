"""Why a GPU decode step runs at two speeds: each step split into host launch and GPU wait.

On the H200 lent to earlier sessions a batch-1 decode step of the 1.5B model took either about
18 ms or about 55 ms, in phases that came and went (``docs/results/gpu/kernel.md``,
``generator_commits_gpu.md``). This study finds out where the time goes. It prefills a context
of random tokens, then runs ``--steps`` consecutive greedy decode steps under each condition,
interleaved for ``--rounds`` rounds so that a phase shows in every condition it overlaps:

* ``read``: the step's argmax is read on the host (``.item()``), as a sampler does; the
  generator study's loop.
* ``read-1-thread``: the same with ``torch.set_num_threads(1)`` (idle OpenMP workers spinning
  on the host's cores would slow the thread that launches the kernels).
* ``no-read``: the argmax stays on the device and feeds the next step; nothing waits for the
  GPU until the end of the run, so the host can run ahead by up to the launch queue.
* ``read-fresh-pool``: ``read`` after ``torch.cuda.empty_cache()``: the caching allocator gives
  its free segments back to the driver, so the growing KV cache must ask for new ones.
* ``read-reserved-pool``: ``read`` after ``empty_cache()`` and then one ``--reserve-gib`` block
  allocated and freed (:func:`analysis.kernel.reserve_cuda_pool`): the pool holds a segment
  the growing cache is split from.
* ``read-no-cudnn-sdp``: ``read`` with PyTorch's cuDNN attention backend switched off
  (``torch.backends.cuda.enable_cudnn_sdp(False)``): sdpa then picks flash or memory-efficient
  attention, which need no per-shape plan.
* ``read-library``: ``read`` with the forward the library runs (:mod:`cad_outlines.decoding.kv`:
  forwards of up to 16 tokens without cuDNN attention, longer ones with PyTorch's choice).

Every other condition calls the model as transformers does, with PyTorch's own choice of
attention backend.

With ``--context-step`` each run starts from a longer context than the one before, so every run
decodes at key lengths no earlier run has seen (a cache keyed by shape then never hits).

Per step it records the wall time, the host's share (the ``model(...)`` call returning: Python
plus kernel launches, the GPU running behind) and the wait for the GPU (the ``.item()``); on
CUDA also the GPU's own time between events recorded around the forward. Per run: the segments
the CUDA caching allocator asked the driver for (cudaMalloc calls), the process's
CPU seconds per wall second (spinning threads show as more than 1), a pure-Python probe of the
host's speed timed before and after, and the GPU's SM clock and power sampled by ``nvidia-smi``
where it runs. If the slow phase lives in the launch time, the host is slow; if in the wait, the
GPU is.

Runs on the CPU too (``--device cpu --config tiny``) to check the script; the wait is then 0.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from .kernel import CONFIGS, build_model, torch_forward
from .kernel import forward as library_forward
from .report import markdown_table, write_report

DESCRIPTION = "GPU decode steps at two speeds: host launch vs GPU wait per step, by condition"
REPO = Path(__file__).resolve().parent.parent
CONDITIONS = ("read", "read-1-thread", "no-read", "read-fresh-pool", "read-reserved-pool", "read-no-cudnn-sdp",
              "read-library")


def add_arguments(parser) -> None:
    parser.add_argument("--config", default="qwen2.5-1.5b", help=f"model shape ({', '.join(CONFIGS)})")
    parser.add_argument("--dtype", default="bf16", help="fp32, bf16 or fp16")
    parser.add_argument("--device", default="cuda", help="cuda (the point) or cpu (a check of the script)")
    parser.add_argument("--context", type=int, default=2048, help="prefilled random tokens before the steps")
    parser.add_argument("--context-step", type=int, default=0,
                        help="run i starts from --context + i * this many tokens (0: every run the same)")
    parser.add_argument("--steps", type=int, default=200, help="consecutive decode steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of all conditions, interleaved")
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help=f"comma-separated subset of {CONDITIONS}")
    parser.add_argument("--reserve-gib", type=float, default=8.0, help="read-reserved-pool: the block's size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results" / "gpu"))
    parser.add_argument("--report-name", default="decode_phases")
    parser.add_argument("--no-plot", action="store_true")


def host_probe(n: int = 200_000) -> float:
    """Seconds for a fixed pure-Python loop: the host thread's speed, free of the GPU."""
    start = time.perf_counter()
    x = 0
    for i in range(n):
        x += i & 7
    return time.perf_counter() - start


def reserve_cuda_pool(gib: float) -> None:
    """Leave one free block of `gib` GiB in PyTorch's CUDA caching allocator (allocate, then free).

    The ``read-reserved-pool`` condition: if a KV cache growing by a new tensor per layer and
    step made the allocator call cudaMalloc each time, a pool holding a large segment would
    remove that cost. No-op for 0 or without CUDA."""
    import torch

    if gib <= 0 or not torch.cuda.is_available():
        return
    block = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")
    del block  # back to the allocator's pool, not to the driver


def cuda_segments_allocated() -> int:
    """How many segments the CUDA caching allocator has asked the driver for so far (0 without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return 0
    return int(torch.cuda.memory_stats().get("segment.all.allocated", 0))


class ClockSampler:
    """``nvidia-smi`` sampled every 100 ms in the background: (monotonic s, SM MHz, watts, util %)."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float, float]] = []
        self.error = ""
        self._proc = None
        self._thread = None

    def start(self) -> None:
        exe = shutil.which("nvidia-smi")
        if not exe:
            self.error = "nvidia-smi not found"
            return
        try:
            self._proc = subprocess.Popen(
                [exe, "--query-gpu=clocks.sm,power.draw,utilization.gpu", "--format=csv,noheader,nounits",
                 "-lms", "100"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError as e:
            self.error = f"nvidia-smi: {e}"
            return
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._proc.stdout:
            try:
                sm, watts, util = (float(v) for v in line.split(","))
            except ValueError:
                continue
            self.samples.append((time.monotonic(), sm, watts, util))

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=5)

    def between(self, t0: float, t1: float) -> dict:
        """Mean SM clock, power and utilisation over [t0, t1] (monotonic seconds); {} if none."""
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if not inside:
            return {}
        return {k: statistics.fmean(s[i] for s in inside) for i, k in ((1, "sm_mhz"), (2, "watts"), (3, "util"))}


def run_condition(model, context_ids, condition: str, steps: int, device: str, reserve_gib: float = 8.0) -> dict:
    """One run: prefill the context on a fresh cache, then `steps` greedy decode steps; per-step times."""
    import torch
    from transformers import DynamicCache

    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    threads = torch.get_num_threads()
    if condition == "read-1-thread":
        torch.set_num_threads(1)
    cudnn_sdp = torch.backends.cuda.cudnn_sdp_enabled()
    if condition == "read-no-cudnn-sdp":
        torch.backends.cuda.enable_cudnn_sdp(False)
    if cuda and condition in ("read-fresh-pool", "read-reserved-pool"):
        torch.cuda.empty_cache()
        if condition == "read-reserved-pool":
            reserve_cuda_pool(reserve_gib)
    forward = library_forward if condition == "read-library" else torch_forward
    try:
        cache = DynamicCache()
        with torch.inference_mode():
            logits = forward(model, context_ids, cache, logits_to_keep=1)
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            sync()
            probe_before = host_probe()
            segments0 = cuda_segments_allocated()
            usage0, wall0, mono0 = time.process_time(), time.perf_counter(), time.monotonic()
            launch, wait, wall, events = [], [], [], []
            for _ in range(steps):
                t0 = time.perf_counter()
                if cuda:
                    e0 = torch.cuda.Event(enable_timing=True)
                    e1 = torch.cuda.Event(enable_timing=True)
                    e0.record()
                logits = forward(model, nxt, cache)
                nxt = logits[:, -1].argmax(-1, keepdim=True)
                if cuda:
                    e1.record()
                    events.append((e0, e1))
                t1 = time.perf_counter()
                if condition != "no-read":
                    nxt = torch.tensor([[int(nxt.item())]], device=device)  # the sampler's host round trip
                t2 = time.perf_counter()
                launch.append(t1 - t0)
                wait.append(t2 - t1)
                wall.append(t2 - t0)
            sync()
            total = time.perf_counter() - wall0
            cpu = time.process_time() - usage0
            mono1 = time.monotonic()
            probe_after = host_probe()
            gpu = [a.elapsed_time(b) / 1000 for a, b in events] if cuda else []
            segments = cuda_segments_allocated() - segments0
    finally:
        torch.set_num_threads(threads)
        torch.backends.cuda.enable_cudnn_sdp(cudnn_sdp)
    return {"condition": condition, "context": int(context_ids.shape[1]), "launch": launch, "wait": wait, "wall": wall, "gpu": gpu, "total": total,
            "cpu_per_wall": cpu / total if total else 0.0, "segments": segments, "probe": (probe_before, probe_after),
            "t0": mono0, "t1": mono1}


def _ms(xs) -> float:
    return 1000 * statistics.median(xs) if xs else float("nan")


def _p90(xs) -> float:
    return 1000 * sorted(xs)[int(0.9 * (len(xs) - 1))] if xs else float("nan")


def summarise(runs: list[dict], sampler: ClockSampler | None) -> tuple[list[list], float]:
    """Table rows, one per run, and the slow-step threshold (1.6x the fastest run's median step)."""
    per_step = [r["total"] / len(r["wall"]) if r["condition"] == "no-read" else statistics.median(r["wall"])
                for r in runs]
    threshold = 1.6 * min(per_step)
    rows = []
    for r, step in zip(runs, per_step):
        if r["condition"] == "no-read":  # no per-step times: the run's mean stands for every step
            p90, slow = 1000 * step, float(step > threshold)
        else:
            p90, slow = _p90(r["wall"]), sum(w > threshold for w in r["wall"]) / len(r["wall"])
        clocks = sampler.between(r["t0"], r["t1"]) if sampler else {}
        rows.append([r["round"], r["condition"], r["context"], f"{1000 * step:.1f}", f"{p90:.1f}", f"{100 * slow:.0f}%",
                     f"{_ms(r['launch']):.1f}", f"{_ms(r['wait']):.1f}",
                     f"{_ms(r['gpu']):.1f}" if r["gpu"] else "-", r["segments"], f"{r['cpu_per_wall']:.2f}",
                     f"{1000 * r['probe'][0]:.1f} / {1000 * r['probe'][1]:.1f}",
                     f"{clocks['sm_mhz']:.0f}" if clocks else "-", f"{clocks['watts']:.0f}" if clocks else "-",
                     f"{clocks['util']:.0f}" if clocks else "-"])
    return rows, threshold


def _plot(runs: list[dict], path: Path, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    colors = {"read": "tab:blue", "read-1-thread": "tab:green", "no-read": "tab:red", "read-fresh-pool": "tab:orange",
              "read-reserved-pool": "tab:purple", "read-no-cudnn-sdp": "tab:brown", "read-library": "tab:cyan"}
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    seen = set()
    x0 = 0
    for r in runs:
        xs = range(x0, x0 + len(r["wall"]))
        label = None if r["condition"] in seen else r["condition"]
        seen.add(r["condition"])
        top.plot(xs, [1000 * w for w in r["wall"]], ".", ms=2, color=colors.get(r["condition"]), label=label)
        bottom.plot(xs, [1000 * w for w in r["launch"]], ".", ms=2, color=colors.get(r["condition"]))
        x0 += len(r["wall"]) + 20
    top.set_ylabel("step wall ms (no-read: host only)")
    bottom.set_ylabel("host launch ms")
    bottom.set_xlabel("decode step, runs in the order they ran")
    top.legend(loc="upper right", markerscale=4)
    top.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _options(argv: list[str]) -> list[str]:
    """The study's options as given on the command line, less where the report went."""
    rest = argv[argv.index("decode-phases") + 1:] if "decode-phases" in argv else []
    out, skip = [], False
    for arg in rest:
        if skip:
            skip = False
        elif arg == "--out-dir":
            skip = True
        elif not arg.startswith("--out-dir="):
            out.append(arg)
    return out


def run(args) -> int:
    import torch
    from tqdm.auto import tqdm

    conditions = [c for c in args.conditions.split(",") if c]
    unknown = sorted(set(conditions) - set(CONDITIONS))
    if unknown or not conditions:
        raise SystemExit(f"--conditions: unknown {unknown}; known: {', '.join(CONDITIONS)}")
    if args.steps < 2 or args.rounds < 1 or args.context < 1:
        raise SystemExit("--steps >= 2, --rounds >= 1 and --context >= 1 please")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here (use --device cpu --config tiny to check the script)")
    model = build_model(args.config, args.dtype, args.device, seed=args.seed)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(args.seed)
    longest = args.context + args.context_step * args.rounds * len(conditions)
    all_ids = torch.randint(0, vocab, (1, longest), generator=gen).to(args.device)
    context_ids = all_ids[:, :args.context]
    sampler = ClockSampler() if args.device.startswith("cuda") else None
    if sampler:
        sampler.start()
    run_condition(model, context_ids, conditions[0], min(args.steps, 16), args.device)  # warm-up, untimed
    runs = []
    try:
        with tqdm(total=args.rounds * len(conditions), desc="decode-phases", unit="run", file=sys.stderr) as bar:
            for rnd in range(1, args.rounds + 1):
                for condition in conditions:
                    n = args.context + args.context_step * len(runs)
                    r = run_condition(model, all_ids[:, :n], condition, args.steps, args.device, args.reserve_gib)
                    r["round"] = rnd
                    runs.append(r)
                    bar.update()
    finally:
        if sampler:
            sampler.stop()
    rows, threshold = summarise(runs, sampler)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    raw = [{k: v for k, v in r.items() if k not in ("t0", "t1")} for r in runs]
    (out / f"{args.report_name}.json").write_text(json.dumps(raw), encoding="utf-8")
    if torch.cuda.is_available() and args.device.startswith("cuda"):
        where = f"CUDA: {torch.cuda.get_device_name()}, torch {torch.__version__}"
    else:
        where = f"CPU, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}"
    header = ["round", "condition", "context", "ms per step (median)", "p90 ms", f"slow steps (> {1000 * threshold:.0f} ms)",
              "host launch ms", "GPU wait ms", "GPU event ms", "cudaMalloc calls",
              "CPU s per wall s", "host probe ms before / after",
              "SM MHz", "W", "GPU util %"]
    if sampler:
        clocks = ("`nvidia-smi` every 100 ms, averaged over the run." if not sampler.error and sampler.samples
                  else f"not sampled ({sampler.error or 'no samples'}).")
        legend = ("Per step: wall time; host launch (the `model(...)` call returning, Python and kernel launches, "
                  "the GPU running behind); GPU wait (reading the argmax on the host, `.item()`); GPU event time "
                  "around the forward (on a launch-bound step it spans the launches too). `no-read` never waits, so "
                  "its per-step figure is the run's time over its steps, and its p90 and slow share are of that "
                  "mean. cudaMalloc calls: segments the caching allocator asked the driver for during the steps. "
                  "CPU s per wall s: the process's CPU time over the run's time (threads spinning show as more than "
                  "1). Host probe: a fixed pure-Python loop timed before and after the run (the host thread's own "
                  "speed). SM clock, power and utilisation: " + clocks)
    else:
        legend = "Per step: wall time, host launch (the forward) and wait (0 on the CPU)."
    contexts = (f"{args.context} prefilled random tokens" if not args.context_step else
                f"{args.context} prefilled random tokens, {args.context_step} more for each later run")
    body = "\n".join([
        (f"Model: `{args.config}` with seeded random weights, {args.dtype}, {where}; {contexts}, then {args.steps} "
         f"consecutive greedy decode steps per run; {args.rounds} rounds of {', '.join(conditions)}, interleaved "
         "(one untimed warm-up run first)."),
        "",
        legend,
        "",
        markdown_table(header, rows),
        "",
        f"Raw per-step times: `{args.report_name}.json`.",
    ])
    if not args.no_plot and _plot(runs, out / f"{args.report_name}.png",
                                  f"{args.config} {args.dtype} decode steps, {where.split(',')[0]}"):
        body += f"\n\n![per-step times]({args.report_name}.png)\n"
    alloc = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")  # an allocator setting changes what is timed
    command = " ".join([*([f"PYTORCH_CUDA_ALLOC_CONF={alloc}"] if alloc else []), "cad-outlines study decode-phases",
                        *_options(sys.argv)])
    path = write_report(out, args.report_name, "GPU decode steps at two speeds: where the time goes", body, command)
    print(markdown_table(header, rows))
    print(f"wrote {path}")
    return 0

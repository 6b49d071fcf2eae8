"""Span-selection brittleness: exact match of oracle programs whose copy endpoints are
shifted by small random offsets."""

from __future__ import annotations

import random
import shlex
import zlib
from pathlib import Path

from cad_outlines.edits import Copy, EditProgram, oracle_program, resolve, split_lines

from .datasets import (LENGTH_BUCKETS, OVER, add_corpus_arguments, corpora_from_args, corpus_argv, length_bucket,
                       report_stem)
from .report import markdown_table, pct, write_report

DESCRIPTION = "exact match of oracle programs under random copy-endpoint noise of +-eps lines"
DEFAULT = ["humanevalfix-python", "humanevalfix-js", "editeval"]

PAPER = """Paper (Copy-as-Decode, arXiv 2604.18170, Figure 6; 5 trials per case, "trimmed EM", line-level copies):
pooled EM 100% at eps=0 -> 15.48% at eps=1; HumanEvalPack-Fix Py plateaus higher than the other corpora (many
single-line fixes; the document-edge clamp absorbs noise). Its corpora are ProbeEdit and HumanEvalPack-Fix Py/JS;
ProbeEdit is not available here, our third corpus is EditEval."""


def perturb_program(program: EditProgram, n_lines: int, eps: int, rng: random.Random) -> EditProgram:
    """`program` with each endpoint of each copy op shifted by an independent uniform
    integer in [-eps, eps] (start drawn before end), clamped to [1, n_lines]; an
    inverted span is repaired by swapping its endpoints. Gen ops are kept."""

    def shift(x: int) -> int:
        return min(max(x + rng.randint(-eps, eps), 1), n_lines)

    ops = []
    for op in program.ops:
        if isinstance(op, Copy):
            start, end = shift(op.start), shift(op.end)
            op = Copy(min(start, end), max(start, end))
        ops.append(op)
    return EditProgram(ops)


def case_rng(seed: int, case_id: str, eps: int) -> random.Random:
    """A generator seeded by a stable hash of (seed, case id, eps)."""
    return random.Random(zlib.crc32(f"{seed}\x00{case_id}\x00{eps}".encode()))


def exact_trials(program: EditProgram, before: str, after: str, eps: int, trials: int, rng: random.Random) -> int:
    """How many of `trials` perturbed copies of `program` still resolve to `after`."""
    n = len(split_lines(before))
    return sum(resolve(perturb_program(program, n, eps, rng), before) == after for _ in range(trials))


def plot(rates: dict[str, list[float]], eps: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, values in rates.items():
        ax.plot(eps, [100 * v for v in values], marker="o", label=name,
                linestyle="--" if name == "pooled" else "-", color="black" if name == "pooled" else None)
    ax.set_xticks(eps)
    ax.set_xlabel("endpoint noise eps (lines)")
    ax.set_ylabel("exact match (%)")
    ax.set_ylim(0, 102)
    ax.set_title("Oracle programs under copy-endpoint noise")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def add_arguments(parser) -> None:
    add_corpus_arguments(parser, DEFAULT)
    parser.add_argument("--eps", default="0,1,2,3", help="comma-separated noise levels (lines)")
    parser.add_argument("--trials", type=int, default=5, help="perturbed programs per case and eps")
    parser.add_argument("--seed", type=int, default=0)


def run(args) -> int:
    eps = [int(e) for e in args.eps.split(",")]
    counts: dict[str, list[int]] = {}  # name -> [cases, no-copy cases, copy ops, exact trials per eps]
    buckets: dict[str, list[int]] = {}  # long-file corpora: the same per document-length bucket
    for corpus in corpora_from_args(args):
        c = counts[corpus.name] = [len(corpus), 0, 0] + [0] * len(eps)
        if corpus.bucketed:
            for label in [*LENGTH_BUCKETS, OVER]:
                buckets[f"{corpus.name} {label}"] = [0] * (3 + len(eps))
        for case in corpus:
            program = oracle_program(case.before, case.after)
            copies = sum(isinstance(op, Copy) for op in program.ops)
            row = [1, copies == 0, copies] + [exact_trials(program, case.before, case.after, e, args.trials,
                                                           case_rng(args.seed, case.id, e)) for e in eps]
            c[1:] = [a + b for a, b in zip(c[1:], row[1:])]
            if corpus.bucketed:
                b = buckets[f"{corpus.name} {length_bucket(case.lines_before)}"]
                b[:] = [x + y for x, y in zip(b, row)]
    counts["pooled"] = [sum(col) for col in zip(*counts.values())]
    counts.update({name: b for name, b in buckets.items() if b[0]})
    rates = {name: [x / max(c[0] * args.trials, 1) for x in c[3:]] for name, c in counts.items()}
    table = markdown_table(["corpus", "cases", "no-copy cases", "copy ops", *(f"EM eps={e}" for e in eps)],
                           [(name, *c[:3], *map(pct, rates[name])) for name, c in counts.items()])
    print(table)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = report_stem(args, "perturb", DEFAULT)
    plot(rates, eps, out / f"{name}.png")
    body = f"""Each case: its max-copy oracle program (`oracle_program`); for each eps, {args.trials} trials (seed
{args.seed}, generator seeded by crc32 of (seed, case id, eps)) in which every endpoint of every copy op is shifted
by an independent uniform integer in [-eps, eps], clamped to [1, n] (n = the input document's line count), and an
inverted span is swapped. EM = share of trials whose program resolves to `after` byte for byte (mean over all
trials; pooled = all trials of all corpora; rows `NAME <200` etc.: a long-file corpus's document-length buckets, in
lines before the edit).

{table}

{PAPER}

![perturb]({name}.png)
"""
    extra = []
    for key, default in (("eps", "0,1,2,3"), ("trials", 5), ("seed", 0)):
        if getattr(args, key) != default:
            extra += [f"--{key}", str(getattr(args, key))]
    path = write_report(out, name, "Span perturbation: exact match under endpoint noise", body,
                        shlex.join(["cad-outlines", "study", "perturb", *corpus_argv(args), *extra]))
    print(f"wrote {path} and {out / f'{name}.png'}")
    return 0

"""Oracle-program speed: the fast `oracle_program` against the quadratic reference DP it replaced.

Every pair of every corpus runs through the fast oracle (both policies); the reference
(analysis/references/oracle_quadratic.py) runs on every short-file pair and on an evenly spread
sample of the long `commits` files, the longest included (it takes seconds each there), and every
program it gives must equal the fast one, op for op.
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import time
from collections.abc import Callable

from cad_outlines.edits import oracle_program, split_lines

from .datasets import REPO, Corpus, EditCase, load_corpus, shared_data_dir
from .report import markdown_table, write_report

DESCRIPTION = "fast oracle programs vs the quadratic reference DP: time per file and identical programs"
SHORT = ["humanevalfix-python", "humanevalfix-js", "humanevalfix-cpp", "humanevalfix-go", "humanevalfix-java",
         "humanevalfix-rust", "editeval"]
LONG = ["click", "requests"]
POLICIES = ("max_copy", "min_tokens")


def add_arguments(parser) -> None:
    parser.add_argument("--sample", type=int, default=10, metavar="N",
                        help="commits pairs per repository also run through the quadratic reference (evenly spread "
                             "by file length, the longest included; default 10; 0 for none, -1 for all 300)")
    parser.add_argument("--repeat", type=int, default=3, help="fast-oracle runs per pair; the best is kept (default 3)")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"), help="where the report goes")


def load_commits(name: str) -> Corpus:
    """``edits/commits/NAME.jsonl.gz`` of the shared data: long files, small real changes."""
    path = shared_data_dir() / "edits" / "commits" / f"{name}.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        cases = [EditCase(d["id"], d["before"], d["after"], d.get("instruction", "")) for d in map(json.loads, f)]
    return Corpus(f"commits-{name}", tuple(cases))


def spread(cases: list[EditCase], n: int) -> list[EditCase]:
    """`n` cases evenly spread over `cases` sorted by length (the longest always in); all of them for n < 0."""
    ordered = sorted(cases, key=lambda c: (len(split_lines(c.before)), c.id))
    if n < 0 or n >= len(ordered):
        return ordered
    if n == 0:
        return []
    return [ordered[round(i * (len(ordered) - 1) / max(n - 1, 1))] for i in range(n)] if n > 1 else ordered[-1:]


def best_time(fn: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    """The least wall time and the least CPU time of `repeat` calls, and the result."""
    wall = cpu = float("inf")
    result = None
    for _ in range(max(repeat, 1)):
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall, cpu, result


def ms(seconds: float) -> str:
    return f"{1000 * seconds:.1f}"


def run(args) -> int:
    from analysis.references.oracle_quadratic import oracle_program_quadratic

    load_at_start = os.getloadavg()
    rows, ref_rows, longest, differences = [], [], [], []
    corpora = [(load_corpus(n), None) for n in SHORT] + [(load_commits(n), args.sample) for n in LONG]
    for corpus, sample in corpora:
        checked = {c.id for c in (corpus.cases if sample is None else spread(list(corpus.cases), sample))}
        longest_id = spread(list(corpus.cases), 1)[0].id if sample is not None else None
        fast_times, fast_cpu, ref_times, fast_on_ref, same = [], [], [], [], 0
        for case in corpus:
            for policy in POLICIES:
                t_fast, c_fast, fast = best_time(lambda: oracle_program(case.before, case.after, policy=policy),
                                                 args.repeat)
                fast_times.append(t_fast)
                fast_cpu.append(c_fast)
                if case.id not in checked:
                    continue
                t_ref, _, ref = best_time(lambda: oracle_program_quadratic(case.before, case.after, policy=policy), 1)
                ref_times.append(t_ref)
                fast_on_ref.append(t_fast)
                if ref == fast:
                    same += 1
                else:
                    differences.append(f"- {corpus.name} {case.id} ({policy})")
                if case.id == longest_id:
                    longest.append((corpus.name, case.id, len(split_lines(case.before)), policy, ms(t_fast),
                                    ms(c_fast), f"{t_ref:.2f}", f"{t_ref / t_fast:,.0f}x"))
        lines = [len(split_lines(c.before)) for c in corpus]
        rows.append((corpus.name, len(corpus), int(statistics.median(lines)), max(lines),
                     ms(statistics.median(fast_times)), ms(sorted(fast_times)[int(0.95 * (len(fast_times) - 1))]),
                     ms(max(fast_times)), ms(max(fast_cpu)), ms(sum(fast_times))))
        if ref_times:
            ref_rows.append((corpus.name, len(ref_times), same, f"{sum(ref_times):.2f}", ms(sum(fast_on_ref)),
                             f"{sum(ref_times) / sum(fast_on_ref):,.0f}x", f"{max(ref_times):.2f}"))
        print(rows[-1], ref_rows[-1] if ref_times else "")
    # the known worst case: every line the same, so every diagonal is a match at every line (quadratic here;
    # the reference is cubic there)
    worst = []
    for n in (200, 400, 800):
        doc = "}\n" * n
        wall, cpu, _ = best_time(lambda: oracle_program(doc, doc[: n]), 1)
        worst.append((n, n // 2, ms(wall), ms(cpu)))
    load_at_end = os.getloadavg()
    table = markdown_table(["corpus", "pairs", "median lines", "max lines", "median ms", "p95 ms", "max ms",
                            "max CPU ms", "total ms"], rows)
    ref_table = markdown_table(["corpus", "programs checked", "identical", "reference s", "fast ms", "speedup",
                                "reference max s"], ref_rows)
    long_table = markdown_table(["corpus", "pair", "lines", "policy", "fast ms", "fast CPU ms", "reference s",
                                 "speedup"], longest)
    print(table, ref_table, long_table, sep="\n\n")
    sample_words = "every pair" if args.sample < 0 else f"{args.sample} pairs per repository"
    body = f"""`oracle_program` (cad_outlines/edits/oracle.py) against the quadratic DP it replaced, kept verbatim as
`analysis/references/oracle_quadratic.py`: same candidates, same packed costs, same tie-breaks (the least
(cost, source end, start) among copies), found without evaluating the candidates that cannot win. Default token
counter, both policies (`max_copy`, `min_tokens`), `sep="\\n"`; tests/edits/test_oracle_fast.py also compares other
separators and counters (length, one token per digit, GPT-2) on random and real cases.

Times are wall clock (and CPU time of this process where marked), the best of {args.repeat} runs per pair for the
fast oracle and one run for the reference, in one process on a machine shared with other jobs (load average
{load_at_start[0]:.1f} at the start, {load_at_end[0]:.1f} at the end, on {os.cpu_count()} cores): read them as
upper bounds. The speedups divide the reference's total time by the fast oracle's on the same programs.

## Fast oracle, every pair (both policies: each pair counts twice)

{table}

## Identical programs: fast vs reference

The reference runs on every short-file pair, and on {sample_words} of `commits` (evenly spread by length, the
longest included) since it takes seconds on a long file.

{ref_table}

{"All " + str(sum(r[1] for r in ref_rows)) + " programs identical, op for op." if not differences else
 "Differences:" + chr(10) + chr(10).join(differences)}

## The longest file of each `commits` repository

{long_table}

## Known worst case: one line repeated

When every line of both documents is the same, every (source, target) diagonal is a match at every line, and the
fast oracle does quadratic work (the reference cubic). `before` = N lines `}}`, `after` = its first N/2 lines,
`max_copy`, one run:

{markdown_table(["lines before", "lines after", "wall ms", "CPU ms"], worst)}
"""
    command = "cad-outlines study oracle-speed" + (f" --sample {args.sample}" if args.sample != 10 else "") + (
        f" --repeat {args.repeat}" if args.repeat != 3 else "")
    path = write_report(args.out_dir, "oracle_speed", "Oracle-program speed", body, command)
    print(f"wrote {path}")
    return 0 if not differences else 1

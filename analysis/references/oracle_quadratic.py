"""The quadratic oracle-program DP, kept verbatim as the reference the fast
``cad_outlines.edits.oracle.oracle_program`` is checked against (tests and ``cad-outlines study
oracle-speed``). It evaluates every copy candidate: every run of matching lines ending at each
`after` line, every length, every source position. Do not optimise it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from cad_outlines.edits.lines import split_lines
from cad_outlines.edits.oracle import approx_token_count  # the same default counter
from cad_outlines.edits.program import GEN_CLOSE, GEN_OPEN, Copy, EditProgram, Op, gen_ops

__all__ = ["oracle_program_quadratic"]

Policy = str  # "min_tokens" | "max_copy"

# Costs are packed into one int so the DP compares them in one operation:
# (primary, secondary, ops) with 2**22 room each (4M tokens per document).
_B = 1 << 22


def oracle_program_quadratic(
    before: str,
    after: str,
    *,
    count_tokens: Callable[[str], int] | None = None,
    policy: Policy = "max_copy",
    sep: str = "\n",
) -> EditProgram:
    """The line-level program that resolves `before` to `after` writing the fewest
    tokens.

    `policy="max_copy"` (default): no gen op where a copy fits -- every line that can
    be copied is copied (the copy ceiling) -- and among such programs the one with the
    fewest written tokens (adjacent copy spans merged). `policy="min_tokens"`
    minimises all written tokens, tags included, so a short line may be generated
    rather than copied when its tag costs more. `sep` is the separator between ops
    that the program's text will use ("\\n" or "").
    """
    if policy not in ("min_tokens", "max_copy"):
        raise ValueError(f"unknown policy {policy!r}: use 'min_tokens' or 'max_copy'")
    count = lru_cache(maxsize=None)(count_tokens or approx_token_count)
    src, out = split_lines(before), split_lines(after)
    m = len(out)
    sep_cost = count(sep) if sep else 0
    gen_overhead = count(GEN_OPEN) + count(GEN_CLOSE) + sep_cost
    line_cost = [count(line) for line in out]

    def pack(content: int, tags: int, ops: int) -> int:
        total = content + tags
        return (content * _B + total) * _B + ops if policy == "max_copy" else (total * _B + content) * _B + ops

    def copy_cost(s: int, e: int) -> int:
        return pack(0, count(Copy(s, e).to_text()) + sep_cost, 1)

    positions: dict[str, list[int]] = {}
    for i, line in enumerate(src):
        positions.setdefault(line, []).append(i)

    INF = float("inf")
    best_a = [INF] * (m + 1)  # ends at an op boundary, last op not an open gen
    best_g = [INF] * (m + 1)  # last op is a gen op that ends at line k
    back_a: list[tuple | None] = [None] * (m + 1)
    back_g: list[tuple | None] = [None] * (m + 1)
    best_a[0] = 0
    runs: dict[int, int] = {}  # source end index e -> length of the match ending at (k, e)
    for k in range(1, m + 1):
        line = out[k - 1]
        # gen: start a new gen op after a boundary, or extend the open one
        start = best_a[k - 1] + pack(line_cost[k - 1], gen_overhead, 1)
        extend = best_g[k - 1] + pack(line_cost[k - 1], 0, 0)
        if start <= extend:
            best_g[k], back_g[k] = start, ("gen_start", k - 1)
        else:
            best_g[k], back_g[k] = extend, ("gen_extend", k - 1)
        # copy: every run of matching lines that ends at (k, e)
        new_runs = {}
        for i in positions.get(line, ()):
            new_runs[i + 1] = runs.get(i, 0) + 1
        runs = new_runs
        for e, run in sorted(runs.items()):
            for length in range(run, 0, -1):
                l = k - length
                base, frm = (best_a[l], "a") if best_a[l] <= best_g[l] else (best_g[l], "g")
                cost = base + copy_cost(e - length + 1, e)
                if cost < best_a[k]:
                    best_a[k], back_a[k] = cost, ("copy", l, frm, e - length + 1, e)
    ops: list[Op] = []
    state = "a" if best_a[m] <= best_g[m] else "g"
    k = m
    gen_end = None
    while k > 0:
        if state == "a":
            _, l, frm, s, e = back_a[k]
            ops.append(Copy(s, e))
            k, state = l, frm
        else:
            if gen_end is None:
                gen_end = k
            kind, l = back_g[k]
            if kind == "gen_start":
                ops.extend(reversed(gen_ops("".join(out[l:gen_end]))))
                gen_end = None
                state = "a"
            k = l
    ops.reverse()
    return EditProgram(ops)

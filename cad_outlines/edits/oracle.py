"""Oracle programs: the cheapest line-level program that turns `before` into `after`.

A dynamic program over the lines of `after`: each line is either copied (any run of
consecutive `after` lines equal to a run of consecutive `before` lines is one copy op,
wherever it sits in `before`) or generated (consecutive generated lines share one gen
op). The cost is the number of tokens the model writes: op tags, separators and gen
text, counted by `count_tokens`. Ties go to copies, then to fewer ops, then to the
earliest source span, so the result is deterministic. By default every line that
can be copied is copied (see `policy`).

The program is the one the plain quadratic DP over every (start, end, source) candidate
gives (``analysis/references/oracle_quadratic.py``, checked against it in the tests), found in
about linear time for real edits: one-line copies are looked up once per distinct line, a
match is extended diagonally from the previous line only where it goes on, and a start inside a
match is skipped when its cost so far plus the cheapest possible tag cannot beat the best
candidate already found. That bound assumes no copy tag costs fewer tokens than
``<copy lines="1-1"/>`` (true of :func:`approx_token_count`, where every tag costs 9, and of the
Qwen2.5, GPT-2, Llama-3, StarCoder and Phi-3 tokenizers, checked on 6,000 tags up to line 8,000:
8 to 14 tokens, never below the 8 of that tag); a `count_tokens` found breaking it raises
ValueError.
"""

from __future__ import annotations

import re
from bisect import insort
from collections.abc import Callable
from functools import lru_cache

from .lines import split_lines
from .program import GEN_CLOSE, GEN_OPEN, Copy, EditProgram, Op, gen_ops

__all__ = ["oracle_program", "approx_token_count", "Policy"]

_APPROX = re.compile(r"\w+|[^\w\s]+|\s+")

Policy = str  # "min_tokens" | "max_copy"


def approx_token_count(text: str) -> int:
    """A tokenizer-free token estimate (words, punctuation runs, whitespace runs)."""
    return len(_APPROX.findall(text))


# Costs are packed into one int so the DP compares them in one operation:
# (primary, secondary, ops) with 2**22 room each (4M tokens per document).
_B = 1 << 22


def oracle_program(
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

    `count_tokens` must count no copy tag below ``<copy lines="1-1"/>`` (see the module
    docstring); about 10-20 ms of CPU for a 1,400-line file with the default counter.
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

    floor = copy_cost(1, 1)  # the cheapest copy tag, by the assumption in the docstring
    tags: dict[tuple[int, int], int] = {}
    constant_tags = count_tokens is None or count_tokens is approx_token_count

    def tag(s: int, e: int) -> int:
        if constant_tags:  # approx_token_count reads each number as one word: every tag is 9 tokens
            return floor
        c = tags.get((s, e))
        if c is None:
            c = tags[(s, e)] = copy_cost(s, e)
            if c < floor:
                raise ValueError(
                    f"count_tokens counts {Copy(s, e).to_text()!r} as fewer tokens than {Copy(1, 1).to_text()!r}; "
                    "oracle_program needs every copy tag to cost at least that"
                )
        return c

    positions: dict[str, list[int]] = {}  # line -> its 1-based line numbers in `before`
    for i, line in enumerate(src, 1):
        positions.setdefault(line, []).append(i)
    position_set = {line: set(ps) for line, ps in positions.items()}
    single: dict[str, tuple[int, int]] = {}  # line -> the cheapest one-line copy of it: (cost, e), earliest e

    INF = float("inf")
    best_a = [INF] * (m + 1)  # ends at an op boundary, last op not an open gen
    best_g = [INF] * (m + 1)  # last op is a gen op that ends at line k
    base = [0] * (m + 1)  # min(best_a, best_g): the cost of the best way to write lines 1..k
    back_a: list[tuple | None] = [None] * (m + 1)
    back_g: list[tuple | None] = [None] * (m + 1)
    best_a[0] = 0
    # A match ending at (k, e): after lines l+1..k equal before lines e-k+l+1..e. `runs` holds the matches of
    # two or more lines ending at the current k, by e, as the list of their starts l, (base[l], l) in
    # increasing order; one-line matches are every position of the line and need no entry.
    runs: dict[int, list[tuple[int, int]]] = {}
    prev: str | None = None
    for k in range(1, m + 1):
        line = out[k - 1]
        # gen: start a new gen op after a boundary, or extend the open one
        start = best_a[k - 1] + pack(line_cost[k - 1], gen_overhead, 1)
        extend = best_g[k - 1] + pack(line_cost[k - 1], 0, 0)
        if start <= extend:
            best_g[k], back_g[k] = start, ("gen_start", k - 1)
        else:
            best_g[k], back_g[k] = extend, ("gen_extend", k - 1)
        # copy. The quadratic DP takes the first candidate of least cost in the order (e, l), i.e. the least
        # (cost, e, l); so does this, without looking at candidates that cannot be it.
        here = positions.get(line)
        new_runs: dict[int, list[tuple[int, int]]] = {}
        best, be, bl = INF, 0, 0
        if here is not None:
            # one-line copies (l = k - 1) cost base[k-1] + tag(e, e): the cheapest e is the same at every k
            if line not in single:
                single[line] = min((tag(e, e), e) for e in here)
            c, e = single[line]
            best, be, bl = base[k - 1] + c, e, k - 1
            # longer matches: those ending at (k - 1, e - 1) go on to (k, e) where line e of `before` is `line`
            if prev is not None and prev in positions:
                there, there_set = positions[prev], position_set[prev]
                if len(here) <= len(there):
                    ends = [e for e in here if e - 1 in there_set]
                else:
                    here_set = position_set[line]
                    ends = [e + 1 for e in there if e + 1 in here_set]
                entry = (base[k - 1], k - 1)
                for e in ends:
                    starts = runs.get(e - 1)
                    if starts is None:  # a one-line match that goes on
                        starts = [(base[k - 2], k - 2)]
                    insort(starts, entry)
                    new_runs[e] = starts
                    # a start l costs at least base[l] + floor: walking the starts by increasing base, the
                    # first whose bound cannot beat the best so far ends the walk
                    for b, l in starts:
                        bound = b + floor
                        if bound > best or (bound == best and (e > be or (e == be and l > bl))):
                            break
                        cost = b + tag(e - k + l + 1, e)
                        if cost < best or (cost == best and (e < be or (e == be and l < bl))):
                            best, be, bl = cost, e, l
        runs, prev = new_runs, line
        if best != INF:
            frm = "a" if best_a[bl] <= best_g[bl] else "g"
            best_a[k], back_a[k] = best, ("copy", bl, frm, be - k + bl + 1, be)
        base[k] = best_a[k] if best_a[k] <= best_g[k] else best_g[k]
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

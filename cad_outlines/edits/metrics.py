"""What a program saves: which output characters and tokens its copy ops produce."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .lines import split_lines
from .oracle import _APPROX
from .program import Copy, EditProgram
from .resolve import resolve_op

__all__ = [
    "op_char_spans",
    "copied_char_ranges",
    "approx_token_offsets",
    "copy_coverage",
    "SuffixAutomaton",
    "greedy_token_cover",
    "KernelCurve",
    "speedup_bound",
]


def op_char_spans(program: EditProgram, document: str) -> list[tuple[object, int, int]]:
    """(op, start, end): the character range of the new document each op produces."""
    lines = split_lines(document)
    spans, pos = [], 0
    for op in program.ops:
        text = resolve_op(op, lines)
        spans.append((op, pos, pos + len(text)))
        pos += len(text)
    return spans


def copied_char_ranges(program: EditProgram, document: str) -> list[tuple[int, int]]:
    """Merged character ranges of the new document produced by copy ops."""
    ranges: list[tuple[int, int]] = []
    for op, start, end in op_char_spans(program, document):
        if isinstance(op, Copy) and end > start:
            if ranges and ranges[-1][1] == start:
                ranges[-1] = (ranges[-1][0], end)
            else:
                ranges.append((start, end))
    return ranges


def approx_token_offsets(text: str) -> list[tuple[int, int]]:
    """Token character offsets from the tokenizer-free estimate."""
    return [m.span() for m in _APPROX.finditer(text)]


def copy_coverage(program: EditProgram, document: str,
                  token_offsets: Sequence[tuple[int, int]] | None = None) -> tuple[int, int]:
    """(covered, total): tokens of the new document (given by their character offsets;
    by default the tokenizer-free estimate) that lie wholly inside text copy ops
    produce. A token straddling a copy/gen boundary counts as generated."""
    if token_offsets is None:
        from .resolve import resolve

        token_offsets = approx_token_offsets(resolve(program, document))
    ranges = copied_char_ranges(program, document)
    covered, r = 0, 0
    for start, end in token_offsets:
        while r < len(ranges) and ranges[r][1] < end:
            r += 1
        if r < len(ranges) and ranges[r][0] <= start and end <= ranges[r][1]:
            covered += 1
    return covered, len(token_offsets)


class SuffixAutomaton:
    """The suffix automaton of a token sequence: built in O(n), it answers "how long is
    the longest prefix of ``query[start:]`` that occurs contiguously in the sequence?"
    in O(answer)."""

    def __init__(self, seq: Sequence[int]):
        nxt: list[dict[int, int]] = [{}]
        link, length, last = [-1], [0], 0
        for c in seq:
            cur = len(nxt)
            nxt.append({})
            length.append(length[last] + 1)
            link.append(0)
            p = last
            while p != -1 and c not in nxt[p]:
                nxt[p][c] = cur
                p = link[p]
            if p != -1:
                q = nxt[p][c]
                if length[p] + 1 == length[q]:
                    link[cur] = q
                else:
                    clone = len(nxt)
                    nxt.append(dict(nxt[q]))
                    length.append(length[p] + 1)
                    link.append(link[q])
                    while p != -1 and nxt[p].get(c) == q:
                        nxt[p][c] = clone
                        p = link[p]
                    link[q] = link[cur] = clone
            last = cur
        self._next = nxt

    def longest_match(self, query: Sequence[int], start: int = 0) -> int:
        """Length of the longest ``query[start:start+L]`` that occurs in the sequence."""
        nxt, state, i = self._next, 0, start
        while i < len(query):
            state = nxt[state].get(query[i], -1)
            if state < 0:
                break
            i += 1
        return i - start


def greedy_token_cover(src_ids: Sequence[int] | SuffixAutomaton, out_ids: Sequence[int],
                       min_span: int) -> list[tuple[int, int]]:
    """(start, length) spans of `out_ids` covered by copying from `src_ids`, greedy left
    to right: at each position take the longest run that occurs contiguously in the
    source; keep it and jump past it if it has at least `min_span` tokens, else step one
    token. `src_ids` may be a prebuilt :class:`SuffixAutomaton` (to reuse it over spans)."""
    if min_span < 1:
        raise ValueError(f"min_span must be >= 1, got {min_span}")
    sam = src_ids if isinstance(src_ids, SuffixAutomaton) else SuffixAutomaton(src_ids)
    spans, p = [], 0
    while p < len(out_ids):
        length = sam.longest_match(out_ids, p)
        if length >= min_span:
            spans.append((p, length))
            p += length
        else:
            p += 1
    return spans


@dataclass(frozen=True)
class KernelCurve:
    """Kernel speedup s(N) of copying N tokens by one parallel prefill instead of N
    decode steps, from measured points: linear in log N between points, clamped
    outside them. Without a point at N <= 1 the curve is anchored at s(1) = 1 (one
    token costs one forward either way)."""

    points: tuple[tuple[float, float], ...]

    @classmethod
    def from_points(cls, points: Iterable[tuple[float, float]]) -> KernelCurve:
        pts = sorted((float(n), float(s)) for n, s in points)
        if not pts or any(n <= 0 for n, _ in pts) or len({n for n, _ in pts}) < len(pts):
            raise ValueError(f"need distinct positive N values, got {pts}")
        if pts[0][0] > 1:
            pts.insert(0, (1.0, 1.0))
        return cls(tuple(pts))

    def __call__(self, n: float) -> float:
        pts = self.points
        if n <= pts[0][0]:
            return pts[0][1]
        if n >= pts[-1][0]:
            return pts[-1][1]
        i = bisect.bisect_right([p[0] for p in pts], n)
        (n0, s0), (n1, s1) = pts[i - 1], pts[i]
        t = (math.log(n) - math.log(n0)) / (math.log(n1) - math.log(n0))
        return s0 + t * (s1 - s0)


def speedup_bound(total_tokens: int, gen_tokens: int, copy_tokens: Iterable[int], speedup: KernelCurve) -> float:
    """Closed-form wall-clock bound T / (T_gen + sum_k N_k / s(N_k)): full regeneration
    (`total_tokens` decode steps) against writing `gen_tokens` and copying each span of
    N_k tokens at the kernel's speedup s(N_k)."""
    cost = gen_tokens + sum(n / speedup(n) for n in copy_tokens if n > 0)
    if not cost:
        return math.inf if total_tokens else 1.0
    return total_tokens / cost

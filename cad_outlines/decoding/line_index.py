"""The document's lines, indexed for the document constraint: which runs of lines a hunk's old text
can still be, narrowed line by line as the text arrives.

A hunk's old text is written line by line. After k complete lines the *candidates* are the starts s
(at or after the cursor) where the document's lines s..s+k-1 are those k lines; the next line being
written must be a prefix of line s+k for some *live* candidate s, one whose old text can still end
up unique. The hunk may end only where exactly one candidate is left.

Liveness is a property of the start alone (given the cursor): s is dead when the document's suffix
from s (lines s..n-1) also occurs at an earlier start s' >= cursor, because then every run starting
at s occurs at s' too. ``prev_occ[s]`` is the latest such s' (any s' >= 0, computed once in linear
time with the Z-function of the reversed line sequence), so s is live iff prev_occ[s] < cursor. The
earliest candidate is always live, so a live candidate exists while any candidate does: the
constraint never leads the model into a state it cannot finish. (Lines a format cannot write as old
text, search/replace's markers, cut the runs; see ``_barrier_liveness``.)

The next lines of the candidates are kept as a sorted list of distinct bodies (bytes), so "is q a
prefix of a candidate's next line" and "which bytes may follow q" are binary searches. The view for
the first line (every line at or after the cursor) is built once per cursor and shared.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

__all__ = ["LineIndex", "Candidates", "UNTERMINATED"]

UNTERMINATED = b"\xff"  # never in UTF-8 text: marks the body of a last line that has no newline


def _z_function(seq: Sequence[int]) -> list[int]:
    n = len(seq)
    z = [0] * n
    if n:
        z[0] = n
    left = right = 0
    for i in range(1, n):
        if i < right:
            z[i] = min(right - i, z[i - left])
        while i + z[i] < n and seq[z[i]] == seq[i + z[i]]:
            z[i] += 1
        if i + z[i] > right:
            left, right = i, i + z[i]
    return z


class LineIndex:
    """A document's line bodies (UTF-8 bytes, without the ``"\\n"``), their ids, where each occurs,
    and for each start the latest earlier occurrence of its suffix (see the module docstring).
    `excluded` bodies (a format's marker lines) can never be written as old lines."""

    def __init__(self, text: str, excluded: Sequence[bytes] = (), mark_unterminated: bool = False):
        data = text.encode("utf-8")
        parts = data.split(b"\n")
        self.terminated = parts[-1] == b"" or not data
        if parts[-1] == b"":
            parts.pop()
        elif mark_unterminated:  # str_replace: a last line without "\n" is not the same as one with it
            parts[-1] += UNTERMINATED
        self.bodies: list[bytes] = parts
        self.n = n = len(parts)
        ids: dict[bytes, int] = {}
        self.ids = np.array([ids.setdefault(b, len(ids)) for b in parts], dtype=np.int64)
        self.id_of = ids
        self.excluded = frozenset(excluded)
        self.where: dict[bytes, np.ndarray] = {}
        for i, b in enumerate(parts):
            self.where.setdefault(b, []).append(i)
        self.where = {b: np.array(v, dtype=np.int64) for b, v in self.where.items()}
        self.prev_occ = np.full(n, -1, dtype=np.int64)
        self.never = np.zeros(n, dtype=bool)  # starts that can never be unique (see _barrier_liveness)
        if self.excluded & ids.keys():
            self._barrier_liveness()
        else:
            # prev_occ[s] = s - (smallest i >= 1 with z[i] >= n - s) over the reversed sequence, or -1
            z = _z_function(self.ids[::-1].tolist())
            first = [0] * (n + 1)  # first[L]: smallest i >= 1 whose reversed match is >= L long (0: none)
            served = 0
            for i in range(1, n):
                while served < z[i]:
                    served += 1
                    first[served] = i
            for s in range(n):
                i = first[n - s]
                if i:
                    self.prev_occ[s] = s - i
        self._first_views: dict[int, Candidates] = {}
        self._anchor_views: dict[int, tuple[list[bytes], list[int]]] = {}

    def _barrier_liveness(self) -> None:
        """Liveness when some lines can never be written (markers): the longest old text from s stops
        before the next such line, so s is dead when that run also occurs later (never unique) or at
        an earlier start >= the cursor. Quadratic in the worst case; only documents holding a marker
        line take this path."""
        n, bodies = self.n, self.bodies
        end = n
        for s in range(n - 1, -1, -1):
            if bodies[s] in self.excluded:
                end = s
                self.never[s] = True
                continue
            run = bodies[s:end]
            for t in self.where[bodies[s]].tolist():
                if t != s and t + len(run) <= n and bodies[t:t + len(run)] == run:
                    if t > s:
                        self.never[s] = True
                    else:
                        self.prev_occ[s] = max(self.prev_occ[s], t)

    def first(self, cursor: int) -> Candidates:
        """The candidates of a hunk's old text before any line: every start at or after `cursor`."""
        c = self._first_views.get(cursor)
        if c is None:
            c = self._first_views[cursor] = Candidates(self, cursor, 0, np.arange(cursor, self.n, dtype=np.int64))
        return c

    def anchor_view(self, cursor: int) -> list[bytes]:
        """The sorted distinct non-empty bodies of the lines at or after `cursor` (what an
        apply_patch anchor may be)."""
        v = self._anchor_views.get(cursor)
        if v is None:
            v = self._anchor_views[cursor] = sorted(set(self.bodies[cursor:]) - {b""})
        return v

    def anchor_target(self, cursor: int, body: bytes) -> int | None:
        """The first line at or after `cursor` whose body is `body`."""
        hits = self.where.get(body)
        if hits is None:
            return None
        i = int(np.searchsorted(hits, cursor))
        return int(hits[i]) if i < len(hits) else None


class Candidates:
    """The starts whose first `k` lines equal the hunk's old lines so far (all of them, dead ones
    included, for counting), with the sorted view of the live ones' next lines."""

    __slots__ = ("index", "cursor", "k", "starts", "_view")

    def __init__(self, index: LineIndex, cursor: int, k: int, starts: np.ndarray):
        self.index, self.cursor, self.k, self.starts = index, cursor, k, starts
        self._view: list[bytes] | None = None

    @property
    def count(self) -> int:
        return len(self.starts)

    @property
    def view(self) -> list[bytes]:
        """Sorted distinct bodies of line s+k over the live candidates s (excluded bodies left out)."""
        if self._view is None:
            ix = self.index
            s = self.starts
            s = s[(s + self.k < ix.n) & (ix.prev_occ[s] < self.cursor) & ~ix.never[s]]
            bodies = {ix.bodies[i] for i in (s + self.k).tolist()}
            self._view = sorted(bodies - ix.excluded)
        return self._view

    def has_prefix(self, q: bytes) -> bool:
        """Whether some live candidate's next line starts with `q`."""
        v = self.view
        i = bisect_left(v, q)
        return i < len(v) and v[i].startswith(q)

    def has_line(self, q: bytes) -> bool:
        """Whether `q` is a whole next line of some live candidate."""
        v = self.view
        i = bisect_left(v, q)
        return i < len(v) and v[i] == q

    def next_bytes(self, q: bytes) -> set[int]:
        """The bytes that may follow `q` inside a live candidate's next line."""
        v = self.view
        i = bisect_left(v, q)
        d = len(q)
        out: set[int] = set()
        while i < len(v) and v[i].startswith(q):
            if len(v[i]) > d:
                b = v[i][d]
                out.add(b)
                # skip the rest of the bodies that continue with the same byte
                i = bisect_left(v, q + bytes([b + 1]), i) if b < 255 else len(v)
            else:
                i += 1
        return out

    def only_line(self, q: bytes) -> bytes | None:
        """The one live next line that starts with `q`, if exactly one does."""
        v = self.view
        i = bisect_left(v, q)
        if i < len(v) and v[i].startswith(q) and not (i + 1 < len(v) and v[i + 1].startswith(q)):
            return v[i]
        return None

    def complete(self, body: bytes) -> Candidates:
        """The candidates after one more old line, `body`."""
        ix = self.index
        line_id = ix.id_of.get(body)
        if line_id is None:
            starts = self.starts[:0]
        elif self.k == 0:
            hits = ix.where[body]
            starts = hits[hits >= self.cursor]
        else:
            s = self.starts[self.starts + self.k < ix.n]
            starts = s[ix.ids[s + self.k] == line_id]
        return Candidates(ix, self.cursor, self.k + 1, starts)

    def ends_at_last_line(self, body: bytes) -> bool:
        """Whether `body` completes the old text exactly at the document's last line when that line
        has no newline (str_replace's old_str may end there: an index built with
        `mark_unterminated`): one start then, so it is unique."""
        ix = self.index
        s = ix.n - 1 - self.k
        return (not ix.terminated and s >= self.cursor and ix.bodies[-1] == body + UNTERMINATED
                and (self.k == 0 or bool(np.any(self.starts == s))))

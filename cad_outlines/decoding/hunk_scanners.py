"""Byte-level readers of the diff-style edit formats that keep their programs applicable.

Each scanner reads program bytes one at a time, tracks the format's structure (which lines are old
text, which are new text or markers) and, through :class:`~.line_index.Candidates`, where the hunk's
old text can still match. ``step(state, byte)`` returns the next state, or None where the byte would
make the hunk's old text impossible: not a prefix of a line of a live candidate, or ending where
more than one candidate is left. States are immutable tuples ``(section, q, candidates, cursor,
extra)``: `q` is the current line's bytes so far (None where the scanner does not need them),
`cursor` the first line the next hunk may match.

The structure itself (markers, prefixes) is the grammar's job: a scanner follows it only as far as
the document needs (it never rejects a byte on structural grounds that the grammar accepts), and
where the text is outside every hunk it accepts anything.

What each state offers the mask (:mod:`.document_constraint`):

- ``stops(state)``: for a *free* state (new text), the bytes that can change it; every other byte
  leaves it as it is;
- ``match(state)``: for a line of old text, ``(candidates, q, extra)``: the line must go on as a
  prefix of one of the candidates' next lines (or of an `extra` text, the divider of search/replace);
- ``next_bytes(state)``: the bytes that may come next, or None for any.
"""

from __future__ import annotations

from bisect import bisect_left

from ..edits.formats import apply_patch, search_replace, udiff
from .line_index import Candidates, LineIndex

__all__ = ["HunkScanner", "SearchReplaceScanner", "UdiffScanner", "ApplyPatchScanner"]

NL = 10
State = tuple


class HunkScanner:
    """The common part: hunk ends, cursor moves, and the old-line match step."""

    empty_old: str | None = "end"  # where a hunk without old lines goes (None: not allowed)

    def __init__(self, document: str, excluded: tuple[bytes, ...] = (), mark_unterminated: bool = False):
        self.index = LineIndex(document, excluded, mark_unterminated)

    # -- hunks ---------------------------------------------------------------------------------------
    def end_ok(self, cands: Candidates) -> bool:
        """Whether the hunk's old text may end here: one candidate left (or none written, where the
        format allows an empty hunk)."""
        return cands.count == 1 if cands.k else self.empty_old is not None

    def after(self, cands: Candidates, cursor: int) -> int:
        """The cursor after a hunk that ended with `cands`."""
        if cands.k:
            return int(cands.starts[0]) + cands.k
        return self.index.n if self.empty_old == "end" else cursor

    @staticmethod
    def old_line_step(cands: Candidates, q: bytes, b: int, extra: bytes | None = None) -> Candidates | bytes | None:
        """One byte of an old line: the line's bytes so far if it stays a prefix of a live next line
        (or of `extra`), the new candidates if ``"\\n"`` completes one, None otherwise."""
        if b == NL:
            return cands.complete(q) if cands.has_line(q) else None
        q2 = q + bytes((b,))
        if cands.has_prefix(q2) or (extra is not None and extra.startswith(q2)):
            return q2
        return None

    @staticmethod
    def old_line_next(cands: Candidates, q: bytes, extra: bytes | None = None) -> set[int]:
        out = cands.next_bytes(q)
        if cands.has_line(q):
            out.add(NL)
        if extra is not None and extra.startswith(q) and len(extra) > len(q):
            out.add(extra[len(q)])
        return out

    # -- the interface -------------------------------------------------------------------------------
    def initial(self) -> State:
        raise NotImplementedError

    def step(self, st: State, b: int) -> State | None:
        raise NotImplementedError

    def eos_ok(self, st: State) -> bool:
        raise NotImplementedError

    def stops(self, st: State) -> tuple[bytes, State] | None:
        """For a state where most bytes lead to one *free* state: ``(stop bytes, free state)``: every
        byte not in `stop bytes` takes `st` to the free state, which every byte not in its own stop
        bytes (a subset) leaves as it is. None for other states."""
        return None

    def match(self, st: State) -> tuple[Candidates, bytes, bytes | None] | None:
        return None

    def next_bytes(self, st: State) -> set[int] | None:
        m = self.match(st)
        if m is not None:
            return self.old_line_next(*m)
        return None

    def forced_next(self, st: State) -> int | None:
        """The byte a forced run takes next: the only byte that may come next, else None."""
        nb = self.next_bytes(st)
        return next(iter(nb)) if nb is not None and len(nb) == 1 else None

    def feed(self, st: State, data: bytes) -> State | None:
        for b in data:
            st = self.step(st, b)
            if st is None:
                return None
        return st


class SearchReplaceScanner(HunkScanner):
    """Sections: "o" between blocks (q: the line so far while it may still be the SEARCH marker),
    "s" in a SEARCH section (q: the old line so far), "r" in a REPLACE section (q while the line may
    be the REPLACE marker). A line that is exactly a marker is that marker, so a document line that
    is one can never be old text."""

    SEARCH = search_replace.SEARCH.encode()
    DIVIDER = search_replace.DIVIDER.encode()
    REPLACE = search_replace.REPLACE.encode()

    def __init__(self, document: str):
        super().__init__(document, tuple(m.encode() for m in search_replace.MARKERS))

    def initial(self) -> State:
        return ("o", b"", None, 0, None)

    def _divider(self, st: State) -> bytes | None:
        return self.DIVIDER if self.end_ok(st[2]) else None

    def step(self, st: State, b: int) -> State | None:
        sec, q, cands, cursor, _ = st
        if sec == "s":
            if b == NL and q == self.DIVIDER:
                return ("r", b"", None, self.after(cands, cursor), None) if self.end_ok(cands) else None
            r = self.old_line_step(cands, q, b, self._divider(st))
            if r is None:
                return None
            return ("s", b"", r, cursor, None) if isinstance(r, Candidates) else ("s", r, cands, cursor, None)
        marker = self.SEARCH if sec == "o" else self.REPLACE
        if b == NL:
            if q == marker:
                return ("s", b"", self.index.first(cursor), cursor, None) if sec == "o" else ("o", b"", None, cursor, None)
            return (sec, b"", None, cursor, None)
        if q is not None and marker.startswith(q + bytes((b,))):
            return (sec, q + bytes((b,)), None, cursor, None)
        return st if q is None else (sec, None, None, cursor, None)

    def eos_ok(self, st: State) -> bool:
        return st[0] == "o" and st[1] == b""

    def stops(self, st: State):
        sec, q = st[0], st[1]
        if sec == "s":
            return None
        if q is None:
            return b"\n", st
        marker = self.SEARCH if sec == "o" else self.REPLACE
        more = marker[len(q):len(q) + 1] if marker.startswith(q) else b""
        return b"\n" + more, (sec, None, None, st[3], None)

    def match(self, st: State):
        return (st[2], st[1], self._divider(st)) if st[0] == "s" else None


class _TaggedLines(HunkScanner):
    """udiff and apply_patch: every line of a hunk starts with a tag. Sections: "h" at the start of
    a line inside a hunk, "c" an old line (context or removed; q its body so far), "+" an added line
    (free), "x" a line the document does not constrain (headers, markers; q unused)."""

    def old_or_new(self, st: State, b: int) -> State | None:
        """The first byte of a line inside a hunk."""
        _, _, cands, cursor, _ = st
        if b in (32, 45):  # " ", "-": an old line, so some live candidate must have a next line
            return ("c", b"", cands, cursor, True) if cands.has_prefix(b"") else None
        if b == 43:  # "+"
            return ("+", None, cands, cursor, True)
        return None

    def old_step(self, st: State, b: int) -> State | None:
        _, q, cands, cursor, extra = st
        r = self.old_line_step(cands, q, b)
        if r is None:
            return None
        return ("h", b"", r, cursor, extra) if isinstance(r, Candidates) else ("c", r, cands, cursor, extra)

    def stops(self, st: State):
        return (b"\n", st) if st[0] in ("+", "x") else None

    def match(self, st: State):
        return (st[2], st[1], None) if st[0] == "c" else None


class UdiffScanner(_TaggedLines):
    """udiff: "o" before the first hunk, "x" in a hunk header line, then the hunk's lines."""

    empty_old = udiff.EMPTY_OLD

    def initial(self) -> State:
        return ("o", None, None, 0, None)

    def step(self, st: State, b: int) -> State | None:
        sec, q, cands, cursor, _ = st
        if sec == "o":
            return ("x", None, self.index.first(cursor), cursor, None) if b == 64 else st  # "@"
        if sec == "x":
            return ("h", b"", cands, cursor, None) if b == NL else st
        if sec == "h":
            if b == 64:  # a new hunk: this one ends here
                if not self.end_ok(cands):
                    return None
                cursor = self.after(cands, cursor)
                return ("x", None, self.index.first(cursor), cursor, None)
            return self.old_or_new(st, b)
        if sec == "c":
            return self.old_step(st, b)
        return ("h", b"", cands, cursor, None) if b == NL else st  # "+"

    def eos_ok(self, st: State) -> bool:
        return st[0] == "o" or (st[0] == "h" and self.end_ok(st[2]))

    def stops(self, st: State):
        return (b"@", st) if st[0] == "o" else super().stops(st)


class ApplyPatchScanner(_TaggedLines):
    """apply_patch: "a" before the first hunk, "@" reading an ``@@`` line (q: its bytes so far), "n"
    an anchor's text (q), "h"/"c"/"+" the hunk's lines (extra: whether the hunk has any yet; until
    it does, more ``@@`` lines may come), "x" the end marker."""

    empty_old = apply_patch.EMPTY_OLD

    def initial(self) -> State:
        return ("a", None, None, 0, False)

    def step(self, st: State, b: int) -> State | None:
        sec, q, cands, cursor, has_lines = st
        ix = self.index
        if sec in ("a", "h") and b in (64, 42):  # "@" or "*": the hunk (if it has lines) ends here
            if has_lines:
                if not self.end_ok(cands):
                    return None
                cursor = self.after(cands, cursor)
            elif sec == "h" and b == 42:
                return None  # "*** End Patch" right after "@@" lines: the grammar wants a line first
            return ("@", b"@", None, cursor, False) if b == 64 else ("x", None, None, cursor, False)
        if sec == "a":
            return None
        if sec == "@":
            if b == NL:
                return ("h", b"", ix.first(cursor), cursor, False) if q == b"@@" else None
            if q == b"@@" and b == 32:  # an anchor: some line must be left at or after the cursor
                return ("n", b"", None, cursor, False) if ix.anchor_view(cursor) else None
            q2 = q + bytes((b,))
            return ("@", q2, None, cursor, False) if b"@@".startswith(q2) else None
        if sec == "n":  # an anchor: the text of a line at or after the cursor
            if b == NL:
                target = ix.anchor_target(cursor, q) if q else None
                return None if target is None else ("h", b"", ix.first(target + 1), target + 1, False)
            q2 = q + bytes((b,))
            return ("n", q2, None, cursor, False) if _has_prefix(ix.anchor_view(cursor), q2) else None
        if sec == "h":
            return self.old_or_new(st, b)
        if sec == "c":
            return self.old_step(st, b)
        if sec == "+":
            return ("h", b"", cands, cursor, True) if b == NL else st
        return st  # "x": the end marker; the grammar ends the text there

    def eos_ok(self, st: State) -> bool:
        return st[0] == "x"

    def stops(self, st: State):
        if st[0] == "x":
            return b"", st
        return (b"\n", st) if st[0] == "+" else None

    def next_bytes(self, st: State) -> set[int] | None:
        if st[0] == "n":
            q = st[1]
            view = self.index.anchor_view(st[3])
            out = {NL} if q and self.index.anchor_target(st[3], q) is not None else set()
            i = bisect_left(view, q)
            while i < len(view) and view[i].startswith(q):
                if len(view[i]) > len(q):
                    out.add(view[i][len(q)])
                i += 1
            return out
        return super().next_bytes(st)


def _has_prefix(view: list[bytes], q: bytes) -> bool:
    i = bisect_left(view, q)
    return i < len(view) and view[i].startswith(q)

"""The document constraint: beside the grammar, a diff-style edit's search, context and removed text
must stay a run of the document's lines that can still occur exactly once where it must.

:class:`DocumentConstraint` holds a format's scanner (:mod:`.hunk_scanners`) and its state after
the program text so far, and answers, at the token level:

- :meth:`~DocumentConstraint.mask`: which vocabulary tokens keep the program applicable (a token is
  allowed when every byte of it, read by the scanner, keeps the hunk's old text a prefix of some
  live candidate's lines, ends it only where it is unique, and so on); EOS only where every hunk
  applies. A token may end inside a UTF-8 character, or run from the end of an old line into the
  next line or the format's next marker: the scanner reads bytes, so both are judged exactly.
- :meth:`~DocumentConstraint.forced_bytes`: the bytes that must come next (once one candidate
  is left, the rest of its line, and its next lines while the hunk may not end yet).

The mask is computed over the vocabulary sorted by bytes (a byte trie as contiguous ranges), walked
from the scanner's state: a *free* state (new text) accepts every token without a byte that could
change it in one vectorized step and reads only the few tokens with one (a newline) from there, with
the results memoized per (state, rest of token); an old line is matched by enumerating the
candidates' next lines against the token table (only prefixes some token has are looked up); other
states branch on the next byte. Masks of free states are cached: a line of new text pays for one.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left

import numpy as np

from ..edits.formats import get_format
from ..engine.vocabulary import Vocabulary
from ..errors import ProgramError
from .hunk_scanners import ApplyPatchScanner, HunkScanner, SearchReplaceScanner, UdiffScanner
from .json_scanner import StrReplaceScanner

__all__ = ["DocumentConstraint", "SortedVocab", "scanner_for"]

SCANNERS = {"search_replace": SearchReplaceScanner, "udiff": UdiffScanner, "apply_patch": ApplyPatchScanner,
            "str_replace": StrReplaceScanner}


def scanner_for(format: str, document: str) -> HunkScanner:
    """The scanner of a diff-style format (every format but ``copy``) on `document`."""
    return SCANNERS[format](document)


class SortedVocab:
    """A vocabulary's tokens sorted by their bytes (special and empty tokens left out), with the
    lookups the mask walk needs. One per :class:`Vocabulary` (see :meth:`of`)."""

    _cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, vocab: Vocabulary):
        specials = vocab.special_ids
        pairs = sorted((b, i) for i, b in enumerate(vocab.token_bytes) if b and i not in specials)
        self.bytes: list[bytes] = [b for b, _ in pairs]
        self.ids = np.array([i for _, i in pairs], dtype=np.int64)
        self.by_bytes: dict[bytes, int] = {}
        for pos, (b, _) in enumerate(pairs):
            self.by_bytes.setdefault(b, pos)  # duplicates: the first position; the rest found by range
        self.size = vocab.size
        self.eos = np.array(sorted(vocab.eos_token_ids), dtype=np.int64)
        self._last: dict[bytes, np.ndarray] = {}
        self._buf: np.ndarray | None = None
        self._offsets: np.ndarray | None = None

    @classmethod
    def of(cls, vocab: Vocabulary) -> SortedVocab:
        sv = cls._cache.get(vocab)
        if sv is None:
            sv = cls._cache[vocab] = cls(vocab)
        return sv

    def last_stop(self, stops: bytes) -> np.ndarray:
        """Per sorted token, the last index holding one of `stops` (-1: none)."""
        arr = self._last.get(stops)
        if arr is None:
            if self._buf is None:
                self._buf = np.frombuffer(b"".join(self.bytes), dtype=np.uint8)
                lengths = np.fromiter((len(b) for b in self.bytes), dtype=np.int64, count=len(self.bytes))
                self._offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
            arr = np.full(len(self.bytes), -1, dtype=np.int64)
            where = np.flatnonzero(np.isin(self._buf, np.frombuffer(stops, dtype=np.uint8)))
            owner = np.searchsorted(self._offsets, where, side="right") - 1
            np.maximum.at(arr, owner, where - self._offsets[owner])
            self._last[stops] = arr
        return arr

    def range_of(self, prefix: bytes, lo: int = 0, hi: int | None = None) -> tuple[int, int]:
        """The positions of the tokens that start with `prefix`, within [lo, hi)."""
        hi = len(self.bytes) if hi is None else hi
        a = bisect_left(self.bytes, prefix, lo, hi)
        b = a
        if a < hi and self.bytes[a].startswith(prefix):
            b = _prefix_end(self.bytes, prefix, a, hi)
        return a, b

    def has_prefix(self, prefix: bytes) -> bool:
        a = bisect_left(self.bytes, prefix)
        return a < len(self.bytes) and self.bytes[a].startswith(prefix)


def _prefix_end(sorted_bytes: list[bytes], prefix: bytes, lo: int, hi: int) -> int:
    """The first position in [lo, hi) whose bytes do not start with `prefix` (all from lo on do before)."""
    # bytes starting with prefix sort before prefix + b"\xff..." ; find the first that does not start with it
    last = prefix.rstrip(b"\xff")
    if not last:
        return hi
    bound = last[:-1] + bytes((last[-1] + 1,))
    return bisect_left(sorted_bytes, bound, lo, hi)


class DocumentConstraint:
    """The document constraint of one edit in a diff-style `format` on `document`, for `vocab`.

    :meth:`feed` the program bytes as they are written (a byte that breaks the constraint raises
    :class:`~cad_outlines.errors.ProgramError`), then :meth:`mask` / :meth:`forced_bytes` /
    :meth:`eos_ok` for the next token."""

    def __init__(self, format: str, document: str, vocab: Vocabulary, *, scanner: HunkScanner | None = None):
        get_format(format)
        if format == "copy":
            raise ValueError("the copy format's document constraint is decoding.spans.SpanConstraint")
        self.format = format
        self.scanner = scanner or scanner_for(format, document)
        self.vocab = vocab
        self.sv = SortedVocab.of(vocab)
        self.state = self.scanner.initial()
        self._free_masks: dict = {}
        self._tails: dict = {}
        self._free_acc: dict = {}

    def fork(self) -> DocumentConstraint:
        """An independent copy at the same state (the document's index and the mask caches are shared)."""
        other = object.__new__(DocumentConstraint)
        other.__dict__.update(self.__dict__)
        return other

    # -- state ---------------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Read program bytes; a ProgramError (state unchanged) if they break the constraint."""
        st = self.scanner.feed(self.state, data)
        if st is None:
            raise ProgramError(f"the {self.format} program stops applying to the document at {data[:60]!r}")
        self.state = st

    def allows(self, data: bytes) -> bool:
        """Whether `data` could be read next (no state change)."""
        return self.scanner.feed(self.state, data) is not None

    def eos_ok(self) -> bool:
        """Whether the program may end here: every hunk applies."""
        return self.scanner.eos_ok(self.state)

    # -- forced bytes --------------------------------------------------------------------------
    def forced_bytes(self, limit: int = 4096) -> bytes:
        """The bytes every continuation allowed by the document starts with (empty where EOS or two
        different bytes are allowed, or the scanner does not constrain the next byte)."""
        sc = self.scanner
        st = self.state
        out = bytearray()
        while len(out) < limit and not sc.eos_ok(st):
            b = sc.forced_next(st)
            if b is None:
                break
            st = sc.step(st, b)
            if st is None:  # next_bytes over-approximated: stop here
                break
            out.append(b)
        return bytes(out)

    # -- the mask ------------------------------------------------------------------------------
    def mask(self) -> np.ndarray:
        """A bool array over the vocabulary: True for the tokens the document allows next (EOS where
        :meth:`eos_ok`). AND it with the grammar's mask."""
        st = self.state
        sc = self.scanner
        cached = self._free_masks.get(st) if sc.stops(st) is not None else None
        if cached is not None:
            return cached.copy()
        ok = np.zeros(self.sv.size, dtype=bool)
        hits: list[np.ndarray] = []
        singles: list[int] = []
        self._walk(st, 0, 0, len(self.sv.bytes), b"", hits, singles)
        for h in hits:
            ok[self.sv.ids[h]] = True
        if singles:
            ok[self.sv.ids[np.array(singles, dtype=np.int64)]] = True
        if sc.eos_ok(st):
            ok[self.sv.eos] = True
        if sc.stops(st) is not None:
            if len(self._free_masks) > 64:
                self._free_masks.clear()
            self._free_masks[st] = ok.copy()
        return ok

    def _feed_memo(self, st, data: bytes):
        key = (st, data)
        r = self._tails.get(key, _MISSING)
        if r is _MISSING:
            r = self.scanner.feed(st, data)
            if len(self._tails) > 200_000:
                self._tails.clear()
            self._tails[key] = r
        return r

    def _walk(self, st, d: int, lo: int, hi: int, prefix: bytes, hits: list, singles: list) -> None:
        """Accept the tokens in sorted positions [lo, hi), which all start with `prefix` (d bytes,
        after which the scanner is in state `st`), that the scanner reads to the end."""
        sv, sc = self.sv, self.scanner
        toks = sv.bytes
        while lo < hi and len(toks[lo]) == d:  # the token(s) that are exactly the prefix
            singles.append(lo)
            lo += 1
        if lo >= hi:
            return
        free = sc.stops(st)
        if free is not None:
            stops, free_st = free
            rest = np.ones(hi - lo, dtype=bool)
            for b in stops:
                a, z = sv.range_of(prefix + bytes((b,)), lo, hi)
                if a < z:
                    rest[a - lo:z - lo] = False
                    st2 = sc.step(st, b)
                    if st2 is not None:
                        self._walk(st2, d + 1, a, z, prefix + bytes((b,)), hits, singles)
            self._free_tokens(free_st, d + 1, lo, rest, hits, singles)
            return
        m = sc.match(st)
        if m is not None:
            self._match_tokens(st, m, d, lo, hi, prefix, hits, singles)
            return
        nb = sc.next_bytes(st)
        if nb is None:
            nb = _column_bytes(toks, d, lo, hi)
        for b in sorted(nb):
            a, z = sv.range_of(prefix + bytes((b,)), lo, hi)
            if a < z:
                st2 = sc.step(st, b)
                if st2 is not None:
                    self._walk(st2, d + 1, a, z, prefix + bytes((b,)), hits, singles)

    def _free_tokens(self, free_st, d: int, lo: int, rest: np.ndarray, hits: list, singles: list) -> None:
        """Tokens at positions lo + flatnonzero(rest) whose bytes from `d` on are read from the free
        state `free_st` (see :meth:`_free_accepts`)."""
        pos = np.flatnonzero(rest) + lo
        if len(pos):
            hits.append(pos[self._free_accepts(free_st, d)[pos]])

    def _free_accepts(self, free_st, d: int) -> np.ndarray:
        """Over all sorted tokens: whether the free state `free_st` reads the token's bytes from `d`
        on. A token without a stop byte from `d` on is read whole; the others from their first stop
        byte on (memoized per rest of token). Cached per (state, d)."""
        key = (free_st, d)
        acc = self._free_acc.get(key)
        if acc is not None:
            return acc
        stops = self.scanner.stops(free_st)[0]
        last = self.sv.last_stop(stops)
        acc = last < d
        toks = self.sv.bytes
        for p in np.flatnonzero(~acc).tolist():
            t = toks[p]
            j = min(i for i in (t.find(bytes((s,)), d) for s in stops) if i >= 0)
            acc[p] = self._feed_memo(free_st, t[j:]) is not None
        if len(self._free_acc) > 256:
            self._free_acc.clear()
        self._free_acc[key] = acc
        return acc

    def _match_tokens(self, st, m, d: int, lo: int, hi: int, prefix: bytes, hits: list, singles: list) -> None:
        """An old line in progress: tokens inside the line continue some candidate's next line (found
        by enumerating those lines' prefixes that are tokens); tokens holding a newline complete the
        line and are read on from there."""
        sv = self.sv
        cands, q, extra = m
        view = cands.view
        i = bisect_left(view, q)
        rems = []
        while i < len(view) and view[i].startswith(q):
            rems.append(view[i][len(q):])
            i += 1
        if extra is not None and extra.startswith(q):
            rems.append(extra[len(q):])
            rems.sort()
        by_bytes, toks = sv.by_bytes, sv.bytes
        seen_upto = 0
        prev = b""
        for r in rems:
            # prefixes shared with the previous remainder were looked up already
            common = 0
            n = min(len(r), len(prev), seen_upto)
            while common < n and r[common] == prev[common]:
                common += 1
            j = common
            prev, seen_upto = r, common
            while j < len(r):
                j += 1
                key = prefix + r[:j]
                pos = by_bytes.get(key)
                if pos is not None:
                    singles.append(pos)
                    k = pos + 1
                    while k < len(toks) and toks[k] == key:  # duplicate byte strings
                        singles.append(k)
                        k += 1
                seen_upto = j
                if not sv.has_prefix(key):
                    break
        # tokens with a newline from d on: the line ends inside them, as one of the remainders
        last = sv.last_stop(b"\n")[lo:hi]
        sc = self.scanner
        whole = set(rems)
        heads: dict[bytes, object] = {}
        for p in (np.flatnonzero(last >= d) + lo).tolist():
            t = toks[p]
            j = t.find(b"\n", d)
            if t[d:j] not in whole:
                continue
            head = t[d:j + 1]
            st_h = heads.get(head, _MISSING)
            if st_h is _MISSING:
                st_h = heads[head] = sc.feed(st, head)
            if st_h is not None and (j + 1 == len(t) or self._feed_memo(st_h, t[j + 1:]) is not None):
                singles.append(p)


_MISSING = object()


def _column_bytes(toks: list[bytes], d: int, lo: int, hi: int) -> set[int]:
    """The distinct bytes at index `d` among the sorted tokens [lo, hi) (all longer than d)."""
    out = set()
    i = lo
    while i < hi:
        b = toks[i][d]
        out.add(b)
        if b == 255:
            break
        i = bisect_left(toks, toks[i][:d] + bytes((b + 1,)), i, hi)
    return out

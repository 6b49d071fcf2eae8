"""Byte-level DFAs for Python regular expressions, with exactly Python's ``re`` semantics.

A pattern is parsed by Python's own parser (``re._parser``, i.e. sre_parse, through
:mod:`._sre_compat`, the one module that touches CPython's regex internals), turned into
an NFA over code points, determinised over code-point ranges, expanded to UTF-8 bytes and
minimised. Two semantics are available (:func:`regex_to_dfa`):

``"full"``
    The DFA accepts exactly the strings ``s`` with ``re.fullmatch(pattern, s)``.
``"match"``
    What a lexer needs: for every text, the DFA's longest accepted prefix is exactly
    ``re.match(pattern, text)`` (Python's *first* match in backtracking order, which is not
    always the longest one: lazy quantifiers, ``a|ab``, ``a?(ab)?``...). Determinisation
    keeps NFA threads in backtracking priority order and drops every thread ranked below a
    successful match (leftmost-first, as RE2/Rust's "first match" DFA); sre's zero-width
    repeat rule (an optional iteration that consumed nothing ends the loop) is reproduced.
    The accepted language is then the set of strings ``re.match`` can return.

Both semantics support lookahead (positive or negative, anywhere, resolved while the
match is read) and one-character lookbehind (not at the start of the match). A negative
lookahead still pending when the match ends (``0(?![1-9])``, ``"(?!"")``) is kept only if
it needs exactly one more character: the state then accepts *unless the next byte* is in
``ByteDFA.block[state]`` (end of text never blocks). Anything else that a DFA cannot
express exactly raises :class:`UnsupportedRegex`: backreferences, conditionals, atomic
groups and possessive repeats, anchors (``^ $ \\A \\Z \\b \\B``), lookbehind wider than one
character or at the start of the match, lookahead nested in a lookaround, and (in match
semantics) lookahead that reaches more than one character past the match or is positive.

Surrogates (U+D800..U+DFFF) cannot be encoded in UTF-8 and are excluded everywhere.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import ResourceLimitError
from ...limits import _how, active_limits, check_deadline
from . import _sre_compat as _sre
from ._sre_compat import K as _K

__all__ = ["MAX_CODEPOINT", "ByteDFA", "UnsupportedRegex", "longest_prefix", "minimize_arrays", "regex_to_dfa",
           "CodepointDFA", "regex_to_codepoint_dfa", "codepoint_dfa_to_bytes"]

MAX_CODEPOINT = 0x110000
_SUR_LO, _SUR_HI = 0xD800, 0xE000
_MAX_NODES = 200_000

# A character set: sorted half-open boundaries (lo0, hi0, lo1, hi1, ...), never surrogates.
Cset = tuple[int, ...]


class UnsupportedRegex(ValueError):
    """A regex construct with no exact DFA equivalent."""

    def __init__(self, construct: str, position: int | None, reason: str = ""):
        self.construct = construct
        self.position = position
        self.reason = reason
        where = f" at offset {position}" if position is not None else ""
        super().__init__(f"{construct}{where} cannot be compiled to a DFA" + (f": {reason}" if reason else ""))


# ---------------------------------------------------------------------------------------
# ByteDFA
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ByteDFA:
    """A minimal DFA over bytes. States are ``0..n-1``, 0 is the start, ``trans[s, b]`` is
    the next state or -1 (dead); every state is reachable and live. ``accept[s]``: a prefix
    ending in s is accepted, unless ``block`` is given and ``block[s, next_byte]`` (a
    trailing negative lookahead; end of text never blocks)."""

    trans: np.ndarray  # int32 (n, 256)
    accept: np.ndarray  # bool (n,)
    block: np.ndarray | None = None  # bool (n, 256) or None

    @property
    def n_states(self) -> int:
        return int(self.trans.shape[0])

    @functools.cached_property
    def live(self) -> np.ndarray:
        """bool (n,): states from which an accepting state is reachable (all, after
        construction; recomputed here so hand-built DFAs can use it too)."""
        return _live(self.trans, self.accept)

    @functools.cached_property
    def tables(self) -> tuple[list[list[int]], list[bool], list[list[bool]] | None]:
        """(trans, accept, block) as Python lists, for scalar loops (faster than numpy
        scalar indexing)."""
        blk = None if self.block is None else self.block.tolist()
        return self.trans.tolist(), self.accept.tolist(), blk

    def step(self, state: int, data: bytes) -> int:
        """State after reading `data` from `state` (-1 once dead)."""
        trans = self.tables[0]
        for b in data:
            if state < 0:
                break
            state = trans[state][b]
        return state

    def accepts_at(self, state: int, next_byte: int | None = None) -> bool:
        """Whether a prefix ending in `state` is accepted when followed by `next_byte`
        (None: end of text)."""
        if state < 0 or not self.accept[state]:
            return False
        return next_byte is None or self.block is None or not self.block[state, next_byte]

    def longest_match(self, data: bytes, pos: int = 0) -> int | None:
        """Length of the longest accepted prefix of ``data[pos:]`` (None if none)."""
        return longest_prefix(self.tables, data, pos)

    def fullmatch(self, data: bytes) -> bool:
        """Whether all of `data` is accepted (at end of text, so `block` does not apply)."""
        s = self.step(0, data)
        return s >= 0 and bool(self.accept[s])

    def equivalent(self, other: ByteDFA) -> bool:
        """Same language and same blocking (both are minimal and canonically numbered)."""
        if self.trans.shape != other.trans.shape:
            return False
        if not (np.array_equal(self.trans, other.trans) and np.array_equal(self.accept, other.accept)):
            return False
        a = np.zeros_like(self.trans, bool) if self.block is None else self.block
        b = np.zeros_like(other.trans, bool) if other.block is None else other.block
        return bool(np.array_equal(a, b))


def longest_prefix(tables: tuple, data: bytes, pos: int = 0) -> int | None:
    """:meth:`ByteDFA.longest_match` on ``ByteDFA.tables`` (the lexer's inner loop)."""
    trans, accept, block = tables
    s, i, n, last = 0, pos, len(data), -1
    while True:
        if accept[s] and (block is None or i == n or not block[s][data[i]]):
            last = i
        if i == n:
            break
        s = trans[s][data[i]]
        if s < 0:
            break
        i += 1
    return last - pos if last >= 0 else None


def _live(trans: np.ndarray, accept: np.ndarray) -> np.ndarray:
    src, _ = np.nonzero(trans >= 0)
    dst = trans[trans >= 0]
    order = np.argsort(dst, kind="stable")
    src, dst = src[order], dst[order]
    starts = np.searchsorted(dst, np.arange(len(accept) + 1))
    live = accept.astype(bool).copy()
    frontier = np.flatnonzero(live)
    while frontier.size:
        preds = np.unique(np.concatenate([src[starts[t]:starts[t + 1]] for t in frontier]))
        new = preds[~live[preds]]
        live[new] = True
        frontier = new
    return live


# ---------------------------------------------------------------------------------------
# Character sets
# ---------------------------------------------------------------------------------------


def _contains(cs: Sequence[int], c: int) -> bool:
    return bisect.bisect_right(cs, c) & 1 == 1


def _combine(a: Cset, b: Cset, op) -> Cset:
    """The set of code points c with op(c in a, c in b), one merge-sweep over both boundary
    lists (op(False, False) must be False)."""
    if len(a) + len(b) > 256:  # large Unicode classes: vectorised
        return _combine_np(a, b, op)
    out: list[int] = []
    i = j = 0
    na, nb = len(a), len(b)
    ina = inb = inside = False
    while i < na or j < nb:
        p = a[i] if j >= nb or (i < na and a[i] <= b[j]) else b[j]
        if p >= MAX_CODEPOINT:
            break
        if i < na and a[i] == p:
            i += 1
            ina = not ina
        if j < nb and b[j] == p:
            j += 1
            inb = not inb
        v = op(ina, inb)
        if v != inside:
            out.append(p)
            inside = v
    if inside:
        out.append(MAX_CODEPOINT)
    return tuple(out)


def _combine_np(a: Cset, b: Cset, op) -> Cset:
    """:func:`_combine` with numpy: membership at every boundary by parity of
    ``searchsorted``, then the points where op's value changes."""
    xa, xb = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    pts = np.union1d(xa, xb)
    pts = pts[pts < MAX_CODEPOINT]
    table = np.array([op(x, y) for x in (False, True) for y in (False, True)], dtype=bool)
    v = table[2 * (np.searchsorted(xa, pts, side="right") & 1) + (np.searchsorted(xb, pts, side="right") & 1)]
    change = v != np.concatenate(([False], v[:-1]))
    out = pts[change].tolist()
    if v.size and v[-1]:
        out.append(MAX_CODEPOINT)
    return tuple(out)


_NO_SURROGATES: Cset = (0, _SUR_LO, _SUR_HI, MAX_CODEPOINT)


def _cset(ranges: Iterable[tuple[int, int]]) -> Cset:
    """From half-open ranges; merged, surrogates removed."""
    out: list[int] = []
    for lo, hi in sorted(r for r in ranges if r[0] < r[1]):
        if out and lo <= out[-1]:
            out[-1] = max(out[-1], hi)
        else:
            out += [lo, hi]
    return _combine(tuple(out), _NO_SURROGATES, lambda x, y: x and y)


def _union(a: Cset, b: Cset) -> Cset:
    return _combine(a, b, lambda x, y: x or y)


def _intersect(a: Cset, b: Cset) -> Cset:
    return _combine(a, b, lambda x, y: x and y)


def _complement(a: Cset) -> Cset:
    return _combine(a, _NO_SURROGATES, lambda x, y: y and not x)


@functools.cache
def _all_chars() -> str:
    return "".join(map(chr, range(MAX_CODEPOINT)))


@functools.cache
def _scan_set(src: str, flags: int) -> Cset:
    """The code points a one-character regex matches, found by running Python's ``re`` over
    every code point once (exact by construction; cached)."""
    rx = re.compile(f"(?:{src})+", flags)
    return _cset((m.start(), m.end()) for m in rx.finditer(_all_chars()))


_CATEGORY_SRC = {
    _K.CATEGORY_DIGIT: r"\d", _K.CATEGORY_NOT_DIGIT: r"\D",
    _K.CATEGORY_SPACE: r"\s", _K.CATEGORY_NOT_SPACE: r"\S",
    _K.CATEGORY_WORD: r"\w", _K.CATEGORY_NOT_WORD: r"\W",
}


def _category(code, ascii_: bool) -> Cset:
    return _scan_set(_CATEGORY_SRC[code], re.ASCII if ascii_ else 0)


# No code point from here on is cased (checked by the tests for the running Python).
_CASED_LIMIT = 0x20000


@functools.cache
def _lower_table() -> np.ndarray:
    """sre's simple lowercase mapping of every code point below _CASED_LIMIT."""
    tolower = _sre.unicode_tolower
    return np.fromiter((tolower(c) for c in range(_CASED_LIMIT)), dtype=np.int32, count=_CASED_LIMIT)


@functools.cache
def _literal_set(c: int, ignorecase: bool, ascii_: bool) -> Cset:
    """Code points matching literal `c` (sre_compile's rules for LITERAL under IGNORECASE:
    x matches iff lower(x) is lower(c) or one of its ``_EXTRA_CASES``)."""
    if not ignorecase:
        return _cset([(c, c + 1)])
    if ascii_:
        if not _sre.ascii_iscased(c):
            return _cset([(c, c + 1)])
        lo = _sre.ascii_tolower(c)
        return _cset((x, x + 1) for x in range(128) if _sre.ascii_tolower(x) == lo)
    if not _sre.unicode_iscased(c):
        return _cset([(c, c + 1)])
    lo = _sre.unicode_tolower(c)
    members = np.flatnonzero(np.isin(_lower_table(), (lo, *_sre.EXTRA_CASES.get(lo, ()))))
    return _cset((int(x), int(x) + 1) for x in members)


def _esc(c: int) -> str:
    return f"\\U{c:08x}"


def _class_set(items: list, flags: int) -> Cset:
    """Code points an ``IN`` item matches under `flags`."""
    ascii_ = bool(flags & _K.SRE_FLAG_ASCII)
    if flags & _K.SRE_FLAG_IGNORECASE:
        parts = []
        for op, av in items:
            if op is _K.NEGATE:
                parts.insert(0, "^")
            elif op is _K.LITERAL:
                parts.append(_esc(av))
            elif op is _K.RANGE:
                parts.append(f"{_esc(av[0])}-{_esc(av[1])}")
            elif op is _K.CATEGORY:
                parts.append(_CATEGORY_SRC[av])
            else:  # pragma: no cover - sre_parse emits nothing else inside a class
                raise UnsupportedRegex(f"class item {op}", None)
        return _scan_set("[" + "".join(parts) + "]", flags & (re.IGNORECASE | re.ASCII | re.UNICODE))
    negate = False
    acc: Cset = ()
    for op, av in items:
        if op is _K.NEGATE:
            negate = True
        elif op is _K.LITERAL:
            acc = _union(acc, _cset([(av, av + 1)]))
        elif op is _K.RANGE:
            acc = _union(acc, _cset([(av[0], av[1] + 1)]))
        elif op is _K.CATEGORY:
            acc = _union(acc, _category(av, ascii_))
        else:  # pragma: no cover
            raise UnsupportedRegex(f"class item {op}", None)
    return _complement(acc) if negate else acc


def _char_set(op, av, flags: int) -> Cset:
    ic = bool(flags & _K.SRE_FLAG_IGNORECASE)
    ascii_ = bool(flags & _K.SRE_FLAG_ASCII)
    if op is _K.LITERAL:
        return _literal_set(av, ic, ascii_)
    if op is _K.NOT_LITERAL:
        return _complement(_literal_set(av, ic, ascii_))
    if op is _K.ANY:
        return _NO_SURROGATES if flags & _K.SRE_FLAG_DOTALL else _complement(_cset([(10, 11)]))
    return _class_set(av, flags)


# ---------------------------------------------------------------------------------------
# Pattern -> NFA
# ---------------------------------------------------------------------------------------

# node kinds
_CHAR, _SPLIT, _MATCH, _ISTART, _IEND, _LBEHIND, _LAHEAD, _GMATCH = range(8)

_CONSTRUCT_PREFIXES = (
    ("(?<=", "lookbehind"), ("(?<!", "neg_lookbehind"), ("(?=", "lookahead"), ("(?!", "neg_lookahead"),
    ("(?>", "atomic"), ("(?P=", "backref"), ("(?(", "conditional"),
)
_NAMES = {
    "lookbehind": "lookbehind (?<=...)", "neg_lookbehind": "lookbehind (?<!...)",
    "lookahead": "lookahead (?=...)", "neg_lookahead": "lookahead (?!...)",
    "atomic": "atomic group (?>...)", "backref": "backreference", "conditional": "conditional (?(...)...)",
    "possessive": "possessive repeat", "^": "anchor ^", "$": "anchor $", "\\A": "anchor \\A", "\\Z": "anchor \\Z",
    "\\b": "word boundary \\b", "\\B": "non-boundary \\B",
}
_AT_KIND = {
    _K.AT_BEGINNING: "^", _K.AT_BEGINNING_LINE: "^", _K.AT_BEGINNING_STRING: "\\A",
    _K.AT_END: "$", _K.AT_END_LINE: "$", _K.AT_END_STRING: "\\Z",
    _K.AT_BOUNDARY: "\\b", _K.AT_NON_BOUNDARY: "\\B",
}


def _scan_constructs(p: str) -> dict[str, list[int]]:
    """Offsets of the constructs we may reject, in textual order (for error messages)."""
    out: dict[str, list[int]] = {}
    i, n, quant = 0, len(p), False
    while i < n:
        ch = p[i]
        if ch == "\\":
            nxt = p[i + 1:i + 2]
            if nxt and nxt in "AZbB":
                out.setdefault("\\" + nxt, []).append(i)
            elif nxt.isdigit() and nxt != "0":
                out.setdefault("backref", []).append(i)
            i, quant = i + 2, False
            continue
        if ch == "[":
            j = i + 1
            if p[j:j + 1] == "^":
                j += 1
            if p[j:j + 1] == "]":
                j += 1
            while j < n and p[j] != "]":
                j += 2 if p[j] == "\\" else 1
            i, quant = j + 1, False
            continue
        if p.startswith("(?#", i):
            j = p.find(")", i)
            i, quant = (n if j < 0 else j + 1), False
            continue
        if ch == "(":
            for pre, kind in _CONSTRUCT_PREFIXES:
                if p.startswith(pre, i):
                    out.setdefault(kind, []).append(i)
                    break
        elif ch in "^$":
            out.setdefault(ch, []).append(i)
        if ch == "+" and quant:
            out.setdefault("possessive", []).append(i - 1)
            quant = False
        elif ch in "*+?}" and not (ch == "?" and i > 0 and p[i - 1] == "("):
            quant = not (ch == "?" and quant)  # a lazy '?' ends the quantifier
        else:
            quant = False
        i += 1
    return out


class _NFA:
    """Nodes as tuples: (CHAR, cset_id, next) (SPLIT, nexts) (MATCH,) (ISTART, loop, next)
    (IEND, loop, decision, exit) (LBEHIND, cset_id, negate, next, where)
    (LAHEAD, assert_id, guard_start, negate, next, where) (GMATCH,)."""

    def __init__(self, pattern: str):
        self.nodes: list[tuple | None] = []
        self.csets: list[Cset] = []
        self._cset_ids: dict[Cset, int] = {}
        self.loops = 0
        self.asserts: list[tuple[str, int | None]] = []
        self._textual = _scan_constructs(pattern)
        self._where: dict[tuple[int, int], tuple[str, int | None]] = {}

    def add(self, node: tuple | None) -> int:
        self.nodes.append(node)
        if len(self.nodes) > _MAX_NODES:
            raise UnsupportedRegex("repeat", None, f"the NFA exceeds {_MAX_NODES} nodes")
        return len(self.nodes) - 1

    def cset_id(self, cs: Cset) -> int:
        got = self._cset_ids.get(cs)
        if got is None:
            got = self._cset_ids[cs] = len(self.csets)
            self.csets.append(cs)
        return got

    # positions: walk the AST forward once, recording which textual occurrence each is
    def locate(self, sub) -> None:
        counters: dict[str, int] = {}

        def kind_of(op, av) -> str | None:
            if op in (_K.ASSERT, _K.ASSERT_NOT):
                base = "lookbehind" if av[0] < 0 else "lookahead"
                return ("neg_" + base) if op is _K.ASSERT_NOT else base
            return {_K.GROUPREF: "backref", _K.GROUPREF_EXISTS: "conditional", _K.ATOMIC_GROUP: "atomic",
                    _K.POSSESSIVE_REPEAT: "possessive"}.get(op) or (_AT_KIND.get(av) if op is _K.AT else None)

        def walk(items) -> None:
            for idx, (op, av) in enumerate(items):
                kind = kind_of(op, av)
                if kind is not None:
                    k = counters.get(kind, 0)
                    counters[kind] = k + 1
                    offs = self._textual.get(kind, [])
                    self._where[(id(items), idx)] = (_NAMES[kind], offs[k] if k < len(offs) else None)
                for child in _children(op, av):
                    walk(child)

        walk(sub)

    def where(self, items, idx) -> tuple[str, int | None]:
        return self._where.get((id(items), idx), ("construct", None))

    def seq(self, items, flags: int, nxt: int, guard: bool) -> int:
        for idx in range(len(items) - 1, -1, -1):
            op, av = items[idx]
            nxt = self.item(items, idx, op, av, flags, nxt, guard)
        return nxt

    def item(self, items, idx, op, av, flags: int, nxt: int, guard: bool) -> int:
        if op in (_K.LITERAL, _K.NOT_LITERAL, _K.ANY, _K.IN):
            return self.add((_CHAR, self.cset_id(_char_set(op, av, flags)), nxt))
        if op is _K.BRANCH:
            return self.add((_SPLIT, tuple(self.seq(alt, flags, nxt, guard) for alt in av[1])))
        if op is _K.SUBPATTERN:
            _group, add_f, del_f, p = av
            return self.seq(p, _sre.combine_flags(flags, add_f, del_f), nxt, guard)
        if op in (_K.MAX_REPEAT, _K.MIN_REPEAT):
            return self.repeat(av, op is _K.MAX_REPEAT, flags, nxt, guard)
        if op in (_K.ASSERT, _K.ASSERT_NOT):
            construct, pos = self.where(items, idx)
            neg = op is _K.ASSERT_NOT
            if guard:
                raise UnsupportedRegex(construct, pos, "lookaround nested in a lookahead")
            direction, p = av
            if direction < 0:
                cs = _single_char_set(p, flags)
                if cs is None:
                    raise UnsupportedRegex(construct, pos, "lookbehind wider than one character")
                return self.add((_LBEHIND, self.cset_id(cs), neg, nxt, (construct, pos)))
            gm = self.add((_GMATCH,))
            gstart = self.seq(p, flags, gm, True)
            self.asserts.append((construct, pos))
            return self.add((_LAHEAD, len(self.asserts) - 1, gstart, neg, nxt, (construct, pos)))
        construct, pos = self.where(items, idx)
        reasons = {
            _K.GROUPREF: "a backreference matches text, not a regular language",
            _K.GROUPREF_EXISTS: "a conditional depends on which groups matched",
            _K.ATOMIC_GROUP: "atomic groups cut backtracking",
            _K.POSSESSIVE_REPEAT: "possessive repeats cut backtracking",
            _K.AT: "anchors depend on the text around the match",
        }
        construct = construct if construct != "construct" else str(op)
        raise UnsupportedRegex(construct, pos, reasons.get(op, "not supported"))

    def repeat(self, av, greedy: bool, flags: int, tail: int, guard: bool) -> int:
        mn, mx, p = av
        loop = self.loops
        self.loops += 1

        def decision(body_start: int) -> tuple:
            return (_SPLIT, (body_start, tail) if greedy else (tail, body_start))

        if mx == _K.MAXREPEAT:
            d = self.add(None)
            iend = self.add((_IEND, loop, d, tail))
            ist = self.add((_ISTART, loop, self.seq(p, flags, iend, guard)))
            self.nodes[d] = decision(ist)
            start = d
        else:
            start = tail
            for _ in range(mx - mn):
                iend = self.add((_IEND, loop, start, tail))
                ist = self.add((_ISTART, loop, self.seq(p, flags, iend, guard)))
                start = self.add(decision(ist))
        for _ in range(mn):
            start = self.seq(p, flags, start, guard)
        return start


def _children(op, av) -> list:
    if op is _K.BRANCH:
        return list(av[1])
    if op is _K.SUBPATTERN:
        return [av[3]]
    if op in (_K.MAX_REPEAT, _K.MIN_REPEAT, _K.POSSESSIVE_REPEAT):
        return [av[2]]
    if op in (_K.ASSERT, _K.ASSERT_NOT):
        return [av[1]]
    if op is _K.ATOMIC_GROUP:
        return [av]
    if op is _K.GROUPREF_EXISTS:
        return [x for x in av[1:] if x is not None]
    return []


def _single_char_set(items, flags: int) -> Cset | None:
    """The set of characters a width-1 subpattern matches, or None if it is not one."""
    if len(items) != 1:
        return None
    op, av = items[0]
    if op in (_K.LITERAL, _K.NOT_LITERAL, _K.ANY, _K.IN):
        return _char_set(op, av, flags)
    if op is _K.SUBPATTERN:
        return _single_char_set(av[3], _sre.combine_flags(flags, av[1], av[2]))
    if op is _K.BRANCH:
        acc: Cset = ()
        for alt in av[1]:
            cs = _single_char_set(alt, flags)
            if cs is None:
                return None
            acc = _union(acc, cs)
        return acc
    return None


# ---------------------------------------------------------------------------------------
# NFA -> code-point DFA
# ---------------------------------------------------------------------------------------

Guard = tuple[int, bool, frozenset]  # (assert id, negative, guard NFA states)
Entry = tuple[int, frozenset]  # (CHAR or MATCH node, pending guards)


class _Determinizer:
    def __init__(self, nfa: _NFA, start: int, mode: str):
        self.nfa = nfa
        self.nodes = nfa.nodes
        self.csets = nfa.csets
        self.mode = mode
        self.start = start
        self._gclose: dict[tuple[int, ...], frozenset] = {}
        self.lbehind = [n[1] for n in nfa.nodes if n is not None and n[0] == _LBEHIND]

    # -- guards (language semantics, unordered) -------------------------------------
    def gclose(self, roots: tuple[int, ...]) -> frozenset:
        got = self._gclose.get(roots)
        if got is not None:
            return got
        nodes, seen, out, stack = self.nodes, set(), set(), list(roots)
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            node = nodes[n]
            k = node[0]
            if k in (_CHAR, _GMATCH):
                out.add(n)
            elif k == _SPLIT:
                stack.extend(node[1])
            elif k == _ISTART:
                stack.append(node[2])
            elif k == _IEND:
                stack.extend((node[2], node[3]))
        got = self._gclose[roots] = frozenset(out)
        return got

    def gstep(self, g: frozenset, c: int) -> frozenset:
        nodes, csets = self.nodes, self.csets
        roots = tuple(sorted(nodes[n][2] for n in g if nodes[n][0] == _CHAR and _contains(csets[nodes[n][1]], c)))
        return self.gclose(roots) if roots else frozenset()

    def advance(self, guards: frozenset, c: int) -> frozenset | None:
        """Guards after reading c; None if one of them kills the thread."""
        if not guards:
            return guards
        out = []
        for aid, neg, g in guards:
            g2 = self.gstep(g, c)
            if any(self.nodes[n][0] == _GMATCH for n in g2):
                if neg:
                    return None
                continue
            if not g2:
                if neg:
                    continue
                return None
            out.append((aid, neg, g2))
        return frozenset(out)

    def guard_chars(self, g: frozenset) -> list[Cset]:
        return [self.csets[self.nodes[n][1]] for n in g if self.nodes[n][0] == _CHAR]

    # -- ordered epsilon closure ------------------------------------------------------
    def close(self, roots: list[Entry], prev: int | None) -> list[Entry]:
        """Threads reachable without consuming, in backtracking priority order."""
        nodes, csets = self.nodes, self.csets
        out: list[Entry] = []
        emitted: set[Entry] = set()
        seen: set = set()
        empty: frozenset = frozenset()
        stack = [(n, empty, g) for n, g in reversed(roots)]
        while stack:
            item = stack.pop()
            if item in seen:
                continue
            seen.add(item)
            n, ctx, guards = item
            node = nodes[n]
            k = node[0]
            if k == _CHAR or k == _MATCH:
                e = (n, guards)
                if e not in emitted:
                    emitted.add(e)
                    out.append(e)
            elif k == _SPLIT:
                for nxt in reversed(node[1]):
                    stack.append((nxt, ctx, guards))
            elif k == _ISTART:
                stack.append((node[2], ctx | {node[1]}, guards))
            elif k == _IEND:
                # sre's zero-width protection: an optional iteration that consumed nothing
                # (it started in this closure) goes straight to the tail
                stack.append((node[3] if node[1] in ctx else node[2], ctx, guards))
            elif k == _LBEHIND:
                if prev is None:
                    raise UnsupportedRegex(*node[4], "lookbehind at the start of the match reads text before it")
                if _contains(csets[node[1]], prev) != node[2]:
                    stack.append((node[3], ctx, guards))
            elif k == _LAHEAD:
                _, aid, gstart, neg, nxt, _where = node
                g0 = self.gclose((gstart,))
                if any(nodes[x][0] == _GMATCH for x in g0):
                    if not neg:
                        stack.append((nxt, ctx, guards))
                elif g0:
                    stack.append((nxt, ctx, guards | {(aid, neg, g0)}))
                elif neg:
                    stack.append((nxt, ctx, guards))
        return out

    # -- acceptance of one DFA state ----------------------------------------------------
    def kill_set(self, entry: Entry) -> Cset:
        """Match mode: the characters after the match that void this (conditional) match."""
        acc: Cset = ()
        for aid, neg, g in entry[1]:
            construct, pos = self.nfa.asserts[aid]
            if not neg:
                raise UnsupportedRegex(construct, pos, "a positive lookahead is still pending at the end of the match")
            for n in g:
                if self.nodes[n][0] != _CHAR or not any(
                    self.nodes[x][0] == _GMATCH for x in self.gclose((self.nodes[n][2],))
                ):
                    raise UnsupportedRegex(construct, pos,
                                           "the lookahead reaches more than one character past the match")
            for cs in self.guard_chars(g):
                acc = _union(acc, cs)
        return acc

    def acceptance(self, state: tuple) -> tuple[bool, Cset]:
        matches = [e for e in state if self.nodes[e[0]][0] == _MATCH]
        if self.mode == "full":
            return any(all(neg for _, neg, _ in e[1]) for e in matches), ()
        if not matches:
            return False, ()
        block: Cset | None = None
        for e in matches:
            ks = self.kill_set(e)
            block = ks if block is None else _intersect(block, ks)
        return True, block or ()

    # -- transitions ---------------------------------------------------------------------
    def successor(self, state, c: int):
        nodes, csets = self.nodes, self.csets
        roots: list[Entry] = []
        for n, guards in state:
            node = nodes[n]
            if node[0] == _MATCH:
                if self.mode == "match" and self.advance(guards, c) is not None:
                    break  # this match is confirmed: everything ranked below it is dropped
                continue
            if _contains(csets[node[1]], c):
                g2 = self.advance(guards, c)
                if g2 is not None:
                    roots.append((node[2], g2))
        if not roots:
            return None
        return self.normal(self.close(roots, c))

    def normal(self, entries: list[Entry]):
        if not entries:
            return None
        if self.mode == "full":
            return frozenset(entries)
        for i, (n, guards) in enumerate(entries):
            if self.nodes[n][0] == _MATCH and not guards:
                return tuple(entries[: i + 1])
        return tuple(entries)

    def relevant_sets(self, state: tuple) -> list[Cset]:
        sets = [self.csets[i] for i in self.lbehind]
        for n, guards in state:
            node = self.nodes[n]
            if node[0] == _CHAR:
                sets.append(self.csets[node[1]])
            for _, _, g in guards:
                sets.extend(self.guard_chars(g))
        return sets

    def run(self) -> tuple[list[list[tuple[int, int, int]]], list[bool], list[Cset]]:
        init = self.normal(self.close([(self.start, frozenset())], None))
        if init is None:
            return [[]], [False], [()]
        ids = {init: 0}
        states = [init]
        trans: list[list[tuple[int, int, int]]] = []
        accept: list[bool] = []
        block: list[Cset] = []
        max_states = active_limits().max_dfa_states
        i = 0
        while i < len(states):
            st = states[i]
            i += 1
            if not i & 63:
                check_deadline("a terminal's DFA")
            acc, blk = self.acceptance(st)
            accept.append(acc)
            block.append(blk)
            out: list[tuple[int, int, int]] = []
            sets = self.relevant_sets(st)
            if any(self.nodes[n][0] == _CHAR for n, _ in st):
                for rep, segs in _partition(sets):
                    nxt = self.successor(st, rep)
                    if nxt is None:
                        continue
                    t = ids.get(nxt)
                    if t is None:
                        if max_states is not None and len(states) >= max_states:
                            raise ResourceLimitError("max_dfa_states", max_states + 1, max_states,
                                                     what="pattern's DFA", how=_how("max_dfa_states"))
                        t = ids[nxt] = len(states)
                        states.append(nxt)
                    out.extend((lo, hi, t) for lo, hi in segs)
            trans.append(_merge(out))
        return trans, accept, block


def _partition(sets: list[Cset]) -> list[tuple[int, list[tuple[int, int]]]]:
    """Split the code points into classes on which every set agrees: [(representative,
    segments)] in order of first segment, skipping the class outside every set."""
    sets = list(dict.fromkeys(s for s in sets if s))
    if not sets:
        return []
    if len(sets) == 1:  # one class: the set itself (e.g. a large Unicode class on its own)
        cs = sets[0]
        return [(cs[0], list(zip(cs[::2], cs[1::2])))]
    if sum(map(len, sets)) > 512:  # large Unicode classes: vectorised
        return _partition_np(sets)
    bounds = sorted(set().union(*sets) | {0, MAX_CODEPOINT})
    ptr = [0] * len(sets)
    bits = 0
    groups: dict[int, list[tuple[int, int]]] = {}
    for i in range(len(bounds) - 1):
        p = bounds[i]
        for k, cs in enumerate(sets):
            if ptr[k] < len(cs) and cs[ptr[k]] == p:
                ptr[k] += 1
                bits ^= 1 << k
        if bits:
            groups.setdefault(bits, []).append((p, bounds[i + 1]))
    return [(segs[0][0], segs) for segs in groups.values()]


def _partition_np(sets: list[Cset]) -> list[tuple[int, list[tuple[int, int]]]]:
    bounds = np.unique(np.concatenate([np.asarray(s, dtype=np.int64) for s in sets] + [np.array([0, MAX_CODEPOINT])]))
    starts, ends = bounds[:-1], bounds[1:]
    sig = np.empty((len(sets), len(starts)), dtype=bool)
    for k, s in enumerate(sets):
        sig[k] = np.searchsorted(np.asarray(s, dtype=np.int64), starts, side="right") & 1
    inside = sig.any(axis=0)
    starts, ends, sig = starts[inside], ends[inside], sig[:, inside]
    if not len(starts):
        return []
    packed = np.packbits(sig, axis=0).T
    _, first, inverse = np.unique(packed, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    out = []
    for g in np.argsort(first):
        idx = np.flatnonzero(inverse == g)
        out.append((int(starts[idx[0]]), list(zip(starts[idx].tolist(), ends[idx].tolist()))))
    return out


def _merge(items: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    items.sort()
    out: list[tuple[int, int, int]] = []
    for lo, hi, t in items:
        if out and out[-1][1] == lo and out[-1][2] == t:
            out[-1] = (out[-1][0], hi, t)
        else:
            out.append((lo, hi, t))
    return out


# ---------------------------------------------------------------------------------------
# code-point DFA -> byte DFA
# ---------------------------------------------------------------------------------------

# (first lead byte, last lead byte, continuation bytes, lowest / highest valid code point)
_UTF8_CLASSES = ((0xC2, 0xDF, 1, 0x80, 0x7FF), (0xE0, 0xEF, 2, 0x800, 0xFFFF), (0xF0, 0xF4, 3, 0x10000, 0x10FFFF))


def _lead_range(b: int) -> tuple[int, int] | None:
    """Valid code points [lo, hi) whose UTF-8 encoding starts with byte b."""
    if b < 0x80:
        return b, b + 1
    for first, last, k, vmin, vmax in _UTF8_CLASSES:
        if first <= b <= last:
            base = (b - (0xC0, 0xE0, 0xF0)[k - 1]) << (6 * k)
            lo, hi = max(base, vmin), min(base + (1 << (6 * k)), vmax + 1)
            return (lo, hi) if lo < hi else None
    return None


@functools.cache
def _lead_sets() -> list[tuple[int, int, int]]:
    """(lead byte, lo, hi): the valid code points [lo, hi) of each multi-byte lead byte
    (never surrogates: one interval each)."""
    out = []
    for b in range(0xC2, 0xF5):
        r = _lead_range(b)
        rr = _cset([r]) if r is not None else ()
        if rr:
            assert len(rr) == 2
            out.append((b, *rr))
    return out


def _block_row(cs: Cset, where: tuple[str, int | None]) -> list[bool]:
    row = [False] * 256
    if not cs:
        return row
    for b in range(0x80):
        row[b] = _contains(cs, b)
    for b, lo, hi in _lead_sets():
        i = bisect.bisect_right(cs, lo)
        if i < len(cs) and cs[i] < hi:  # a boundary inside the lead byte's code points
            raise UnsupportedRegex(*where, "the lookahead's characters split a UTF-8 lead byte")
        row[b] = i & 1 == 1
    return row


def _to_bytes(trans, accept, block, where) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The code-point DFA's transitions expanded to UTF-8 bytes (by the compiled core:
    continuation-byte nodes are hash-consed, a lead byte whose code points all go one way
    shares one chain)."""
    from ..._native import core

    n = len(trans)
    off = np.zeros(n + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(t) for t in trans])
    flat = np.array([x for t in trans for x in t], dtype=np.int64).reshape(-1, 3)
    out = np.frombuffer(core().utf8_expand(off, np.ascontiguousarray(flat[:, 0]), np.ascontiguousarray(flat[:, 1]),
                                           flat[:, 2].astype(np.int32)), dtype=np.int32).reshape(-1, 256)
    total = out.shape[0]
    acc = np.zeros(total, dtype=bool)
    acc[:n] = accept
    blk = np.zeros((total, 256), dtype=bool)
    for s, cs in enumerate(block):
        if cs:
            blk[s] = _block_row(cs, where)
    return out, acc, blk


# ---------------------------------------------------------------------------------------
# minimisation
# ---------------------------------------------------------------------------------------


def minimize_arrays(trans: np.ndarray, label: np.ndarray, block: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Trim (unreachable and dead states), Moore-minimise and number states canonically (BFS
    from state 0, bytes in increasing order), in the compiled core. ``label[s] >= 0``
    marks accepting states; states with different labels or block rows stay distinct.
    Returns (trans int32, label int64, block bool or None)."""
    from ..._native import core

    t = np.ascontiguousarray(trans, dtype=np.int32)
    blk = None if block is None else np.ascontiguousarray(block, dtype=np.uint8)
    n, ft, lab, fb = core().minimize_dfa(t, np.ascontiguousarray(label, dtype=np.int64), blk)
    return ft.reshape(n, 256), lab, fb.view(bool).reshape(n, 256) if fb.size else None


def _minimize(trans: np.ndarray, accept: np.ndarray, block: np.ndarray) -> ByteDFA:
    t, lab, blk = minimize_arrays(trans, np.where(accept, 0, -1), block)
    return ByteDFA(t, lab >= 0, blk)


# ---------------------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------------------


def _literal(parsed) -> bytes | None:
    """The UTF-8 text a pattern of plain literals matches (no case folding, no surrogate);
    None for any other pattern."""
    if parsed.state.flags & _K.SRE_FLAG_IGNORECASE:
        return None
    chars = []
    for op, av in parsed.data:
        if op is not _K.LITERAL or _SUR_LO <= av < _SUR_HI:
            return None
        chars.append(av)
    return "".join(map(chr, chars)).encode("utf-8")


def _chain(text: bytes) -> ByteDFA:
    """The minimal DFA of one string (states in BFS order: the i-th byte leads i -> i+1),
    the same in both semantics."""
    n = len(text) + 1
    trans = np.full((n, 256), -1, dtype=np.int32)
    trans[np.arange(n - 1), np.frombuffer(text, dtype=np.uint8)] = np.arange(1, n, dtype=np.int32)
    accept = np.zeros(n, dtype=bool)
    accept[-1] = True
    return ByteDFA(trans, accept, None)


@functools.lru_cache(maxsize=4096)
def _compile(pattern: str, flags: int, semantics: str) -> ByteDFA:
    parsed = _sre.parse(pattern, flags)
    text = _literal(parsed)
    if text is not None:  # most terminals (keywords, operators): no automaton construction
        return _chain(text)
    nfa = _NFA(pattern)
    nfa.locate(parsed)
    match = nfa.add((_MATCH,))
    start = nfa.seq(parsed, parsed.state.flags, match, False)
    trans, accept, block = _Determinizer(nfa, start, semantics).run()
    where = nfa.asserts[0] if nfa.asserts else ("lookahead", None)
    bt, ba, bb = _to_bytes(trans, accept, block, where)
    return _minimize(bt, ba, bb)


CodepointDFA = tuple[list[list[tuple[int, int, int]]], list[bool]]  # per state sorted (lo, hi, target); accepting


@functools.lru_cache(maxsize=1024)
def regex_to_codepoint_dfa(pattern: str, flags: int = 0) -> CodepointDFA:
    """The DFA over code points of ``re.fullmatch(pattern, s, flags)`` (states and transitions as
    :func:`regex_to_dfa` builds them before the UTF-8 expansion), for front ends that rewrite the
    characters (the JSON Schema front end writes each character as JSON does). Cached; treat the
    result as read-only. Raises :class:`UnsupportedRegex` as :func:`regex_to_dfa` does."""
    parsed = _sre.parse(pattern, flags)
    nfa = _NFA(pattern)
    nfa.locate(parsed)
    match = nfa.add((_MATCH,))
    start = nfa.seq(parsed, parsed.state.flags, match, False)
    trans, accept, block = _Determinizer(nfa, start, "full").run()
    if any(block):  # full semantics resolves every lookahead inside the text
        raise UnsupportedRegex("lookahead", None, "it reaches past the end of the text")
    return trans, accept


def codepoint_dfa_to_bytes(dfa: CodepointDFA) -> ByteDFA:
    """A code-point DFA (:data:`CodepointDFA`) as a minimal :class:`ByteDFA` over its UTF-8 bytes."""
    trans, accept = dfa
    bt, ba, bb = _to_bytes(trans, accept, [()] * len(trans), ("dfa", None))
    return _minimize(bt, ba, bb)


def regex_to_dfa(pattern: str, flags: int | re.RegexFlag = 0, *, semantics: str = "full") -> ByteDFA:
    """Compile a Python ``str`` regex to a minimal :class:`ByteDFA` over its UTF-8 bytes.

    ``semantics="full"``: accepts exactly the ``s`` with ``re.fullmatch(pattern, s, flags)``.
    ``semantics="match"``: for every text, ``longest_match`` equals the length of
    ``re.match(pattern, text, flags)`` (None where it does not match); use this for lexing.
    Raises :class:`UnsupportedRegex` for constructs without an exact DFA, ``re.error`` for
    invalid patterns. Results are cached.
    """
    if semantics not in ("full", "match"):
        raise ValueError(f"semantics must be 'full' or 'match', not {semantics!r}")
    return _compile(pattern, int(flags), semantics)

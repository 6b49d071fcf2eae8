"""The terminals of a schema's grammar: string, key and number classes made exact under lark's basic
lexer.

Most value positions need none of this: they admit a class as a whole terminal lexed on its own
(:mod:`.grammar`, ``SchemaGrammar.groups``). The families below are for the positions that must tell
classes apart, and for object keys; their terminals compete in one lexer group each.

Within a group, the basic lexer picks, at each position, the FIRST terminal in its order that matches,
whatever the parser expects. Two terminals whose languages overlap (a property's name and a string value, a
``pattern`` string and any string, ``minimum: 0`` and ``maximum: 9`` integers) would make the
lexer's choice wrong for one of the positions. So each kind of lexeme (object keys, string values,
numbers) has a *family* of classes (sets of lexemes), closed under the intersection of any two that
overlap, and ordered so that a class comes before every class that contains it. A text then lexes as
the smallest class that contains it, and a grammar position that admits class ``C`` admits the
terminals of the classes inside ``C`` (:meth:`Family.alternatives`); a position that admits ``C``
minus some values (an object's additional keys: any key but its declared ones) leaves out the
classes inside those values. Both directions are exact: a text is admitted iff it is in the class.

Keys are strings followed by the key separator (``"name"\\s*:\\s*``): they come before every value
terminal, so a key never lexes as a string value, and a string value (never followed by ``:``)
never as a key. Numbers end only where no number byte follows (:mod:`.numbers`).

Classes are keyed by what they mean, so their automata (and their pairwise relations) are built
once per process and shared by every schema that uses them.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ....limits import active_limits, check_deadline, check_limit
from ..automata import ByteDFA, minimize_arrays, regex_to_codepoint_dfa
from . import strings as S
from .formats import format_regex
from .numbers import NumberSpec, number_dfa

__all__ = ["StrClass", "Family", "string_class_dfa", "punctuation"]


@dataclass(frozen=True)
class StrClass:
    """A set of strings: a finite set of values (``values``), or every string of ``min_len`` to
    ``max_len`` code points matching all ``patterns`` (``re.search``) and ``formats`` (fullmatch)."""

    values: frozenset[str] | None = None
    min_len: int = 0
    max_len: int | None = None
    patterns: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()

    @property
    def generic(self) -> bool:
        return self.values is None and not self.min_len and self.max_len is None and not self.patterns \
            and not self.formats

    def contains(self, v: str) -> bool:
        if self.values is not None:
            return v in self.values
        n = len(v)
        if n < self.min_len or (self.max_len is not None and n > self.max_len):
            return False
        if any(0xD800 <= ord(c) < 0xE000 for c in v):
            return False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if not all(re.search(p, v) for p in self.patterns):
                return False
        return all(re.fullmatch(format_regex(f), v) for f in self.formats)


_ANY_NUMBER = NumberSpec()
_STR_DFAS: dict = {}
_RELATIONS: dict = {}
_PRODUCTS: dict = {}


def string_class_dfa(c: StrClass) -> ByteDFA:
    """The JSON string literals of `c` (cached per process)."""
    got = _STR_DFAS.get(c)
    if got is None and c.values is not None:
        got = _literal_dfa(c.values, None)
        if got is not None:
            _STR_DFAS[c] = got
            check_limit("max_dfa_states", got.n_states, "a JSON Schema string terminal")
    if got is None:
        if c.values is not None:
            cp = S.literals(sorted(c.values))
        else:
            cp = S.any_string(c.min_len, c.max_len)
            for p in c.patterns:
                cp = S.intersect(cp, S.pattern_dfa(p))
            for f in c.formats:
                cp = S.intersect(cp, regex_to_codepoint_dfa(format_regex(f)))
        got = S.json_string_dfa(cp)
        # a length class alone (no pattern, no format) is bounded by its length (the builder's MAX_LENGTH_BOUND
        # and MAX_COUNTED_CHARS: JSON's spelling takes ~13 byte states a character); any other by its states
        if c.values is not None or c.patterns or c.formats:
            check_limit("max_dfa_states", got.n_states, "a JSON Schema string terminal")
        _STR_DFAS[c] = got
    return got


def _relation_dfas(a: ByteDFA, b: ByteDFA) -> str:
    """'eq', 'sub' (a inside b), 'sup', 'dis' or 'ovl' from the product of two DFAs."""
    outcomes = _pair_outcomes(a, b)
    in_a_only, in_b_only, both = bool(outcomes & 1), bool(outcomes & 2), bool(outcomes & 4)
    if not both:
        return "dis"
    if not in_a_only and not in_b_only:
        return "eq"
    if not in_a_only:
        return "sub"
    if not in_b_only:
        return "sup"
    return "ovl"


def _pair_outcomes(a: ByteDFA, b: ByteDFA) -> int:
    """Which accepting outcomes the reachable state pairs of two DFAs show (bit 0: `a` accepts alone,
    1: `b` alone, 2: both), walked in the compiled core (``pair_outcomes``). Past the limit on
    automaton states (and at least 200,000 pairs), a ResourceLimitError naming ``max_dfa_states``."""
    from ...._native import core

    check_deadline("a JSON Schema terminal")
    limit = active_limits().max_dfa_states
    max_pairs = 2**31 - 2 if limit is None else max(200_000, int(limit))
    outcomes, n = core().pair_outcomes(np.ascontiguousarray(a.trans, dtype=np.int32),
                                       np.ascontiguousarray(a.accept, np.uint8),
                                       np.ascontiguousarray(b.trans, dtype=np.int32),
                                       np.ascontiguousarray(b.accept, np.uint8), max_pairs)
    if n < 0:
        check_limit("max_dfa_states", max_pairs + 1, "a JSON Schema terminal (relation of two string classes)")
    return outcomes


class Family:
    """The classes of one kind of lexeme (keys, string values or numbers) in one schema, closed and
    ordered (module docstring). ``kind``: "key", "str" or "num"; each class is a :class:`StrClass`
    or a :class:`NumberSpec`."""

    def __init__(self, kind: str):
        self.kind = kind
        self.classes: list = []
        self._index: dict = {}
        self.closed = False

    def add(self, c) -> None:
        if c not in self._index:
            self._index[c] = len(self.classes)
            self.classes.append(c)

    # -- relations ------------------------------------------------------------------------
    def dfa(self, c) -> ByteDFA:
        if self.kind == "num":
            return number_dfa(c)
        return string_class_dfa(c)

    def relation(self, a, b) -> str:
        if a == b:
            return "eq"
        if self.kind == "num" and (a == _ANY_NUMBER or b == _ANY_NUMBER):  # every number: no automaton needed
            return "sub" if b == _ANY_NUMBER else "sup"
        if self.kind != "num":
            if a.generic or b.generic:
                return "eq" if a.generic and b.generic else ("sub" if b.generic else "sup")
            if a.values is not None and b.values is not None:
                inter = a.values & b.values
                if not inter:
                    return "dis"
                return "eq" if a.values == b.values else "sub" if inter == a.values else \
                    "sup" if inter == b.values else "ovl"
            if a.values is not None or b.values is not None:
                lit, rx = (a, b) if a.values is not None else (b, a)
                inside = {v for v in lit.values if rx.contains(v)}
                r = "dis" if not inside else "sub" if inside == lit.values else "ovl"
                if r == "ovl" or lit is a:
                    return r
                return {"sub": "sup"}.get(r, r)
        key = (a, b)
        got = _RELATIONS.get(key)
        if got is None:
            got = _RELATIONS[key] = _relation_dfas(self.dfa(a), self.dfa(b))
            _RELATIONS[(b, a)] = {"sub": "sup", "sup": "sub"}.get(got, got)
        return got

    def _intersection(self, a, b):
        if self.kind == "num":
            from .schema import _lcm, _tighter
            lo, lo_s = _tighter(a.lo, a.lo_strict, b.lo, b.lo_strict, max)
            hi, hi_s = _tighter(a.hi, a.hi_strict, b.hi, b.hi_strict, min)
            m = a.multiple if b.multiple is None else b.multiple if a.multiple is None else _lcm(a.multiple, b.multiple)
            return NumberSpec(a.integer or b.integer, lo, lo_s, hi, hi_s, m, a.whole or b.whole, a.plain or b.plain)
        if a.values is not None or b.values is not None:
            lit, other = (a, b) if a.values is not None else (b, a)
            return StrClass(values=frozenset(v for v in lit.values if other.contains(v)))
        return StrClass(min_len=max(a.min_len, b.min_len),
                        max_len=b.max_len if a.max_len is None else a.max_len if b.max_len is None else
                        min(a.max_len, b.max_len),
                        patterns=tuple(dict.fromkeys(a.patterns + b.patterns)),
                        formats=tuple(dict.fromkeys(a.formats + b.formats)))

    # -- closure and order ----------------------------------------------------------------
    def close(self) -> None:
        """Add the intersection of every two overlapping classes (until none is new); merge equal
        classes (``self.rep``); order subsets first (``self.order``). String families index literal
        values, so a schema with many property names costs a membership test per (value, pattern
        class), not a relation per pair of classes."""
        if self.kind == "num":
            self._close_pairwise()
            return
        member: dict[tuple[int, str], bool] = {}

        def contains(i: int, v: str) -> bool:
            c = self.classes[i]
            if c.generic:
                return True
            got = member.get((i, v))
            if got is None:
                got = member[(i, v)] = c.contains(v)
            return got

        done_rx: set = set()
        changed = True
        while changed:
            changed = False
            rx = [i for i, c in enumerate(self.classes) if c.values is None]
            lit = [i for i, c in enumerate(self.classes) if c.values is not None]
            for x in rx:  # rx x rx
                for y in rx:
                    if y < x and (y, x) not in done_rx:
                        done_rx.add((y, x))
                        if self.relation(self.classes[y], self.classes[x]) == "ovl":
                            n = len(self.classes)
                            self.add(self._intersection(self.classes[y], self.classes[x]))
                            changed |= len(self.classes) > n
            for x in rx:  # literal sets split by each pattern class
                if self.classes[x].generic:
                    continue
                for j in lit:
                    vals = self.classes[j].values
                    inside = frozenset(v for v in vals if contains(x, v))
                    if inside and inside != vals:
                        n = len(self.classes)
                        self.add(StrClass(values=inside))
                        changed |= len(self.classes) > n
            by_value: dict[str, list[int]] = defaultdict(list)
            for j in lit:
                for v in self.classes[j].values:
                    by_value[v].append(j)
            for js in by_value.values():  # overlapping literal sets
                for a in js:
                    for b in js:
                        if a < b:
                            va, vb = self.classes[a].values, self.classes[b].values
                            inter = va & vb
                            if inter != va and inter != vb:
                                n = len(self.classes)
                                self.add(StrClass(values=inter))
                                changed |= len(self.classes) > n
            check_limit("max_terminals", len(self.classes), f"JSON Schema {self.kind} classes")
        n = len(self.classes)
        self.rep = list(range(n))
        first_rx: dict = {}
        for i, c in enumerate(self.classes):
            if c.values is None:
                for j, d in first_rx.items():
                    if self.relation(d, c) == "eq":
                        self.rep[i] = j
                        break
                else:
                    first_rx[i] = c
        reps = [i for i in range(n) if self.rep[i] == i]
        lit = [i for i in reps if self.classes[i].values is not None]
        rx = [i for i in reps if self.classes[i].values is None]
        by_value = defaultdict(list)
        for j in lit:
            for v in self.classes[j].values:
                by_value[v].append(j)
        inside: dict[int, set[int]] = {}
        for i in lit:
            vals = self.classes[i].values
            cands = {j for v in vals for j in by_value[v] if j != i}
            inside[i] = {j for j in cands if self.classes[j].values < vals}
        for i in rx:
            c = self.classes[i]
            inside[i] = {j for j in lit if all(contains(i, v) for v in self.classes[j].values)}
            inside[i] |= {j for j in rx if j != i and self.relation(self.classes[j], c) == "sub"}
        self.inside = inside
        self.order = sorted(lit, key=lambda i: (len(self.classes[i].values), i)) + \
            sorted(rx, key=lambda i: (len(inside[i]), i))
        self.closed = True

    def _close_pairwise(self) -> None:
        i = 0
        while i < len(self.classes):
            for j in range(i):
                a, b = self.classes[j], self.classes[i]
                if self.relation(a, b) == "ovl":
                    self.add(self._intersection(a, b))
                    check_limit("max_terminals", len(self.classes), f"JSON Schema {self.kind} classes")
            i += 1
        n = len(self.classes)
        self.rep = list(range(n))
        for i in range(n):
            for j in range(i):
                if self.rep[j] == j and self.relation(self.classes[j], self.classes[i]) == "eq":
                    self.rep[i] = j
                    break
        reps = [i for i in range(n) if self.rep[i] == i]
        self.inside = {i: {j for j in reps if j != i and self.relation(self.classes[j], self.classes[i]) == "sub"}
                       for i in reps}
        self.order = sorted(reps, key=lambda i: (len(self.inside[i]), i))
        self.closed = True

    def region_dfa(self, atoms: frozenset[int]) -> ByteDFA:
        """The lexemes that lex as one of `atoms` (their first class, in lexing order, is one of them), as
        one automaton of their own, trimmed: a position that admits it alone, lexed apart from the family,
        is live exactly where some such lexeme continues the text (an atom's own class may go on where
        every continuation lexes as an earlier class). Built as the product of the family's automata."""
        check_deadline("a JSON Schema terminal")
        order = list(self.order)
        dfas = [self.dfa(self.classes[i]) for i in order]
        want = [i in atoms for i in order]
        tables = [d.trans.tolist() for d in dfas]
        used = sorted({b for d in dfas for b in np.flatnonzero((d.trans >= 0).any(axis=0)).tolist()})
        cap = active_limits().max_dfa_states
        start = tuple(0 for _ in dfas)
        ids, states, rows, labels, blocks = {start: 0}, [start], [], [], []
        k = 0
        while k < len(states):
            st = states[k]
            row = np.full(256, -1, dtype=np.int32)
            for b in used:
                nxt = tuple(t[q][b] if q >= 0 else -1 for t, q in zip(tables, st))
                if all(q < 0 for q in nxt):
                    continue
                got = ids.get(nxt)
                if got is None:
                    got = ids[nxt] = len(states)
                    states.append(nxt)
                    if cap is not None and len(states) > cap:
                        check_limit("max_dfa_states", len(states), "a JSON Schema number terminal")
                row[b] = got
            first = next((j for j, q in enumerate(st) if q >= 0 and dfas[j].accept[q]), None)
            rows.append(row)
            labels.append(0 if first is not None and want[first] else -1)
            blk = None if first is None or dfas[first].block is None else dfas[first].block[st[first]]
            blocks.append(np.zeros(256, dtype=bool) if blk is None else blk)
            k += 1
            if not k & 255:
                check_deadline("a JSON Schema number terminal")
        trans, lab, block = minimize_arrays(np.stack(rows), np.array(labels, dtype=np.int64), np.stack(blocks))
        return ByteDFA(trans, lab >= 0, block)

    def terminal_index(self, c) -> int:
        return self.rep[self._index[c]]

    def alternatives(self, c, minus: frozenset | None = None) -> list[int]:
        """Indices (into ``classes``) of the terminals a position admitting `c` admits; `minus`: values
        left out (each is a singleton class of the family, so exactly the literal classes inside `minus`
        are dropped)."""
        i = self.terminal_index(c)
        out = [i, *sorted(self.inside[i])]
        if minus:
            out = [x for x in out if not (self.classes[x].values is not None and self.classes[x].values <= minus)]
        return out


_KEY_DFAS: dict = {}


def key_dfa(c: StrClass, ws: str) -> ByteDFA:
    """Object keys of class `c`: the string, then the key separator (whitespace `ws` around ``:``)."""
    got = _KEY_DFAS.get((c, ws))
    if got is None:
        colon = punctuation(ws)["COLON"]
        got = _literal_dfa(c.values, colon) if c.values is not None else None
        if got is None:
            got = concat_suffix(string_class_dfa(c), colon)
        _KEY_DFAS[(c, ws)] = got
    return got


_ONE_SPELLING = re.compile(r'[^\x00-\x1f"\\/\ud800-\udfff]*\Z')  # characters JSON writes one way only


def _literal_dfa(values, suffix: ByteDFA | None) -> ByteDFA | None:
    """The JSON string literals of `values` (quotes included), then `suffix` if given, built straight
    as a byte trie (what :func:`string_class_dfa` and :func:`concat_suffix` make of a literal class,
    without the code-point automaton): property names and enum values are new in most schemas, so
    this is most of a new schema's terminal work. None where a value has a character JSON may spell
    two ways (escapes, ``/``) or cannot encode (a lone surrogate): the general path handles those."""
    if not all(_ONE_SPELLING.match(v) for v in values):
        return None
    if len(values) == 1:  # a chain of bytes (most keys)
        (v,) = values
        spelled = np.frombuffer(b'"' + v.encode() + b'"', dtype=np.uint8)
        k = len(spelled)
        if suffix is not None and _quote_free(suffix):
            return _chain(spelled, suffix)
        src, byte, tgt, ends = np.arange(k), spelled, np.arange(1, k + 1), [k]
        n_trie = k + 1
    else:
        edges: list[dict[int, int]] = [{}]
        ends = []
        for v in values:
            st = 0
            for b in b'"' + v.encode() + b'"':
                nxt = edges[st].get(b)
                if nxt is None:
                    nxt = edges[st][b] = len(edges)
                    edges.append({})
                st = nxt
            ends.append(st)
        src = [st for st, e in enumerate(edges) for _ in e]
        byte, tgt = [b for e in edges for b in e], [t for e in edges for t in e.values()]
        n_trie = len(edges)
    n = n_trie + (suffix.n_states if suffix is not None else 0)
    trans = np.full((n, 256), -1, dtype=np.int32)
    trans[src, byte] = tgt
    return _joined(trans, np.zeros(n, dtype=bool), ends, suffix)


_QUOTE_FREE: dict[int, ByteDFA] = {}  # id -> suffix, the suffixes :func:`_chain` may append


def _quote_free(suffix: ByteDFA) -> bool:
    """Whether :func:`_chain` may append `suffix`: minimal and canonically numbered already (as
    :func:`punctuation` makes it: checked once per suffix), no block rows, no ``"`` in any text."""
    if _QUOTE_FREE.get(id(suffix)) is suffix:
        return True
    t = suffix.trans
    if suffix.block is not None or (t[:, ord('"')] >= 0).any():
        return False
    again, lab, _ = minimize_arrays(t, np.where(suffix.accept, 0, -1), None)
    if again.shape != t.shape or not (again == t).all() or not ((lab >= 0) == suffix.accept).all():
        return False
    _QUOTE_FREE[id(suffix)] = suffix
    return True


def _chain(spelled: np.ndarray, suffix: ByteDFA) -> ByteDFA:
    """One literal's bytes (`spelled`, quotes included) then a :func:`_quote_free` `suffix`: what
    :func:`_joined` returns for it, without minimising. It is minimal: a chain state's texts all hold
    the closing quote and no suffix state's text does, and two chain states' shortest texts differ in
    length. It is canonically numbered: a breadth-first walk from 0 goes down the chain, then through
    the suffix in the suffix's own order."""
    k = len(spelled)  # chain states 0 .. k-1; the closing quote enters the suffix's start, state k
    trans = np.full((k + suffix.n_states, 256), -1, dtype=np.int32)
    trans[np.arange(k), spelled] = np.arange(1, k + 1, dtype=np.int32)
    trans[k:] = np.where(suffix.trans >= 0, suffix.trans + k, -1)
    acc = np.zeros(len(trans), dtype=bool)
    acc[k:] = suffix.accept
    return ByteDFA(trans, acc, None)


def concat_suffix(dfa: ByteDFA, suffix: ByteDFA) -> ByteDFA:
    """`dfa` followed by `suffix`, where `dfa`'s accepting states have no way out (a JSON string
    ends at its closing quote)."""
    n = dfa.n_states
    trans = np.full((n + suffix.n_states, 256), -1, dtype=np.int32)
    trans[:n] = dfa.trans
    return _joined(trans, np.zeros(len(trans), dtype=bool), np.flatnonzero(dfa.accept), suffix)


def _joined(trans: np.ndarray, acc: np.ndarray, ends, suffix: ByteDFA | None) -> ByteDFA:
    """A DFA whose first states are filled in `trans` (its last ``suffix.n_states`` rows free), its
    texts ending in states `ends`, followed by `suffix` (None: accepted there), minimised. The ends
    have no way out (a JSON string ends at its closing quote), so each takes the suffix's start row."""
    if suffix is None:
        acc[ends] = True
    else:
        n = len(trans) - suffix.n_states
        st = suffix.trans.astype(np.int32)
        trans[n:] = np.where(st >= 0, st + n, -1)
        acc[n:] = suffix.accept
        trans[ends] = trans[n]
        acc[ends] = suffix.accept[0]
    t, lab, blk = minimize_arrays(trans, np.where(acc, 0, -1), None)
    return ByteDFA(t, lab >= 0, blk)


@functools.lru_cache(maxsize=64)
def punctuation(ws: str) -> dict[str, ByteDFA]:
    """The structural terminals with whitespace regex `ws` around them (inside values only)."""
    from ..automata import regex_to_dfa
    w = f"(?:{ws})" if ws else ""
    return {
        "LBRACE": regex_to_dfa(r"\{" + w), "RBRACE": regex_to_dfa(w + r"\}"),
        "LSQB": regex_to_dfa(r"\[" + w), "RSQB": regex_to_dfa(w + r"\]"),
        "COMMA": regex_to_dfa(w + "," + w), "COLON": regex_to_dfa(w + ":" + w),
        "TRUE": regex_to_dfa("true"), "FALSE": regex_to_dfa("false"), "NULL": regex_to_dfa("null"),
    }


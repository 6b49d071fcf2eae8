"""JSON numbers with exact bounds, integrality and ``multipleOf``, as byte DFAs ("digit automata").

A :class:`NumberSpec` is a set of numbers; :func:`number_dfa` builds the DFA of the JSON number
texts (``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``) whose exact decimal value is in it,
by walking a small state machine over the text: the sign, where the text is (integer part,
fraction, exponent), how the magnitude read so far compares with each bound (digit by digit, as
a number is compared with a fixed decimal), and the value modulo the ``multipleOf`` numerator.

Exponents: a bound other than 0, ``multipleOf`` and integrality relate the exponent's value to
the number of digits, which no finite automaton can check, so a number with any of them is
written without an exponent (a departure: ``1e2`` is refused where ``100`` is accepted; see
docs). An integer may be written with a fraction of zeros (``2.0``: jsonschema's integers
include integral floats).

Every accepting state blocks on the bytes that could continue a number (``0-9 . e E + -``), so
the basic lexer never ends a number lexeme inside a longer number.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ....errors import ResourceLimitError
from ....limits import _how, active_limits
from ..automata import ByteDFA, minimize_arrays

__all__ = ["NumberSpec", "number_dfa", "MAX_MODULUS"]

MAX_MODULUS = 10_000  # multipleOf numerators beyond this are refused (states grow with it)
_CONT = b"0123456789.eE+-"


@dataclass(frozen=True)
class NumberSpec:
    """A set of numbers: `integer` (integral values only), bounds as exact fractions
    (``lo``/``hi``, None: unbounded; ``lo_strict``/``hi_strict``: exclusive), ``multiple``
    (multipleOf as a fraction, or None), `whole` (written without a fraction part: drafts 3 and 4, where
    ``1.0`` is not an integer), `plain` (written without an exponent: the numbers whose membership in every
    class of a family is decided by their spelling, see :meth:`exponent_allowed`)."""

    integer: bool = False
    lo: Fraction | None = None
    lo_strict: bool = False
    hi: Fraction | None = None
    hi_strict: bool = False
    multiple: Fraction | None = None
    whole: bool = False
    plain: bool = False

    @property
    def exponent_allowed(self) -> bool:
        """Whether the set's texts include exponent spellings. Integers, bounds other than 0 and
        ``multipleOf`` are written without one (a departure: ``1e2`` is not admitted for ``minimum: 5``),
        so an exponent spelling outside such a class may still have a value inside it."""
        return not self.plain and not self.integer and self.multiple is None and \
            all(b is None or b == 0 for b in (self.lo, self.hi))

    def empty(self) -> bool:
        """No number is in the set (decided on the bounds alone; a DFA with no accepting state
        is also reported by the grammar's checks)."""
        if self.lo is None or self.hi is None:
            return False
        return self.lo > self.hi or (self.lo == self.hi and (self.lo_strict or self.hi_strict))

    def contains(self, x: Fraction) -> bool:
        if self.integer and x.denominator != 1:
            return False
        if self.lo is not None and (x < self.lo or (self.lo_strict and x == self.lo)):
            return False
        if self.hi is not None and (x > self.hi or (self.hi_strict and x == self.hi)):
            return False
        return self.multiple is None or (x / self.multiple).denominator == 1


def _digits(b: Fraction) -> tuple[str, str] | None:
    """|b| as (integer digits, fraction digits without trailing zeros); None if it has no finite
    decimal expansion."""
    m = abs(b)
    i, r = divmod(m.numerator, m.denominator)
    frac = []
    for _ in range(400):
        if not r:
            break
        d, r = divmod(r * 10, m.denominator)
        frac.append(str(d))
    if r:
        return None
    return str(i), "".join(frac)


class _Cmp:
    """Comparison of a magnitude being read with a fixed decimal |b| = I.F: state is
    ('i', k, rel) in the integer part after k digits (rel: -1, 0, 1 on the first k digits;
    k capped one past len(I)), ('f', j, rel) in the fraction after the integer parts were equal
    (j capped at len(F)), or ('d', rel) decided."""

    def __init__(self, b: Fraction):
        got = _digits(b)
        if got is None:  # a bound like 1/3: compare exactly with a bound just inside would be needed
            raise ValueError("bound without a finite decimal expansion")
        self.I, self.F = got

    def int_digit(self, st, d: str):
        _, k, rel = st
        n = len(self.I)
        if k >= n:
            return ("i", n + 1, 1)  # longer than I: larger (no leading zeros)
        if rel == 0:
            rel = (d > self.I[k]) - (d < self.I[k])
        return ("i", k + 1, rel)

    def end_int(self, st):
        _, k, rel = st
        n = len(self.I)
        if k < n:
            return ("d", -1)
        if k > n:
            return ("d", 1)
        return ("f", 0, 0) if rel == 0 else ("d", rel)

    def frac_digit(self, st, d: str):
        if st[0] == "d":
            return st
        _, j, rel = st
        if rel != 0:
            return ("d", rel)
        if j < len(self.F):
            rel = (d > self.F[j]) - (d < self.F[j])
            return ("f", j + 1, rel) if rel == 0 else ("d", rel)
        return ("d", 1) if d != "0" else st

    def result(self, st) -> int:
        if st[0] == "i":
            st = self.end_int(st)
        if st[0] == "d":
            return st[1]
        _, j, rel = st
        return -1 if rel == 0 and j < len(self.F) else rel


def _value_cmp(sign: int, rel: int, b: Fraction) -> int:
    """The sign of x - b, where x has `sign` (-1, 0, 1) and |x| compares with |b| as `rel`."""
    if sign == 0:
        return -(b > 0) + (b < 0)
    if sign > 0:
        return 1 if b <= 0 else rel
    return -1 if b >= 0 else -rel


def _ok(spec: NumberSpec, sign: int, rels: list[int]) -> bool:
    """The bounds hold for a number of `sign` whose magnitude compares with each bound as `rels`."""
    k = 0
    if spec.lo is not None:
        c = _value_cmp(sign, rels[k], spec.lo)
        if c < 0 or (c == 0 and spec.lo_strict):
            return False
        k += 1
    if spec.hi is not None:
        c = _value_cmp(sign, rels[k], spec.hi)
        if c > 0 or (c == 0 and spec.hi_strict):
            return False
    return True


@functools.lru_cache(maxsize=2048)
def number_dfa(spec: NumberSpec) -> ByteDFA:
    """The JSON number texts of `spec`'s values (see the module docstring). Raises ValueError for a
    bound or ``multipleOf`` without a finite decimal expansion, :class:`ResourceLimitError` for a
    ``multipleOf`` whose numerator exceeds :data:`MAX_MODULUS`."""
    bounds = [b for b in (spec.lo, spec.hi) if b is not None]
    cmps = [_Cmp(b) for b in bounds]
    mod, mdig = 1, 0
    if spec.multiple is not None:
        got = _digits(spec.multiple)
        if got is None or spec.multiple <= 0:
            raise ValueError("multipleOf without a finite decimal expansion")
        mdig = len(got[1])
        mod = int(spec.multiple * 10 ** mdig)
        if mod > MAX_MODULUS:
            raise ResourceLimitError("multipleOf", mod, MAX_MODULUS, what="multipleOf's numerator",
                                     how="a multipleOf of more than 4 significant digits is refused")
    exp_ok = spec.exponent_allowed
    # state: (phase, negative, a nonzero digit seen, comparison states, residue, fraction digits counted)
    start = ("s", False, False, tuple(("i", 0, 0) for _ in cmps), 0, 0)

    def step(st, ch: str):
        phase, neg, nz, cs, r, j = st
        nz2 = nz or (ch.isdigit() and ch != "0" and phase not in ("e", "E", "X"))
        got = _step(phase, neg, cs, r, j, ch)
        return None if got is None else (got[0], got[1], nz2, *got[2:])

    def _step(phase, neg, cs, r, j, ch):
        if phase == "s":
            if ch == "-":
                return ("-", True, cs, r, j)
            phase = "-"
        if phase == "-":
            if ch == "0":
                return ("0", neg, tuple(c.int_digit(x, "0") for c, x in zip(cmps, cs)), 0, 0)
            if ch.isdigit():
                return ("I", neg, tuple(c.int_digit(x, ch) for c, x in zip(cmps, cs)), int(ch) % mod, 0)
            return None
        if phase == "I" and ch.isdigit():
            return ("I", neg, tuple(c.int_digit(x, ch) for c, x in zip(cmps, cs)), (r * 10 + int(ch)) % mod, 0)
        if phase in ("0", "I"):
            if ch == "." and not spec.whole:
                return (".", neg, tuple(c.end_int(x) for c, x in zip(cmps, cs)), r, 0)
            if ch in "eE" and exp_ok:
                return ("e", neg, tuple(c.end_int(x) for c, x in zip(cmps, cs)), r, 0)
            return None
        if phase in (".", "F") and ch.isdigit():
            if spec.integer and ch != "0":
                return None
            if j < mdig:
                r, j = (r * 10 + int(ch)) % mod, j + 1
            elif ch != "0" and spec.multiple is not None:
                return None
            return ("F", neg, tuple(c.frac_digit(x, ch) for c, x in zip(cmps, cs)), r, j)
        if phase == "F" and ch in "eE" and exp_ok:
            return ("e", neg, cs, r, j)
        if phase == "e":
            if ch in "+-":
                return ("E", neg, cs, r, j)
            phase = "E"
        if phase in ("E", "X") and ch.isdigit():
            return ("X", neg, cs, r, j)
        return None

    def accepting(st) -> bool:
        phase, neg, nz, cs, r, j = st
        if phase not in ("0", "I", "F", "X"):
            return False
        if spec.multiple is not None and (r * 10 ** (mdig - j)) % mod:
            return False
        sign = 0 if not nz else (-1 if neg else 1)
        return _ok(spec, sign, [c.result(x) for c, x in zip(cmps, cs)])

    ids = {start: 0}
    states = [start]
    edges: list[tuple[int, int, int]] = []
    alphabet = [chr(b) for b in _CONT]
    i = 0
    while i < len(states):
        st = states[i]
        for ch in alphabet:
            nxt = step(st, ch)
            if nxt is None:
                continue
            t = ids.get(nxt)
            if t is None:
                t = ids[nxt] = len(states)
                states.append(nxt)
                if len(states) > 200_000:
                    limit = active_limits().max_dfa_states
                    raise ResourceLimitError("max_dfa_states", len(states), limit or 200_000,
                                             what="number terminal", how=_how("max_dfa_states"))
            edges.append((i, ord(ch), t))
        i += 1
    n = len(states)
    trans = np.full((n, 256), -1, dtype=np.int32)
    if edges:
        e = np.array(edges, dtype=np.int64)
        trans[e[:, 0], e[:, 1]] = e[:, 2]
    acc = np.array([accepting(s) for s in states], dtype=bool)
    block = np.zeros((n, 256), dtype=bool)
    block[np.ix_(acc, np.frombuffer(_CONT, dtype=np.uint8))] = True
    t, lab, blk = minimize_arrays(trans, np.where(acc, 0, -1), block)
    return ByteDFA(t, lab >= 0, blk)

"""Normalized schema -> BNF rules and terminals for this engine.

:class:`SchemaGrammar` is what the compile driver needs: lark-style rules, the terminals as byte
DFAs in lexer order, the start symbol. Rules are built directly (no grammar text is written and
parsed again).

**Values as formulas over leaves.** A sub-schema denotes a boolean formula over *leaves*: pure
conjunctions (:class:`~.schema.Basic` without checks). A union (``anyOf``, ``type`` lists, disjoint
``oneOf``) is an OR; the checks a node carries (``not``, overlapping ``oneOf``, ``if``/``then``/
``else``, dependencies) add NOT, EXACTLY-ONE, and implications; an ``enum`` of objects or arrays is
an OR of literal leaves. A grammar position asks for the values whose acceptance vector over some
sub-schemas is a given one (:meth:`_Builder.region`: "accepted by these, rejected by those").

- **Scalars**: where a position admits the values of a union of leaves (a property's schema, ``anyOf``
  of scalars), it admits each leaf's class as a *whole* terminal, its own automaton, lexed apart from
  every other terminal (``SchemaGrammar.groups``): the parser, not the lexer, tells the classes apart,
  so inside a string value only that value's class runs. Where a position must tell the leaves apart
  (``not``, overlapping ``oneOf``, values left out, object keys, a property read by several leaves), each
  kind of lexeme (keys, string values, numbers) has a family of classes closed under intersection
  (:mod:`.lexicon`), whose *atoms* compete under the basic lexer's rule, so every lexeme belongs to
  exactly one atom, and each atom is inside or outside each leaf's class; such a position admits the
  atoms whose leaf acceptance makes the formula hold. Keys are closed before any rule is written
  (:meth:`_Builder.collect`); string values and numbers on the first position that needs their atoms.
- **Objects and arrays** are read by a *product*: one pass over the members tracks every leaf at once
  (its position among its declared properties, the property count, whether it still holds), so a
  union of objects that share a prefix is decided where the texts differ, not at the first key (an
  LALR(1) parser could not choose a branch there). A property's value is split into disjoint regions
  by which of the leaves' value schemas accept it, each region a value of its own; at ``}`` (``]``)
  the formula is evaluated on the leaves that hold.
- **Property order.** Declared properties come in schema order (llguidance's order, which MaskBench
  follows), each optional one skippable, then additional properties (``additionalProperties``,
  ``patternProperties``) in any order and number. When the formula is a plain union, each leaf reads
  the keys in its own order (a text is admitted in the spelling of any member). When a leaf must
  *fail* (``not``, ``oneOf``, ``else``), a leaf failing on the order alone would admit a value it
  accepts, so then all leaves read one merged order and fail only on values.

Whitespace lives inside the punctuation terminals (``LBRACE`` is ``{`` and the whitespace after it),
so whitespace costs no parser step.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import sys
import warnings
from dataclasses import dataclass, field, replace
from fractions import Fraction

from lark.grammar import NonTerminal, Rule, RuleOptions, Terminal

from ....errors import SchemaError
from ....limits import check_deadline, check_limit
from ..automata import ByteDFA
from .lexicon import Family, StrClass, key_dfa, punctuation
from .numbers import NumberSpec
from .schema import Basic, SchemaDoc, Sub, merge, once_per_sub

__all__ = ["SchemaGrammar", "build_grammar", "WHITESPACE", "PROPERTY_ORDERS", "SchemaOrderWarning"]

WHITESPACE = {"outlines": "[ ]?", "flexible": r"[ \t\n\r]*", "compact": ""}
_GENERIC = StrClass()
_NUMBER = NumberSpec()
_PLAIN_NUMBER = NumberSpec(plain=True)  # every number written without an exponent
MAX_UNDECIDED = 8  # leaves an exponent spelling leaves undecided at one position (2**n verdicts tried)
_TRUE = Sub(True, "")
MAX_SPLIT = 10  # distinct value schemas one property's value is split by (2**n regions at most)
MAX_UNIQUE_VALUES = 10  # uniqueItems: the values an array's items may take (2**n sets of them seen)
MAX_PATTERNS = 8  # patternProperties told apart in one object (2**n key classes at most)
MAX_PRODUCT_STATES = 20_000  # states of one object's or array's product
MAX_WHOLES = 8  # whole classes one position admits (each a lexer run of its own); more: atoms
MAX_ANY_ORDER_EDGES = 16_384  # moves of a schema's object products in property_order="any", all objects together
# (past it an object keeps its declared order). Where the grammar then has over MAX_ANY_ORDER_RULES rules (an
# object's rules are written once per way its values end), or an object's merged states split a value past
# MAX_SPLIT or MAX_PRODUCT_STATES, the schema is built again with MAX_ANY_ORDER_EDGES_EACH moves an object.
# Fixed numbers, not the active limits: a schema and its options make one grammar (the caches are keyed so)
MAX_ANY_ORDER_RULES = 40_000
MAX_ANY_ORDER_EDGES_EACH = 4096
PROPERTY_ORDERS = ("declared", "any")
GUARD_FROM = 6  # in any order, an object with this many required names is guarded at once (where it can be)


class SchemaOrderWarning(UserWarning):
    """An object compiled in its declared property order although ``property_order="any"`` asked for any."""


@dataclass
class SchemaGrammar:
    """A schema's grammar: ``rule_list`` ((name, expansion names) pairs), ``terminals`` ((name, ByteDFA)
    in the basic lexer's order), ``start`` (the start rule's name); ``rules``: the same rules as lark
    ``Rule`` objects (built on first use: the eager store's analyses read them, a lazy compile does not)."""

    rule_list: list[tuple[str, tuple[str, ...]]]
    terminals: list[tuple[str, ByteDFA]]
    start: str
    groups: tuple[int, ...] | None = None  # per terminal: which compete under the basic lexer's rule (LexerSpec)
    # ObjectGuards codes by nonterminal: objects whose required names come in any order, checked beside the
    # parser (the rules alone admit such an object without some of them)
    guards: dict[str, int] = field(default_factory=dict)
    checks: tuple[tuple[int, ...], ...] = ()  # the close checks guard code -(j + 1) names (ObjectGuards)

    @functools.cached_property
    def rules(self) -> list:
        names = {t for t, _ in self.terminals}
        return [Rule(NonTerminal(lhs), [Terminal(x) if x in names else NonTerminal(x) for x in rhs],
                     options=RuleOptions()) for lhs, rhs in self.rule_list]


# ---------------------------------------------------------------------------------------------------------
# formulas over leaves: ("v", i) ("c", bool) ("and", fs) ("or", fs) ("not", f) ("one", fs)

_T, _F = ("c", True), ("c", False)


def _and(fs) -> tuple:
    out = []
    for f in fs:
        if f == _F:
            return _F
        if f != _T:
            out.extend(f[1] if f[0] == "and" else (f,))
    out = tuple(dict.fromkeys(out))
    return _T if not out else out[0] if len(out) == 1 else ("and", out)


def _or(fs) -> tuple:
    out = []
    for f in fs:
        if f == _T:
            return _T
        if f != _F:
            out.extend(f[1] if f[0] == "or" else (f,))
    out = tuple(dict.fromkeys(out))
    return _F if not out else out[0] if len(out) == 1 else ("or", out)


def _not(f) -> tuple:
    if f[0] == "c":
        return ("c", not f[1])
    return f[1] if f[0] == "not" else ("not", f)


def _eval(f, acc) -> bool:
    k = f[0]
    if k == "v":
        return f[1] in acc
    if k == "c":
        return f[1]
    if k == "and":
        return all(_eval(g, acc) for g in f[1])
    if k == "or":
        return any(_eval(g, acc) for g in f[1])
    if k == "not":
        return not _eval(f[1], acc)
    return sum(_eval(g, acc) for g in f[1]) == 1


def _eval3(f, true, false):
    """f with the leaves in `true` holding, those in `false` failing, the rest unknown: True, False or
    None (either)."""
    k = f[0]
    if k == "v":
        return True if f[1] in true else False if f[1] in false else None
    if k == "c":
        return f[1]
    if k == "not":
        r = _eval3(f[1], true, false)
        return None if r is None else not r
    rs = [_eval3(g, true, false) for g in f[1]]
    if k == "and":
        return False if False in rs else None if None in rs else True
    if k == "or":
        return True if True in rs else None if None in rs else False
    yes, unknown = rs.count(True), rs.count(None)
    if yes > 1 or yes + unknown == 0:
        return False
    return True if yes == 1 and unknown == 0 else None


def _dnf_leaves(forms, cap: int = 64) -> list[int] | None:
    """The leaves of formulas that are all one OR of single leaves (the values any one of the leaves
    accepts), or None (a conjunction, a constant, a check, or more than `cap` leaves)."""
    out: dict[int, None] = {}
    if len(forms) != 1:
        return None

    def walk(f) -> bool:
        if f[0] == "v":
            out[f[1]] = None
            return len(out) <= cap
        return f[0] == "or" and all(walk(g) for g in f[1])

    return list(out) if walk(forms[0]) else None


def _monotone(f) -> bool:
    return f[0] in ("v", "c") or (f[0] in ("and", "or") and all(_monotone(g) for g in f[1]))


def _vars(f, out: set) -> set:
    if f[0] == "v":
        out.add(f[1])
    elif f[0] == "not":
        _vars(f[1], out)
    elif f[0] != "c":
        for g in f[1]:
            _vars(g, out)
    return out


class _Target:
    """What a region asks of a value: each formula in `forms` evaluates as in `vec`."""

    def __init__(self, forms: tuple, vec: tuple[bool, ...]):
        self.forms, self.vec = forms, vec
        self.leaves = sorted(set().union(*(_vars(f, set()) for f in forms)))
        # a union: leaves read keys in their own order, and failing ones can be dropped
        self.monotone = all(vec) and all(_monotone(f) for f in forms)

    def holds(self, acc) -> bool:
        return all(_eval(f, acc) == v for f, v in zip(self.forms, self.vec))

    def possible(self, true, false) -> bool:
        return all(_eval3(f, true, false) in (None, v) for f, v in zip(self.forms, self.vec))


# ---------------------------------------------------------------------------------------------------------
# leaves


@dataclass
class _Leaf:
    """A leaf and what its scalars are: literal flags, string classes (class, values left out), number
    specs; its object part (declared names in order) and array part."""

    b: Basic
    null: bool = False
    true: bool = False
    false: bool = False
    strs: tuple = ()
    nums: tuple = ()
    names: tuple[str, ...] = ()
    is_object: bool = False
    is_array: bool = False


def _literal_basic(v, ptr: str) -> Basic:
    """The leaf of exactly the object or array `v` (its members in the order given). Each member is an
    ``enum`` of one value, not a ``const``: every draft has ``enum``, and drafts 3-4 ignore ``const``."""
    if isinstance(v, dict):
        return Basic(types=frozenset({"object"}), props=tuple((k, Sub({"enum": [x]}, ptr)) for k, x in v.items()),
                     required=tuple(v), additional=Sub(False, ptr), pointer=ptr)
    return Basic(types=frozenset({"array"}), prefix=tuple(Sub({"enum": [x]}, ptr) for x in v),
                 items=Sub(False, ptr), min_items=len(v), max_items=len(v), pointer=ptr)


class _Builder:
    def __init__(self, doc: SchemaDoc, ws: str, property_order: str = "declared",
                 any_order_budget: int | None = MAX_ANY_ORDER_EDGES, guards: bool = True,
                 labelled_guards: bool = True):
        self.doc = doc
        self.allow_guards = guards
        self.labelled_guards = labelled_guards  # False after _GuardUnsound: guards for objects that must hold only
        self.ws = ws
        self.any_order = property_order == "any"
        self.counted: set[int] = set()  # distinct string length bounds (_check_length)
        self.rules: list[tuple[str, tuple]] = []  # (lhs, rhs); rhs items: names or ("atoms"/"key", ...) symbols
        self.memo: dict = {}
        self.keys = Family("key")
        self.strs = Family("str")
        self.nums = Family("num")
        self.n = 0
        self.leaves: list[_Leaf] = []
        self._leaf_ids: dict[int, int] = {}
        self._forms: dict[str, tuple] = {}
        self._forming: set[str] = set()
        self._atoms: dict = {}
        self.wholes: dict[tuple, None] = {}  # (kind, class) of the whole-class terminals, in first use order
        # moves the objects in any order may still take (None: MAX_ANY_ORDER_EDGES_EACH each)
        self.any_order_left = any_order_budget
        self._splits: dict = {}
        self._pending: list = []
        self.guards: dict[str, int] = {}  # SchemaGrammar.guards
        self.checks: dict[tuple[int, ...], int] = {}  # SchemaGrammar.checks, by their codes

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def rule(self, lhs: str, *rhs) -> None:
        self.rules.append((lhs, rhs))
        if not len(self.rules) & 1023:
            check_deadline("JSON Schema rules")
            self._rule_budget()
            check_limit("max_rules", len(self.rules), "JSON Schema grammar")

    def _rule_budget(self) -> None:
        """Stop a build within the schema's any-order budget that writes over MAX_ANY_ORDER_RULES rules."""
        if self.any_order and self.any_order_left is not None and len(self.rules) > MAX_ANY_ORDER_RULES:
            raise _TooManyRules

    # -- formulas -------------------------------------------------------------------------
    def formula(self, sub: Sub) -> tuple:
        """The formula (over leaf ids) of the values `sub` accepts."""
        def make() -> tuple:
            if sub.parts:
                return _and(self.formula(p) for p in sub.parts)
            return _or(self._basic_formula(b) for b in self.doc.basics(sub))

        return once_per_sub(self._forms, self._forming, sub, "a schema that refers to itself through not/oneOf/if/"
                            "dependencies without an object or array in between", make)

    def _basic_formula(self, b: Basic) -> tuple:
        core = replace(b, checks=()) if b.checks else b
        if b.enum is not None and any(t[0] in "{[" for t in b.enum):  # objects and arrays: literal leaves
            rest = replace(core, enum=None)
            parts = []
            scalars = tuple(t for t in b.enum if t[0] not in "{[")
            if scalars:
                parts.append(("v", self._leaf(replace(core, enum=scalars))))
            for t in b.enum:
                if t[0] in "{[" and t not in b.exclude:
                    m = merge(_literal_basic(json.loads(t), b.pointer + "/enum"), rest)
                    if m is not None:
                        parts.append(("v", self._leaf(m)))
            f = _or(parts)
        else:
            f = ("v", self._leaf(core))
        checks = []
        for kind, subs in b.checks:
            fs = [self.formula(s) for s in subs]
            if kind == "not":
                checks.append(_not(fs[0]))
            elif kind == "one":
                checks.append(("one", tuple(fs)))
            elif kind == "ite":
                checks.append(_or([_and([fs[0], fs[1]]), _and([_not(fs[0]), fs[2]])]))
            else:  # "imp"
                checks.append(_or([_not(fs[0]), fs[1]]))
        return _and([f] + checks)

    def _leaf(self, b: Basic) -> int:
        got = self._leaf_ids.get(id(b))  # normalized nodes are cached per sub-schema: identity suffices
        if got is None:
            got = self._leaf_ids[id(b)] = len(self.leaves)
            self.leaves.append(self._describe(b))  # keeps b alive, so its id stays its own
        return got

    def _describe(self, b: Basic) -> _Leaf:
        """The leaf's scalars as classes of the families (registered there) and its structure."""
        lf = _Leaf(b)
        ex = [json.loads(v) for v in b.exclude]
        if b.enum is not None:
            constrained = StrClass(min_len=b.min_len, max_len=b.max_len, patterns=b.patterns, formats=b.formats)
            spec = _spec(b)
            strs, nums = [], []
            for text in b.enum:
                if text in b.exclude:
                    continue
                v = json.loads(text)
                if v is None:
                    lf.null = "null" in b.types
                elif isinstance(v, bool):
                    if "boolean" in b.types:
                        lf.true, lf.false = lf.true or v, lf.false or not v
                elif isinstance(v, str):
                    if "string" in b.types and constrained.contains(v):
                        strs.append(v)
                elif isinstance(v, (int, float)):
                    x = Fraction(repr(v)) if isinstance(v, float) else Fraction(v)
                    if "number" in b.types and spec.contains(x):
                        nums.append(NumberSpec(False, x, False, x, False, None))
            lf.strs = ((StrClass(values=frozenset(strs)), None),) if strs else ()
            lf.nums = tuple(dict.fromkeys(nums))
        else:
            lf.null = "null" in b.types and None not in ex
            if "boolean" in b.types:
                lf.true = not any(e is True for e in ex)
                lf.false = not any(e is False for e in ex)
            if "string" in b.types:
                _check_length(b, self.counted)
                c = StrClass(min_len=b.min_len, max_len=b.max_len, patterns=b.patterns, formats=b.formats)
                minus = frozenset(e for e in ex if isinstance(e, str)) or None
                lf.strs = ((c, minus),)
            if "number" in b.types:
                lf.nums = tuple(dict.fromkeys(_split(_spec(b), [
                    Fraction(repr(e)) if isinstance(e, float) else Fraction(e)
                    for e in ex if isinstance(e, (int, float)) and not isinstance(e, bool)])))
            lf.is_object = "object" in b.types
            lf.is_array = "array" in b.types
        for c, minus in lf.strs:
            self.strs.add(c)
            for v in minus or ():
                self.strs.add(StrClass(values=frozenset([v])))
        for c in lf.nums:
            self.nums.add(c)
        if any(not c.exponent_allowed for c in lf.nums):  # exponent spellings it cannot decide (splits)
            self.nums.add(_PLAIN_NUMBER)
        if lf.is_object:
            lf.names = tuple(dict.fromkeys([n for n, _ in b.props] + list(b.required)))
            for n in lf.names:
                self.keys.add(StrClass(values=frozenset([n])))
            for p, _ in b.pattern_props:
                self.keys.add(StrClass(patterns=(p,)))
        return lf

    # -- the families ------------------------------------------------------------------------
    def collect(self, root: Sub) -> None:
        """Every leaf reachable from `root` (through properties, items and checks) described, so its
        classes are in the families; then the key family is closed (the others when their atoms are
        first needed: most schemas never need them)."""
        self.strs.add(_GENERIC)
        self.nums.add(_NUMBER)
        self.keys.add(_GENERIC)
        seen: set[str] = set()
        todo = [root, _TRUE]  # any value: the regions a product splits values into may need it
        done_leaves = 0
        names: dict[str, Sub] = {}  # propertyNames sub-schemas: their string classes become key classes
        while todo:
            sub = todo.pop()
            if sub.key in seen:
                continue
            seen.add(sub.key)
            self.formula(sub)
            while done_leaves < len(self.leaves):
                b = self.leaves[done_leaves].b
                done_leaves += 1
                todo.extend(s for _, s in b.props)
                todo.extend(s for _, s in b.pattern_props)
                todo.extend(b.prefix)
                todo.extend(s for s, _, _ in b.contains)
                todo.extend(s for s in (b.additional, b.items, b.names) if s is not None)
                if b.unique and "array" in b.types:
                    self.unique_values(b)
                if b.names is not None and "object" in b.types:
                    names.setdefault(b.names.key, b.names)
            if not len(seen) & 255:
                check_deadline("JSON Schema sub-schemas")
        for sub in names.values():
            for i in _vars(self.formula(sub), set()):
                for c, minus in self.leaves[i].strs:
                    self.keys.add(c)
                    for v in minus or ():
                        self.keys.add(StrClass(values=frozenset([v])))
        self.keys.close()  # string values and numbers: on first need of their atoms (_atom_set)

    def unique_values(self, bb: Basic) -> tuple[tuple[str, Sub], ...]:
        """The scalar values (canonical JSON texts, each with a one-value enum) an array's items may take
        under ``uniqueItems``: each item schema's leaves must be enums of scalars, booleans or null (else
        SchemaError: telling any two strings or numbers apart takes a state per value seen). Asked first while
        collecting, so the consts' classes are in the families before they close."""
        got = self.memo.get(("unique", bb))
        if got is not None:
            return got
        ptr = f"{bb.pointer}/uniqueItems"
        if bb.items is None and (bb.max_items is None or bb.max_items > len(bb.prefix)):
            raise SchemaError("uniqueItems", ptr, "uniqueItems: true is compiled only where every item comes from a "
                              "finite set of scalars (an enum, booleans, null); these items may be any value")
        subs = list(bb.prefix) + ([bb.items] if bb.items is not None else [])
        values: dict[str, None] = {}
        for sub in subs:
            for leaf in sorted(_vars(self.formula(sub), set())):
                lb = self.leaves[leaf].b
                if lb.enum is not None and all(not v.startswith(("{", "[")) for v in lb.enum):
                    values.update(dict.fromkeys(lb.enum))
                elif lb.types <= {"boolean", "null"}:
                    values.update(dict.fromkeys(t for t, ty in (("true", "boolean"), ("false", "boolean"),
                                                                ("null", "null")) if ty in lb.types))
                else:
                    raise SchemaError("uniqueItems", ptr, "uniqueItems: true is compiled only where every item comes "
                                      "from a finite set of scalars (an enum, booleans, null)")
        if len(values) > MAX_UNIQUE_VALUES:
            raise SchemaError("uniqueItems", ptr, f"uniqueItems over {len(values)} values: at most "
                              f"{MAX_UNIQUE_VALUES} are compiled")
        out = tuple((v, Sub({"enum": [json.loads(v)]}, ptr)) for v in values)  # (enum: every draft has it)
        for _, c in out:
            self.formula(c)
        self.memo[("unique", bb)] = out
        return out

    def _atom_set(self, fam: Family, c, minus=None) -> frozenset[int]:
        key = (fam.kind, c, minus)
        got = self._atoms.get(key)
        if got is None:
            if not fam.closed:
                fam.close()
            got = self._atoms[key] = frozenset(fam.alternatives(c, minus))
        return got

    def key_atoms(self, names: Sub | None) -> frozenset[int] | None:
        """The key atoms a ``propertyNames`` sub-schema admits (None: every key). Key atoms refine its
        string classes (collect), so each atom is wholly in or out of each leaf."""
        if names is None:
            return None
        key = ("names", names.key)
        got = self.memo.get(key)
        if got is None:
            f = self.formula(names)
            leaves = sorted(_vars(f, set()))
            per = {i: set().union(*(self._atom_set(self.keys, c, minus) for c, minus in self.leaves[i].strs))
                   for i in leaves}
            got = self.memo[key] = frozenset(a for a in self._atom_set(self.keys, _GENERIC)
                                             if _eval(f, {i for i in leaves if a in per[i]}))
        return got

    def _wholes(self, t: _Target, kind: str, attr: str) -> tuple | None:
        """The whole-class symbol of a monotone target's `kind` scalars when they are a union of its
        leaves' own classes (each leaf alone holds the target, and none leaves values out), else None
        (the atoms of a closed family are needed). A whole class is one terminal of its own, lexed apart
        from every other: a value position that admits it needs no run of the family's other classes
        beside each lexeme."""
        terms = _dnf_leaves(t.forms)
        if terms is None:
            return None
        classes: dict = {}
        for term in terms:
            items = getattr(self.leaves[term], attr)
            for item in items:
                c, minus = item if kind == "str" else (item, None)
                if minus:
                    return None
                classes[c] = None
        if not classes:
            return ()
        if len(classes) > MAX_WHOLES:  # a number enum: its values compete as atoms, one lexer run for all
            return None
        for c in classes:
            self.wholes.setdefault((kind, c), None)
        return ("wholes", kind, tuple(classes))

    # -- values ---------------------------------------------------------------------------
    def value(self, sub: Sub) -> str | None:
        """The nonterminal of a sub-schema's values (None: no value)."""
        if _monotone(self.formula(sub)):
            return self.union(sub)
        return self.split_nt((sub,), (True,))

    def union(self, sub: Sub) -> str | None:
        """The values of a sub-schema whose formula is monotone (a union of leaves: no check fails a
        value): each object leaf reads keys in its own order, and leaves that fail are dropped."""
        key = ("union", sub.key)
        if key in self.memo:
            return self.memo[key]
        name = self.memo[key] = self.fresh("v")
        t = _Target((self.formula(sub),), (True,))
        alts = self._scalars(t)
        for kind, cls in (("is_object", _ObjectProduct), ("is_array", _ArrayProduct)):
            members = tuple(i for i in t.leaves if getattr(self.leaves[i], kind))
            if members:
                p = cls(self, members, t.forms, t)
                p.explore()
                nt = p.emit(True)
                if nt is not None:
                    alts.append((nt,))
        if not alts:
            self.memo[key] = None
            return None
        for a in alts:
            self.rule(name, *a)
        return name

    def _scalars(self, t: _Target) -> list[tuple]:
        """The scalar alternatives of a monotone target: literals and the atoms of its leaves."""
        out = []
        leaves = [(i, self.leaves[i]) for i in t.leaves]
        for term, attr in (("NULL", "null"), ("TRUE", "true"), ("FALSE", "false")):
            if t.holds({i for i, lf in leaves if getattr(lf, attr)}):
                out.append((term,))
        for kind, fam, attr in (("str", self.strs, "strs"), ("num", self.nums, "nums")):
            whole = self._wholes(t, kind, attr)
            if whole is not None:
                if whole:
                    out.append((whole,))
                continue
            per = self._leaf_atoms(kind, fam, attr, leaves)
            cands = set().union(*per.values()) if per else set()
            keep = frozenset(a for a in cands if t.holds({i for i, s in per.items() if a in s}))
            if keep:
                out.append((("atoms", kind, keep),))
        return out

    def _leaf_atoms(self, kind: str, fam: Family, attr: str, leaves) -> dict[int, set[int]]:
        per = {}
        for i, lf in leaves:
            items = getattr(lf, attr)
            if items:
                atoms: set[int] = set()
                for item in items:
                    c, minus = item if kind == "str" else (item, None)
                    atoms |= self._atom_set(fam, c, minus)
                per[i] = atoms
        return per

    # -- splitting values by the schemas that accept them -----------------------------------
    def splits(self, subs: tuple[Sub, ...]) -> _Split:
        """Every acceptance vector over `subs` some value has, with what makes each (scalar atoms,
        labelled object and array products)."""
        key = tuple(s.key for s in subs)
        got = self._splits.get(key)
        if got is not None:
            return got
        sp = self._splits[key] = _Split(subs, tuple(self.formula(s) for s in subs))
        forms = sp.forms
        leaves = [(i, self.leaves[i]) for i in sorted(set().union(*(_vars(f, set()) for f in forms)))]

        def vec(acc) -> tuple[bool, ...]:
            return tuple(_eval(f, acc) for f in forms)

        for term, attr in (("NULL", "null"), ("TRUE", "true"), ("FALSE", "false")):
            sp.scalars.setdefault(vec({i for i, lf in leaves if getattr(lf, attr)}), []).append(term)
        for kind, fam, attr, universe in (("str", self.strs, "strs", _GENERIC), ("num", self.nums, "nums", _NUMBER)):
            per = self._leaf_atoms(kind, fam, attr, leaves)
            groups: dict[tuple, set[int]] = {}
            # an exponent spelling (an atom outside the plain numbers) is out of a class written without
            # exponents whatever its value: for the leaves with only such classes it decides nothing, so it
            # goes where every verdict of those leaves gives one vector, or nowhere (narrower, never wider)
            undecided: list[int] = []
            plain, dropped = None, False
            if kind == "num" and _PLAIN_NUMBER in fam._index:
                plain = self._atom_set(fam, _PLAIN_NUMBER)
                undecided = [i for i, lf in leaves if any(not c.exponent_allowed for c in lf.nums)]
            for a in self._atom_set(fam, universe):
                holding = {i for i, s in per.items() if a in s}
                if plain is None or a in plain:
                    groups.setdefault(vec(holding), set()).add(a)
                    continue
                open_ = [i for i in undecided if i not in holding]
                got = {vec(holding | {i for j, i in enumerate(open_) if pick >> j & 1})
                       for pick in range(1 << len(open_))} if len(open_) <= MAX_UNDECIDED else set()
                if len(got) == 1:
                    groups.setdefault(got.pop(), set()).add(a)
                else:
                    dropped = True
            for v, atoms in groups.items():
                # with an atom left out, the others' lexemes are one terminal of their own (whose automaton
                # knows where they end): an atom's class may go on where only the left-out atom does
                sp.scalars.setdefault(v, []).append(("region", kind, frozenset(atoms)) if dropped else
                                                    ("atoms", kind, frozenset(atoms)))
        for kind, cls in (("is_object", _ObjectProduct), ("is_array", _ArrayProduct)):
            members = tuple(i for i, lf in leaves if getattr(lf, kind))
            if members:
                p = cls(self, members, forms, None)
                p.explore()
            else:  # no leaf reads objects (arrays): all of them have one vector
                p = _Uniform(self.any_structure(cls), vec(()))
            sp.products.append(p)
        sp.vectors = set(sp.scalars) | {v for p in sp.products for v in p.labels()}
        sp.done = True
        return sp

    def any_structure(self, cls) -> str | None:
        """Any object (cls _ObjectProduct) or any array."""
        key = ("any", cls.prefix)
        if key not in self.memo:
            f = self.formula(_TRUE)
            p = cls(self, tuple(_vars(f, set())), (f,), _Target((f,), (True,)))
            p.explore()
            self.memo[key] = p.emit(True)
        return self.memo[key]

    def split_nt(self, subs: tuple[Sub, ...], vec: tuple[bool, ...]) -> str | None:
        """The values whose acceptance vector over `subs` is `vec` (None: none). Products are written
        once every product they refer to is explored (:meth:`flush`)."""
        key = ("split", tuple(s.key for s in subs), vec)
        if key in self.memo:
            return self.memo[key]
        sp = self.splits(subs)
        if sp.done and vec not in sp.vectors:
            self.memo[key] = None
            return None
        name = self.memo[key] = self.fresh("s")
        self._pending.append((name, sp, vec))
        return name

    def flush(self) -> None:
        """Write the split nonterminals asked for (each may ask for more)."""
        while self._pending:
            name, sp, vec = self._pending.pop()
            for alt in sp.scalars.get(vec, ()):
                self.rule(name, alt)
            for p in sp.products:
                nt = p.emit(vec)
                if nt is not None:
                    self.rule(name, nt)

    def _split_value(self, wants: list[tuple[int, Sub | None]], possible) -> list[tuple[str, frozenset[int]]]:
        """`wants`: (leaf, the schema its value must satisfy; None: it fails whatever the value). The
        regions of values, each with the leaves it keeps: [(nonterminal, leaves that hold)], only those
        `possible(holding, failing)` allows."""
        subs: dict[str, Sub] = {}
        for _, s in wants:
            if s is not None and not s.is_true() and not s.is_false():
                subs.setdefault(s.key, s)
        order = tuple(subs.values())
        # (uniqueItems' value consts split apart cheaply, as literals: not counted)
        heavy = {s.key for i, s in wants if s is not None and not (isinstance(i, tuple) and i[0] == "u")}
        if len(heavy & subs.keys()) > MAX_SPLIT:
            raise SchemaError("anyOf", order[0].pointer, f"one property's value is decided by {len(order)} different "
                              f"schemas at once; at most {MAX_SPLIT} are compiled")
        everyone = frozenset(i for i, _ in wants)

        def region(ok: dict[str, bool]) -> tuple[frozenset[int], frozenset[int]]:
            hold = frozenset(i for i, s in wants if s is not None and (s.is_true() or ok.get(s.key, False)))
            return hold, everyone - hold

        out = []
        if not order:
            hold, fail = region({})
            if possible(hold, fail):
                out.append((self.value(_TRUE), hold))
            return out
        if len(order) == 1 and _monotone(self.formula(order[0])):  # its own spelling where it holds
            s = order[0]
            for v in (True, False):
                hold, fail = region({s.key: v})
                if possible(hold, fail):
                    nt = self.union(s) if v else self.split_nt(order, (False,))
                    if nt is not None:
                        out.append((nt, hold))
            return out
        sp = self.splits(order)
        vectors = sp.vectors if sp.done else itertools.product((True, False), repeat=len(order))  # recursion
        for vec in vectors:
            hold, fail = region(dict(zip((s.key for s in order), vec)))
            if possible(hold, fail):
                nt = self.split_nt(order, tuple(vec))
                if nt is not None:
                    out.append((nt, hold))
        return out

    def key_symbol(self, name: str) -> tuple:
        return ("atoms", "key", frozenset([self.keys.terminal_index(StrClass(values=frozenset([name])))]))

    def other_keys(self, include: tuple[str, ...], exclude: tuple[str, ...], names: frozenset[str]) -> tuple | None:
        """The key symbol of keys not in `names` matching every pattern of `include` and none of
        `exclude` (None: no such key)."""
        fam = self.keys
        atoms = set(self._atom_set(fam, _GENERIC))
        for p in include:
            atoms &= self._atom_set(fam, StrClass(patterns=(p,)))
        for p in exclude:
            atoms -= self._atom_set(fam, StrClass(patterns=(p,)))
        atoms = {a for a in atoms if not (fam.classes[a].values is not None and fam.classes[a].values <= names)}
        return ("atoms", "key", frozenset(atoms)) if atoms else None

    # -- terminals --------------------------------------------------------------------------
    def finish(self, root: str) -> SchemaGrammar:
        self.flush()
        self._rule_budget()
        names: dict[tuple, str] = {}
        terminals: list[tuple[str, ByteDFA]] = []
        groups: list[int] = []
        # a closed family's atoms compete (the basic lexer's rule: a lexeme is its smallest class), each
        # family in a group of its own; a family no position asked atoms of has none
        for g, (kind, fam) in enumerate((("key", self.keys), ("str", self.strs), ("num", self.nums))):
            if not fam.closed:
                continue
            for i in fam.order:
                c = fam.classes[i]
                names[(kind, i)] = f"{kind.upper()}{len(names)}"
                terminals.append((names[(kind, i)], key_dfa(c, self.ws) if kind == "key" else fam.dfa(c)))
                groups.append(g)
        # whole classes and punctuation: each lexed alone (a group of its own)
        for kind, c in self.wholes:
            names[("whole", kind, c)] = f"W{kind.upper()}{len(names)}"
            terminals.append((names[("whole", kind, c)], self.strs.dfa(c) if kind == "str" else self.nums.dfa(c)))
            groups.append(len(groups) + 3)
        punct = punctuation(self.ws)
        used = {s for _, rhs in self.rules for s in rhs if isinstance(s, str) and s in punct}
        for p in punct:
            if p in used:
                terminals.append((p, punct[p]))
                groups.append(len(groups) + 3)
        rules: list = []
        made: dict = {}
        term_names = {t for t, _ in terminals}

        def sym(x):
            if isinstance(x, str):
                return x
            got = made.get(x)
            if got is None:
                if x[0] == "wholes":
                    alts = [names[("whole", x[1], c)] for c in x[2]]
                elif x[0] == "region":  # atoms as one terminal, lexed alone (splits)
                    alts = [f"WNUM{len(names)}"]
                    names[x] = alts[0]
                    terminals.append((alts[0], self.nums.region_dfa(x[2])))
                    groups.append(len(groups) + 3)
                    term_names.add(alts[0])
                else:
                    _, kind, atoms = x
                    alts = [names[(kind, i)] for i in sorted(atoms)]
                if len(alts) == 1:
                    got = alts[0]
                else:
                    got = self.fresh("cls")
                    rules.extend((got, (a,)) for a in alts)
                made[x] = got
            return got

        resolved = [(lhs, tuple(sym(x) for x in rhs)) for lhs, rhs in self.rules]
        all_rules = _prune([("start", (root,))] + resolved + rules, term_names)
        if not all_rules:
            raise SchemaError("schema", "", "the schema admits no value")
        check_limit("max_rules", len(all_rules), "JSON Schema grammar")
        check_limit("max_terminals", len(terminals), "JSON Schema grammar")
        kept = {lhs for lhs, _ in all_rules}
        guards = {lhs: code for lhs, code in self.guards.items() if lhs in kept}
        return SchemaGrammar(all_rules, terminals, "start", tuple(groups), guards, tuple(self.checks))


@dataclass
class _Split:
    """What :meth:`_Builder.splits` finds for some sub-schemas: their formulas, the scalar alternatives
    per acceptance vector, the labelled object and array products, every vector some value has."""

    subs: tuple
    forms: tuple
    scalars: dict = field(default_factory=dict)
    products: list = field(default_factory=list)
    vectors: set = field(default_factory=set)
    done: bool = False


@dataclass
class _Uniform:
    """Stands for a product where every value has one label (no leaf reads that kind of value)."""

    nt: str | None
    label: tuple

    def labels(self) -> set:
        return {self.label} if self.nt is not None else set()

    def emit(self, label) -> str | None:
        return self.nt if label == self.label else None


class _Product:
    """A product over states (hashable), explored breadth-first, written as FIRST/REST rule chains:
    ``FIRST[s]`` is a non-empty member list from state s, ``REST[s]`` its continuation (a separator and
    a member, or the end). With a target (a monotone one) states that cannot satisfy it are not
    explored and one nonterminal is written; without (labelled), every state is explored and each end
    is labelled by the acceptance vector of ``forms``; :meth:`emit` writes the values of one label.
    Subclasses give the start state, the moves, skips and the leaves holding at an end."""

    open_: str
    close: str
    edge_budget: int | None = None  # past this many edges explore() calls over_budget() and starts again

    def __init__(self, b: _Builder, members: tuple[int, ...], forms: tuple, target: _Target | None):
        self.b, self.members, self.forms, self.t = b, members, forms, target
        self.lf = {i: b.leaves[i] for i in members}
        self.ids: dict = {}
        self.states: list = []
        self.edges: list[tuple[int, tuple, int]] = []  # (from, symbols, to)
        self.skip_edges: list[tuple[int, int]] = []
        self.ends: dict[int, object] = {}  # state -> label where the member list may end
        self.empty: object = None  # the label of the empty object/array (None: not admitted)
        self.made: dict = {}
        self._splits: dict = {}  # split() results
        self._back: dict[int, list[int]] | None = None

    def label(self, holding) -> object:
        if self.t is not None:
            return True if self.t.holds(holding) else None
        return tuple(_eval(f, holding) for f in self.forms)

    def possible(self, failed) -> bool:
        return self.t is None or self.t.possible(set(), failed)

    def labels(self) -> set:
        out = set(self.ends.values())
        if self.empty is not None:
            out.add(self.empty)
        out.discard(None)
        return out

    def sid(self, state) -> int:
        got = self.ids.get(state)
        if got is None:
            got = self.ids[state] = len(self.states)
            self.states.append(state)
            if got >= MAX_PRODUCT_STATES:
                raise SchemaError("anyOf", self.b.leaves[self.members[0]].b.pointer if self.members else "",
                                  f"an object or array whose alternatives need more than {MAX_PRODUCT_STATES} "
                                  "states to tell apart")
        return got

    def explore(self) -> None:
        """Every state from the start, breadth first. Past `edge_budget` edges (or when
        :meth:`over_budget_at_once` says so) :meth:`over_budget` changes the product and it is explored
        again (one frame for all of it: products nest as deep as the schema)."""
        while True:
            self.ids, self.states, self.edges, self.skip_edges, self.ends = {}, [], [], [], {}
            self._back = None  # live()'s reverse edges, once asked
            start = self.start()
            self.empty = self.empty_label(start)
            self.sid(start)
            k = 0
            over = self.edge_budget is not None and self.over_budget_at_once()
            while k < len(self.states) and not over:
                st = self.states[k]
                lab = self.end_label(st)
                if lab is not None:
                    self.ends[k] = lab
                for syms, nxt in self.moves(st):
                    self.edges.append((k, syms, self.sid(nxt)))
                over = self.edge_budget is not None and len(self.edges) > self.edge_budget
                for nxt in self.skips(st):
                    self.skip_edges.append((k, self.sid(nxt)))
                k += 1
                if not k & 255:
                    check_deadline("a JSON Schema object or array")
            if not over and self.settled():
                return
            if over:
                self.over_budget()

    def over_budget_at_once(self) -> bool:
        return False

    def settled(self) -> bool:
        """After a whole exploration: whether it stands (False: the product changed itself, explored again)."""
        return True

    def over_budget(self) -> None:
        """What a product does past its edge budget (then explored again); it must lift the budget."""
        raise AssertionError("a product with an edge budget must say what to do past it")

    def emit(self, label) -> str | None:
        """The nonterminal of the values ending with `label` (None: none)."""
        if label in self.made:
            return self.made[label]
        good = self.live(label)
        if 0 not in good and self.empty != label:
            self.made[label] = None
            return None
        b = self.b
        name = self.made[label] = b.fresh(self.prefix)
        first, rest = f"{name}_f", f"{name}_r"
        if self.empty == label:
            b.rule(name, self.open_, self.close)
        if 0 in good:
            b.rule(name, self.open_, f"{first}0", *self.closing(label), self.close)
        for k in good:
            if self.ends.get(k) == label:
                b.rule(f"{rest}{k}", *self.end_check(k))
        for a, syms, c in self.edges:
            if a in good and c in good:
                syms = self.member(syms)
                b.rule(f"{first}{a}", *syms, f"{rest}{c}")
                b.rule(f"{rest}{a}", "COMMA", *syms, f"{rest}{c}")
        for a, c in self.skip_edges:
            if a in good and c in good:
                b.rule(f"{first}{a}", f"{first}{c}")
                b.rule(f"{rest}{a}", f"{rest}{c}")
        return name

    def live(self, label) -> set[int]:
        """The states from which the member list can end with `label` (edges and skips followed back)."""
        if self._back is None:
            self._back = {}
            for a, _, c in self.edges:
                self._back.setdefault(c, []).append(a)
            for a, c in self.skip_edges:
                self._back.setdefault(c, []).append(a)
        good = {k for k, lab in self.ends.items() if lab == label}
        todo = list(good)
        while todo:
            for a in self._back.get(todo.pop(), ()):
                if a not in good:
                    good.add(a)
                    todo.append(a)
        return good

    def member(self, syms: tuple) -> tuple:
        """The symbols :meth:`emit` writes for a member (a move's symbols)."""
        return syms

    def closing(self, label) -> tuple:
        """Symbols :meth:`emit` writes before the close of a non-empty value with `label`."""
        return ()

    def end_check(self, k: int) -> tuple:
        """Symbols :meth:`emit` writes where the member list ends at end state k."""
        return ()

    def skips(self, st):
        return ()

    def split(self, wants, failed):
        """The regions of a member's value (:meth:`_Builder._split_value`), remembered per product: in any
        property order every state moves on every name, with the same wants for most of them. Pseudo-leaves
        (tuples: an array's ``contains`` and ``uniqueItems`` values) are no leaves of the formulas: what they
        fail decides nothing here."""
        key = (tuple((i, None if s is None else s.key) for i, s in wants), frozenset(failed))
        got = self._splits.get(key)
        if got is None:
            got = self._splits[key] = self.b._split_value(
                wants, lambda h, f: self.possible(failed | {x for x in f if not isinstance(x, tuple)}))
        return got


class _ObjectProduct(_Product):
    """Objects: every leaf reads the keys (its declared properties in order, then additional ones).

    A union (monotone target) lets each leaf read in its own order: state ((position per leaf, -1 in
    the additional properties, -2 failed), count). Otherwise one merged order G for all: state
    (position in G, count, leaves that failed); a skipped property fails the leaves that require it,
    and a failed leaf keeps reading (its verdict is known), so a value is failed only on its content.

    ``property_order="any"``: keys come in any order, state (required names seen, count, leaves that
    failed); a leaf holds at the end if it saw all its required names. A key may come again (each
    value checked against its schema; JSON parsers keep the last): tracking every name seen would take
    2**n states for n names, the required ones alone take 2**r, each with a move per name. An object
    with GUARD_FROM or more required names, or whose product passes what the schema's other objects left
    of MAX_ANY_ORDER_EDGES moves, is *guarded* where it can be: the names :meth:`guardable` picks are
    checked by the parser beside its tables (:class:`~cad_outlines.engine.frontend.parse_tables.ObjectGuards`:
    a member nonterminal per such name marks it seen, an empty rule before the close checks them all) and
    the states track the other required names only; past the budget still, :meth:`full_guardable` guards
    every required name whose values do not tell leaves apart, each end state checking the sets of names its
    label needs (:meth:`_end_masks`). Every guard is kept only where open objects stay live
    (:meth:`settled`). One whose states still pass the budget keeps its declared order (narrower, never
    wider), with a :class:`SchemaOrderWarning`. A grammar whose guarded
    objects overlap an alternative is built again without guards (compile_json_schema); one that asks a
    guarded object for a label its guard cannot decide (:meth:`closing`) is built again guarding only
    objects that must hold. Labelled products (no target) are guarded only past the budget."""

    open_, close, prefix = "LBRACE", "RBRACE", "obj"
    EXTRA, DEAD = -1, -2

    def __init__(self, *a):
        super().__init__(*a)
        lf = self.lf
        self.own = self.t is not None and self.t.monotone and len(self.members) > 1
        # declared properties first, in the members' order, then names only required (as merge orders them:
        # a bare `required` beside a oneOf of `properties` does not move its names ahead)
        self.G = tuple(dict.fromkeys([n for i in self.members for n, _ in lf[i].b.props] +
                                     [n for i in self.members for n in lf[i].names]))
        self.all_names = frozenset(self.G)
        bounds = [lf[i].b.min_props for i in self.members] + \
            [lf[i].b.max_props + 1 for i in self.members if lf[i].b.max_props is not None]
        self.K = max(bounds, default=0)
        self.req = {i: set(lf[i].b.required) for i in self.members}
        self.pos = {i: {n: j for j, n in enumerate(lf[i].names)} for i in self.members}
        self.required = frozenset(n for i in self.members for n in self.req[i])
        self.key_ok = {i: self.b.key_atoms(lf[i].b.names) for i in self.members}  # propertyNames (None: any)
        self.any_order = self.b.any_order
        self.own_declared = self.own
        self.gnames: frozenset[str] = frozenset()  # required names checked beside the parser (guard)
        self.bits: dict = {}  # their key symbols -> bit
        self._members: dict[tuple, tuple] = {}
        self._close: tuple = ()  # the empty rule checking them (closing), once made
        self.unguardable: set[str] = set()  # names a guard could not keep live (settled)
        self.full = False  # guarding every required name it can, each end checking its own (end_masks)
        self.full_tried = False
        self.full_tries = 0  # _end_masks runs
        self.guard_budget = 0  # the moves a guarded product's states may take (guard)
        self.end_masks: dict[int, tuple[int, ...]] = {}  # full: end state -> the guard bit masks its close
        # needs one of
        self._checks: dict[tuple[int, ...], tuple] = {}  # close check rules by masks
        self._needed: dict = {}  # needed() per failed set
        if self.any_order:
            self.own = False  # no order to read in: one merged state for every leaf
            left = self.b.any_order_left  # what the schema's other objects left of MAX_ANY_ORDER_EDGES
            self.edge_budget = self.base_budget = MAX_ANY_ORDER_EDGES_EACH if left is None else left
            if len(self.required) >= GUARD_FROM and self.t is not None:  # (a labelled one: past the budget only)
                names = self.guardable()
                if names:
                    self.guard(names, budget=self.base_budget)  # (what it had unguarded)

    def explore(self) -> None:
        super().explore()
        if self.any_order and self.b.any_order_left is not None:
            self.b.any_order_left -= len(self.edges)

    def over_budget_at_once(self) -> bool:  # (with one leaf already: not explored)
        return 2 ** len(self.required - self.gnames) * len(self.G) > self.edge_budget

    def may_guard(self) -> bool:
        """Guards are allowed (not after _GuardUnsound for a labelled product), and the object has no
        maxProperties (an added name must not use up the room) and, with a target, asks every form to hold."""
        if not self.b.allow_guards or not self.members or (self.t is None and not self.b.labelled_guards):
            return False
        if any(self.lf[i].b.max_props is not None for i in self.members):
            return False
        return self.t is None or all(self.t.vec)

    def guardable(self) -> frozenset[str]:
        """The required names the parser may check (ObjectGuards; empty: none), at most 31 (a frame's
        bits): those *necessary* to every form: with the leaves requiring n failing, every form is false,
        so an object missing n has no label with a true form (the only ones a guarded product writes) and
        the close may refuse it. Whether an open object can always add the guarded names it lacks and still
        end as its state says is checked once the product is explored (:meth:`settled`)."""
        if not self.may_guard():
            return frozenset()
        forms = self.t.forms if self.t is not None else self.forms
        names = [n for n in self.G if n in self.required and n not in self.unguardable and
                 all(_eval3(f, (), {i for i in self.members if n in self.req[i]}) is False for f in forms)][:31]
        if not names or self._too_big(len(self.required) - len(names)):
            return frozenset()  # (the names left in states would pass their budget anyway)
        return frozenset(names)

    def settled(self) -> bool:
        """Guarded: every state that can still end with a label having a true form moves on every guarded
        name to such a state again, so an open object can always add the guarded names it lacks (in any
        order: then it ends as its state says) and masks admit no dead end. Names for which that fails are
        tracked in states instead (never guarded again) and the product is explored again."""
        if not self.guarded:
            return True
        dead = self._end_masks() if self.full else frozenset()
        dead = dead or self._dead_guards()
        if not dead:
            return True
        self.unguardable |= dead
        names = self.gnames - dead
        if names and (self.full or not self._too_big(len(self.required) - len(names))):
            self.guard(names, self.full)
        else:
            self.gnames, self.bits, self.edge_budget = frozenset(), {}, self.base_budget
        self._members.clear()
        return False

    def full_guardable(self) -> frozenset[str]:
        """Past the budget with :meth:`guardable`'s names: every required name (at most 31) that has a value
        every leaf accepts, each end state checking the ones its label needs (:meth:`_end_masks`), so the
        states track only names whose values tell leaves apart (oneOf objects whose branches require names
        of their own: 2**r states otherwise)."""
        if not self.may_guard():
            return frozenset()
        every, names = frozenset(self.members), []
        for n in self.G:
            if n in self.required and n not in self.unguardable:
                key = self.b.key_symbol(n)
                wants = [(i, (self.declared(i, n) if n in self.pos[i] else self.extra(i, n))
                          if self.name_ok(i, key) else None) for i in self.members]
                try:
                    regions = self.split(wants, frozenset())
                except SchemaError:  # (split too finely: tracked, and the exploration says so)
                    continue
                if any(hold >= every for _, hold in regions):
                    names.append(n)  # (a name whose values tell leaves apart is tracked in states)
        return frozenset(names[:31])

    def _end_masks(self) -> frozenset[str]:
        """Full guard: per end state, the sets of guarded names its close needs one of (end_masks), where
        they decide its label exactly: with s the guarded names seen, the object ends with the state's
        label iff s holds one of them all (an up-set: adding names never takes it away), and otherwise has
        no true form (a label the guard never writes; asked for one, the schema is built again: closing).
        Where that fails (or an end has more than 10 distinct sets of guarded names among its leaves), the
        smallest such set is returned, to track in states instead (all of them after 8 tries)."""
        bit = self._name_bits()
        bad: set[str] = set()
        self.full_tries += 1

        def fails(groups) -> None:
            if self.full_tries > 8:
                bad.update(*groups)
            else:
                bad.update(min(groups, key=lambda g: (len(g), sorted(g))))
        for k, lab in self.ends.items():
            seen, c, failed = self.states[k]
            live = [(i, frozenset(self.req[i] & self.gnames)) for i in self.members
                    if i not in failed and self.count_ok(i, c) and self.req[i] - self.gnames <= seen]
            groups = list({g for _, g in live if g})
            if len(groups) > 10:
                fails(groups)
                continue
            verdicts: dict[frozenset, object] = {}
            for pick in range(1 << len(groups)):
                got = frozenset().union(*(g for j, g in enumerate(groups) if pick >> j & 1))
                if got not in verdicts:
                    verdicts[got] = self.label({i for i, g in live if g <= got})
                if not pick & 255:
                    check_deadline("a JSON Schema object's close checks")
            if not (lab is True or (lab is not None and any(lab))):  # no true form: none may have one
                if any(v != lab for v in verdicts.values()):
                    fails(groups)
                continue
            ends_with = [got for got, v in verdicts.items() if v == lab]
            need = [got for got in ends_with if not any(o < got for o in ends_with)]
            if all(any(got >= m for m in need) == (v == lab) and
                   (v == lab or v is None or (v is not True and not any(v))) for got, v in verdicts.items()):
                masks = sorted(sum(1 << bit[n] for n in m) for m in need)
                self.end_masks[k] = () if 0 in masks else tuple(masks)
            else:
                fails(groups)
        return frozenset(bad)

    def _dead_guards(self) -> frozenset[str]:
        """The guarded names some live state cannot move on to a live state (live: it can end with a label
        having a true form)."""
        names = {self.b.key_symbol(n): n for n in self.gnames}
        on: dict[str, list[tuple[int, int]]] = {}
        for a, syms, c in self.edges:
            n = names.get(syms[0])
            if n is not None:
                on.setdefault(n, []).append((a, c))
        dead: set[str] = set()
        for label in set(self.ends.values()):
            if label is None or (label is not True and not any(label)):
                continue
            good = self.live(label)
            for n in self.gnames - dead:
                if not good <= {a for a, c in on.get(n, ()) if c in good}:
                    dead.add(n)
        return frozenset(dead)

    def _too_big(self, tracked: int) -> bool:
        """A guarded product tracking `tracked` required names in states passes its own budget at once."""
        return tracked > 0 and 2 ** tracked * len(self.G) > 4 * MAX_ANY_ORDER_EDGES_EACH

    @property
    def guarded(self) -> bool:
        return bool(self.gnames)

    def guard(self, names: frozenset[str], full: bool = False, budget: int | None = None) -> None:
        """Check `names` (:meth:`guardable`, or `full`: :meth:`full_guardable`) beside the parser from now
        on; the states track the others, within `budget` moves (None: the one it had when first guarded;
        past the budget, its own: MAX_ANY_ORDER_EDGES_EACH, fixed: one grammar per schema)."""
        self.gnames, self.full, self.end_masks = names, full, {}
        if budget is not None or not self.guard_budget:
            self.guard_budget = budget if budget is not None else MAX_ANY_ORDER_EDGES_EACH
        self.edge_budget = None if names == self.required else self.guard_budget  # (none in states: none)
        self.bits = {self.b.key_symbol(n): j for n, j in self._name_bits().items()}

    def _name_bits(self) -> dict[str, int]:
        """The guarded names' frame bits (in declared order)."""
        return {n: j for j, n in enumerate(n for n in self.G if n in self.gnames)}

    def over_budget(self) -> None:
        ptr = self.lf[self.members[0]].b.pointer if self.members else ""
        names = frozenset() if self.guarded else self.guardable()
        if names:
            self.guard(names)
            return
        if not self.full_tried:
            self.full_tried = True
            names = self.full_guardable()
            if names:
                self.guard(names, full=True)
                return
        self.gnames, self.bits, self.full = frozenset(), {}, False
        warnings.warn(f"JSON Schema object at {ptr or '#'!r}: its {len(self.G)} properties ({len(self.required)} "
                      f"required) in any order take over the {self.edge_budget} moves between parser states it may "
                      "take; this object keeps its declared property order", SchemaOrderWarning, stacklevel=2)
        self.any_order, self.own, self.edge_budget = False, self.own_declared, None

    def member(self, syms: tuple) -> tuple:
        """Guarded: a required name's member is a nonterminal whose reduction marks the name seen."""
        bit = self.bits.get(syms[0]) if self.guarded else None
        if bit is None:
            return syms
        got = self._members.get(syms)
        if got is None:
            m = self.b.fresh("gm")
            self.b.rule(m, *syms)
            self.b.guards[m] = bit + 1
            got = self._members[syms] = (m,)
        return got

    def closing(self, label) -> tuple:
        """Guarded: an empty rule reduced before the close, which checks every guarded name was seen. A
        label with no true form is not decided by it (an object missing a guarded name may have it):
        _GuardUnsound, the schema is built again with no labelled product guarded."""
        if not self.guarded:
            return ()
        if label is not True and not any(label):
            raise _GuardUnsound
        if self.full:  # each end checks its own names (end_check)
            return ()
        if not self._close:  # one for all the product's labels
            self._close = self._check(((1 << len(self.bits)) - 1,))
        return self._close

    def end_check(self, k: int) -> tuple:
        """Full guard: the empty rule ending the member list at end state k, checking the guarded names
        its label needs (end_masks)."""
        return self._check(self.end_masks.get(k, ())) if self.full else ()

    def _check(self, masks: tuple[int, ...]) -> tuple:
        """An empty rule whose reduction checks the innermost object has seen every name of one of `masks`
        (guard bits; none: no rule)."""
        if not masks:
            return ()
        got = self._checks.get(masks)
        if got is None:
            gc = self.b.fresh("gc")
            self.b.rule(gc)
            self.b.guards[gc] = -1 - self.b.checks.setdefault(masks, len(self.b.checks))
            got = self._checks[masks] = (gc,)
        return got

    # values a leaf asks of a property ----------------------------------------------------
    def declared(self, i: int, n: str) -> Sub:
        b = self.lf[i].b
        s = b.prop(n)
        parts = [s] if s is not None else []
        parts += [ps for p, ps in b.pattern_props if _search(p, n)]
        if not parts:
            return b.additional if b.additional is not None else _TRUE
        return _conj(parts)

    def extra(self, i: int, n: str | None, matched: frozenset[str] = frozenset()) -> Sub:
        """Leaf i's schema for an additional property named n (or, n None, of a key matching exactly the
        patterns `matched`)."""
        b = self.lf[i].b
        hits = [ps for p, ps in b.pattern_props if (_search(p, n) if n is not None else p in matched)]
        if hits:
            return _conj(hits)
        return b.additional if b.additional is not None else _TRUE

    def count_ok(self, i: int, c: int) -> bool:
        b = self.lf[i].b
        return c >= b.min_props and (b.max_props is None or c <= b.max_props)

    def fits(self, i: int, c: int) -> bool:
        """Leaf i admits one more property after c."""
        m = self.lf[i].b.max_props
        return m is None or c + 1 <= m

    def start(self):
        if self.own:
            return (tuple(0 for _ in self.members), 0)
        return (frozenset() if self.any_order else 0, 0, frozenset())

    def end_label(self, st):
        if self.any_order:
            seen, c, failed = st  # the guarded names taken as seen (the parser checks them at the close)
            return self.label({i for i in self.members if i not in failed and self.count_ok(i, c) and
                               self.req[i] <= seen | self.gnames})
        if self.own:
            pos, c = st
            return self.label({i for i, p in zip(self.members, pos) if p != self.DEAD and self.count_ok(i, c) and
                               (p == self.EXTRA or not any(n in self.req[i] for n in self.lf[i].names[p:]))})
        p, c, failed = st
        if p < len(self.G):
            return None
        return self.label({i for i in self.members if i not in failed and self.count_ok(i, c)})

    def empty_label(self, st):
        if self.guarded:  # no guarded name seen: the leaves requiring one fail
            return self.label({i for i in self.members if self.count_ok(i, 0) and not self.req[i]})
        if not self.own and not self.any_order:  # skip every declared property
            while st[0] < len(self.G):
                st = self._skip(st)
        return self.end_label(st)

    def _skip(self, st):
        p, c, failed = st
        n = self.G[p]
        return (p + 1, c, failed | {i for i in self.members if n in self.req[i]})

    def skips(self, st):
        if self.own or self.any_order or st[0] >= len(self.G):
            return ()
        nxt = self._skip(st)
        return (nxt,) if self.possible(nxt[2]) else ()

    def moves(self, st):
        return self._own_moves(st) if self.own else self._merged_moves(st)

    def _merged_moves(self, st):
        """Moves of the merged state: (position in G, or in any order the required names seen; count;
        leaves that failed). In order, the next declared name, then (past G) the other keys; in any
        order, every name and the other keys at once."""
        at, c, failed = st
        c2 = min(c + 1, self.K)
        alive = [i for i in self.members if i not in failed]
        out = []

        def add(key, wants, nxt):
            for val, hold in self.split(wants, failed):
                f2 = failed | (frozenset(alive) - hold)
                # in any order, names no live leaf requires are forgotten (failed leaves stay failed)
                out.append(((key, val), (nxt & self.needed(f2) if self.any_order and nxt else nxt, c2, f2)))

        if self.any_order:
            names = [(n, at | {n} if n in self.required and n not in self.gnames else at) for n in self.G]
        else:
            names = [(self.G[at], at + 1)] if at < len(self.G) else []
        for n, nxt in names:
            key = self.b.key_symbol(n)
            add(key, [(i, (self.declared(i, n) if n in self.pos[i] else self.extra(i, n))
                       if self.fits(i, c) and self.name_ok(i, key) else None) for i in alive], nxt)
        if self.any_order or at >= len(self.G):
            for inc, key, ok in self._other_keys(alive):
                add(key, [(i, self.extra(i, None, inc) if self.fits(i, c) and i in ok else None) for i in alive], at)
        return out

    def needed(self, failed: frozenset) -> frozenset:
        """The required names some leaf not in `failed` requires (the only ones a state must remember)."""
        got = self._needed.get(failed)
        if got is None:
            got = self._needed[failed] = frozenset(n for i in self.members if i not in failed for n in self.req[i])
        return got

    def name_ok(self, i: int, key: tuple) -> bool:
        """Leaf i's propertyNames admit the key symbol's atoms (all of them: a name's symbol has one)."""
        ok = self.key_ok[i]
        return ok is None or key[2] <= ok

    def _own_moves(self, st):
        pos, c = st
        alive = [(i, p) for i, p in zip(self.members, pos) if p != self.DEAD]
        c2 = min(c + 1, self.K)
        out = []

        def go(wants, nxt_pos, key):
            dead = {i for i in self.members if nxt_pos.get(i, self.DEAD) == self.DEAD}
            for val, hold in self.split(wants, dead):
                new = tuple(nxt_pos.get(i, self.DEAD) if i in hold else self.DEAD for i in self.members)
                if any(x != self.DEAD for x in new):
                    out.append(((key, val), (new, c2)))

        for n in self.G:
            wants, nxt_pos = [], {}
            key = self.b.key_symbol(n)
            for i, p in alive:
                j = self.pos[i].get(n)
                names = self.lf[i].names
                if j is not None:
                    ok = p != self.EXTRA and j >= p and not any(x in self.req[i] for x in names[p:j])
                    ok = ok and self.name_ok(i, key)
                    nxt_pos[i] = j + 1 if ok else self.DEAD
                    wants.append((i, self.declared(i, n) if ok else None))
                else:
                    ok = (p == self.EXTRA or not any(x in self.req[i] for x in names[p:])) and self.name_ok(i, key)
                    nxt_pos[i] = self.EXTRA if ok else self.DEAD
                    wants.append((i, self.extra(i, n) if ok else None))
            if any(s is not None for _, s in wants):
                go(wants, nxt_pos, key)
        for inc, key, admitted in self._other_keys([i for i, _ in alive]):
            wants, nxt_pos = [], {}
            for i, p in alive:
                ok = (p == self.EXTRA or not any(x in self.req[i] for x in self.lf[i].names[p:])) and i in admitted
                nxt_pos[i] = self.EXTRA if ok else self.DEAD
                wants.append((i, self.extra(i, None, inc) if ok else None))
            if any(s is not None for _, s in wants):
                go(wants, nxt_pos, key)
        return out

    def _other_keys(self, alive):
        """(patterns matched, key symbol, leaves whose propertyNames admit it) for the keys no leaf
        declares, by the patterns they match and the propertyNames that admit them."""
        pats = sorted({pat for i in alive for pat, _ in self.lf[i].b.pattern_props})
        if len(pats) > MAX_PATTERNS:
            raise SchemaError("patternProperties", self.lf[alive[0]].b.pointer + "/patternProperties",
                              f"{len(pats)} patterns to tell apart in one object; at most {MAX_PATTERNS} are compiled")
        named = [i for i in alive if self.key_ok[i] is not None]
        for k in range(len(pats) + 1):
            for inc in itertools.combinations(pats, k):
                key = self.b.other_keys(inc, tuple(p for p in pats if p not in inc), self.all_names)
                if key is None:
                    continue
                if not named:
                    yield frozenset(inc), key, frozenset(alive)
                    continue
                groups: dict[frozenset, set] = {}
                for a in key[2]:
                    groups.setdefault(frozenset(i for i in alive if i not in named or a in self.key_ok[i]),
                                      set()).add(a)
                for admitted, atoms in sorted(groups.items(), key=lambda g: min(g[1])):
                    yield frozenset(inc), ("atoms", "key", frozenset(atoms)), admitted


class _ArrayProduct(_Product):
    """Arrays: state (items read, capped where every leaf's bounds are decided; leaves that failed; per
    ``contains`` of a leaf, the items that matched it, capped past its bounds). An item's value is split by
    the leaves' item schemas and their ``contains`` schemas at once (each ``contains`` a pseudo-leaf
    ``("c", slot)`` of the split: held where the item matches). ``uniqueItems`` over a finite set of scalars:
    the values seen so far, each value a pseudo-leaf ``("u", slot, value)`` (a const) of the split."""

    open_, close, prefix = "LSQB", "RSQB", "arr"

    def __init__(self, *a):
        super().__init__(*a)
        bounds = [1]
        self.slots: list[tuple[int, Sub, int, int | None]] = []  # (leaf, contains schema, min, max)
        self.uniq: list[tuple[int, tuple[tuple[str, Sub], ...]]] = []  # (leaf, its items' values as consts)
        for i in self.members:
            bb = self.lf[i].b
            bounds += [len(bb.prefix), bb.min_items] + ([bb.max_items + 1] if bb.max_items is not None else [])
            self.slots += [(i, c, lo, hi) for c, lo, hi in bb.contains]
            if bb.unique:
                self.uniq.append((i, self.b.unique_values(bb)))
        self.K = max(bounds)

    def start(self):
        return (0, frozenset(), (0,) * len(self.slots), (frozenset(),) * len(self.uniq))

    def item(self, i: int, k: int) -> Sub | None:
        bb = self.lf[i].b
        if bb.max_items is not None and k >= bb.max_items:
            return None
        if k < len(bb.prefix):
            return bb.prefix[k]
        return bb.items if bb.items is not None else _TRUE

    def end_label(self, st):
        k, failed, counts, _ = st
        short = {i for (i, _, lo, _), n in zip(self.slots, counts) if n < lo}
        return self.label({i for i in self.members if i not in failed and i not in short and
                           k >= self.lf[i].b.min_items})

    def empty_label(self, st):
        return self.end_label(st)

    def moves(self, st):
        k, failed, counts, seen = st
        alive = [i for i in self.members if i not in failed]
        wants = [(i, self.item(i, k)) for i in alive]
        wants += [(("c", j), c) for j, (i, c, _, _) in enumerate(self.slots) if i not in failed]
        wants += [(("u", j, v), c) for j, (i, vals) in enumerate(self.uniq) if i not in failed for v, c in vals]
        out = []
        for val, hold in self.split(wants, failed):
            f2 = failed | (frozenset(alive) - hold)
            c2 = list(counts)
            for j, (i, _, lo, hi) in enumerate(self.slots):
                if ("c", j) in hold:
                    c2[j] = min(counts[j] + 1, lo if hi is None else hi + 1)
                    if hi is not None and c2[j] > hi:
                        f2 |= {i}
            s2 = list(seen)
            for j, (i, vals) in enumerate(self.uniq):
                for v, _ in vals:
                    if ("u", j, v) in hold:  # the item is v (at most one v holds)
                        if v in seen[j]:
                            f2 |= {i}
                        s2[j] = seen[j] | {v}
            out.append(((val,), (min(k + 1, self.K), f2, tuple(c2), tuple(s2))))
        return out



def _conj(parts: list[Sub]) -> Sub:
    parts = [p for p in dict.fromkeys(parts) if not p.is_true()]
    if not parts:
        return _TRUE
    if len(parts) == 1:
        return parts[0]
    flat = []
    for p in parts:
        flat.extend(p.parts or (p,))
    return Sub(None, parts[0].pointer, tuple(dict.fromkeys(flat)))


def _prune(rules: list[tuple[str, tuple]], terminals: set[str]) -> list[tuple[str, tuple]]:
    """The rules whose symbols all derive some text, reachable from ``start``."""
    # productive: a worklist over the count of each rule's symbols not yet known to derive text
    missing = []
    uses: dict[str, list[int]] = {}
    todo: list[str] = []
    productive: set[str] = set()
    for i, (lhs, rhs) in enumerate(rules):
        syms = {x for x in rhs if x not in terminals}
        missing.append(len(syms))
        for x in syms:
            uses.setdefault(x, []).append(i)
        if not syms and lhs not in productive:
            productive.add(lhs)
            todo.append(lhs)
    while todo:
        for i in uses.get(todo.pop(), ()):
            missing[i] -= 1
            lhs = rules[i][0]
            if not missing[i] and lhs not in productive:
                productive.add(lhs)
                todo.append(lhs)
    if "start" not in productive:
        return []
    rules = [(lhs, rhs) for lhs, rhs in rules if lhs in productive and all(x in terminals or x in productive
                                                                            for x in rhs)]
    by_lhs: dict[str, list] = {}
    for lhs, rhs in rules:
        by_lhs.setdefault(lhs, []).append(rhs)
    seen, todo = {"start"}, ["start"]
    while todo:
        for rhs in by_lhs.get(todo.pop(), ()):
            for x in rhs:
                if x not in terminals and x not in seen:
                    seen.add(x)
                    todo.append(x)
    return [(lhs, rhs) for lhs, rhs in rules if lhs in seen]


class _GuardUnsound(Exception):
    """A guarded object asked for a label its guard cannot decide (_ObjectProduct.closing): built again
    with guards for the objects that must hold only (a labelled product is never guarded then)."""


class _TooManyRules(Exception):
    """A build whose any-order objects, within the schema's budget, made over MAX_ANY_ORDER_RULES rules."""


def _build(doc: SchemaDoc, ws: str, property_order: str, root: Sub, any_order_budget: int | None,
           guards: bool, labelled_guards: bool = True) -> SchemaGrammar:
    b = _Builder(doc, ws, property_order, any_order_budget, guards, labelled_guards)
    b.collect(root)
    top = b.value(root)
    if top is None:
        raise SchemaError("schema", "", "the schema admits no value")
    return b.finish(top)


MAX_LENGTH_BOUND = 4096  # minLength/maxLength above this are refused: the automaton counts every character
MAX_COUNTED_CHARS = 16_384  # the distinct length bounds of one schema, summed (~13 lexer states a character)


def _check_length(b: Basic, counted: set[int]) -> None:
    """Refuse a length bound the string automata cannot count within the limits; `counted`: the
    schema's distinct bounds so far (each takes an automaton state per character)."""
    for k, v in (("minLength", b.min_len), ("maxLength", b.max_len)):
        if v is None:
            continue
        if v > MAX_LENGTH_BOUND:
            raise SchemaError(k, b.pointer, f"{k} {v} is above {MAX_LENGTH_BOUND}: the string automaton counts "
                              "every character, so longer bounds are not compiled")
        counted.add(v)
        if sum(counted) > MAX_COUNTED_CHARS:
            raise SchemaError(k, b.pointer, f"the schema's distinct string length bounds sum to {sum(counted)}, above "
                              f"{MAX_COUNTED_CHARS}: the string automata count every character of each")


def _spec(b: Basic) -> NumberSpec:
    return NumberSpec(b.integer, b.lo, b.lo_strict, b.hi, b.hi_strict, b.multiple, b.whole)


def _split(spec: NumberSpec, excluded: list[Fraction]) -> list[NumberSpec]:
    """`spec` minus the excluded values, as specs with strict bounds around each."""
    out = [spec]
    for x in excluded:
        nxt = []
        for s in out:
            if not s.contains(x):
                nxt.append(s)
                continue
            nxt.append(NumberSpec(s.integer, s.lo, s.lo_strict, x, True, s.multiple, s.whole))
            nxt.append(NumberSpec(s.integer, x, True, s.hi, s.hi_strict, s.multiple, s.whole))
        out = nxt
    return [s for s in out if not s.empty()]


@functools.lru_cache(maxsize=65536)
def _search(pattern: str, s: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return re.search(pattern, s) is not None


def build_grammar(schema, *, whitespace: str = "outlines", coerce_one_of: bool = False,
                  property_order: str = "declared", guards: bool = True) -> SchemaGrammar:
    """The grammar of a JSON Schema (a dict or bool). `whitespace`: "outlines" (an optional space
    around punctuation, as Outlines), "flexible" (any JSON whitespace, as llguidance), "compact"
    (none), or a regex for the whitespace at each place JSON allows it. `property_order`:
    "declared" (an object's declared properties in schema order, as Outlines and llguidance) or
    "any" (:class:`_ObjectProduct`). `guards`: objects' required names may be checked beside the parser
    (:class:`~cad_outlines.engine.frontend.parse_tables.ObjectGuards`), an object that must hold at once from
    GUARD_FROM required names, any past the budget."""
    if property_order not in PROPERTY_ORDERS:
        raise ValueError(f"property_order must be one of {PROPERTY_ORDERS}, not {property_order!r}")
    ws = WHITESPACE.get(whitespace, whitespace)
    doc = SchemaDoc(schema, coerce_one_of=coerce_one_of)
    root = Sub(schema, "")
    try:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always", SchemaOrderWarning)
            def attempt(labelled: bool) -> SchemaGrammar:
                try:
                    return _build(doc, ws, property_order, root, MAX_ANY_ORDER_EDGES, guards, labelled)
                except (_TooManyRules, SchemaError) as e:
                    # too many rules, or merged any-order states that split a value too finely ("anyOf"): each
                    # object then gets its own smaller budget (others' keyword errors come again, as they were)
                    if isinstance(e, SchemaError) and (property_order != "any" or e.keyword != "anyOf"):
                        raise
                    warned.clear()  # (of the first build)
                    return _build(doc, ws, property_order, root, None, guards, labelled)

            try:
                out = attempt(True)
            except _GuardUnsound:  # a labelled object's guard asked for a label it cannot decide: only the
                warned.clear()  # objects that must hold are guarded (their guards decide every label asked)
                out = attempt(False)
        for w in warned:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return out
    except RecursionError:
        raise SchemaError("schema", "", "its sub-schemas nest too deeply to compile: each level of nesting (or of a "
                          "recursive $ref whose constraints differ from level to level) is a level of the front "
                          f"end's recursion, and Python's limit of {sys.getrecursionlimit()} was reached") from None

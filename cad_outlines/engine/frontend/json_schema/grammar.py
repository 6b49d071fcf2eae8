"""Normalized schema -> BNF rules and terminals for this engine (one rule per sub-schema).

:class:`SchemaGrammar` is what the compile driver needs: lark-style rules, the terminals as byte
DFAs in lexer order, the start symbol. Rules are built directly (no grammar text is written and
parsed again). Layout, for a value ``v`` of one sub-schema:

- scalars: ``v -> T`` for each terminal of its string/number classes (:mod:`.lexicon`), ``TRUE``,
  ``FALSE``, ``NULL``;
- an object: its declared properties in schema order (llguidance's order, which MaskBench follows),
  each optional one skippable, then its additional properties (``additionalProperties``,
  ``patternProperties``) in any order and number; ``minProperties``/``maxProperties`` count along
  the chain;
- an array: ``prefixItems`` then ``items``, ``minItems``/``maxItems`` counted, a left-recursive tail
  when unbounded.

Whitespace lives inside the punctuation terminals (``LBRACE`` is ``{`` and the whitespace after it),
so whitespace costs no parser step.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from fractions import Fraction

from lark.grammar import NonTerminal, Rule, RuleOptions, Terminal

from ....errors import SchemaError
from ....limits import check_deadline, check_limit
from ..automata import ByteDFA
from .lexicon import Family, StrClass, key_dfa, punctuation
from .numbers import NumberSpec
from .schema import Basic, SchemaDoc, Sub, _extra_for, conj

__all__ = ["SchemaGrammar", "build_grammar", "WHITESPACE"]

WHITESPACE = {"outlines": "[ ]?", "flexible": r"[ \t\n\r]*", "compact": ""}
_GENERIC = StrClass()
_NUMBER = NumberSpec()


@dataclass
class SchemaGrammar:
    """A schema's grammar: ``rule_list`` ((name, expansion names) pairs), ``terminals`` ((name, ByteDFA)
    in the basic lexer's order), ``start`` (the start rule's name); ``rules``: the same rules as lark
    ``Rule`` objects (built on first use: the eager store's analyses read them, a lazy compile does not)."""

    rule_list: list[tuple[str, tuple[str, ...]]]
    terminals: list[tuple[str, ByteDFA]]
    start: str

    @functools.cached_property
    def rules(self) -> list:
        names = {t for t, _ in self.terminals}
        return [Rule(NonTerminal(lhs), [Terminal(x) if x in names else NonTerminal(x) for x in rhs],
                     options=RuleOptions()) for lhs, rhs in self.rule_list]


class _Builder:
    def __init__(self, doc: SchemaDoc, ws: str):
        self.doc = doc
        self.ws = ws
        self.rules: list[tuple[str, tuple]] = []  # (lhs, rhs); rhs items: str (nonterminal/punct) or tuple
        self.memo: dict[str, str | None] = {}
        self.keys = Family("key")
        self.strs = Family("str")
        self.nums = Family("num")
        self.n = 0
        self.unions: dict = {}

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def rule(self, lhs: str, *rhs) -> None:
        self.rules.append((lhs, rhs))
        if not len(self.rules) & 1023:
            check_deadline("JSON Schema rules")
            check_limit("max_rules", len(self.rules), "JSON Schema grammar")

    # -- values ---------------------------------------------------------------------------
    def value(self, sub: Sub) -> str | None:
        """The nonterminal of a sub-schema's values (None: no value)."""
        key = sub.key
        if key in self.memo:
            return self.memo[key]
        name = self.fresh("v")
        self.memo[key] = name
        alts = self._alternatives(self.doc.basics(sub), sub.pointer)
        if not alts:
            self.memo[key] = None
            return None
        for a in alts:
            self.rule(name, *a)
        return name

    def _alternatives(self, basics: list[Basic], ptr: str) -> list[tuple]:
        scalars: dict = {}
        strs: list = []
        nums: list = []
        structured: list[tuple] = []
        for b in basics:
            if b.enum is not None:
                self._enum(b, scalars, strs, nums, structured, ptr)
                continue
            ex = [json.loads(v) for v in b.exclude]
            if "null" in b.types and None not in ex:
                scalars["NULL"] = None
            if "boolean" in b.types:
                for t, v in (("TRUE", True), ("FALSE", False)):
                    if not any(e is v for e in ex):
                        scalars[t] = None
            if "string" in b.types:
                _check_length(b)
                c = StrClass(min_len=b.min_len, max_len=b.max_len, patterns=b.patterns, formats=b.formats)
                xs = frozenset(e for e in ex if isinstance(e, str))
                strs.append((c, xs or None))
            if "number" in b.types:
                nums.extend(_split(_spec(b), [Fraction(repr(e)) if isinstance(e, float) else Fraction(e)
                                              for e in ex if isinstance(e, (int, float)) and not isinstance(e, bool)]))
            if "object" in b.types:
                o = self.object(b)
                if o is not None:
                    structured.append((o,))
            if "array" in b.types:
                a = self.array(b)
                if a is not None:
                    structured.append((a,))
        out = [(t,) for t in scalars]
        if strs:
            out.append((("str", tuple(strs)),))
        if nums:
            out.append((("num", tuple(dict.fromkeys(nums))),))
        out.extend(dict.fromkeys(structured))
        return out

    def _enum(self, b: Basic, scalars, strs, nums, structured, ptr) -> None:
        constrained = StrClass(min_len=b.min_len, max_len=b.max_len, patterns=b.patterns, formats=b.formats)
        spec = _spec(b)
        keep_s = []
        for text in b.enum:
            if text in b.exclude:
                continue
            v = json.loads(text)
            if v is None and "null" in b.types:
                scalars["NULL"] = None
            elif isinstance(v, bool) and "boolean" in b.types:
                scalars["TRUE" if v else "FALSE"] = None
            elif isinstance(v, str) and "string" in b.types and constrained.contains(v):
                keep_s.append(v)
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and "number" in b.types:
                x = Fraction(repr(v)) if isinstance(v, float) else Fraction(v)
                if spec.contains(x):
                    nums.append(NumberSpec(False, x, False, x, False, None))
            elif isinstance(v, (dict, list)) and ("object" if isinstance(v, dict) else "array") in b.types:
                if isinstance(v, dict) and (b.props or b.required or b.additional is not None or b.pattern_props
                                            or b.min_props or b.max_props is not None):
                    raise SchemaError("enum", ptr, "an enum of objects beside object keywords is not supported")
                if isinstance(v, list) and (b.prefix or b.items is not None or b.min_items or
                                            b.max_items is not None):
                    raise SchemaError("enum", ptr, "an enum of arrays beside array keywords is not supported")
                structured.append((self.literal(v),))
        if keep_s:
            strs.append((StrClass(values=frozenset(keep_s)), None))

    def literal(self, v) -> str:
        """A nonterminal for exactly the JSON value `v` (its members in the order given)."""
        key = "lit:" + json.dumps(v, sort_keys=False, ensure_ascii=False)
        if key in self.memo:
            return self.memo[key]
        name = self.memo[key] = self.fresh("lit")
        if isinstance(v, dict):
            body = ["LBRACE"]
            for i, (k, x) in enumerate(v.items()):
                if i:
                    body.append("COMMA")
                body += [self._key_symbol(StrClass(values=frozenset([k]))), self._literal_symbol(x)]
            self.rule(name, *body, "RBRACE")
        elif isinstance(v, list):
            body = ["LSQB"]
            for i, x in enumerate(v):
                if i:
                    body.append("COMMA")
                body.append(self._literal_symbol(x))
            self.rule(name, *body, "RSQB")
        else:
            self.rule(name, self._literal_symbol(v))
        return name

    def _literal_symbol(self, x):
        if x is None:
            return "NULL"
        if isinstance(x, bool):
            return "TRUE" if x else "FALSE"
        if isinstance(x, str):
            return ("str", ((StrClass(values=frozenset([x])), None),))
        if isinstance(x, (int, float)):
            f = Fraction(repr(x)) if isinstance(x, float) else Fraction(x)
            return ("num", (NumberSpec(False, f, False, f, False, None),))
        return self.literal(x)

    def _key_symbol(self, c: StrClass, minus: frozenset | None = None):
        return ("key", c, minus)

    # -- objects --------------------------------------------------------------------------
    def object(self, b: Basic) -> str | None:
        declared: list[tuple[str, str | None]] = []
        names = [n for n, _ in b.props] + [r for r in b.required if b.prop(r) is None]
        for n in names:
            s = b.prop(n)
            if s is None:
                s = _extra_for(b, n) or Sub(True, b.pointer)
            else:  # a declared property also obeys every patternProperties entry matching its name
                for p, ps in b.pattern_props:
                    if _search(p, n):
                        s = conj(s, ps) or s
            declared.append((n, self.value(s)))
        required = set(b.required)
        for n, v in declared:
            if v is None and n in required:
                return None  # a required property that admits no value
        declared = [(n, v) for n, v in declared if v is not None]
        extras = self._extras(b, {n for n in names})
        name = self.fresh("obj")
        maxp, minp = b.max_props, b.min_props
        cap = maxp if maxp is not None else minp
        k = len(declared)
        opt = [n not in required for n, _ in declared]

        def nn(i: int) -> str:
            return f"{name}_n{i}"

        def ss(i: int, c: int) -> str:
            return f"{name}_s{i}_{c}"

        made: set[str] = set()
        todo_s: list[tuple[int, int]] = []

        def want_s(i: int, c: int) -> str:
            c = min(c, cap) if maxp is None else c
            if (i, c) not in made:
                made.add((i, c))
                todo_s.append((i, c))
            return ss(i, c)

        # N_i: nothing written yet
        for i in range(k):
            pname, pv = declared[i]
            if maxp is None or maxp >= 1:
                self.rule(nn(i), self._key_symbol(StrClass(values=frozenset([pname]))), pv, want_s(i + 1, 1))
            if opt[i]:
                self.rule(nn(i), nn(i + 1))
        has_n_end = bool(extras) and (maxp is None or maxp >= 1)
        for key_sym, val in extras if has_n_end else ():
            self.rule(nn(k), key_sym, val, want_s(k, 1))
        while todo_s:
            i, c = todo_s.pop()
            lhs = ss(i, c)
            if i < k:
                pname, pv = declared[i]
                if maxp is None or c + 1 <= maxp:
                    self.rule(lhs, "COMMA", self._key_symbol(StrClass(values=frozenset([pname]))), pv,
                              want_s(i + 1, c + 1))
                if opt[i]:
                    self.rule(lhs, want_s(i + 1, c))
            else:
                if c >= minp:
                    self.rule(lhs)
                if maxp is None or c + 1 <= maxp:
                    for key_sym, val in extras:
                        self.rule(lhs, "COMMA", key_sym, val, want_s(k, c + 1))
        # the object itself; N_k exists only with extras
        reachable_n = k > 0 or has_n_end  # N_0 derives something: a property, or the extras
        if all(opt) and minp == 0:
            self.rule(name, "LBRACE", "RBRACE")
        if reachable_n:
            self.rule(name, "LBRACE", nn(0), "RBRACE")
        elif not (all(opt) and minp == 0):
            return None
        return name

    def _extras(self, b: Basic, declared: set[str]) -> list[tuple]:
        """(key symbol, value nonterminal) for the properties beyond the declared ones."""
        out = []
        minus = frozenset(declared) or None
        covered: list[StrClass] = []
        for p, s in b.pattern_props:
            v = self.value(s)
            c = StrClass(patterns=(p,))
            if _overlapping_pattern(b, p):
                raise SchemaError("patternProperties", f"{b.pointer}/patternProperties", "patterns that may "
                                  "match one key together are not supported")
            covered.append(c)
            if v is not None:
                out.append((("key", c, minus), v))
        add = b.additional
        if add is None or not add.is_false():
            v = self.value(add or Sub(True, b.pointer))
            if v is not None:
                out.append((("key", _GENERIC, minus, tuple(covered)), v))
        return out

    # -- arrays ---------------------------------------------------------------------------
    def array(self, b: Basic) -> str | None:
        prefix = [self.value(s) for s in b.prefix]
        rest = self.value(b.items) if b.items is not None else self.value(Sub(True, b.pointer))
        mn, mx = b.min_items, b.max_items

        def item(i: int) -> str | None:
            return prefix[i] if i < len(prefix) else rest

        # the longest array possible: up to the first item that admits no value
        limit = mx
        for i in range(len(prefix) + 1):
            if item(i) is None and (limit is None or i < limit):
                limit = i
                break
        if limit is not None and limit < mn:
            return None
        name = self.fresh("arr")
        if mn == 0:
            self.rule(name, "LSQB", "RSQB")
        if limit == 0:
            return name
        k0 = max(len(prefix), mn, 1)  # from here on, every position is alike (when unbounded)

        def tail(i: int) -> str:  # i items written
            return f"{name}_t{i}"

        self.rule(name, "LSQB", item(0), tail(1), "RSQB")
        for i in range(1, (limit if limit is not None else k0) + 1):
            if limit is None and i == k0:  # tail(k0) -> (COMMA item)*, left recursive
                more = f"{name}_more"
                self.rule(tail(i))
                self.rule(tail(i), more)
                self.rule(more, "COMMA", rest)
                self.rule(more, more, "COMMA", rest)
                break
            if i >= mn:
                self.rule(tail(i))
            if limit is None or i < limit:
                self.rule(tail(i), "COMMA", item(i), tail(i + 1))
        return name

    # -- terminals --------------------------------------------------------------------------
    def finish(self, root: str) -> SchemaGrammar:
        # collect the classes every placeholder uses
        for _, rhs in self.rules:
            for sym in rhs:
                if isinstance(sym, tuple):
                    self._collect(sym)
        for fam in (self.keys, self.strs, self.nums):
            if fam.classes:
                fam.close()
        names: dict[tuple, str] = {}
        terminals: list[tuple[str, ByteDFA]] = []

        def tname(kind: str, fam: Family, i: int) -> str:
            key = (kind, i)
            if key not in names:
                names[key] = f"{kind.upper()}{len(names)}"
            return names[key]

        for kind, fam in (("key", self.keys), ("str", self.strs), ("num", self.nums)):
            if not fam.classes:
                continue
            for i in fam.order:
                c = fam.classes[i]
                dfa = key_dfa(c, self.ws) if kind == "key" else fam.dfa(c)
                terminals.append((tname(kind, fam, i), dfa))
        punct = punctuation(self.ws)
        used = {s for _, rhs in self.rules for s in rhs if isinstance(s, str) and s in punct}
        terminals += [(p, punct[p]) for p in punct if p in used]
        rules: list = []
        made: dict = {}
        term_names = {t for t, _ in terminals}

        def sym(x):
            if isinstance(x, str):
                return x
            key = x
            if key in made:
                return made[key]
            alts = self._terms(x, tname)
            if len(alts) == 1:
                made[key] = alts[0]
                return alts[0]
            nt = made[key] = self.fresh("cls")
            for t in alts:
                rules.append((nt, (t,)))
            return nt

        resolved = [(lhs, tuple(sym(x) for x in rhs)) for lhs, rhs in self.rules]
        all_rules = _prune([("start", (root,))] + resolved + rules, term_names)
        if not all_rules:
            raise SchemaError("schema", "", "the schema admits no value")
        check_limit("max_rules", len(all_rules), "JSON Schema grammar")
        check_limit("max_terminals", len(terminals), "JSON Schema grammar")
        return SchemaGrammar(all_rules, terminals, "start")

    def _collect(self, sym: tuple) -> None:
        kind = sym[0]
        if kind == "key":
            self.keys.add(sym[1])
            for v in sym[2] or ():  # values left out: each a singleton class (Family.alternatives)
                self.keys.add(StrClass(values=frozenset([v])))
            for c in (sym[3] if len(sym) > 3 else ()):
                self.keys.add(c)
        elif kind == "str":
            for c, minus in sym[1]:
                self.strs.add(c)
                for v in minus or ():
                    self.strs.add(StrClass(values=frozenset([v])))
        else:
            for c in sym[1]:
                self.nums.add(c)

    def _terms(self, sym: tuple, tname) -> list[str]:
        kind = sym[0]
        if kind == "key":
            fam = self.keys
            alts = set(fam.alternatives(sym[1], sym[2]))
            for c in (sym[3] if len(sym) > 3 else ()):  # keys matching a pattern go to patternProperties
                covered = {fam.terminal_index(c), *fam.inside[fam.terminal_index(c)]}
                alts -= covered
            return [tname("key", fam, i) for i in sorted(alts)]
        fam = self.strs if kind == "str" else self.nums
        alts = set()
        for item in sym[1]:
            c, minus = item if kind == "str" else (item, None)
            alts |= set(fam.alternatives(c, minus))
        return [tname(kind, fam, i) for i in sorted(alts)]


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


MAX_LENGTH_BOUND = 512  # minLength/maxLength above this are refused: the automaton counts every character


def _check_length(b: Basic) -> None:
    for k, v in (("minLength", b.min_len), ("maxLength", b.max_len)):
        if v is not None and v > MAX_LENGTH_BOUND:
            raise SchemaError(k, b.pointer, f"{k} {v} is above {MAX_LENGTH_BOUND}: the string automaton counts "
                              "every character, so longer bounds are not compiled")


def _spec(b: Basic) -> NumberSpec:
    return NumberSpec(b.integer, b.lo, b.lo_strict, b.hi, b.hi_strict, b.multiple)


def _split(spec: NumberSpec, excluded: list[Fraction]) -> list[NumberSpec]:
    """`spec` minus the excluded values, as specs with strict bounds around each."""
    out = [spec]
    for x in excluded:
        nxt = []
        for s in out:
            if not s.contains(x):
                nxt.append(s)
                continue
            nxt.append(NumberSpec(s.integer, s.lo, s.lo_strict, x, True, s.multiple))
            nxt.append(NumberSpec(s.integer, x, True, s.hi, s.hi_strict, s.multiple))
        out = nxt
    return [s for s in out if not s.empty()]


def _search(pattern: str, s: str) -> bool:
    import re
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return re.search(pattern, s) is not None


def _overlapping_pattern(b: Basic, p: str) -> bool:
    """Whether another of `b`'s patternProperties may match a key `p` matches."""
    from .strings import intersect, is_empty, pattern_dfa

    for q, _ in b.pattern_props:
        if q != p and not is_empty(intersect(pattern_dfa(p), pattern_dfa(q))):
            return True
    return False


def build_grammar(schema, *, whitespace: str = "outlines", coerce_one_of: bool = False) -> SchemaGrammar:
    """The grammar of a JSON Schema (a dict or bool). `whitespace`: "outlines" (an optional space
    around punctuation, as Outlines), "flexible" (any JSON whitespace, as llguidance), "compact"
    (none), or a regex for the whitespace at each place JSON allows it."""
    ws = WHITESPACE.get(whitespace, whitespace)
    doc = SchemaDoc(schema, coerce_one_of=coerce_one_of)
    b = _Builder(doc, ws)
    root = b.value(Sub(schema, ""))
    if root is None:
        raise SchemaError("schema", "", "the schema admits no value")
    return b.finish(root)

"""JSON Schema -> a union of basic nodes (:class:`Basic`): ``$ref`` resolved, ``allOf`` merged,
``anyOf``/``oneOf`` as alternatives, every keyword either honoured, known to be an annotation, or
refused with a :class:`~cad_outlines.errors.SchemaError` naming it and its JSON pointer.

A basic node is one conjunction of constraints over each JSON type (``types`` says which types it
admits; the string, number, array and object fields constrain values of their own type only). Sub-
schemas (property values, items, additional properties) stay as :class:`Sub` references, compiled
to grammar rules on demand (so recursive ``$ref`` is fine) and keyed by their canonical JSON, so
equal sub-schemas share one rule.

Semantics follow the draft the root's ``$schema`` names (default 2020-12, as ``jsonschema``):
drafts 3-7 ignore the siblings of ``$ref``; draft 4 has boolean ``exclusiveMinimum``; up to
2019-09 ``items`` may be an array (with ``additionalItems``). ``format`` is checked as 2020-12's
format checker checks it (see :mod:`.formats`); a format no checker knows is an annotation.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Callable, TypeVar

from ....errors import SchemaError

__all__ = ["Basic", "Sub", "SchemaDoc", "ANNOTATIONS", "TYPES", "canonical", "once_per_sub"]

T = TypeVar("T")

TYPES = ("null", "boolean", "object", "array", "string", "number")
# Keywords that never change which instances are valid (documented in docs/json_schema.md).
ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "$comment", "$anchor", "$dynamicAnchor", "$vocabulary", "title", "description",
    "default", "examples", "example", "deprecated", "readOnly", "writeOnly", "readonly", "contentEncoding",
    "contentMediaType", "contentSchema", "$defs", "definitions", "discriminator", "nullable-annotation",
    "markdownDescription", "x-intellij-html-description",
})
_NUMBER_KW = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRING_KW = ("minLength", "maxLength", "pattern", "format")
_ARRAY_KW = ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
             "minContains", "maxContains", "unevaluatedItems")
_OBJECT_KW = ("properties", "required", "additionalProperties", "patternProperties", "minProperties",
              "maxProperties", "propertyNames", "dependentRequired", "dependentSchemas", "dependencies",
              "unevaluatedProperties")
_DATA_VALUES = ("enum", "const", "default", "examples", "example")  # instances, not schemas: no anchors there
_APPLICATORS = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "type", "enum", "const")
# ($dynamicRef and $recursiveRef are not here: their target depends on the dynamic scope, so they are refused)
KNOWN = frozenset(_NUMBER_KW + _STRING_KW + _ARRAY_KW + _OBJECT_KW + _APPLICATORS)
MAX_ALTERNATIVES = 256  # anyOf x allOf distribution beyond this is refused


def canonical(x: Any) -> str:
    """A JSON value's canonical text (sorted keys): equal schemas, equal keys."""
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, eq=False)
class Sub:
    """A sub-schema to compile on demand: its JSON (``True``/``False`` or an object), where it is,
    and for a merge its parts (their conjunction). Equal when their keys are."""

    schema: Any
    pointer: str
    parts: tuple[Sub, ...] = ()

    @functools.cached_property
    def key(self) -> str:
        """Equal keys, equal rules: the schema's JSON in its own key order, since the order of
        ``properties`` is the order the grammar writes them in (sorted keys would let two schemas that
        differ only in that order share one rule)."""
        if self.parts:
            return "&".join(p.key for p in self.parts)
        return json.dumps(_strip(self.schema), separators=(",", ":"), ensure_ascii=False)

    def __eq__(self, other) -> bool:
        return isinstance(other, Sub) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def is_true(self) -> bool:
        return not self.parts and (self.schema is True or self.schema == {})

    def is_false(self) -> bool:
        return not self.parts and self.schema is False


def conj(a: Sub | None, b: Sub | None) -> Sub | None:
    """Both sub-schemas (None: no constraint)."""
    if a is None or a.is_true():
        return b
    if b is None or b.is_true():
        return a
    if a.key == b.key:
        return a
    parts = (a.parts or (a,)) + (b.parts or (b,))
    return Sub(None, a.pointer, tuple({p.key: p for p in parts}.values()))


def _strip(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: v for k, v in schema.items() if k not in ANNOTATIONS}
    return schema


@dataclass(frozen=True)
class Basic:
    """One conjunction: the JSON types it admits and the constraints of each."""

    types: frozenset[str] = frozenset(TYPES)
    enum: tuple | None = None  # allowed values (JSON texts of them, canonical), None: any
    exclude: tuple = ()  # values excluded (canonical JSON texts): scalars only
    integer: bool = False
    whole: bool = False  # an integer written without a fraction part (drafts 3-4: 1.0 is not an integer there)
    # strings
    min_len: int = 0
    max_len: int | None = None
    patterns: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    # numbers
    lo: Fraction | None = None
    lo_strict: bool = False
    hi: Fraction | None = None
    hi_strict: bool = False
    multiple: Fraction | None = None
    # arrays
    prefix: tuple[Sub, ...] = ()
    items: Sub | None = None  # None: any
    min_items: int = 0
    max_items: int | None = None
    contains: tuple[tuple[Sub, int, int | None], ...] = ()  # (schema, minContains, maxContains) each
    unique: bool = False  # uniqueItems: true (compiled where the items come from a small finite set)
    # objects
    props: tuple[tuple[str, Sub], ...] = ()
    required: tuple[str, ...] = ()
    additional: Sub | None = None  # None: any
    names: Sub | None = None  # propertyNames: what every key (a string) satisfies; None: any
    pattern_props: tuple[tuple[str, Sub], ...] = ()
    min_props: int = 0
    max_props: int | None = None
    # boolean conditions over other sub-schemas (``not``, overlapping ``oneOf``, ``if``/``then``/``else``,
    # dependencies): (kind, subs) with kind "not" (none holds), "one" (exactly one), "ite" (if, then,
    # else) or "imp" (the first implies the second); the grammar decides them (grammar.py)
    checks: tuple[tuple[str, tuple[Sub, ...]], ...] = ()
    pointer: str = field(default="", compare=False)

    def prop(self, name: str) -> Sub | None:
        return self._prop_index.get(name)

    @functools.cached_property
    def _prop_index(self) -> dict[str, Sub]:
        """`props` by name (the first of a name, as a scan finds it): an object product asks once per move."""
        out: dict[str, Sub] = {}
        for n, s in self.props:
            out.setdefault(n, s)
        return out


def once_per_sub(memo: dict, busy: set, sub: Sub, cycle: str, make: Callable[[], T]) -> T:
    """`make()` for `sub`, made once per sub-schema key and kept in `memo`; asked for again while it is
    being made (`busy`: the keys under way) is a reference cycle that never reaches a value: a
    :class:`SchemaError` on ``$ref`` at `sub`'s pointer, `cycle` saying why."""
    key = sub.key
    got = memo.get(key)
    if got is not None:
        return got
    if key in busy:
        raise SchemaError("$ref", sub.pointer, cycle)
    busy.add(key)
    try:
        got = make()
    finally:
        busy.discard(key)
    memo[key] = got
    return got


class SchemaDoc:
    """One schema document: resolves local ``$ref`` and normalizes sub-schemas to unions of
    :class:`Basic` (cached per sub-schema)."""

    def __init__(self, root: Any, *, coerce_one_of: bool = False, draft: str | None = None):
        self.root = root
        self.coerce_one_of = coerce_one_of
        self.draft = draft or _draft(root)
        self._cache: dict[str, list[Basic]] = {}
        self._resolving: set[str] = set()

    # -- references ----------------------------------------------------------------------
    def resolve(self, ref: str, pointer: str) -> tuple[Any, str]:
        if not isinstance(ref, str) or not ref.startswith("#"):
            root_id = self.root.get("$id", self.root.get("id")) if isinstance(self.root, dict) else None
            if isinstance(ref, str) and root_id and ref.split("#")[0] == root_id.split("#")[0]:
                ref = "#" + ref.split("#", 1)[1] if "#" in ref else "#"
            else:
                raise SchemaError("$ref", pointer, f"only local references ('#/...') are supported, not {ref!r}")
        path = ref[1:]
        node = self.root
        if path and not path.startswith("/"):  # an anchor: look for $anchor / $id "#name"
            found = self._anchor(path)
            if found is None:
                raise SchemaError("$ref", pointer, f"no anchor {path!r} in the schema")
            return found, ref
        for part in path.split("/")[1:] if path else []:
            part = part.replace("~1", "/").replace("~0", "~")
            from urllib.parse import unquote
            part = unquote(part)
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaError("$ref", pointer, f"{ref!r} points at nothing in the schema")
        return node, path or ""

    def _anchor(self, name: str) -> Any:
        """The sub-schema that the root's resource names `name` (``$anchor``, or an ``$id``/``id`` of
        ``#name``): an embedded resource (a sub-schema with an ``$id`` of its own) keeps its anchors to
        itself, so the search does not enter one, nor values that are data (``enum``, ``const``,
        ``default``, ``examples``)."""
        todo = [self.root]
        while todo:
            x = todo.pop()
            if isinstance(x, dict):
                own = x.get("$id", x.get("id"))
                if x is not self.root and isinstance(own, str) and not own.startswith("#"):
                    continue  # another resource
                if x.get("$anchor") == name or x.get("$id") == "#" + name or x.get("id") == "#" + name:
                    return x
                todo.extend(v for k, v in x.items() if k not in _DATA_VALUES)
            elif isinstance(x, list):
                todo.extend(x)
        return None

    # -- normalization -------------------------------------------------------------------
    def basics(self, sub: Sub) -> list[Basic]:
        """The union of basic nodes `sub` denotes (empty: no value)."""
        def make() -> list[Basic]:
            if not sub.parts:
                return self._normalize(sub.schema, sub.pointer)
            out = [Basic()]
            for p in sub.parts:
                out = self._and(out, self.basics(p), p.pointer)
            return out

        return once_per_sub(self._cache, self._resolving, sub, "a reference cycle that never reaches a value (the "
                            "schema refers to itself without any object or array in between)", make)

    def _normalize(self, s: Any, ptr: str) -> list[Basic]:
        if s is True:
            return [Basic(pointer=ptr)]
        if s is False:
            return []
        if not isinstance(s, dict):
            raise SchemaError("schema", ptr, f"a schema must be an object or a boolean, not {type(s).__name__}")
        if "$ref" in s:
            target, tptr = self.resolve(s["$ref"], ptr + "/$ref")
            ref = self.basics(Sub(target, "#" + tptr))
            if self.draft in ("draft3", "draft4", "draft6", "draft7"):
                return ref  # drafts up to 7 ignore the siblings of $ref
            rest = {k: v for k, v in s.items() if k != "$ref"}
            return self._and(ref, self._normalize(rest, ptr), ptr)
        ignored = IGNORED_BY_DRAFT[self.draft]
        if any(k in ignored for k in s):
            s = {k: v for k, v in s.items() if k not in ignored}
        for k in s:
            if k not in KNOWN and k not in ANNOTATIONS and _is_keyword(k, self.draft):
                raise SchemaError(k, f"{ptr}/{k}", f"keyword {k!r} is not supported")
        out = [self._own(s, ptr)]
        if "allOf" in s:
            parts = _list(s["allOf"], "allOf", ptr)
            for i, part in enumerate(parts):
                out = self._and(out, self.basics(Sub(part, f"{ptr}/allOf/{i}")), ptr)
        if "anyOf" in s:
            alts: list[Basic] = []
            for i, part in enumerate(_list(s["anyOf"], "anyOf", ptr)):
                alts.extend(self.basics(Sub(part, f"{ptr}/anyOf/{i}")))
            out = self._and(out, alts, ptr)
        if "oneOf" in s:
            branches = [self.basics(Sub(part, f"{ptr}/oneOf/{i}")) for i, part in
                        enumerate(_list(s["oneOf"], "oneOf", ptr))]
            branches = [[b2 for b2 in self._and(out, b, ptr)] for b in branches]
            overlap = not self.coerce_one_of and any(
                not disjoint(x, y) for i in range(len(branches)) for j in range(i + 1, len(branches))
                for x in branches[i] for y in branches[j])
            if overlap:  # exactly one branch: decided by the grammar (a check), not as a union
                subs = tuple(Sub(part, f"{ptr}/oneOf/{i}") for i, part in enumerate(s["oneOf"]))
                out = [replace(b, checks=b.checks + (("one", subs),)) for b in out]
            else:
                out = [b for br in branches for b in br]
        if "not" in s:
            out = [self._not(b, s["not"], f"{ptr}/not") for b in out]
            out = [b for b in out if b is not None]
        deps = self._dependencies(s, ptr)
        if deps:
            out = [replace(b, checks=b.checks + deps) for b in out]
        if "if" in s:
            out = self._if(out, s, ptr)
        return out

    def _if(self, out: list[Basic], s: dict, ptr: str) -> list[Basic]:
        cond = s["if"]
        then, els = s.get("then", True), s.get("else", True)
        if then is True and els is True:
            return out
        # exact when `if` pins one property to constants and that property is required by both sides'
        # outcome: (if AND then) OR (NOT if AND else)
        pinned = _pinned_property(cond)
        if pinned is None:  # (if and then) or (not if and else), decided by the grammar
            subs = (Sub(cond, f"{ptr}/if"), Sub(then, f"{ptr}/then"), Sub(els, f"{ptr}/else"))
            return [replace(b, checks=b.checks + (("ite", subs),)) for b in out]
        name, sch, required = pinned
        # `if` holds for every value that is not an object (properties and required hold there): only an
        # object can take the else side
        yes = {"properties": {name: sch}, **({"required": [name]} if required else {})}
        no_parts = [{"type": "object", "properties": {name: {"not": sch}}, "required": [name]}]
        if required:
            no_parts.append({"type": "object", "not": {"required": [name]}})
        alts = self._and(out, self._normalize({"allOf": [yes, then]}, f"{ptr}/then"), ptr)
        for part in no_parts:
            alts += self._and(out, self._normalize({"allOf": [part, els]}, f"{ptr}/else"), ptr)
        return alts

    def _not(self, b: Basic, neg: Any, ptr: str) -> Basic | None:
        """b AND NOT neg, where that is again a basic node (else SchemaError)."""
        if neg is True:
            return None
        if neg is False or neg == {}:
            return b if neg is False else None
        if not isinstance(neg, dict):
            raise SchemaError("not", ptr, "not must hold a schema")
        keys = set(neg) - ANNOTATIONS
        if keys == {"type"}:
            ts = _types(neg["type"], ptr)
            types = set(b.types)
            integer = b.integer
            if "number" in ts:
                types.discard("number")
            elif "integer" in ts and "number" in types:
                if not b.integer:  # non-integral numbers: the grammar tells integers apart (a check)
                    return replace(b, checks=b.checks + (("not", (Sub(neg, ptr),)),))
                types.discard("number")
            types -= ts
            return replace(b, types=frozenset(types), integer=integer) if types else None
        if keys <= {"enum", "const"}:
            vals = neg["enum"] if "enum" in neg else [neg["const"]]
            if not isinstance(vals, list):
                raise SchemaError("enum", ptr, "enum must be an array")
            banned = {canonical(_number_form(v)) for v in vals}
            if b.enum is not None:
                left = tuple(v for v in b.enum if v not in banned)
                return replace(b, enum=left) if left else None
            structured = [v for v in vals if isinstance(v, (dict, list))]
            if structured and ({"object", "array"} & b.types):
                return replace(b, checks=b.checks + (("not", (Sub(neg, ptr),)),))
            return replace(b, exclude=tuple(dict.fromkeys(b.exclude + tuple(sorted(banned)))))
        if keys == {"required"} and isinstance(neg["required"], list):
            names = neg["required"]
            if "object" not in b.types:
                return b
            if len(names) == 1 and names[0] not in b.required:
                n = names[0]
                props = tuple((k, v) for k, v in b.props if k != n) + ((n, Sub(False, ptr)),)
                return replace(b, props=props)
            if all(n in b.required for n in names):
                types = b.types - {"object"}
                return replace(b, types=types) if types else None
        return replace(b, checks=b.checks + (("not", (Sub(neg, ptr),)),))

    def _own(self, s: dict, ptr: str) -> Basic:
        """The constraints of `s` itself (no applicators). Its fields are gathered in `kw` and the node
        made once (a frozen dataclass made again per keyword cost a tenth of a new schema's front end)."""
        kw: dict[str, Any] = {}
        if "type" in s:
            ts = _types(s["type"], ptr)
            types = set(ts)
            integer = False
            if "integer" in types:
                types.discard("integer")
                if "number" not in types:
                    integer = True
                types.add("number")
            kw.update(types=frozenset(types), integer=integer,
                      whole=integer and self.draft in ("draft3", "draft4"))
        if "const" in s or "enum" in s:
            vals = [s["const"]] if "const" in s else s["enum"]
            if not isinstance(vals, list):
                raise SchemaError("enum", f"{ptr}/enum", "enum must be an array")
            if "enum" in s and "const" in s:
                consts = {canonical(_number_form(s["const"]))}
                vals = [v for v in vals if canonical(_number_form(v)) in consts]
            kw.update(enum=tuple(dict.fromkeys(canonical(_number_form(v)) for v in vals)))
        # strings
        for k in ("minLength", "maxLength"):
            if k in s:
                _nonneg_int(s[k], k, ptr)
        if "minLength" in s:
            kw.update(min_len=int(s["minLength"]))
        if "maxLength" in s:
            kw.update(max_len=int(s["maxLength"]))
        if "pattern" in s:
            if not isinstance(s["pattern"], str):
                raise SchemaError("pattern", f"{ptr}/pattern", "pattern must be a string")
            _check_pattern(s["pattern"], "pattern", f"{ptr}/pattern")
            kw.update(patterns=(s["pattern"],))
        if "format" in s and isinstance(s["format"], str):
            from .formats import checked_format
            f = checked_format(s["format"], f"{ptr}/format")
            if f is not None:
                kw.update(formats=(f,))
        # numbers
        lo = hi = None
        lo_strict = hi_strict = False
        old_style = self.draft in ("draft3", "draft4")  # exclusive* qualify minimum/maximum (truthy: strict)
        if "minimum" in s:
            lo = _number(s["minimum"], "minimum", ptr)
            lo_strict = old_style and bool(s.get("exclusiveMinimum"))
        if "maximum" in s:
            hi = _number(s["maximum"], "maximum", ptr)
            hi_strict = old_style and bool(s.get("exclusiveMaximum"))
        for k, is_lo in (("exclusiveMinimum", True), ("exclusiveMaximum", False)):
            v = s.get(k)
            if v is None or old_style:
                continue
            x = _number(int(v) if isinstance(v, bool) else v, k, ptr)  # jsonschema compares with True as 1
            if is_lo and (lo is None or x >= lo):
                lo, lo_strict = x, True
            elif not is_lo and (hi is None or x <= hi):
                hi, hi_strict = x, True
        kw.update(lo=lo, lo_strict=lo_strict, hi=hi, hi_strict=hi_strict)
        if "multipleOf" in s:
            m = _number(s["multipleOf"], "multipleOf", ptr)
            if m <= 0:
                raise SchemaError("multipleOf", f"{ptr}/multipleOf", "multipleOf must be > 0")
            kw.update(multiple=m)
        # arrays
        items = s.get("items")
        prefix = s.get("prefixItems")
        if isinstance(items, list):
            if self.draft == "draft2020":
                raise SchemaError("items", f"{ptr}/items", "items must be a schema in draft 2020-12 (use "
                                  "prefixItems)")
            prefix, items = items, s.get("additionalItems", True)
            base = f"{ptr}/items"
            kw.update(prefix=tuple(Sub(x, f"{base}/{i}") for i, x in enumerate(prefix)),
                      items=None if items is True else Sub(items, f"{ptr}/additionalItems"))
        else:
            if prefix is not None:
                prefix = _list(prefix, "prefixItems", ptr)
                kw.update(prefix=tuple(Sub(x, f"{ptr}/prefixItems/{i}") for i, x in enumerate(prefix)))
            if items is not None and items is not True and items != {}:
                kw.update(items=Sub(items, f"{ptr}/items"))
        if "minItems" in s:
            kw.update(min_items=_nonneg_int(s["minItems"], "minItems", ptr))
        if "maxItems" in s:
            kw.update(max_items=_nonneg_int(s["maxItems"], "maxItems", ptr))
        if s.get("uniqueItems") is True:  # (the array product checks it, or refuses it naming this pointer)
            kw.update(unique=True)
        if "contains" in s:
            kw.update(_contains(kw, s, ptr))
        for k in ("unevaluatedItems", "unevaluatedProperties"):
            if k in s and s[k] is not True and s[k] != {}:
                raise SchemaError(k, f"{ptr}/{k}", f"{k} is not supported")
        if "propertyNames" in s and s["propertyNames"] is not True and s["propertyNames"] != {}:
            kw.update(names=Sub(s["propertyNames"], f"{ptr}/propertyNames"))
        # objects
        props = s.get("properties")
        if props is not None:
            if not isinstance(props, dict):
                raise SchemaError("properties", f"{ptr}/properties", "properties must be an object")
            kw.update(props=tuple((k, Sub(v, f"{ptr}/properties/{_esc(k)}")) for k, v in props.items()))
        req = s.get("required")
        if isinstance(req, list):
            kw.update(required=tuple(dict.fromkeys(r for r in req if isinstance(r, str))))
        elif req is not None and not isinstance(req, bool):
            raise SchemaError("required", f"{ptr}/required", "required must be an array of names")
        if isinstance(req, bool) and req:
            raise SchemaError("required", f"{ptr}/required", "draft-3 'required: true' is not supported")
        if "additionalProperties" in s and s["additionalProperties"] is not True and s["additionalProperties"] != {}:
            kw.update(additional=Sub(s["additionalProperties"], f"{ptr}/additionalProperties"))
        pp = s.get("patternProperties")
        if pp:
            if not isinstance(pp, dict):
                raise SchemaError("patternProperties", f"{ptr}/patternProperties", "must be an object")
            for k in pp:
                _check_pattern(k, "patternProperties", f"{ptr}/patternProperties/{_esc(k)}")
            kw.update(pattern_props=tuple((k, Sub(v, f"{ptr}/patternProperties/{_esc(k)}"))
                                              for k, v in pp.items()))
        if "minProperties" in s:
            kw.update(min_props=_nonneg_int(s["minProperties"], "minProperties", ptr))
        if "maxProperties" in s:
            kw.update(max_props=_nonneg_int(s["maxProperties"], "maxProperties", ptr))
        return Basic(pointer=ptr, **kw)

    def _dependencies(self, s: dict, ptr: str) -> tuple:
        """``dependentRequired``, ``dependentSchemas`` and draft-7 ``dependencies`` as checks: an
        object with property k also has the listed properties / satisfies the schema."""
        out = []
        groups = [("dependentRequired", s.get("dependentRequired")), ("dependentSchemas", s.get("dependentSchemas")),
                  ("dependencies", s.get("dependencies"))]
        for kw, deps in groups:
            if deps is None:
                continue
            if not isinstance(deps, dict):
                raise SchemaError(kw, f"{ptr}/{kw}", f"{kw} must be an object")
            for k, v in deps.items():
                where = f"{ptr}/{kw}/{_esc(k)}"
                if isinstance(v, list):
                    if not all(isinstance(x, str) for x in v):
                        raise SchemaError(kw, where, "a dependency lists property names")
                    if not v:
                        continue
                    then: Any = {"required": v}
                elif kw == "dependentRequired":
                    raise SchemaError(kw, where, "dependentRequired maps names to arrays of names")
                else:
                    then = v
                if then is True or then == {}:
                    continue
                has = Sub({"type": "object", "required": [k]}, where)
                out.append(("imp", (has, Sub(then, where))))
        return tuple(out)

    # -- conjunction ---------------------------------------------------------------------
    def _and(self, xs: list[Basic], ys: list[Basic], ptr: str) -> list[Basic]:
        out = []
        for x in xs:
            for y in ys:
                m = merge(x, y)
                if m is not None:
                    out.append(m)
        if len(out) > MAX_ALTERNATIVES:
            raise SchemaError("anyOf", ptr, f"the schema's alternatives multiply to {len(out)} (allOf over anyOf/"
                              f"oneOf); at most {MAX_ALTERNATIVES} are compiled")
        return out


def merge(x: Basic, y: Basic) -> Basic | None:
    """The conjunction of two basic nodes; None when no value satisfies both."""
    types = x.types & y.types
    if not types:
        return None
    enum = x.enum if y.enum is None else (y.enum if x.enum is None else
                                           tuple(v for v in x.enum if v in set(y.enum)))
    if enum is not None and not enum:
        return None
    lo, lo_s = _tighter(x.lo, x.lo_strict, y.lo, y.lo_strict, max)
    hi, hi_s = _tighter(x.hi, x.hi_strict, y.hi, y.hi_strict, min)
    mult = x.multiple if y.multiple is None else (y.multiple if x.multiple is None else _lcm(x.multiple, y.multiple))
    n = max(len(x.prefix), len(y.prefix))
    prefix = tuple(conj(_item(x, i), _item(y, i)) or Sub(True, x.pointer) for i in range(n))
    props: dict[str, Sub] = {}
    for a, b in ((x, y), (y, x)):
        for name, s in a.props:
            if name in props:
                continue
            other = b.prop(name)
            if other is None:
                other = _extra_for(b, name)
            props[name] = conj(s, other) or Sub(True, s.pointer)
    if x.pattern_props and y.pattern_props:
        pp = x.pattern_props + tuple(p for p in y.pattern_props if p not in x.pattern_props)
        if x.additional is not None or y.additional is not None:
            return _refuse("patternProperties", x.pointer, "allOf of objects that both have patternProperties "
                           "and additionalProperties")
    else:
        own, other = (x, y) if x.pattern_props else (y, x)
        pp = tuple((p, conj(s, other.additional) or s) for p, s in own.pattern_props)
    return Basic(
        types=types, enum=enum, exclude=tuple(dict.fromkeys(x.exclude + y.exclude)), integer=x.integer or y.integer,
        whole=x.whole or y.whole,
        min_len=max(x.min_len, y.min_len), max_len=_min(x.max_len, y.max_len),
        patterns=tuple(dict.fromkeys(x.patterns + y.patterns)), formats=tuple(dict.fromkeys(x.formats + y.formats)),
        lo=lo, lo_strict=lo_s, hi=hi, hi_strict=hi_s, multiple=mult,
        prefix=prefix, items=conj(x.items, y.items), min_items=max(x.min_items, y.min_items),
        max_items=_min(x.max_items, y.max_items), contains=tuple(dict.fromkeys(x.contains + y.contains)),
        unique=x.unique or y.unique,
        props=tuple(props.items()), required=tuple(dict.fromkeys(x.required + y.required)),
        additional=conj(x.additional, y.additional), names=conj(x.names, y.names), pattern_props=pp,
        min_props=max(x.min_props, y.min_props), max_props=_min(x.max_props, y.max_props),
        checks=tuple(dict.fromkeys(x.checks + y.checks)), pointer=x.pointer)


def _check_pattern(pattern: str, keyword: str, ptr: str) -> None:
    """`pattern` compiled now (cached for the lexicon), so that a pattern without an exact automaton, or one
    past a limit, is refused naming the keyword and its JSON pointer."""
    import re

    from ....errors import ResourceLimitError
    from .strings import UnsupportedRegex, pattern_dfa

    try:
        pattern_dfa(pattern)
    except re.error as e:
        raise SchemaError(keyword, ptr, f"{pattern!r} is not a valid regex: {e}") from None
    except UnsupportedRegex as e:
        raise SchemaError(keyword, ptr, f"{pattern!r} has no exact automaton ({e.construct}: {e.reason})") from None
    except ResourceLimitError as e:
        raise ResourceLimitError(e.limit, e.value, e.maximum, what=f"keyword {keyword} at {ptr!r}, {pattern[:60]!r}",
                                 how=e.how) from None


def _refuse(keyword: str, ptr: str, why: str):
    raise SchemaError(keyword, ptr, why + " is not supported")


def _item(b: Basic, i: int) -> Sub | None:
    return b.prefix[i] if i < len(b.prefix) else b.items


def _extra_for(b: Basic, name: str) -> Sub | None:
    """What object node `b` requires of property `name`, which it does not declare."""
    import re as _re

    hits = [s for p, s in b.pattern_props if _re.search(p, name)]
    if hits:
        out = None
        for s in hits:
            out = conj(out, s) or s
        return out
    return b.additional


def disjoint(x: Basic, y: Basic) -> bool:
    """Whether no value satisfies both (a sufficient test, used for oneOf)."""
    if merge_or_none(x, y) is None:
        return True
    if "object" in (x.types & y.types) and (x.types & y.types) == {"object"}:
        # a property both require, pinned to disjoint constants
        for name, s in x.props:
            t = y.prop(name)
            if t is None or name not in x.required or name not in y.required:
                continue
            a, b = _consts(s), _consts(t)
            if a is not None and b is not None and not (a & b):
                return True
        # one requires a property the other forbids
        for a, b in ((x, y), (y, x)):
            for name in a.required:
                p = b.prop(name)
                if (p is not None and p.is_false()) or (p is None and b.additional is not None and
                                                        b.additional.is_false() and not b.pattern_props):
                    return True
    return False


def merge_or_none(x: Basic, y: Basic) -> Basic | None:
    try:
        m = merge(x, y)
    except SchemaError:
        return x
    if m is None:
        return None
    if m.types == frozenset({"number"}) and m.lo is not None and m.hi is not None and (
            m.lo > m.hi or (m.lo == m.hi and (m.lo_strict or m.hi_strict))):
        return None
    if m.types == frozenset({"string"}) and m.max_len is not None and m.max_len < m.min_len:
        return None
    return m


def _consts(s: Sub) -> set[str] | None:
    if s.parts or not isinstance(s.schema, dict):
        return None
    if "const" in s.schema:
        return {canonical(_number_form(s.schema["const"]))}
    if isinstance(s.schema.get("enum"), list):
        return {canonical(_number_form(v)) for v in s.schema["enum"]}
    return None


def _pinned_property(cond: Any) -> tuple[str, dict, bool] | None:
    """(name, its schema, required) for an `if` of the form {properties: {name: {const|enum, type?}}, required?}."""
    if not isinstance(cond, dict):
        return None
    keys = set(cond) - ANNOTATIONS
    props = cond.get("properties")
    if not isinstance(props, dict) or len(props) != 1 or not keys <= {"properties", "required"}:
        return None
    (name, sch), = props.items()
    if not isinstance(sch, dict) or not (set(sch) - ANNOTATIONS) <= {"const", "enum", "type"}:
        return None
    vals = [sch["const"]] if "const" in sch else sch.get("enum")
    if not isinstance(vals, list):
        return None
    req = cond.get("required", [])
    return name, sch, name in req


def _tighter(a, a_s, b, b_s, pick):
    if a is None:
        return b, b_s
    if b is None:
        return a, a_s
    if a == b:
        return a, a_s or b_s
    return (a, a_s) if pick(a, b) == a else (b, b_s)


def _min(a, b):
    return b if a is None else a if b is None else min(a, b)


def _lcm(a: Fraction, b: Fraction) -> Fraction:
    return Fraction(math.lcm(a.numerator, b.numerator), math.gcd(a.denominator, b.denominator))


def _number(v: Any, k: str, ptr: str) -> Fraction:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        raise SchemaError(k, f"{ptr}/{k}", f"{k} must be a number")
    return Fraction(repr(v)) if isinstance(v, float) else Fraction(v)


def _number_form(v: Any) -> Any:
    """Numbers compared by value: 1 and 1.0 are the same enum value (as in jsonschema)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _contains(kw: dict, s: dict, ptr: str) -> dict:
    """``contains``: ``minContains`` (default 1) to ``maxContains`` items match its schema (the counts are
    keywords of drafts 2019-09 on; an older draft's reader has dropped them). One that every item matches
    (``true``, ``{}``) bounds the array's length; ``false`` with a minimum above 0 rules arrays out; any other
    is counted item by item by the array's product (``Basic.contains``). `kw`: the node's fields so far
    (:meth:`SchemaDoc._own`); returns those it changes."""
    c = s["contains"]
    lo = _nonneg_int(s.get("minContains", 1), "minContains", ptr)
    hi = _nonneg_int(s["maxContains"], "maxContains", ptr) if "maxContains" in s else None
    if c is True or c == {}:
        min_items, max_items = kw.get("min_items", 0), kw.get("max_items")
        return dict(min_items=max(min_items, lo),
                    max_items=hi if max_items is None else max_items if hi is None else min(max_items, hi))
    if c is False:
        return {} if lo == 0 else dict(types=kw.get("types", frozenset(TYPES)) - {"array"})
    if lo == 0 and hi is None:  # (no count to keep)
        return {}
    if hi is not None and hi < lo:
        return dict(types=kw.get("types", frozenset(TYPES)) - {"array"})
    return dict(contains=kw.get("contains", ()) + ((Sub(c, f"{ptr}/contains"), lo, hi),))


def _nonneg_int(v: Any, k: str, ptr: str) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SchemaError(k, f"{ptr}/{k}", f"{k} must be a non-negative integer")
    return v


def _types(t: Any, ptr: str) -> set[str]:
    ts = t if isinstance(t, list) else [t]
    out = set()
    for x in ts:
        if x == "any":
            return {"null", "boolean", "object", "array", "string", "number"}
        if x not in ("null", "boolean", "object", "array", "string", "number", "integer"):
            raise SchemaError("type", f"{ptr}/type", f"unknown type {x!r}")
        out.add(x)
    return out


def _list(v: Any, k: str, ptr: str) -> list:
    if not isinstance(v, list) or not v:
        raise SchemaError(k, f"{ptr}/{k}", f"{k} must be a non-empty array of schemas")
    return v


def _esc(k: str) -> str:
    return k.replace("~", "~0").replace("/", "~1")


def _is_keyword(k: str, draft: str) -> bool:
    """Unknown names that are validation keywords of this draft (the rest are annotations)."""
    return k in _DRAFT_ONLY.get(draft, ())


_DRAFT_ONLY = {"draft3": ("extends", "disallow", "divisibleBy"), "draft2019": ("$recursiveRef",),
               "draft2020": ("$dynamicRef",)}
_LATER = ("dependentRequired", "dependentSchemas", "prefixItems", "unevaluatedItems", "unevaluatedProperties",
          "minContains", "maxContains")
# keywords a draft does not have (jsonschema's validator for that draft ignores them)
IGNORED_BY_DRAFT = {
    "draft3": frozenset(("const", "contains", "propertyNames", "if", "then", "else") + _LATER),
    "draft4": frozenset(("const", "contains", "propertyNames", "if", "then", "else") + _LATER),
    "draft6": frozenset(("if", "then", "else") + _LATER),
    "draft7": frozenset(_LATER),
    "draft2019": frozenset(("dependencies", "prefixItems")),
    "draft2020": frozenset(("dependencies",)),
}
_META = {"http://json-schema.org/draft-03/schema": "draft3", "http://json-schema.org/draft-04/schema": "draft4",
         "http://json-schema.org/draft-06/schema": "draft6", "http://json-schema.org/draft-07/schema": "draft7",
         "https://json-schema.org/draft/2019-09/schema": "draft2019",
         "https://json-schema.org/draft/2020-12/schema": "draft2020"}


def _draft(root: Any) -> str:
    """The draft ``jsonschema`` validates `root` with: its ``$schema`` when that is one of the meta-schema
    URIs (an empty fragment dropped), else 2020-12 (so ``https://json-schema.org/draft-04/schema`` is
    2020-12, as there)."""
    from urllib.parse import urlsplit

    s = root.get("$schema") if isinstance(root, dict) else None
    if not isinstance(s, str):
        return "draft2020"
    try:
        return _META.get(urlsplit(s).geturl(), "draft2020")
    except ValueError:
        return "draft2020"

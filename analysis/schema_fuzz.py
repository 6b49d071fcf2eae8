r"""Random JSON Schemas against ``jsonschema``: the schema front end's differential fuzzer.

Each case is a random schema built around the constructs the front end works hardest on: objects whose
names come from a small pool (so branches collide), required and optional names in any order, ``oneOf``
(with and without a discriminator), ``anyOf``, ``allOf``, ``not``, ``if``/``then``/``else``,
``dependentRequired``, ``additionalProperties``/``patternProperties``/``propertyNames``,
``minProperties``/``maxProperties``, arrays (``items``, ``prefixItems``, ``minItems``/``maxItems``,
``contains``), bounded integers and numbers (``multipleOf``, exclusive bounds), strings with lengths,
``enum``/``const`` and local ``$ref``. It is compiled for a vocabulary of the 256 bytes (whitespace
``flexible``, property order ``any`` unless told), then checked three ways:

- **instances near the schema** (values drawn from the schema's own names, constants and bounds, keys in
  random order, then mutated): the matcher's verdict on ``json.dumps(..., ensure_ascii=False)`` of each
  (``", "``/``": "`` separators, and compact; strings spelled as the front end's language spells them:
  no ``\uXXXX`` escape but for control characters) must be ``jsonschema``'s;
- **random walks over the engine's masks** (biased to close values): every text the engine admits whole
  must validate (else a *false admission*);
  a text with a key twice in one object is counted apart, not checked: JSON leaves its meaning open
  (RFC 8259 4), the engine checks every occurrence and counts each for ``minProperties``, ``json.loads``
  keeps the last (docs/json_schema.md, Departures);
- and no walk may stop on a prefix that has no legal next byte and is not complete (a *dead end*: a mask
  that admitted a byte no valid text continues).

Where objects keep a declared order (``--property-order declared``, or an object past the any-order budget:
``SchemaOrderWarning``) a valid instance in another key order is rightly rejected: rejections there are
counted apart, not checked (admissions and walks still are). A schema the front end refuses (``SchemaError`` and the other
library errors) is counted by reason. Nothing is random beyond ``--seed``: a case is reproduced by its seed
and index (``--only``).
"""

from __future__ import annotations

import json
import random
import re
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from .report import markdown_table, write_report
from .schema_coverage import _accepts as _verdict  # the grammar admits the text whole (None: unchecked)

DESCRIPTION = "JSON Schema front end: random schemas and instances, the matcher's verdicts against jsonschema's"
REPO = Path(__file__).resolve().parent.parent

NAMES = ["a", "b", "c", "d", "kind", "x"]
FORMAT_SAMPLES = {  # a few spellings each, valid and not, for the instances
    "date": ["2024-02-29", "2023-02-29", "2024-13-01", "1999-12-31"],
    "date-time": ["2024-01-02T03:04:05Z", "2024-01-02T03:04:05+01:00", "2024-01-02 03:04:05Z", "2024-01-02T25:00:00Z"],
    "email": ["a@b.c", "a@@b", "x.y@example.com", "@b"],
    "ipv4": ["1.2.3.4", "256.1.1.1", "01.2.3.4", "0.0.0.0"],
    "uuid": ["12345678-1234-1234-1234-123456789abc", "12345678-1234-1234-1234-123456789ab", "x"],
    "time": ["03:04:05Z", "03:04:05", "24:00:00Z"],
}
MORE_NAMES = ["e", "f", "g", "h", "i", "j", "k"]  # big objects: past GUARD_FROM required names (object guards)
STRINGS = ["", "a", "b", "ab", "x1", "kind", "A", "é", "a\"b", "1"]
DRAFTS = {"2020-12": "https://json-schema.org/draft/2020-12/schema", "7": "http://json-schema.org/draft-07/schema#"}


# -- schemas ---------------------------------------------------------------------------------------------
class SchemaMaker:
    """Random schemas of one draft (keywords that draft has: ``dependentRequired`` vs ``dependencies``,
    ``prefixItems`` vs array ``items``)."""

    def __init__(self, rng: random.Random, draft: str):
        self.rng, self.draft = rng, draft
        self.defs: dict[str, object] = {}

    def schema(self) -> dict:
        root = self.value(0, top=True)
        if not isinstance(root, dict):
            root = {"allOf": [root]}
        root = dict(root)
        if self.defs:
            root["$defs" if self.draft == "2020-12" else "definitions"] = self.defs
        root["$schema"] = DRAFTS[self.draft]
        return root

    def value(self, depth: int, top: bool = False):
        r = self.rng
        if depth >= 3:
            return self.scalar()
        kinds = ["object"] * 5 + ["array"] * 2 + ["scalar"] * 3 + ["anyOf", "oneOf", "allOf", "not", "if", "enum",
                                                                      "ref", "types"]
        if top:
            kinds = ["object"] * 6 + ["oneOf", "anyOf", "if", "allOf", "array"]
        k = r.choice(kinds)
        if k == "object":
            return self.obj(depth)
        if k == "array":
            return self.array(depth)
        if k == "scalar":
            return self.scalar()
        if k in ("anyOf", "oneOf"):
            n = r.randint(2, 3)
            if r.random() < 0.7:  # branches that are objects: the hard case
                branches = [self.obj(depth + 1, branch=j) for j in range(n)]
                if k == "oneOf" and r.random() < 0.5:  # a discriminator
                    for j, b in enumerate(branches):
                        b.setdefault("properties", {})["kind"] = {"const": f"k{j}"}
                        if r.random() < 0.8:
                            b["required"] = sorted(set(b.get("required", [])) | {"kind"})
                out = {k: branches}
                if r.random() < 0.5:
                    out["type"] = "object"
                return out
            return {k: [self.value(depth + 1) for _ in range(n)]}
        if k == "allOf":
            return {"allOf": [self.obj(depth + 1) if r.random() < 0.7 else self.value(depth + 1)
                              for _ in range(r.randint(1, 2))]}
        if k == "not":
            inner = self.obj(depth + 1) if r.random() < 0.5 else self.scalar()
            base = self.obj(depth + 1) if r.random() < 0.5 else {}
            return {**base, "not": inner}
        if k == "if":
            out = {"if": self.obj(depth + 1, small=True), "then": self.obj(depth + 1, small=True)}
            if r.random() < 0.6:
                out["else"] = self.obj(depth + 1, small=True)
            if r.random() < 0.5:
                out["type"] = "object"
            return out
        if k == "enum":
            pool = [None, True, False, 0, 1, 2.5, -3, "a", "b", "", [], [1], {}, {"a": 1}, {"a": "b"}, {"kind": "k0"},
                    {"a": 1, "b": None}, [1, "a"], 1.0]
            vals = r.sample(pool, r.randint(1, 4))
            return {"const": vals[0]} if len(vals) == 1 and r.random() < 0.5 else {"enum": vals}
        if k == "ref":
            name = f"d{len(self.defs)}"
            self.defs[name] = {}  # (placeholder while the body is made: a body may refer to itself)
            self.defs[name] = self.value(depth + 1)
            return {"$ref": f"#/{'$defs' if self.draft == '2020-12' else 'definitions'}/{name}"}
        if r.random() < 0.3:  # integers inside numbers: 1.0 is an integer (2020-12 and 7)
            return {r.choice(["oneOf", "anyOf"]): [{"type": "integer"}, {"type": "number", **r.choice(
                [{}, {"maximum": 3}, {"multipleOf": 0.5}])}]}
        types = r.sample(["string", "integer", "number", "boolean", "null", "object", "array"], r.randint(2, 3))
        return {"type": types}

    def obj(self, depth: int, branch: int = 0, small: bool = False) -> dict:
        r = self.rng
        big = not small and depth <= 1 and r.random() < 0.15
        if big:  # many required names: guarded beside the parser, or past the budget
            names = r.sample(NAMES + MORE_NAMES, r.randint(6, 11))
        else:
            names = r.sample(NAMES, r.randint(0 if small else 1, 3 if small else 5))
        out: dict = {}
        if r.random() < 0.8:
            out["type"] = "object"
        if names:
            out["properties"] = {n: self.value(depth + 1) if r.random() < (0.2 if big else 0.6) else self.scalar()
                                 for n in names}
        req = [n for n in names if r.random() < (0.85 if big else 0.5)]
        if r.random() < 0.15:
            req.append(r.choice(NAMES))  # a required name with no schema of its own
        if req:
            out["required"] = sorted(set(req))
        x = r.random()
        if x < 0.25:
            out["additionalProperties"] = False
        elif x < 0.4:
            out["additionalProperties"] = self.scalar()
        if r.random() < 0.15:
            out["patternProperties"] = {r.choice(["^x", "b$", "^k"]): self.scalar()}
        if r.random() < 0.1:
            out["propertyNames"] = r.choice([{"maxLength": 1}, {"enum": ["a", "b", "kind"]}, {"pattern": "^[a-c]"},
                                             {"not": {"const": "x"}}, {"minLength": 2}])
        if r.random() < 0.15:
            out["minProperties"] = r.randint(0, 2)
        if r.random() < 0.15:
            out["maxProperties"] = r.randint(1, 3)
        if names and r.random() < 0.08:  # a dependency on a schema
            key = "dependentSchemas" if self.draft == "2020-12" else "dependencies"
            out[key] = {r.choice(names): self.obj(depth + 2, small=True)}
        if depth <= 1 and r.random() < 0.06:  # a recursive definition: a tree of these
            name = f"d{len(self.defs)}"
            ref = f"#/{'$defs' if self.draft == '2020-12' else 'definitions'}/{name}"
            self.defs[name] = {"type": "object", "properties": {"v": self.scalar(), "kids": {"type": "array",
                                                                                            "items": {"$ref": ref}}},
                               "required": ["v"] if r.random() < 0.5 else []}
            out.setdefault("properties", {})[r.choice(NAMES)] = {"$ref": ref}
        if names and r.random() < 0.15:
            a, b = r.choice(names), r.choice(NAMES)
            if a != b:
                if self.draft == "2020-12":
                    out["dependentRequired"] = {a: [b]}
                else:
                    out["dependencies"] = {a: [b]}
        return out

    def array(self, depth: int) -> dict:
        r = self.rng
        out: dict = {"type": "array"}
        x = r.random()
        if x < 0.6:
            out["items"] = self.value(depth + 1)
        elif x < 0.8:
            pre = [self.value(depth + 1) for _ in range(r.randint(1, 2))]
            if self.draft == "2020-12":
                out["prefixItems"] = pre
                if r.random() < 0.5:
                    out["items"] = r.choice([False, self.scalar()])
            else:
                out["items"] = pre
                if r.random() < 0.5:
                    out["additionalItems"] = r.choice([False, self.scalar()])
        if r.random() < 0.3:
            out["minItems"] = r.randint(0, 2)
        if r.random() < 0.3:
            out["maxItems"] = r.randint(0, 3)
        if r.random() < 0.15:  # items from a small enum, unique
            out["items"] = {"enum": r.sample(["a", "b", "", 0, 1, 1.0, True, None], r.randint(1, 4))}
            out["uniqueItems"] = True
        if r.random() < 0.2:
            out["contains"] = self.scalar() if r.random() < 0.7 else self.obj(depth + 1, small=True)
            if self.draft == "2020-12" and r.random() < 0.5:
                out[r.choice(["minContains", "maxContains"])] = r.randint(0, 2)
        return out

    def scalar(self) -> dict:
        r = self.rng
        k = r.choice(["string", "integer", "number", "boolean", "null", "enum", "const", "any"])
        if k == "string":
            out: dict = {"type": "string"}
            if r.random() < 0.3:
                out["minLength"] = r.randint(0, 2)
            if r.random() < 0.3:
                out["maxLength"] = r.randint(0, 3)
            if r.random() < 0.15:
                out["pattern"] = r.choice(["^a", "b$", "^[a-c]*$", "x", "^.{2}$"])
            if r.random() < 0.1:
                out["format"] = r.choice(sorted(FORMAT_SAMPLES))
            return out
        if k in ("integer", "number"):
            out = {"type": k}
            if r.random() < 0.4:
                out[r.choice(["minimum", "exclusiveMinimum"])] = r.choice([-2, 0, 1, 3, 2.5])
            if r.random() < 0.4:
                out[r.choice(["maximum", "exclusiveMaximum"])] = r.choice([0, 2, 5, 10, 7.5])
            if r.random() < 0.15:
                out["multipleOf"] = r.choice([2, 3, 0.5])
            return out
        if k == "enum":
            return {"enum": r.sample(["a", "b", "k0", "", 0, 1, True, None], r.randint(1, 3))}
        if k == "const":
            return {"const": r.choice(["a", "k1", 0, 1, False, None])}
        if k == "any":
            return {}
        return {"type": k}


# -- instances -------------------------------------------------------------------------------------------
class InstanceMaker:
    """Values near a schema: its names, constants and bounds, keys in random order; then mutated."""

    def __init__(self, rng: random.Random, root: dict):
        self.rng, self.root = rng, root

    def resolve(self, s):
        for _ in range(8):
            if isinstance(s, dict) and "$ref" in s and isinstance(s["$ref"], str) and s["$ref"].startswith("#/"):
                node = self.root
                for part in s["$ref"][2:].split("/"):
                    node = node.get(part, {}) if isinstance(node, dict) else {}
                s = node
            else:
                break
        return s

    def make(self, s, depth: int = 0):
        r = self.rng
        s = self.resolve(s)
        if not isinstance(s, dict) or depth > 5:
            return self.any(depth)
        for k in ("oneOf", "anyOf"):
            if k in s and r.random() < 0.85:
                base = {kk: v for kk, v in s.items() if kk != k}
                branch = self.resolve(r.choice(s[k]))
                return self.make(_merge(base, branch), depth)
        if "allOf" in s:
            merged = {kk: v for kk, v in s.items() if kk != "allOf"}
            for b in s["allOf"]:
                merged = _merge(merged, self.resolve(b))
            return self.make(merged, depth)
        if "if" in s and r.random() < 0.8:
            base = {kk: v for kk, v in s.items() if kk not in ("if", "then", "else")}
            pick = r.choice([k for k in ("if", "then", "else") if k in s])
            return self.make(_merge(base, self.resolve(s[pick])), depth)
        if "const" in s and r.random() < 0.8:
            return s["const"]
        if "enum" in s and r.random() < 0.8:
            return r.choice(s["enum"])
        t = s.get("type")
        if isinstance(t, list):
            t = r.choice(t) if t else None
        if t is None:
            if "properties" in s or "required" in s:
                t = "object"
            elif "items" in s or "prefixItems" in s:
                t = "array"
            else:
                t = r.choice(["object", "string", "integer", "array", "null"])
        if t == "object":
            return self.obj(s, depth)
        if t == "array":
            return self.array(s, depth)
        if t == "string":
            if s.get("format") in FORMAT_SAMPLES and r.random() < 0.8:
                return r.choice(FORMAT_SAMPLES[s["format"]])
            lo, hi = s.get("minLength", 0), s.get("maxLength", 4)
            return "".join(r.choice("abkx1") for _ in range(r.randint(lo, max(lo, hi))))
        if t in ("integer", "number"):
            bounds = [v for k, v in s.items() if k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
                      and isinstance(v, (int, float)) and not isinstance(v, bool)]
            v = r.choice(bounds) + r.choice([-1, 0, 0, 1, 0.5]) if bounds and r.random() < 0.7 else r.randint(-3, 12)
            if t == "integer" and r.random() < 0.9:
                v = int(v)
            return v
        if t == "boolean":
            return r.random() < 0.5
        if t == "null":
            return None
        return self.any(depth)

    def obj(self, s: dict, depth: int) -> dict:
        r = self.rng
        props = s.get("properties", {}) if isinstance(s.get("properties"), dict) else {}
        names = [n for n in props if r.random() < 0.7]
        names += [n for n in s.get("required", []) if n not in names and r.random() < 0.95]
        if r.random() < 0.25:
            names.append(r.choice(NAMES + ["y", "xz", "kb"]))
        r.shuffle(names)
        out = {}
        for n in names:
            out[n] = self.make(props.get(n, s.get("additionalProperties", {}) if isinstance(
                s.get("additionalProperties"), dict) else {}), depth + 1)
        return out

    def array(self, s: dict, depth: int) -> list:
        r = self.rng
        pre = s.get("prefixItems") or (s.get("items") if isinstance(s.get("items"), list) else [])
        items = s.get("items") if isinstance(s.get("items"), dict) else {}
        n = r.randint(s.get("minItems", 0), max(s.get("minItems", 0), s.get("maxItems", 3)))
        out = [self.make(pre[i] if i < len(pre) else items, depth + 1) for i in range(n)]
        if "contains" in s and out:  # some items made to match it
            for _ in range(r.randint(0, 2)):
                out[r.randrange(len(out))] = self.make(s["contains"], depth + 1)
        return out

    def any(self, depth: int):
        r = self.rng
        k = r.randint(0, 6 if depth < 3 else 4)
        if k == 5:
            return [self.any(depth + 1)]
        if k == 6:
            return {r.choice(NAMES): self.any(depth + 1)}
        return [None, True, r.randint(-2, 5), r.choice(STRINGS), 2.5][k]

    def mutate(self, v, depth: int = 0):
        """One random change somewhere in `v` (a value replaced, a key dropped or added, an item added)."""
        r = self.rng
        if isinstance(v, dict) and v and r.random() < 0.6:
            k = r.choice(list(v))
            x = r.random()
            if x < 0.3:
                return {kk: vv for kk, vv in v.items() if kk != k}
            if x < 0.5:
                return {**v, r.choice(NAMES): self.any(depth + 1)}
            return {**v, k: self.mutate(v[k], depth + 1)}
        if isinstance(v, list) and v and r.random() < 0.6:
            i = r.randrange(len(v))
            if r.random() < 0.3:
                return v + [v[i]]
            return v[:i] + [self.mutate(v[i], depth + 1)] + v[i + 1:]
        return self.any(depth)


def _merge(a: dict, b) -> dict:
    if not isinstance(b, dict):
        return a
    out = dict(a)
    for k, v in b.items():
        if k == "properties" and isinstance(out.get(k), dict) and isinstance(v, dict):
            out[k] = {**out[k], **v}
        elif k == "required" and isinstance(out.get(k), list) and isinstance(v, list):
            out[k] = sorted(set(out[k]) | set(v))
        else:
            out[k] = v
    return out


# -- checking --------------------------------------------------------------------------------------------
@dataclass
class CaseResult:
    index: int
    outcome: str  # "compiled", or the refusal's reason
    declared_order: bool = False
    checked: int = 0
    walks: int = 0
    wrong: list[str] = field(default_factory=list)  # "kind: detail"
    order_rejections: int = 0
    duplicate_keys: int = 0  # walks that ended on a text with a key twice in one object
    unchecked: int = 0  # walks whose text has a number no float holds exactly
    token_checks: int = 0  # tokens of a real tokenizer's masks checked against the byte-level grammar
    schema: dict | None = None


class _DuplicateKey(ValueError):
    pass


def _finite(text: str) -> float:
    """A JSON number as ``json.loads`` reads it, when that float is the number exactly (jsonschema
    judges floats: ``1e400`` is infinite, a long fraction rounds); else OverflowError (not checked)."""
    x = float(text)
    try:
        exact = x not in (float("inf"), float("-inf")) and Decimal(x) == Decimal(text)  # (no 10**e expansion)
    except ArithmeticError:  # an exponent past decimal's context
        exact = False
    if not exact:
        raise OverflowError(text)
    return x


def _exact_int(text: str) -> int:
    x = int(text)
    if abs(x) > 2 ** 53:  # jsonschema divides it by a float multipleOf
        raise OverflowError(text)
    return x


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _validator(schema):
    """jsonschema's validator of the schema's draft, formats asserted (the 2020-12 checker), as MaskBench's labels."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


PREFER = b'"}],:0123456789 tfn'


def walk(grammar, rng: random.Random, max_bytes: int) -> tuple[bytes, str]:
    """A random walk over the byte vocabulary's masks: ("complete" | "dead end" | "long", the bytes). Past
    half of `max_bytes` it prefers closing bytes; at each step it takes a structural byte when one is legal
    with probability 0.6 (else any legal byte): string bodies stay short."""
    import numpy as np

    from cad_outlines.engine.matcher import Matcher

    m, out = Matcher(grammar), bytearray()
    eos = set(grammar.eos_token_ids)
    for step in range(max_bytes):
        allowed = [int(t) for t in np.flatnonzero(m.allowed_mask()) if int(t) not in eos]
        if not allowed:
            return bytes(out), "complete" if m.is_accepting() else "dead end"
        if m.is_accepting() and rng.random() < (0.5 if step > max_bytes // 2 else 0.15):
            return bytes(out), "complete"
        closing = [t for t in allowed if grammar.token_bytes(t) in (b'"', b"}", b"]")]
        prefer = [t for t in allowed if grammar.token_bytes(t)[:1] in (b'"', b"}", b"]", b",", b":")
                  or grammar.token_bytes(t)[:1] in PREFER]
        if step > max_bytes // 2 and closing and rng.random() < 0.7:
            tok = rng.choice(closing)
        elif prefer and rng.random() < 0.6:
            tok = rng.choice(prefer)
        else:
            tok = rng.choice(allowed)
        m.advance(tok)
        out += grammar.token_bytes(tok)
    return bytes(out), "complete" if m.is_accepting() else "long"


def fuzz_case(seed: int, index: int, *, instances: int, walks: int, property_order: str = "any",
              timeout: float = 5.0, vocab=None, token_vocab=None, token_walks: int = 0) -> CaseResult:
    """One random schema: compiled, then its instances and walks checked against jsonschema."""
    import jsonschema

    from cad_outlines import compile_json_schema
    from cad_outlines.engine.frontend.json_schema import SchemaOrderWarning
    from cad_outlines.engine.vocabulary import Vocabulary
    from cad_outlines.errors import CadOutlinesError
    from cad_outlines.limits import Limits

    rng = random.Random(f"{seed}/{index}")
    draft = rng.choice(sorted(DRAFTS))
    schema = SchemaMaker(rng, draft).schema()
    res = CaseResult(index, "compiled", schema=schema)
    vocab = vocab or Vocabulary.of_bytes()
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        try:
            g = compile_json_schema(schema, vocab, cache=False, whitespace="flexible", property_order=property_order,
                                    limits=Limits(max_compile_seconds=timeout))
        except CadOutlinesError as e:
            res.outcome = f"refused: {type(e).__name__}: {str(e).splitlines()[0]}"
            if "admits no value" in str(e):  # then no instance may validate
                validator = _validator(schema)
                maker = InstanceMaker(rng, schema)
                for _ in range(instances):
                    v = maker.make(schema)
                    res.checked += 1
                    if validator.is_valid(v):
                        res.wrong.append(f"refused as empty, valid: {json.dumps(v, ensure_ascii=False)[:300]}")
                        break
            return res
    res.declared_order = any(issubclass(w.category, SchemaOrderWarning) for w in warned)
    validator = _validator(schema)
    maker = InstanceMaker(rng, schema)
    seen = set()
    for _ in range(instances):
        v = maker.make(schema)
        if rng.random() < 0.4:
            v = maker.mutate(v)
        for sep in ((", ", ": "), (",", ":")):
            text = json.dumps(v, separators=sep, ensure_ascii=False)  # (the language's spelling: see strings.py)
            if text in seen:
                continue
            seen.add(text)
            got = _verdict(g, text)
            if got is None:
                continue
            res.checked += 1
            valid = validator.is_valid(v)
            if got != valid:
                if valid and (res.declared_order or property_order == "declared"):
                    res.order_rejections += 1  # (a key order the declared one refuses, or a bug: not told apart)
                else:
                    res.wrong.append(f"{'false rejection' if valid else 'false admission'}: {text[:300]}")
    for _ in range(walks):
        data, how = walk(g, rng, 160)
        res.walks += 1
        if how == "dead end":
            res.wrong.append(f"dead end: {data[-300:]!r}")
        elif how == "complete":
            try:
                value = json.loads(data, object_pairs_hook=_no_duplicates, parse_float=_finite,
                                   parse_int=_exact_int)
            except _DuplicateKey:
                res.duplicate_keys += 1  # outside the exactness claim (docs/json_schema.md, Departures)
                continue
            except OverflowError:
                res.unchecked += 1  # a number no float holds exactly: jsonschema cannot judge it
                continue
            except ValueError as e:
                res.wrong.append(f"admitted non-JSON ({e}): {data[:300]!r}")
                continue
            if not validator.is_valid(value):
                res.wrong.append(f"false admission (walk): {data[:300]!r}")
    if token_vocab is not None and token_walks:
        with warnings.catch_warnings():  # (its SchemaOrderWarning: the byte-level compile's, counted above)
            warnings.simplefilter("ignore")
            gt = compile_json_schema(schema, token_vocab, cache=False, whitespace="flexible",
                                     property_order=property_order, limits=Limits(max_compile_seconds=timeout))
        for _ in range(token_walks):
            res.token_checks += token_walk(gt, g, rng, res.wrong)
    return res


def token_walk(gt, gb, rng: random.Random, wrong: list[str], steps: int = 40, sample: int = 150) -> int:
    """A random walk over a real tokenizer's masks (grammar `gt`), each mask checked against the byte-level
    grammar `gb` of the same schema: a sampled token (allowed ones, random forbidden ones, forbidden ones
    whose first byte some allowed token has) is allowed exactly when its bytes continue the text there, and
    EOS exactly when the text is complete. What is checked is the token-level store (lazy rows, their
    shortcuts over bounded strings and plain characters), not the language. Returns the checks made."""
    import numpy as np

    from cad_outlines.engine.matcher import Matcher

    mt, mb = Matcher(gt), Matcher(gb)
    eos = list(gt.eos_token_ids)
    text, checks = b"", 0
    for _ in range(steps):
        mask = mt.allowed_mask()
        allowed = np.flatnonzero(mask)
        allowed = allowed[~np.isin(allowed, eos)]
        allowed_firsts = {gt.token_bytes(int(t))[:1] for t in allowed[:2000]}
        picks = set(rng.sample(list(allowed), min(sample, len(allowed))))
        picks |= {rng.randrange(gt.vocab_size) for _ in range(sample)}
        near = [t for t in rng.sample(range(gt.vocab_size), min(20 * sample, gt.vocab_size))
                if not mask[t] and gt.token_bytes(t)[:1] in allowed_firsts]
        picks |= set(near[:sample])
        for t in picks:
            data = gt.token_bytes(int(t))
            if not data:
                continue
            checks += 1
            ok = mb.validate(list(data)) == len(data)
            if ok != bool(mask[t]):
                wrong.append(f"token mask: after {text[-80:]!r}, token {data!r} {'allowed' if mask[t] else 'forbidden'}"
                             f" by the masks, {'continues' if ok else 'does not continue'} the text")
                return checks
        if any(bool(mask[e]) != mb.is_accepting() for e in eos):
            wrong.append(f"token mask: EOS after {text[-80:]!r} is {bool(mask[eos[0]])}, complete: {mb.is_accepting()}")
            return checks
        if not len(allowed):
            return checks
        t = int(rng.choice(list(allowed)))
        data = gt.token_bytes(t)
        mt.advance(t)
        mb.advance_many(list(data))
        text += data
    return checks


# -- the study -------------------------------------------------------------------------------------------
def add_arguments(parser) -> None:
    parser.add_argument("--schemas", type=int, default=300, help="random schemas")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--instances", type=int, default=40, help="instances near each schema (each written twice)")
    parser.add_argument("--walks", type=int, default=20, help="random walks over each schema's masks")
    parser.add_argument("--property-order", default="any", choices=["declared", "any"])
    parser.add_argument("--timeout", type=float, default=5.0, help="compile seconds per schema")
    parser.add_argument("--tokenizer", default=None,
                        help="also walk a real tokenizer's masks (a name under the shared data's tokenizers/, e.g. "
                             "qwen2.5), each mask checked against the byte-level grammar")
    parser.add_argument("--token-walks", type=int, default=3, help="walks over the tokenizer's masks per schema")
    parser.add_argument("--only", type=int, default=None, help="run only this case index (prints its schema)")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))


def run(args) -> int:
    from tqdm import tqdm

    from cad_outlines.engine.vocabulary import Vocabulary

    vocab = Vocabulary.of_bytes()
    token_vocab = None
    if args.tokenizer:
        from .grammar_fuzz import tokenizer_path

        token_vocab = Vocabulary.from_tokenizer(tokenizer_path(args.tokenizer))
    started = time.perf_counter()
    indices = [args.only] if args.only is not None else range(args.schemas)
    results = []
    for i in tqdm(indices, desc="schema-fuzz", unit="schema"):
        results.append(fuzz_case(args.seed, i, instances=args.instances, walks=args.walks,
                                 property_order=args.property_order, timeout=args.timeout, vocab=vocab,
                                 token_vocab=token_vocab, token_walks=args.token_walks))
    minutes = (time.perf_counter() - started) / 60
    if args.only is not None:
        r = results[0]
        print(json.dumps(r.schema, indent=1))
        print(r.outcome, "declared order" if r.declared_order else "", f"{r.checked} checked")
        for w in r.wrong:
            print(" ", w)
        return 1 if r.wrong else 0
    compiled = [r for r in results if r.outcome == "compiled"]
    # refusals by the error's type and what it says (numbers and pointers left out)
    refused = Counter(re.sub(r"'[^']*'|\bat \S+|\d+", "_", r.outcome.split(":", 1)[1]).strip()[:110]
                      for r in results if r.outcome != "compiled")
    kinds = Counter(w.split(":")[0] for r in results for w in r.wrong)
    bad = [r for r in results if r.wrong]
    empty = [r for r in results if "admits no value" in r.outcome]
    rows = [["schemas", len(results)], ["compiled", len(compiled)],
            ["kept declared order (SchemaOrderWarning)", sum(r.declared_order for r in compiled)],
            ["instances checked", sum(r.checked for r in compiled)], ["walks", sum(r.walks for r in compiled)],
            ["valid rejected where objects keep a declared order (not checked)", sum(r.order_rejections for r in compiled)],
            ["walks admitted with a key twice in one object (not checked)", sum(r.duplicate_keys for r in compiled)],
            ["walks with a number no float holds exactly (not checked)", sum(r.unchecked for r in compiled)],
            [f"tokens of {args.tokenizer} masks checked against the byte-level grammar" if args.tokenizer else
             "tokens of a real tokenizer's masks checked (--tokenizer)", sum(r.token_checks for r in compiled)],
            ["refused as admitting no value: instances checked", sum(r.checked for r in empty)]]
    rows += [[k, n] for k, n in sorted(kinds.items())] or [["wrong verdicts", 0]]
    body = (__doc__.split("\n\n", 1)[0].strip().replace("``", "`") + "\n\n"
            + f"Seed {args.seed}, {args.schemas} schemas, {args.instances} instances and {args.walks} walks each, "
            f"property_order={args.property_order!r}; {minutes:.1f} min in all.\n\n"
            + markdown_table(["", "count"], rows)
            + "\n\nRefusals by error type:\n\n" + markdown_table(["error", "schemas"], refused.most_common())
            + ("\n\nCases with a wrong verdict (reproduce with `--only INDEX`):\n\n"
               + "\n".join(f"- {r.index}: {r.wrong[0][:200]}" for r in bad[:30]) if bad else ""))
    cmd = (f"python -m analysis schema-fuzz --schemas {args.schemas} --seed {args.seed} --instances {args.instances} "
           f"--walks {args.walks}" + (f" --property-order {args.property_order}" if args.property_order != "any" else "")
           + (f" --tokenizer {args.tokenizer} --token-walks {args.token_walks}" if args.tokenizer else ""))
    path = write_report(Path(args.out_dir), "schema_fuzz", "JSON Schema front end against jsonschema, fuzzed", body, cmd)
    print(markdown_table(["", "count"], rows))
    for r in bad[:10]:
        print(f"case {r.index}: {r.wrong[0][:240]}")
    print(f"wrote {path}")
    return 0

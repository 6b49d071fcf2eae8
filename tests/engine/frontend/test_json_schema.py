"""The JSON Schema front end: a schema's grammar accepts exactly the JSON texts of the instances
``jsonschema`` validates (written in schema property order, with the chosen whitespace), its
terminals stay exact under the basic lexer, refusals name the keyword and its JSON pointer, and
hostile schemas stop within the limits."""

from __future__ import annotations

import functools
import itertools
import json
import re
from fractions import Fraction

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cad_outlines import Matcher, ResourceLimitError, SchemaError, Vocabulary, compile_json_schema
from cad_outlines.engine.frontend.json_schema import strings as S
from cad_outlines.engine.frontend.json_schema.formats import FORMATS
from cad_outlines.engine.frontend.json_schema.numbers import NumberSpec, number_dfa
from cad_outlines.limits import Limits
from tests.fixture_data import SMALL
from tests.helpers import encode

FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")


def accepts(grammar, vocab, text: str) -> bool:
    """Every token of `text` allowed in turn, and EOS at the end (the whole text is a sentence)."""
    ids = encode(vocab, text.encode("utf-8"))
    m = Matcher(grammar)
    if m.validate(ids) != len(ids):
        return False
    m.advance_many(ids)
    return m.is_accepting()


def valid(schema, value) -> bool:
    """jsonschema's verdict with the validator of the schema's draft (2020-12 by default), as MaskBench's labels."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=FORMAT_CHECKER).is_valid(value)


def dump(value) -> str:
    return json.dumps(value, ensure_ascii=False)


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "exclusiveMaximum": 150},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "maxItems": 3},
        "kind": {"enum": ["a", "b", 3, None]},
        "score": {"type": "number", "minimum": -1.5, "maximum": 2.25},
    },
    "required": ["name", "age"],
    "additionalProperties": {"type": "boolean"},
}

CASES = [
    (PERSON, [
        {"name": "x", "age": 3}, {"name": "", "age": 3}, {"name": "abcdefghi", "age": 3}, {"age": 3},
        {"name": "age", "age": 149}, {"name": "a", "age": 150}, {"name": "a", "age": -1}, {"name": "a", "age": 2.0},
        {"name": "a", "age": 2.5}, {"name": "a", "age": 1, "email": "x@y"}, {"name": "a", "age": 1, "email": "xy"},
        {"name": "a", "age": 1, "tags": ["ab", "c"]}, {"name": "a", "age": 1, "tags": ["Ab"]},
        {"name": "a", "age": 1, "tags": ["a", "b", "c", "d"]}, {"name": "a", "age": 1, "kind": 3},
        {"name": "a", "age": 1, "kind": "c"}, {"name": "a", "age": 1, "kind": None}, {"name": "a", "age": 1, "x": True},
        {"name": "a", "age": 1, "x": 1}, {"name": "a", "age": 1, "score": -1.5}, {"name": "a", "age": 1, "score": 2.26},
        {"name": "name", "age": 1, "name2": False}, {"name": "é\n\"", "age": 1},
    ]),
    ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False, "minItems": 1},
     [[], [1], [1, "a"], [1, "a", 2], ["a"], [1, 2]]),
    ({"anyOf": [{"type": "string", "pattern": "^[0-9]+$"}, {"type": "integer", "multipleOf": 3}]},
     ["12", "1a", 9, 10, 0, -3, "", 3.0]),
    ({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": {"type": "string"},
      "properties": {"x-a": {"type": "string"}}},
     [{}, {"x-b": 1}, {"x-b": "s"}, {"y": "s"}, {"y": 1}, {"x-a": "s"}, {"x-a": 1}]),
    ({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                         "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                         "required": ["v"], "additionalProperties": False}},
      "$ref": "#/$defs/node"},
     [{"v": 1}, {"v": 1, "kids": [{"v": 2, "kids": []}]}, {"v": 1, "kids": [{"w": 2}]}, {"kids": []}]),
    ({"type": "object", "properties": {"t": {"const": "a"}, "n": {"type": "integer"}}, "required": ["t"],
      "if": {"properties": {"t": {"const": "a"}}}, "then": {"required": ["n"]}},
     [{"t": "a", "n": 1}, {"t": "a"}, {"t": "b"}]),
    ({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                {"type": "object", "properties": {"k": {"const": 2}, "z": {"type": "null"}}, "required": ["k"]}]},
     [{"k": 1}, {"k": 2, "z": None}, {"k": 3}, {"k": 1, "z": 5}]),
    ({"type": "string", "format": "date-time"}, ["2020-02-29T10:00:00Z", "2021-02-29T10:00:00Z",
                                                 "2020-01-01t00:00:00+01:00",
                                                 "2020-01-01", "x"]),
    ({"type": "string", "format": "ipv4"}, ["1.2.3.4", "01.2.3.4", "256.1.1.1", "1.2.3"]),
    ({"type": "string", "format": "duration"},
     ["P3Y6M4DT12H30M5S", "PT0,5S", "-P1.5e2D", "P0Y2W", "P1Y2W", "P1Y2T3H", "P1,5T3H", "P12T3H", "PT", "P1M1Y",
      "P1Y2", "P", "p1y", "PT1D"]),
    ({"type": "string", "format": "uuid"},
     ["12345678-1234-1234-1234-123456789abc", "12345678123412341234123456789abc"]),
    ({"not": {"type": "string"}, "enum": ["a", 1, None]}, ["a", 1, None, 2]),
    ({"type": "object", "minProperties": 1, "maxProperties": 2},
     [{}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}]),
    ({"type": "number", "exclusiveMinimum": 0, "not": {"enum": [5]}}, [0, 0.001, 5, 5.0, 6, -1, 1e3]),
    # overlapping oneOf, decided exactly: integers match both branches
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, [1, 1.5, -2, "x", None]),
    ({"oneOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
                {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}]},
     [{}, {"a": "x"}, {"b": 1}, {"a": "x", "b": 1}, {"a": 1, "b": 1}, {"b": "s"}, {"c": 1}]),
    # a bare `required` beside an overlapping oneOf does not move its name ahead of the declared order
    # (MaskBench Github_trivial---o25751)
    ({"type": "object", "required": ["b"], "oneOf": [
        {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        {"properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}]},
     [{"a": 1, "b": 2}, {"a": "x", "b": 2}, {"b": 2}, {"a": 1}, {"a": None, "b": 1}]),
    # not of objects, arrays, strings, numbers; not not
    ({"not": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}},
     [{}, {"a": 1}, {"a": "x"}, {"b": 1, "a": 2}, {"a": 1, "b": 2}, 3, "s", [1]]),
    ({"type": "array", "not": {"items": {"type": "integer"}, "maxItems": 2}},
     [[], [1], [1, 2], [1, 2, 3], ["a"], [1, "a"]]),
    ({"not": {"pattern": "^a", "minLength": 2}}, ["", "a", "ab", "ba", "abc", 1, None]),
    ({"not": {"not": {"type": "integer", "minimum": 3}}}, [1, 3, 4, 3.5, "x"]),
    ({"not": {"multipleOf": 3}}, [3, 4, 0, 6.0, 1.5, "x"]),
    # general if/then/else
    ({"if": {"type": "string", "maxLength": 2}, "then": {"pattern": "^a"}, "else": {"type": ["string", "integer"]}},
     ["ab", "b", "abc", 1, 1.5, None]),
    ({"type": "object", "if": {"properties": {"k": {"type": "integer"}}, "required": ["k"]},
      "then": {"properties": {"v": {"type": "string"}}}, "else": {"properties": {"v": {"type": "null"}}}},
     [{}, {"k": 1, "v": "x"}, {"k": 1, "v": None}, {"k": "s", "v": None}, {"k": "s", "v": "x"}, {"v": None}]),
    # dependencies (draft-7 `dependencies`; 2020-12 ignores it, as jsonschema does)
    ({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "dependentRequired": {"a": ["b"]}},
     [{}, {"a": 1}, {"a": 1, "b": 2}, {"b": 2}, {"a": 1, "c": 3}]),
    ({"type": "object", "properties": {"a": {}, "b": {}},
      "dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}},
     [{}, {"a": 1}, {"a": 1, "b": "x"}, {"a": 1, "b": 2}, {"b": 2}]),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {}, "b": {}},
      "dependencies": {"a": ["b"]}}, [{"a": 1}, {"a": 1, "b": 2}, {}]),
    ({"type": "object", "properties": {"a": {}, "b": {}}, "dependencies": {"a": ["b"]}}, [{"a": 1}]),
    # anyOf of objects an LALR(1) parser could not tell apart at the first key
    ({"anyOf": [{"type": "object", "properties": {"foo": {"type": "string"}}},
                {"type": "object", "properties": {"baz": {"type": "object",
                                                          "properties": {"bar": {"type": "number"}}}}}]},
     [{}, {"foo": "x"}, {"baz": {"bar": 1}}, {"baz": {"bar": "x"}}, {"baz": {}, "foo": 1}, {"foo": "x", "baz": 1}]),
    ({"type": "array", "items": {"anyOf": [
        {"type": "object", "properties": {"n": {"enum": ["a"]}, "q": {"maxItems": 1}}},
        {"type": "object", "properties": {"n": {"enum": ["b"]}, "q": {"minItems": 2}}}]}},
     [[{}], [{"n": "a", "q": [1]}], [{"n": "a", "q": [1, 2]}], [{"n": "b", "q": [1, 2]}], [{"n": "b", "q": []}, {}]]),
    ({"enum": [{"a": 1}, {"a": 1, "b": [2]}, [1, 2], "s"]}, [{"a": 1}, {"a": 1, "b": [2]}, {"a": 2}, [1, 2], [1], "s", {}]),
    ({"type": "object", "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 3}}},
     [{"ab": 3}, {"ab": 2}, {"ax": 1}, {"xb": 1}, {"xb": 4}, {"ab": "s"}]),
    # propertyNames: every key satisfies it (its string classes refine the key terminals)
    ({"type": "object", "propertyNames": {"pattern": "^[a-c]+$"}}, [{}, {"ab": 1}, {"ab": 1, "d": 2}, {"": 1}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "bb": {}}, "propertyNames": {"maxLength": 1},
      "additionalProperties": {"type": "string"}},
     [{"a": 1}, {"a": 1, "bb": 2}, {"bb": 1}, {"a": 1, "c": "x"}, {"a": 1, "cd": "x"}, {"c": 1}]),
    ({"type": "object", "propertyNames": {"not": {"enum": ["x", "y"]}}, "required": ["z"]},
     [{"z": 1}, {"z": 1, "x": 2}, {"z": 1, "w": 1}, {"y": 1}]),
    ({"type": "object", "propertyNames": {"enum": ["a", "b"]}, "required": ["a"]}, [{"a": 1}, {"a": 1, "b": 2},
                                                                                     {"a": 1, "c": 1}, {}]),
    ({"type": "object", "propertyNames": {"$ref": "#/$defs/k"}, "$defs": {"k": {"type": "string", "minLength": 2}}},
     [{}, {"ab": 1}, {"a": 1}]),
    ({"type": "object", "propertyNames": False}, [{}, {"a": 1}]),
    ({"type": "object", "required": ["z"], "propertyNames": {"pattern": "^.$"}}, [{}, {"z": 1}, {"z": 1, "zz": 1}]),
    ({"anyOf": [{"type": "object", "propertyNames": {"maxLength": 1}}, {"type": "object", "required": ["zz"]}]},
     [{"a": 1}, {"zz": 1}, {"ab": 1}, {"zz": 1, "ab": 2}]),
    # draft-4 exclusiveMinimum qualifies minimum; in 2020-12 `exclusiveMinimum: true` is > 1 (as jsonschema)
    ({"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 2, "exclusiveMinimum": True}, [2, 3, 2.5]),
    ({"minimum": 0, "exclusiveMinimum": True}, [0, 1, 1.5, 2]),
]


@pytest.mark.parametrize("whitespace", ["outlines", "flexible"])
def test_accepts_exactly_the_valid_instances(vocab, whitespace):
    for schema, instances in CASES:
        g = compile_json_schema(schema, vocab, cache=False, whitespace=whitespace)
        for v in instances:
            text = dump(v)
            assert accepts(g, vocab, text) == valid(schema, v), (schema, text)


def test_whitespace_modes(vocab):
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    texts = {'{"a":[1,2]}': (True, True, True), '{"a": [1, 2]}': (True, True, False),
             '{ "a" : [ 1 , 2 ] }': (True, True, False), '{"a":  [1]}': (False, True, False),
             '{\n  "a": [\n    1\n  ]\n}': (False, True, False), ' {"a": []}': (False, False, False)}
    for i, ws in enumerate(["outlines", "flexible", "compact"]):
        g = compile_json_schema(schema, vocab, cache=False, whitespace=ws)
        for text, want in texts.items():
            assert accepts(g, vocab, text) == want[i], (ws, text)


def test_property_order_follows_the_schema(vocab):
    g = compile_json_schema({"type": "object", "properties": {"a": {}, "b": {}}}, vocab, cache=False)
    assert accepts(g, vocab, '{"a": 1, "b": 2}')
    assert not accepts(g, vocab, '{"b": 2, "a": 1}')  # documented departure: schema order
    assert accepts(g, vocab, '{"b": 2, "c": 3}')


def _orders(value, limit: int = 24):
    """`value` with its objects' keys in every order (nested objects too), at most `limit` of them."""
    if isinstance(value, list):
        out = [[]]
        for x in value:
            out = [a + [b] for a in out for b in _orders(x, limit)][:limit]
        return out
    if not isinstance(value, dict):
        return [value]
    out = []
    for keys in itertools.permutations(value):
        for vals in itertools.product(*(_orders(value[k], 4) for k in keys)):
            out.append(dict(zip(keys, vals)))
            if len(out) >= limit:
                return out
    return out


def test_any_property_order_accepts_exactly_the_valid_instances_in_every_key_order(vocab):
    """property_order="any": every case above, each instance in every order of its keys (unions of
    objects, required names, pattern and additional properties, min/maxProperties, dependencies)."""
    for schema, instances in CASES:
        g = compile_json_schema(schema, vocab, cache=False, property_order="any")
        for v in instances:
            for w in _orders(v):
                text = dump(w)
                assert accepts(g, vocab, text) == valid(schema, w), (schema, text)


def test_any_property_order_tracks_required_names_and_checks_repeated_keys(vocab):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {}},
              "required": ["a", "b"], "additionalProperties": False}
    g = compile_json_schema(schema, vocab, cache=False, property_order="any")
    assert accepts(g, vocab, '{"b": "x", "c": 1, "a": 1}')
    assert not accepts(g, vocab, '{"b": "x", "c": 1}')  # a is missing
    assert not accepts(g, vocab, '{"b": "x", "b": "y"}')  # b twice is not a
    assert accepts(g, vocab, '{"a": 1, "b": "x", "a": 2}')  # a key may repeat (documented; parsers keep the last)
    assert not accepts(g, vocab, '{"a": 1, "b": "x", "a": "s"}')  # each value is checked
    assert not accepts(g, vocab, '{"a": 1, "b": "x", "d": 1}')
    declared = compile_json_schema(schema, vocab, cache=False)
    assert not accepts(declared, vocab, '{"b": "x", "a": 1}')  # the default keeps the schema's order


def test_any_property_order_checks_many_required_names_beside_the_parser(vocab):
    """An object whose 2**r required-name states pass the budget is guarded: its states forget the names
    seen and the parser checks them (ObjectGuards) at the close. Any order, each name required, a key may
    repeat, and the masks refuse the close (alone or inside a token) until every name is there."""
    from cad_outlines.engine.frontend.json_schema import grammar as G

    names = [f"p{i}" for i in range(14)]
    schema = {"type": "object", "properties": {"small": {"type": "object", "properties": {"x": {}, "y": {}},
                                                         "required": ["x", "y"]},
                                               **{n: {"type": "integer"} for n in names}},
              "required": names}
    sg = G.build_grammar(schema, property_order="any")  # no SchemaOrderWarning (the suite makes warnings errors)
    assert sorted(sg.guards.values()) == [-1, *range(1, 15)]  # 14 members and the close (the small one fits)
    assert sg.checks == ((2 ** 14 - 1,),)  # the close: all 14 names seen
    assert len(sg.rule_list) < 200
    g = compile_json_schema(schema, vocab, cache=False, property_order="any")
    inner = ", ".join(f'"{n}": 1' for n in names)
    assert accepts(g, vocab, '{"small": {"y": 1, "x": 2}, ' + inner + "}")
    swapped = ", ".join(f'"{n}": {i}' for i, n in enumerate(reversed(names)))
    assert accepts(g, vocab, "{" + swapped + "}")
    assert accepts(g, vocab, "{" + swapped + ', "p3": 7}')  # a key may repeat
    assert not accepts(g, vocab, "{" + swapped + ', "p3": "s"}')  # its value still checked
    assert not accepts(g, vocab, "{" + ", ".join(f'"{n}": 1' for n in names[1:]) + "}")  # p0 missing
    assert not accepts(g, vocab, '{"small": {"x": 2}, ' + inner + "}")  # y missing (small: 2**2 parser states)
    missing = "{" + ", ".join(f'"{n}": 1' for n in names[:-1])
    m = Matcher(g)
    m.advance_many(encode(vocab, missing.encode()))
    allowed = m.allowed_mask()
    assert not any(allowed[t] for t in range(len(allowed)) if b"}" in vocab.decode([t]))
    assert allowed[encode(vocab, b",")[0]]
    m.advance_many(encode(vocab, f', "{names[-1]}": 1'.encode()))
    assert m.allowed_mask()[encode(vocab, b"}")[0]]
    m.rollback(len(encode(vocab, f', "{names[-1]}": 1'.encode())))  # back before the last name: '}' refused again
    assert not m.allowed_mask()[encode(vocab, b"}")[0]]


def test_guarded_objects_give_the_masks_of_their_required_name_states(vocab, monkeypatch):
    """Exactness of ObjectGuards: with no any-order budget every object is guarded; its masks equal, at every
    prefix of valid and invalid texts in random key orders, those of the grammar that tracks the names in
    parser states (nested objects, objects in arrays, a $ref, minProperties; lazy and eager stores)."""
    import random

    from cad_outlines.engine.frontend.json_schema import grammar as G

    d = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "null"}}, "required": ["x", "y"],
         "additionalProperties": False}
    schema = {"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3}, "c": {"type": "boolean"}, "d": d,
        "e": {"type": "array", "items": {"$ref": "#/properties/d"}}, "f": {"type": "null"}},
        "required": ["a", "b", "c", "d"], "additionalProperties": False, "minProperties": 5}
    pairs = []
    for lazy in (True, False):
        states = compile_json_schema(schema, vocab, cache=False, property_order="any", whitespace="compact",
                                     lazy=lazy)
        with monkeypatch.context() as mp:
            mp.setattr(G, "MAX_ANY_ORDER_EDGES", 0)
            assert len(G.build_grammar(schema, property_order="any").guards) == 11  # 3 objects: 8 members, 3 closes
            guarded = compile_json_schema({"title": "guarded", **schema}, vocab, cache=False, property_order="any",
                                          whitespace="compact", lazy=lazy)
        pairs.append((states, guarded))
    rnd = random.Random(7)

    def small():
        v = {"x": rnd.randint(0, 9), "y": None}
        if rnd.random() < 0.3:
            v.pop(rnd.choice(["x", "y"]))
        return dict(rnd.sample(list(v.items()), len(v)))

    positions = 0
    for _ in range(40):
        full = {"a": rnd.randint(-3, 30), "b": rnd.choice(["", "ab", "abcd"]), "c": True, "d": small(),
                "e": [small() for _ in range(rnd.randint(0, 2))], "f": None}
        keys = [k for k in full if rnd.random() < 0.85]
        rnd.shuffle(keys)
        value = {k: full[k] for k in keys}
        ids = encode(vocab, json.dumps(value, separators=(",", ":")).encode())
        for states, guarded in pairs:
            m1, m2 = Matcher(states), Matcher(guarded)
            for t in ids:
                a = m1.allowed_mask()
                assert (a == m2.allowed_mask()).all()
                positions += 1
                if not a[t]:
                    break
                m1.advance(t)
                m2.advance(t)
            else:
                assert m1.is_accepting() == m2.is_accepting() == valid(schema, value)
    assert positions > 1000


def _same_masks(states, guarded, vocab, schema, values) -> set[bool]:
    """Teacher-force each value (compact JSON) through two grammars of `schema`: their masks are equal at
    every prefix and the verdict is jsonschema's. Returns the verdicts seen."""
    verdicts = set()
    for value in values:
        m1, m2 = Matcher(states), Matcher(guarded)
        accepted = True
        for t in encode(vocab, json.dumps(value, separators=(",", ":")).encode()):
            a = m1.allowed_mask()
            assert (a == m2.allowed_mask()).all(), value
            if not a[t]:
                accepted = False
                break
            m1.advance(t)
            m2.advance(t)
        accepted = accepted and m1.is_accepting() == m2.is_accepting() is True
        assert accepted == valid(schema, value), value
        verdicts.add(accepted)
    return verdicts


def test_guarded_names_of_a_oneof_object_are_those_of_a_leaf_every_branch_needs(vocab, monkeypatch):
    """A oneOf object is read by a labelled product over its leaves (the base and each branch). The names
    only the base requires are guarded (the base failing fails the oneOf: every label written has it
    holding), the branches' names stay in parser states; masks equal those of the grammar that tracks every
    name in states at every prefix of 80 random texts. Under `not`, the object (past the budget: a labelled
    product is guarded only then) is asked for the label no guard decides, and the schema is built again
    guarding only objects that must hold."""
    import random
    import warnings

    from cad_outlines.engine.frontend.json_schema import grammar as G

    base = [f"b{i}" for i in range(6)]
    schema = {"type": "object", "properties": {**{n: {"type": "integer"} for n in base}, "kind": {"type": "string"},
                                               "x": {"type": "string"}, "y": {"type": "integer"}},
              "required": base,
              "oneOf": [{"properties": {"kind": {"const": "a"}}, "required": ["kind", "x"]},
                        {"properties": {"kind": {"const": "b"}}, "required": ["kind", "y"]}]}
    assert not G.build_grammar(schema, property_order="any").guards  # (its states fit the budget)
    monkeypatch.setattr(G, "MAX_ANY_ORDER_EDGES", 400)  # (they do not: past the budget, guarded)
    sg = G.build_grammar(schema, property_order="any")
    assert sorted(set(sg.guards.values())) == [-1, *range(1, 8)] and sg.checks == ((2 ** 7 - 1,),)  # "kind" too
    plain = {"type": "object", "properties": {n: {"type": "integer"} for n in base}, "required": base}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (under `not` the object passes the budget: declared order)
        assert not G.build_grammar({"type": "array", "items": {"not": schema}}, property_order="any").guards
        mixed = G.build_grammar({"type": "array", "prefixItems": [plain, {"not": schema}]}, property_order="any")
    assert sorted(mixed.guards.values()) == [-1, *range(1, 7)] and mixed.checks == ((2 ** 6 - 1,),)  # the plain
    # object keeps its guard
    guarded = compile_json_schema(schema, vocab, cache=False, property_order="any", whitespace="compact")
    with monkeypatch.context() as mp:
        mp.setattr(G, "GUARD_FROM", 99)
        mp.setattr(G, "MAX_ANY_ORDER_EDGES", 10**6)
        assert not G.build_grammar(schema, property_order="any").guards
        states = compile_json_schema({"title": "states", **schema}, vocab, cache=False, property_order="any",
                                     whitespace="compact")
    rnd = random.Random(3)
    values = []
    for _ in range(80):
        full = {**{k: rnd.randint(0, 9) for k in base}, "kind": rnd.choice(["a", "b", "c"]), "x": "s", "y": 1}
        keys = [k for k in full if rnd.random() < 0.85]
        rnd.shuffle(keys)
        values.append({k: full[k] for k in keys})
    assert _same_masks(states, guarded, vocab, schema, values) == {True, False}


_FULL_GUARD_CASES = {
    # at least one of two sets of names (an anyOf of required lists: one object that must hold)
    "anyOf required": ({"type": "object", "properties": {k: {"type": "integer"} for k in "abcde"}, "required": ["a"],
                        "anyOf": [{"required": ["b"]}, {"required": ["c", "d"]}], "additionalProperties": False},
                       ((0b11, 0b1101),)),
    # ... with a name one of them forbids (labelled: its leaves under `not`)
    "anyOf and a dependency": ({"type": "object", "properties": {k: {"type": "integer"} for k in "abcde"},
                                "required": ["a"], "anyOf": [{"required": ["b"]}, {"required": ["c", "d"]}],
                                "dependencies": {"b": {"properties": {"e": {"not": {}}}}}}, None),
    # a oneOf told apart by a discriminator's value, each branch requiring names of its own
    "oneOf discriminator": ({"type": "object", "properties": {"kind": {"enum": ["p", "q"]}, "n": {"type": "string"},
                                                              **{k: {"type": "integer"} for k in "uvw"}},
                             "required": ["kind", "n"],
                             "oneOf": [{"properties": {"kind": {"const": "p"}}, "required": ["u", "v"]},
                                       {"properties": {"kind": {"const": "q"}}, "required": ["w"]}]}, None),
}


@pytest.mark.parametrize("case", sorted(_FULL_GUARD_CASES))
def test_full_guards_check_per_end_the_names_its_label_needs(vocab, monkeypatch, case):
    """Past the budget with the names every form needs, an object guards every required name that has a
    value all its leaves accept: the states track only the others (a discriminator), and each end state's
    close checks the names its label needs, as one of several sets (ObjectGuards' checks). Masks equal
    those of the grammar that tracks every name in states at every prefix of 150 random texts, and the
    verdicts jsonschema's."""
    import random

    from cad_outlines.engine.frontend.json_schema import grammar as G

    schema, checks = _FULL_GUARD_CASES[case]
    names = list(schema["properties"])
    with monkeypatch.context() as mp:
        mp.setattr(G, "MAX_ANY_ORDER_EDGES", 10)
        mp.setattr(G, "MAX_ANY_ORDER_EDGES_EACH", 200)
        mp.setattr(G._ObjectProduct, "guardable", lambda self: frozenset())  # (straight to the full guard)
        sg = G.build_grammar(schema, property_order="any")  # no SchemaOrderWarning: any order kept
        assert sg.guards and sg.checks
        if checks is not None:
            assert sg.checks == checks
        guarded = compile_json_schema(schema, vocab, cache=False, property_order="any", whitespace="compact")
    assert not G.build_grammar(schema, property_order="any").guards  # (it fits the budget: every name in states)
    states = compile_json_schema(schema, vocab, cache=False, property_order="any", whitespace="compact")
    rnd = random.Random(5)
    values = []
    for _ in range(150):
        full = {k: rnd.choice(["p", "q", "r"]) if k == "kind" else "s" if k == "n" else rnd.randint(0, 9)
                for k in names}
        keys = [k for k in full if rnd.random() < 0.6]
        rnd.shuffle(keys)
        values.append({k: full[k] for k in keys})
    assert _same_masks(states, guarded, vocab, schema, values) == {True, False}


def test_a_guard_that_would_leave_a_dead_end_is_not_kept(monkeypatch):
    """A guarded product takes its guarded names as seen, so a state may look live only because a name it
    has not seen is taken as there: here, once m fails the first branch, only the second can hold, and it
    refuses the required n. Such a name is tracked in states instead (the liveness check), so masks admit
    no dead end: after `{"m":3` the comma is refused (digits are not: 35 passes), as the grammar that
    tracks every name in states does."""
    from cad_outlines.engine.frontend.json_schema import grammar as G

    base = [f"b{i}" for i in range(6)]
    schema = {"type": "object", "properties": {**{k: {"type": "integer"} for k in base}, "n": {"type": "integer"},
                                               "m": {"type": "integer"}},
              "required": [*base, "n"], "anyOf": [{"properties": {"m": {"minimum": 5}}}, {"properties": {"n": False}}]}
    sg = G.build_grammar(schema, property_order="any")
    assert sorted(set(sg.guards.values())) == [-1, *range(1, 7)] and sg.checks == ((2 ** 6 - 1,),)  # not n
    vocab = Vocabulary.of_bytes()
    guarded = compile_json_schema(schema, vocab, cache=False, property_order="any", whitespace="compact")
    with monkeypatch.context() as mp:
        mp.setattr(G, "GUARD_FROM", 99)
        states = compile_json_schema({"title": "states", **schema}, vocab, cache=False, property_order="any",
                                     whitespace="compact")
    for g in (guarded, states):
        assert Matcher(g).validate(list(b'{"m":3,')) == 6
        assert Matcher(g).validate(list(b'{"m":35,')) == 8
        m = Matcher(g)
        text = json.dumps({"m": 35, "n": 1, **{k: 0 for k in base}}, separators=(",", ":")).encode()
        assert m.validate(list(text)) == len(text)
        m.advance_many(list(text))
        assert m.is_accepting()


def test_full_guards_refuse_what_no_set_of_names_decides(monkeypatch):
    """A oneOf whose branches differ only in the names they require (no value tells them apart): adding the
    other branch's names makes the object invalid, which no close check can see, so the object is not
    guarded (past the budget it keeps its declared order, with a warning)."""
    from cad_outlines.engine.frontend.json_schema import SchemaOrderWarning
    from cad_outlines.engine.frontend.json_schema import grammar as G

    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in "abcde"},
              "oneOf": [{"required": ["a", "b"]}, {"required": ["c"]}]}
    monkeypatch.setattr(G, "MAX_ANY_ORDER_EDGES", 10)
    monkeypatch.setattr(G, "MAX_ANY_ORDER_EDGES_EACH", 60)
    with pytest.warns(SchemaOrderWarning):
        sg = G.build_grammar(schema, property_order="any")
    assert not sg.guards


def test_guarded_objects_that_overlap_an_alternative_are_built_again_without_guards(vocab):
    """Where a property's value is split into "X holds" and "X fails", a guarded X (its rules admit objects
    missing names) overlaps the other region: LALR conflicts, so compile_json_schema builds the schema again
    without guards (X's required names then in parser states). Objects that must hold with GUARD_FROM or more
    required names are guarded at once, the others only past the budget."""
    from cad_outlines.engine.compile_profile import CompileProfile
    from cad_outlines.engine.frontend.json_schema import grammar as G

    names = list("abcdef")
    assert len(names) >= G.GUARD_FROM
    x = {"type": "object", "properties": {k: {"type": "integer"} for k in names}, "required": names}
    assert len(G.build_grammar(x, property_order="any").guards) == len(names) + 1
    assert not G.build_grammar({**x, "required": names[:2]}, property_order="any").guards
    schema = {"anyOf": [{"type": "object", "properties": {"p": x}, "required": ["p"]},
                        {"type": "object", "properties": {"q": {"type": "null"}}, "required": ["q"]}]}
    assert G.build_grammar(schema, property_order="any").guards
    prof = CompileProfile(memory=False)
    g = compile_json_schema(schema, vocab, cache=False, property_order="any", profile=prof)
    assert [p.name for p in prof.phases].count("lark load") == 2
    full = ", ".join(f'"{k}": 1' for k in reversed(names))
    assert accepts(g, vocab, '{"p": {' + full + "}}")
    assert not accepts(g, vocab, '{"p": {' + full.replace('"a": 1', '"g": 1') + "}}")
    assert accepts(g, vocab, '{"p": {' + full.replace('"a": 1', '"g": 1') + '}, "q": null}')


def test_any_property_order_keeps_the_declared_order_of_objects_it_cannot_guard(vocab):
    """An object past the budget that the parser cannot guard (here maxProperties: a prefix with too many
    optional names could no longer end) keeps its declared order, with a SchemaOrderWarning."""
    from cad_outlines.engine.frontend.json_schema import SchemaOrderWarning

    names = [f"p{i}" for i in range(14)]
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names + ["q"]}, "required": names,
              "maxProperties": 14}
    with pytest.warns(SchemaOrderWarning, match="15 properties .14 required. in any order"):
        g = compile_json_schema(schema, vocab, cache=False, property_order="any")
    assert accepts(g, vocab, "{" + ", ".join(f'"{n}": 1' for n in names) + "}")
    swapped = ", ".join(f'"{n}": 1' for n in [names[1], names[0], *names[2:]])
    assert not accepts(g, vocab, "{" + swapped + "}")  # declared order (narrower, never wider)
    with pytest.raises(ValueError, match="property_order"):
        compile_json_schema(schema, vocab, cache=False, property_order="sorted")


def test_schemas_differing_only_in_property_order_each_keep_their_order(vocab, tmp_path):
    """The compile cache and the sub-schema rules were keyed by sorted JSON: the second schema got the first's
    order and rejected its own (found with the vLLM request fields). Nested, in the same process and cache."""
    for cache in (False, tmp_path):
        for outer in ("x", "y"):
            ab = {"type": "object", "properties": {outer: {"type": "object", "properties": {"a": {}, "b": {}}}}}
            ba = {"type": "object", "properties": {outer: {"type": "object", "properties": {"b": {}, "a": {}}}}}
            g_ab = compile_json_schema(ab, vocab, cache=cache)
            g_ba = compile_json_schema(ba, vocab, cache=cache)
            assert accepts(g_ab, vocab, f'{{"{outer}": {{"a": 1, "b": 2}}}}')
            assert accepts(g_ba, vocab, f'{{"{outer}": {{"b": 2, "a": 1}}}}')
            assert not accepts(g_ba, vocab, f'{{"{outer}": {{"a": 1, "b": 2}}}}')


def test_colliding_terminals_stay_exact(vocab):
    """A key's text as a string value, a pattern string beside any string, overlapping patterns and
    overlapping number ranges: the lexer's first-match choice never loses a valid text."""
    schema = {"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$"}, "name": {"type": "string"},
        "p": {"type": "string", "pattern": "a"}, "q": {"type": "string", "pattern": "b"},
        "lo": {"type": "integer", "maximum": 10}, "hi": {"type": "integer", "minimum": 5},
        "any": {"type": "number"}}}
    g = compile_json_schema(schema, vocab, cache=False)
    for v in [{"id": "12", "name": "12"}, {"name": "id"}, {"name": "name"}, {"p": "ab", "q": "ab"},
              {"p": "a", "q": "a"},
              {"lo": 7, "hi": 7}, {"lo": 3, "hi": 3}, {"lo": 11}, {"any": 7}, {"any": 7.5e3}, {"id": "1a"}]:
        assert accepts(g, vocab, dump(v)) == valid(schema, v), v


def test_eos_only_when_the_value_is_complete(vocab):
    g = compile_json_schema({"type": "integer", "minimum": 10}, vocab, cache=False)
    assert not accepts(g, vocab, "1")  # a prefix of 10..19, not a valid value
    assert accepts(g, vocab, "12")



@pytest.mark.parametrize("schema", [
    {"if": {"properties": {"k": {"const": False}}}, "then": {"type": "object"}},
    {"if": {"properties": {"k": {"type": "string", "enum": ["a", 1]}}, "required": ["k"]},
     "then": {"required": ["t"]}, "else": {"type": "object", "required": ["e"]}},
])
def test_if_on_one_property_holds_for_every_value_that_is_not_an_object(vocab, schema):
    """An `if` pinning one property (read as a union: then-side with the property's values, else-side
    without) holds for strings, numbers and arrays: they take the then side only (a fuzzer case: the
    else side admitted `""` against `then: {type: object}`)."""
    g = compile_json_schema(schema, vocab, cache=False, property_order="any")
    values = ["", 1, [], None, {}, {"k": False}, {"k": 1}, {"k": "a"}, {"k": "a", "t": 0}, {"k": 1, "e": 0},
              {"k": 1, "t": 0}, {"e": 0}, {"k": True}]
    for v in values:
        assert accepts(g, vocab, dump(v)) == valid(schema, v), v


def test_exponent_spellings_a_bound_cannot_decide_are_left_out_without_dead_ends(vocab):
    """A number class with a bound other than 0 (or multipleOf, or integer) is written without an
    exponent, so an exponent spelling outside it may still have a value inside it: where the verdict
    depends on that (a oneOf whose other branch takes every number), exponent spellings are not admitted
    (3E+9 is >= 2.5: both branches would hold), and the numbers left are one terminal of their own, so no
    prefix is admitted that only a refused number continues (`8` could only go on as 8e-1)."""
    schema = {"oneOf": [{"properties": {"a": {}}}, {"type": "number", "minimum": 2.5}]}
    g = compile_json_schema(schema, vocab, cache=False)
    for text in ["3E+9", "8", "2.5", "1e-1", "2656493421e6"]:
        assert not accepts(g, vocab, text), text
    for text in ["1", "2.4", "-7", "0", "{}", '"x"']:
        assert accepts(g, vocab, text) and valid(schema, json.loads(text)), text
    m = Matcher(g)
    ids = encode(vocab, b"8")
    assert m.validate(ids) == 0  # `8` begins no admitted number
    schema = {"not": {"multipleOf": 0.5}}  # (every non-number is a multiple: refused)
    g = compile_json_schema(schema, vocab, cache=False)
    for text, ok in [("0.3", True), ("-2.25", True), ("1.5", False), ("3E+9", False), ("15e-1", False), ('"s"', False)]:
        assert accepts(g, vocab, text) == ok, text
        assert valid(schema, json.loads(text)) == ok, text


CONTAINS = [
    {"type": "array", "contains": {"type": "integer", "minimum": 3}},
    {"type": "array", "contains": {"const": "a"}, "minContains": 2, "maxContains": 3},
    {"type": "array", "contains": {"const": "a"}, "minContains": 0, "maxContains": 1},
    {"not": {"contains": {"type": "string"}}},
    {"oneOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}}]},
    {"type": "array", "items": {"type": "integer"}, "contains": {"maximum": 0}, "maxItems": 3},
    {"allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}}], "prefixItems": [{"const": 2}]},
]
ARRAYS = [[], [1], [3], [1, 5], ["a"], ["a", "a"], ["a", "a", "a", "a"], [1, 2], [2], [0, 1], ["x", 1], 5, "s",
          [-1, 4, 7], [1, 1], [2, 1], [1, 2, 0, 3], ["a", "b", "a"]]


@pytest.mark.parametrize("schema", CONTAINS)
def test_contains_counts_the_items_that_match(vocab, schema):
    """`contains` (with minContains/maxContains): the array's product counts the items matching its schema,
    each item's value split by its item schema and the contains schema at once; under `not` and `oneOf` too."""
    g = compile_json_schema(schema, vocab, cache=False)
    for v in ARRAYS:
        assert accepts(g, vocab, dump(v)) == valid(schema, v), (schema, v)


@pytest.mark.parametrize("schema", [
    {"not": {"type": "integer"}},
    {"type": "number", "not": {"type": "integer"}},
    {"type": ["number", "string"], "not": {"type": ["integer", "string"]}},
    {"$schema": "http://json-schema.org/draft-04/schema#", "not": {"type": "integer"}},
])
def test_not_integer_admits_exactly_the_non_integral_numbers(vocab, schema):
    """`not {type: integer}` on numbers: a check the grammar decides on the number's spelling (1.0 is an
    integer from draft 6 on, not in draft 4); an exponent spelling it cannot decide is left out (narrower)."""
    g = compile_json_schema(schema, vocab, cache=False)
    for text in ["1", "1.0", "1.5", "-0.5", "0", "2.50", "-0.0", "10.01", '"s"', "null", "[]", "1e2", "1.5e1"]:
        ok, want = accepts(g, vocab, text), valid(schema, json.loads(text))
        assert ok == want or ("e" in text and not ok), (schema, text)


UNIQUE = [
    {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True},
    {"type": "array", "items": {"enum": [1, 1.0, 2, "1", None]}, "uniqueItems": True, "minItems": 2},
    {"not": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}},
    {"oneOf": [{"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True},
               {"type": "array", "items": {"const": "a"}}]},
    {"$schema": "http://json-schema.org/draft-04/schema#", "items": [{"type": "boolean"}, {"type": "boolean"}],
     "uniqueItems": True, "additionalItems": False},
]
UNIQUE_VALUES = [[], ["a"], ["a", "a"], ["a", "b"], ["b", "a", "c"], ["a", "b", "a"], [True, False], [True, True],
                 [1, 1.0], [1, 2], [1, "1"], [None, None], ["d"], 5, ["a", 1], [False, True, None]]


@pytest.mark.parametrize("schema", UNIQUE)
def test_unique_items_over_a_finite_set_of_scalars(vocab, schema):
    """uniqueItems where every item comes from an enum of scalars, booleans or null: the array's product
    keeps the set of values seen (1 and 1.0 are one value, "1" another); under `not`/`oneOf` and draft 4 too."""
    g = compile_json_schema(schema, vocab, cache=False)
    for v in UNIQUE_VALUES:
        assert accepts(g, vocab, dump(v)) == valid(schema, v), (schema, v)


@pytest.mark.parametrize("schema,why", [
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "finite set of scalars"),
    ({"type": "array", "uniqueItems": True}, "may be any value"),
    ({"type": "array", "items": {"enum": list("abcdefghijk")}, "uniqueItems": True}, "11 values"),
])
def test_unique_items_over_unbounded_or_large_sets_are_refused(vocab, schema, why):
    with pytest.raises(SchemaError) as e:
        compile_json_schema(schema, vocab, cache=False)
    assert e.value.keyword == "uniqueItems" and why in str(e.value)

# -- automata against Python's own semantics -------------------------------------------------

NUMBERS = st.builds(lambda s, i, f: f"{s}{i}{f}", st.sampled_from(["", "-"]),
                    st.sampled_from(["0", "1", "2", "5", "10", "99", "150"]),
                    st.sampled_from(["", ".0", ".5", ".25", ".125", ".75"]))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_number_automaton_is_exact(data):
    bound = st.one_of(st.none(), st.sampled_from([Fraction(0), Fraction(5), Fraction(-3), Fraction("2.5"),
                                                 Fraction("-0.25"), Fraction(100)]))
    spec = NumberSpec(data.draw(st.booleans()), data.draw(bound), data.draw(st.booleans()), data.draw(bound),
                      data.draw(st.booleans()), data.draw(st.sampled_from([None, Fraction(3), Fraction("0.5")])))
    dfa = number_dfa(spec)
    for text in data.draw(st.lists(NUMBERS, min_size=5, max_size=20)):
        want = spec.contains(Fraction(text))
        assert dfa.fullmatch(text.encode()) == want, (spec, text)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["^a+$", "ab", "^x", "y$", "a|^b", "[0-9]{2,3}", "^(?:foo|bar)-[a-z]*$",
                        # anchors inside groups and repeats, MULTILINE, \\A and \\Z (MaskBench has these)
                        "(^[a-b0-9-]+$)", "^$|(^(?:\\S+\\s+){0,2}\\S+$)", "(^a.+)|(^[0-9]+)", "^([^,]+(,|$)){2,}$",
                        "(a|^b)x", "(?m)^a$", "\\Aab\\Z", "ab|ba|fo",
                        # a lookbehind sees the string's own characters (none before its start)
                        "(?<=a)b", "(?<!a)b", "^(?<!x)a", "(?<=[0-9])x$"]),
       st.text(alphabet="abxy019-fo\nr ,", max_size=8))
def test_pattern_has_search_semantics(pattern, s):
    dfa = S.json_string_dfa(S.pattern_dfa(pattern))
    assert dfa.fullmatch(json.dumps(s).encode()) == bool(re.search(pattern, s))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(FORMATS)), st.one_of(
    st.text(alphabet="0123456789-:.TZtz+ ", max_size=25), st.text(alphabet="0123456789abcdefABCDEF:.-", max_size=40),
    st.sampled_from(["2020-02-29", "2019-02-29", "2000-02-29", "1900-02-29", "0000-01-01", "23:59:59Z",
                     "24:00:00Z", "::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::1.2.3.4",
                     "1::2:3:4:5:6:7:8", "fe80::1%eth0", "http://x.org/a?b#c", "a:b", "//host", "mailto:x@y",
                     "1.2.3.4", "1.2.3.04", "a@b", "http://[::1]:80/", "P1Y2M3DT4H5M6S", "PT0.5S", "P1W"])))
def test_formats_agree_with_jsonschema(fmt, s):
    assert fmt in FORMAT_CHECKER.checkers, f"the test extra installs the checker of {fmt!r}"
    dfa = S.json_string_dfa(S.regex_to_codepoint_dfa(FORMATS[fmt]))
    assert dfa.fullmatch(json.dumps(s, ensure_ascii=False).encode()) == FORMAT_CHECKER.conforms(s, fmt), (fmt, s)


DURATION_PARTS = ["P", "-P", "+P", "T", "Y", "M", "D", "W", "H", "S", "0", "1", "25", "0.5", ",5", "1.", "e3", "E-2",
                  "+", "-", "e", ".", ",", "y", "h", "x", " ", "\n", "0e999999", "1e99999"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(DURATION_PARTS), max_size=9))
def test_duration_agrees_with_jsonschema(parts):
    """ISO 8601 durations as isoduration parses them (jsonschema's checker): designator order, W only
    after zero values, a dropped number before T, decimal commas and exponents."""
    s = "".join(parts)
    assert _duration_dfa().fullmatch(json.dumps(s).encode()) == FORMAT_CHECKER.conforms(s, "duration"), s


@functools.cache
def _duration_dfa():
    return S.json_string_dfa(S.regex_to_codepoint_dfa(FORMATS["duration"]))


@pytest.mark.parametrize("s,ok", [
    ("P3Y6M4DT12H30M5S", True), ("-P1.5e2D", True), ("P0Y0.0M-0D2W", True), ("P,0Y2W", True), ("PT1,5H2.S", True),
    ("P1Y2T3H", True), ("P1,5T3H", True), ("PT1H", True), ("P1e00099999Y", True), ("P1W", True), ("+PT.5S", True),
    ("P1Y2W", False), ("P0Y1D2W", False), ("P12T3H", False), ("P1-2T3H", False), ("PT", False), ("P", False),
    ("-P", False), ("P1M1Y", False), ("P1Y2", False), ("PT1D", False), ("P1H", False), ("p1y", False),
    ("P1yT", False), ("PY", False), ("P.Y", False), ("P1..5Y", False), ("P1e5e5Y", False), ("P1Y\n", False),
    ("P2020-01-01T10:00:00H", False), ("P1e100000Y", False),  # the last: valid, refused (exponent > 5 digits)
])
def test_duration_cases(s, ok):
    assert _duration_dfa().fullmatch(json.dumps(s).encode()) == ok, s
    if s != "P1e100000Y":
        assert FORMAT_CHECKER.conforms(s, "duration") == ok, s


def test_string_spellings_decode_to_the_class():
    dfa = S.json_string_dfa(S.any_string(2, 2))
    for text, want in [('"ab"', True), ('"a\\n"', True), ('"\\u0001\\""', True), ('"\\u0041b"', False),
                       ('"a\x01"', False), ('"\\/x"', True), ('"é€"', True), ('"abc"', False)]:
        assert dfa.fullmatch(text.encode()) == want, text


# -- property-based: instances from the schema, and random JSON ---------------------------------

HAND_WRITTEN = [
    PERSON,
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": -5, "maximum": 5},
                                      "b": {"type": "array", "items": {"type": "boolean"}, "minItems": 1,
                                            "maxItems": 2}},
     "required": ["a"], "additionalProperties": False},
    {"type": "array", "items": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 3}]}},
]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-200, 200) | st.sampled_from([0.5, -1.5, 2.25, 1e3]) |
    st.text(alphabet="abAZ09_-@é\"\\\n", max_size=6),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
        st.sampled_from(["name", "age", "a", "b", "tags", "kind", "x", "score"]), kids, max_size=4),
    max_leaves=8)


def _schema_order(schema, value):
    """`value` with each object's declared properties first, in schema order (the language's order)."""
    if isinstance(value, dict) and isinstance(schema, dict):
        props = schema.get("properties", {})
        out = {k: _schema_order(props[k], value[k]) for k in props if k in value}
        out.update({k: v for k, v in value.items() if k not in props})
        return out
    if isinstance(value, list) and isinstance(schema, dict) and isinstance(schema.get("items"), dict):
        return [_schema_order(schema["items"], v) for v in value]
    return value


@pytest.mark.parametrize("index", range(len(HAND_WRITTEN)))
def test_random_json_is_accepted_iff_valid(vocab, index):
    schema = HAND_WRITTEN[index]
    g = compile_json_schema(schema, vocab, cache=False)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(JSON_VALUES)
    def check(v):
        v = _schema_order(schema, v)
        assert accepts(g, vocab, dump(v)) == valid(schema, v), dump(v)

    check()


def instances(schema):
    """Valid instances of the hand-written schemas' keywords (a small generator: hypothesis-jsonschema
    does not run on this hypothesis)."""
    if "anyOf" in schema:
        return st.one_of([instances(s) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    t = schema.get("type")
    if t == "null":
        return st.none()
    if t == "boolean":
        return st.booleans()
    if t == "integer":
        hi = schema.get("maximum", 10**6)
        hi = hi - 1 if "exclusiveMaximum" in schema else hi
        return st.integers(schema.get("minimum", -10**6), min(hi, schema.get("exclusiveMaximum", hi + 1) - 1))
    if t == "number":
        # eighths: bounded numbers are written without an exponent (docs), as json.dumps writes these
        lo, hi = int(schema.get("minimum", -1e6) * 8), int(schema.get("maximum", 1e6) * 8)
        return st.integers(lo, hi).map(lambda i: i / 8)
    if t == "string":
        if "format" in schema:
            return st.builds(lambda a, b: f"{a}@{b}", st.text(max_size=3), st.text(max_size=3))
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 8))
    if t == "array":
        return st.lists(instances(schema.get("items", {"type": "null"})), min_size=schema.get("minItems", 0),
                        max_size=schema.get("maxItems", 4))
    props = schema.get("properties", {})
    req = schema.get("required", [])
    add = schema.get("additionalProperties", True)
    extra = st.just({}) if add is False else st.dictionaries(st.sampled_from(["zz", "extra"]), instances(add))
    return st.builds(lambda d, e: {**d, **e}, st.fixed_dictionaries({k: instances(props[k]) for k in req},
                                                                   optional={k: instances(v) for k, v in props.items()
                                                                             if k not in req}), extra)


@pytest.mark.parametrize("index", range(len(HAND_WRITTEN)))
def test_generated_valid_instances_are_accepted(vocab, index):
    schema = HAND_WRITTEN[index]
    g = compile_json_schema(schema, vocab, cache=False)

    @settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
    @given(instances(schema))
    def check(v):
        v = _schema_order(schema, v)
        assert valid(schema, v), v
        assert accepts(g, vocab, dump(v)), dump(v)

    check()


# -- refusals and limits ------------------------------------------------------------------------

@pytest.mark.parametrize("schema,keyword,pointer", [
    ({"type": "array", "uniqueItems": True}, "uniqueItems", "/uniqueItems"),
    ({"properties": {"h": {"type": "string", "format": "hostname"}}}, "format", "/properties/h/format"),
    ({"$ref": "http://example.com/s.json"}, "$ref", "/$ref"),
    ({"type": "object", "unevaluatedProperties": False}, "unevaluatedProperties", "/unevaluatedProperties"),
    ({"properties": {"p": {"type": "string", "pattern": "(a)\\1"}}}, "pattern", "/properties/p/pattern"),
    ({"type": "string", "pattern": "x(?<=ab)"}, "pattern", "/pattern"),
    ({"type": "string", "pattern": "["}, "pattern", "/pattern"),
    ({"type": "object", "patternProperties": {"(x)\\1": {}}}, "patternProperties", "/patternProperties/(x)\\1"),
])
def test_refusals_name_the_keyword_and_pointer(vocab, schema, keyword, pointer):
    with pytest.raises(SchemaError) as e:
        compile_json_schema(schema, vocab, cache=False)
    assert e.value.keyword == keyword and e.value.pointer == pointer, str(e.value)
    assert keyword in str(e.value) and "\n" not in str(e.value)


def test_length_bounds_up_to_4096_are_counted_exactly_and_larger_ones_refused():
    """maxLength 4096 (Snowplow's): the string automaton counts every character (a vocabulary of the 256
    bytes keeps the walks of 4,097 lexer positions quick); above 4096, or bounds summing past 16,384 in one
    schema, are refused naming the keyword."""
    from cad_outlines.engine.frontend.json_schema.grammar import MAX_COUNTED_CHARS, MAX_LENGTH_BOUND

    byte_vocab = Vocabulary.of_bytes()
    g = compile_json_schema({"type": "object", "properties": {"c": {"type": ["string", "null"], "maxLength": 4096},
                                                             "i": {"type": "string", "minLength": 600}}},
                            byte_vocab, cache=False)
    for text, want in [('{"c": "' + "é" * 4096 + '"}', True), ('{"c": "' + "a" * 4097 + '"}', False),
                       ('{"c": null, "i": "' + "x" * 600 + '"}', True), ('{"i": "' + "x" * 599 + '"}', False)]:
        assert accepts(g, byte_vocab, text) == want, (text[:20], len(text))
    with pytest.raises(SchemaError, match="maxLength 4097 is above 4096") as e:
        compile_json_schema({"properties": {"s": {"maxLength": MAX_LENGTH_BOUND + 1}}}, byte_vocab, cache=False)
    assert e.value.pointer == "/properties/s"
    many = {"properties": {f"s{i}": {"type": "string", "maxLength": 4000 + i} for i in range(5)}}
    with pytest.raises(SchemaError, match=f"sum to .* above {MAX_COUNTED_CHARS}") as e:
        compile_json_schema(many, byte_vocab, cache=False)
    assert e.value.keyword == "maxLength"


@pytest.mark.parametrize("depth", [400, 1000])
def test_nesting_past_the_recursion_limit_is_a_schema_error_not_a_crash(depth):
    """max_schema_depth lifted: a schema nested past what the front end's recursion reaches is refused
    naming the schema (was a RecursionError: MaskBench's Handwritten mod304 reaches it through recursive
    $refs whose constraints differ from level to level)."""
    s = {"type": "integer"}
    for i in range(depth):
        s = {"type": "object", "properties": {"a": s}, "required": ["a"]} if i % 2 else {"type": "array", "items": s}
    with pytest.raises(SchemaError, match="nests? too deeply") as e:
        compile_json_schema(s, Vocabulary.of_bytes(), cache=False, limits=Limits(max_schema_depth=None))
    assert e.value.keyword == "schema"


def test_coerce_one_of_treats_overlapping_branches_as_any_of(vocab):
    g = compile_json_schema({"oneOf": [{"type": "integer"}, {"type": "string"}]}, vocab, cache=False)
    assert accepts(g, vocab, "1") and accepts(g, vocab, '"a"')
    exact = compile_json_schema({"oneOf": [{"type": "integer"}, {"type": "number"}]}, vocab, cache=False)
    assert accepts(exact, vocab, "1.5") and not accepts(exact, vocab, "1")  # 1 matches both branches
    g = compile_json_schema({"oneOf": [{"type": "integer"}, {"type": "number"}]}, vocab, cache=False,
                            coerce_one_of=True)
    assert accepts(g, vocab, "1.5") and accepts(g, vocab, "1")


def test_annotations_and_unknown_formats_are_ignored(vocab):
    g = compile_json_schema({"type": "string", "format": "int32", "title": "t", "description": "d", "examples": [1],
                             "default": "x", "x-custom": 1}, vocab, cache=False)
    assert accepts(g, vocab, '"anything"')


def test_hostile_schemas_stop_within_the_limits(vocab):
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(40_000)}}
    with pytest.raises(ResourceLimitError):
        compile_json_schema(huge, vocab, cache=False)
    deep: dict = {"type": "integer"}
    for _ in range(3000):
        deep = {"type": "array", "items": deep}
    with pytest.raises((ResourceLimitError, SchemaError)):
        compile_json_schema(deep, vocab, cache=False)
    with pytest.raises((ResourceLimitError, SchemaError)):
        compile_json_schema({"type": "string", "pattern": "^(a|b)*a(a|b){40}$"}, vocab, cache=False)
    # a long counted repeat is refused before its subset construction (minutes), naming keyword and pointer
    with pytest.raises(ResourceLimitError, match="max_dfa_states") as e:
        compile_json_schema({"properties": {"p": {"pattern": "[^y]{32000}"}}}, vocab, cache=False)
    assert "pattern at '/properties/p/pattern'" in str(e.value)
    # the compile's clock: a zero budget stops it at its first check, lazy or eager (values unique to this test,
    # so no earlier test's terminal memo lets the lazy compile skip the loops that check it)
    many = {"type": "object",
            "properties": {f"p{i}": {"enum": [f"hostile-{i}-{j}" for j in range(50)]} for i in range(300)}}
    for lazy in (True, False):
        with pytest.raises(ResourceLimitError, match="max_compile_seconds"):
            compile_json_schema(many, vocab, cache=False, lazy=lazy, limits=Limits(max_compile_seconds=0.0))


def test_cached_in_process_and_on_disk(vocab, tmp_path):
    from cad_outlines.engine.compile import wait_for_cache_writes

    schema = {"type": "object", "properties": {"cached": {"type": "integer"}}}
    g1 = compile_json_schema(schema, vocab, cache=tmp_path)
    assert compile_json_schema(json.dumps(schema), vocab, cache=tmp_path) is g1
    wait_for_cache_writes()
    assert any(p.name.startswith("lazy-schema-") for p in tmp_path.iterdir())
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    assert compile_json_schema(path, vocab, cache=tmp_path) is g1


def test_each_caller_keeps_its_own_limits_on_a_grammar_kept_in_process(vocab):
    """Two callers of the same schema with other limits: each handle keeps the limits it was asked with (a
    later call never changes an earlier handle's), and both share one native core, so rows one builds serve both."""
    schema = {"type": "object", "properties": {"own_limits": {"type": "integer"}}}
    tight = Limits(max_parser_stack_depth=64)
    g1 = compile_json_schema(schema, vocab, cache=False)
    g2 = compile_json_schema(schema, vocab, cache=False, limits=tight)
    assert g1.limits == Limits() and g2.limits == tight and g2 is not g1 and g2.native is g1.native
    assert compile_json_schema(schema, vocab, cache=False) is g1 and g1.limits == Limits()
    assert accepts(g2, vocab, '{"own_limits": 3}')


def test_eager_compile_gives_the_same_masks(vocab):
    import numpy as np

    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 3}, "b": {"enum": ["x", "y"]}}}
    lazy = compile_json_schema(schema, vocab, cache=False)
    eager = compile_json_schema(schema, vocab, cache=False, lazy=False)
    text = encode(vocab, b'{"a": 31, "b": "y"}')
    ml, me = Matcher(lazy), Matcher(eager)
    for t in text:
        assert np.array_equal(ml.allowed_mask(), me.allowed_mask())
        ml.advance(t)
        me.advance(t)
    assert ml.is_accepting() and me.is_accepting()


@pytest.mark.parametrize("schema, words", [
    ({"$ref": "#"}, "never reaches a value"),
    ({"anyOf": [{"$ref": "#"}, {"type": "integer"}]}, "never reaches a value"),
    ({"not": {"$ref": "#"}}, "through not/oneOf/if/dependencies"),
    ({"definitions": {"a": {"not": {"$ref": "#/definitions/a"}}}, "$ref": "#/definitions/a"},
     "through not/oneOf/if/dependencies"),
])
def test_a_reference_cycle_with_no_value_in_between_is_refused_naming_ref(vocab, schema, words):
    """A schema that is itself (directly, in a union, or under not) has no rule to write: refused on $ref with
    its pointer. Through an object or array it is plain recursion, compiled."""
    with pytest.raises(SchemaError, match=r"keyword \$ref: at .*" + re.escape(words)):
        compile_json_schema(schema, vocab, cache=False)
    tree = compile_json_schema({"type": "object", "properties": {"x": {"$ref": "#"}}}, vocab, cache=False)
    assert accepts(tree, vocab, '{"x": {"x": {}}}') and not accepts(tree, vocab, '{"x": 1}')


def test_any_property_order_over_its_rule_budget_builds_again_with_a_budget_per_object(vocab, monkeypatch):
    """The any-order budget is the schema's (MAX_ANY_ORDER_EDGES moves, all objects together); where the
    grammar it gives has over MAX_ANY_ORDER_RULES rules, the schema is built again with
    MAX_ANY_ORDER_EDGES_EACH moves per object: here the big object is then guarded (its required names
    checked beside the parser), in a few rules. Fixed numbers, not the active limits: the grammar does not
    depend on them."""
    import warnings

    from cad_outlines.engine.frontend.json_schema import grammar as G

    monkeypatch.setattr(G, "GUARD_FROM", 99)  # (10 required names are guarded at once otherwise)
    names = [f"p{i}" for i in range(10)]  # 2**10 required subsets x 11 names: within 16,384, over 4,096
    schema = {"type": "object", "properties": {"small": {"type": "object", "properties": {"x": {}, "y": {}},
                                                         "required": ["x", "y"]},
                                               **{n: {"type": "integer"} for n in names}},
              "required": names}
    inner = '{"small": {"y": 1, "x": 2}, '
    swapped = ", ".join(f'"{n}": 1' for n in [names[1], names[0], *names[2:]])
    g = compile_json_schema(schema, vocab, cache=False, property_order="any")  # any order: no warning
    assert accepts(g, vocab, inner + swapped + "}")
    assert not G.build_grammar(schema, property_order="any").guards  # in parser states
    monkeypatch.setattr(G, "MAX_ANY_ORDER_RULES", 2000)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        sg = G.build_grammar(schema, property_order="any")
    assert not warned
    assert len(sg.rule_list) < 2000 and sorted(sg.guards.values()) == [-1, *range(1, 11)]
    small = compile_json_schema({"title": "t", **schema}, vocab, cache=False, property_order="any")
    assert accepts(small, vocab, inner + swapped + "}")
    assert not accepts(small, vocab, inner + swapped.replace('"p5": 1, ', "") + "}")


def test_any_property_order_that_splits_a_value_too_finely_builds_again_with_a_budget_per_object(monkeypatch):
    """In any order a union of objects reads keys in one merged state, so a property's value is split by
    every branch's schema at once; past MAX_SPLIT the first build is refused ("anyOf") and the schema is
    built again with MAX_ANY_ORDER_EDGES_EACH moves per object (here none: declared order, as it compiles)."""
    import warnings

    from cad_outlines.engine.frontend.json_schema import SchemaOrderWarning
    from cad_outlines.engine.frontend.json_schema import grammar as G

    branches = [("circle", ["radius"]), ("rectangle", ["length", "width"]), ("triangle", ["base", "height"])]
    schema = {"type": "object", "oneOf": [
        {"properties": {**{n: {"type": "number"} for n in ns}, "shape": {"enum": [s]}}, "required": ["shape", *ns]}
        for s, ns in branches]}  # in declared order each branch reads its own names first
    monkeypatch.setattr(G, "MAX_SPLIT", 2)  # "shape" is decided by 3 schemas in the merged state
    G.build_grammar(schema, property_order="declared")
    with pytest.raises(SchemaError, match="decided by 3 different schemas"):  # the object fits 4,096 moves
        G.build_grammar(schema, property_order="any")
    monkeypatch.setattr(G, "MAX_ANY_ORDER_EDGES_EACH", 0)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        G.build_grammar(schema, property_order="any")
    assert warned and all(w.category is SchemaOrderWarning for w in warned)


def test_a_compile_pauses_the_cyclic_collector_and_restores_it(vocab, monkeypatch):
    """compile_json_schema runs with the cyclic GC paused (its allocations would start full collections of
    a server's heap) and leaves it as it found it: enabled or disabled, after a compile or a refusal."""
    import gc

    import cad_outlines.engine.frontend.json_schema as front

    during = []
    real = front.build_grammar

    def build(*a, **k):
        during.append(gc.isenabled())
        return real(*a, **k)

    monkeypatch.setattr(front, "build_grammar", build)
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            compile_json_schema({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}},
                                 "title": f"gc {enabled}"}, vocab, cache=False)
            assert gc.isenabled() is enabled
            with pytest.raises(SchemaError):
                compile_json_schema({"type": "array", "uniqueItems": True}, vocab, cache=False)
            assert gc.isenabled() is enabled
        assert during == [False] * 4
    finally:
        gc.enable()

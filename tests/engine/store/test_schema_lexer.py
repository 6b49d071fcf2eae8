"""The JSON Schema compile's fast paths build the same automata as the general ones: literal key and
enum terminals built as byte tries equal the code-point route, and the lexer arrays built natively
from the terminal DFAs (``lexer_tables.cpp``) equal those of the Python ``LexerSpec``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad_outlines.engine.frontend.json_schema import build_grammar
from cad_outlines.engine.frontend.json_schema import strings as S
from cad_outlines.engine.frontend.json_schema.lexicon import _literal_dfa, concat_suffix, punctuation
from cad_outlines.engine.store.flat_grammar import dfa_automaton_arrays, spec_automaton_arrays
from cad_outlines.engine.store.lexer import lexer_spec_from_dfas

CHARS = st.sampled_from(list("abXY_ -.:$0") + ["\u00e9", "\u6f22", "\U0001f600"])


def same(a, b) -> bool:
    return np.array_equal(a.trans, b.trans) and np.array_equal(a.accept, b.accept) and a.block is b.block is None


@settings(max_examples=60, deadline=None)
@given(st.frozensets(st.text(CHARS, max_size=6), min_size=1, max_size=4))
def test_literal_tries_equal_the_code_point_route(values):
    ref = S.json_string_dfa(S.literals(sorted(values)))
    assert same(_literal_dfa(values, None), ref)
    for ws in ("[ ]?", r"[ \t\n\r]*", ""):
        colon = punctuation(ws)["COLON"]
        assert same(_literal_dfa(values, colon), concat_suffix(ref, colon))


@pytest.mark.parametrize("value", ["a/b", 'say "hi"', "back\\slash", "tab\there", "\ud800"])
def test_literals_with_several_spellings_take_the_general_route(value):
    assert _literal_dfa(frozenset([value]), None) is None


SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer",
     "minimum": 0, "maximum": 130}, "tags": {"type": "array", "items": {"enum": ["a", "b", "ab"]}}},
     "required": ["name"]},
    {"anyOf": [{"type": "number", "exclusiveMinimum": 1.5}, {"type": "string", "pattern": "^x[0-9]+$"},
               {"type": "object", "additionalProperties": {"type": "boolean"}}]},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}, "n": {"type": "number",
     "multipleOf": 0.5}}, "patternProperties": {"^x-": {"type": "null"}}},
]


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("whitespace", ["outlines", "flexible"])
def test_native_lexer_arrays_equal_the_lexer_spec(schema, whitespace):
    sg = build_grammar(schema, whitespace=whitespace)
    ref, ref_meta = spec_automaton_arrays(lexer_spec_from_dfas(sg.terminals))
    got, meta = dfa_automaton_arrays(sg.terminals)
    assert set(got) == set(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype and np.array_equal(got[k], ref[k]), k
    assert {k: ref_meta[k] for k in meta} == meta


def test_the_native_lexer_is_bounded_by_max_lexer_configs():
    from cad_outlines import ResourceLimitError
    from cad_outlines.limits import Limits, enforcing

    sg = build_grammar(SCHEMAS[0], whitespace="flexible")
    with enforcing(Limits(max_lexer_configs=20)), pytest.raises(ResourceLimitError) as info:
        dfa_automaton_arrays(sg.terminals)
    assert info.value.limit == "max_lexer_configs"

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


@pytest.mark.parametrize("ws", ["[ ]?", r"[ \t\n\r]*", "", r'(?:\s|")*', "x?y*"])
def test_one_key_is_a_chain_before_its_separator_unless_the_separator_reads_a_quote(ws):
    """A single key's automaton is written as it is minimised (no minimisation), only where no text of
    the separator holds a quote (else a state of the chain could equal one of the separator's)."""
    from cad_outlines.engine.frontend.json_schema import lexicon

    colon = punctuation(ws)["COLON"]
    lexicon._QUOTE_FREE.clear()
    for key in ["a", "name", "a:b", " x ", "", "\u00e9\U0001f600"]:
        ref = concat_suffix(S.json_string_dfa(S.literals([key])), colon)
        assert same(_literal_dfa(frozenset([key]), colon), ref), (ws, key)
    assert (id(colon) in lexicon._QUOTE_FREE) == ('"' not in ws)


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
    # string and number atoms (a check: the families are closed) beside whole classes
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3, "not": {"enum": ["ab"]}},
     "b": {"oneOf": [{"type": "integer", "minimum": 3}, {"type": "number", "maximum": 5}]},
     "c": {"type": "string", "pattern": "^[a-c]+$"}}},
]


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("whitespace", ["outlines", "flexible"])
@pytest.mark.parametrize("grouped", [True, False])
def test_native_lexer_arrays_equal_the_lexer_spec(schema, whitespace, grouped):
    sg = build_grammar(schema, whitespace=whitespace)
    groups = sg.groups if grouped else None
    ref, ref_meta = spec_automaton_arrays(lexer_spec_from_dfas(sg.terminals, groups))
    got, meta = dfa_automaton_arrays(sg.terminals, groups)
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


def test_schema_grammars_group_atoms_and_lex_whole_classes_alone():
    """A family's atoms compete in one group; whole classes and punctuation each lex alone."""
    sg = build_grammar(SCHEMAS[3], whitespace="compact")
    names = [n for n, _ in sg.terminals]
    by_group: dict[int, list[str]] = {}
    for n, g in zip(names, sg.groups):
        by_group.setdefault(g, []).append(n)
    kinds = {tuple(sorted({n.rstrip("0123456789") for n in ns})) for ns in by_group.values() if len(ns) > 1}
    assert kinds == {("KEY",), ("STR",), ("NUM",)}
    assert all(len(ns) == 1 for ns in by_group.values() if ns[0].startswith(("W", "L", "R", "C")))
    # a plain property ("c") is one whole class: no string atoms for it
    assert any(n.startswith("WSTR") for n in names)
    # a schema with no check: only keys compete, its values are whole classes
    sg = build_grammar(SCHEMAS[0], whitespace="compact")
    names = [n for n, _ in sg.terminals]
    assert {n for n, g in zip(names, sg.groups) if g == 0} == {n for n in names if n.startswith("KEY")}
    assert not any(n.startswith(("STR", "NUM")) for n in names)
    # name, the enum of tags, and any string (additional properties); age and any number
    assert sum(n.startswith("WSTR") for n in names) == 3 and sum(n.startswith("WNUM") for n in names) == 2


def _lex(groups, text: bytes):
    from cad_outlines.engine.frontend.automata import regex_to_dfa
    from cad_outlines.engine.reference.lexer_run import run_lexer
    from cad_outlines.engine.store.lexer import Lexer

    spec = lexer_spec_from_dfas([("A", regex_to_dfa("ab")), ("B", regex_to_dfa("abc"))], groups)
    lexer = Lexer(spec)
    return sorted({(e, lexer.final_labels(c) is not None) for c, e, _ in run_lexer(lexer, lexer.initial, text)})


def test_terminals_compete_only_within_their_group():
    # one group (lark's basic lexer): "ab" is A's, and lark never tries B after A matched
    assert _lex(None, b"abc") == []
    assert _lex([0, 0], b"ab") == [((0,), True)]
    # apart: each terminal is its own longest match, whatever the other matches
    assert _lex([0, 1], b"abc") == [((1,), True)]
    assert _lex([0, 1], b"ab") == [((), False), ((0,), True)]
    assert _lex([5, 7], b"abc") == _lex([0, 1], b"abc")
    with pytest.raises(ValueError, match="groups"):
        lexer_spec_from_dfas([("A", _dfa("a"))], [0, 1])


def _dfa(rx: str):
    from cad_outlines.engine.frontend.automata import regex_to_dfa
    return regex_to_dfa(rx)


def test_native_lexer_tables_check_the_groups():
    from cad_outlines._native import core
    dfa = _dfa("a")
    tables = [(np.ascontiguousarray(dfa.trans, dtype=np.int32), np.ascontiguousarray(dfa.accept).view(np.uint8), None)]
    with pytest.raises(ValueError, match="groups"):
        core().lexer_automaton(tables, groups=[0, 1])


def test_a_long_number_enum_competes_as_atoms():
    """Each whole class is a lexer run of its own: past MAX_WHOLES at one position, the values are atoms of
    one group (one run for all), and the texts stay exact either way."""
    from cad_outlines.engine.frontend.json_schema.grammar import MAX_WHOLES

    many = build_grammar({"enum": list(range(MAX_WHOLES + 1))}, whitespace="compact")
    few = build_grammar({"enum": list(range(MAX_WHOLES))}, whitespace="compact")
    assert not any(n.startswith("WNUM") for n, _ in many.terminals)
    assert sum(n.startswith("WNUM") for n, _ in few.terminals) == MAX_WHOLES
    assert not any(n.startswith("NUM") for n, _ in few.terminals)

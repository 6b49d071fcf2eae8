"""The hand-written Lark grammar reader (lark_syntax, lark_rules) against lark's own.

Its contract: the same parse tree as ``lark.load_grammar._parse_grammar`` and the same
terminals and rules as ``load_grammar(...).compile(...)``, or None where lark must read
the grammar (and then reports its own error).
"""

from __future__ import annotations

import random
from pathlib import Path

import lark
import lark.load_grammar as lark_load
import pytest

from cad_outlines.engine.frontend.grammar_load import load_rules
from cad_outlines.engine.frontend.lark_rules import compile_lark_rules
from cad_outlines.engine.frontend.lark_syntax import parse_grammar_text
from analysis.grammar_sampler import syntax_grammar
from cad_outlines.errors import GrammarError
from tests.fixture_data import SMALL, require_shared

SHIPPED = Path(__file__).resolve().parents[3] / "grammars"
LARK_STDLIB = Path(lark.__file__).parent / "grammars"
# always here: the vendored grammars (tests/data), the shipped ones and lark's own
FILES = sorted([*(SMALL / "grammars").rglob("*.lark"), *SHIPPED.glob("*.lark"), *LARK_STDLIB.glob("*.lark")])
STARTS = ("start", "file_input", "value", "json")


def _rules(rules) -> list:
    return [(r.origin.name, [(s.is_term, s.name, getattr(s, "filter_out", None)) for s in r.expansion],
             r.order, r.alias, r.options.keep_all_tokens, r.options.expand1, r.options.priority,
             r.options.template_source, r.options.empty_indices) for r in rules]


def _terminals(terminals) -> list:
    return [(t.name, type(t.pattern).__name__, t.pattern.value, tuple(sorted(t.pattern.flags)),
             t.pattern.raw, t.priority) for t in terminals]


def _lark(text: str, start: list[str], paths: list[str]):
    try:
        grammar, _ = lark_load.load_grammar(text, "<string>", paths, False)
        return grammar.compile(start, set())
    except Exception:  # every error lark raises, including its assertions
        return None


def _same(ours, ref) -> bool:
    return (_rules(ours[1]) == _rules(ref[1]) and _terminals(ours[0]) == _terminals(ref[0])
            and ours[2] == ref[2])


def _compare_files(files: list[Path]) -> int:
    """Check every file against lark; the number of (file, start) pairs lark compiles."""
    compared = 0
    for path in files:
        text = path.read_text()
        assert parse_grammar_text(text) == lark_load._parse_grammar(text, "<string>"), path
        for start in STARTS:
            ref = _lark(text, [start], [str(path.parent)])
            ours = compile_lark_rules(text, [str(path.parent)], [start])
            if ref is None:
                assert ours is None, (path, start)
                continue
            assert ours is not None, f"{path} ({start}) fell back to lark"
            assert _same(ours, ref), (path, start)
            compared += 1
    return compared


def test_grammar_files_are_read_here_and_equal_lark():
    """The grammars a fresh clone has (it read ../shared/data/grammars and failed `assert 8 >= 30` without it)."""
    assert len(FILES) >= 30
    assert _compare_files(FILES) >= 100


@pytest.mark.shared_data
def test_shared_grammar_files_are_read_here_and_equal_lark():
    """The shared data folder's grammars (SynCode's, Outlines' historical ones, lark's examples)."""
    files = sorted((require_shared() / "grammars").rglob("*.lark"))
    assert len(files) >= 25
    assert _compare_files(files) >= 80


# -- random grammars -----------------------------------------------------------------------

def test_random_grammars_equal_lark():
    rng = random.Random(20261123)
    equal = rejected = 0
    for _ in range(400):
        text = syntax_grammar(rng)
        ref = _lark(text, ["start"], [])
        ours = compile_lark_rules(text, [], ["start"])
        if ref is None:
            assert ours is None, text  # never accept a grammar lark rejects
            rejected += 1
            continue
        assert ours is not None, text  # the generator uses nothing that needs lark
        assert _same(ours, ref), text
        equal += 1
    assert equal >= 150 and rejected >= 20, (equal, rejected)


def test_constructs_left_to_lark_still_compile_through_load_rules():
    base = 'start: a\na: "x"\n'
    for extra in ['%override a: "y"\n', '%extend a: "z"\n']:
        text = base + extra
        assert compile_lark_rules(text, [], ["start"]) is None
        g = load_rules(text)
        ref = _lark(text, ["start"], [])
        assert _terminals(g.terminals) == _terminals(ref[0]) and _rules(g.rules) == _rules(ref[1])


@pytest.mark.parametrize("text", ['start: "a" b\n', "start: (\n", 'start: "a"\nstart: "b"\n',
                                  'start: A\nA: "a" A\n', 'start: "" \n', "start: _x\n_x: \"a\" -> y\n"])
def test_bad_grammars_get_lark_errors(text):
    """lark's own error, raised as our GrammarError in one line (lark's reason, line and column kept)."""
    assert compile_lark_rules(text, [], ["start"]) is None
    with pytest.raises(GrammarError) as ours:
        load_rules(text)
    with pytest.raises(lark.exceptions.GrammarError) as ref:
        lark_load.load_grammar(text, "<string>", [], False)[0].compile(["start"], set())
    assert isinstance(ours.value.__cause__, lark.exceptions.GrammarError)
    assert str(ours.value.__cause__) == str(ref.value)
    reason = str(ref.value).splitlines()[0].split(", at line")[0]
    assert reason in str(ours.value) and "\n" not in str(ours.value)
    if ", at line" in str(ref.value):
        line = str(ref.value).split(", at line ")[1].split()[0]
        assert str(ours.value).startswith(f"line {line}, column ")


def test_relative_and_aliased_imports(tmp_path):
    (tmp_path / "lib.lark").write_text('item: NAME ("," NAME)*\nNAME: /[a-z]+/\n_SEP: ";"\n'
                                       'pair: item _SEP item\n%ignore " "\n')
    text = "start: lib_pair | other\n%import lib.pair -> lib_pair\n%import lib (item, NAME)\nother: NAME\n"
    ref = _lark(text, ["start"], [str(tmp_path)])
    ours = compile_lark_rules(text, [str(tmp_path)], ["start"])
    assert ref is not None and ours is not None and _same(ours, ref)
    assert [t.name for t in ours[0]] == ["NAME", "_lib__SEP", "COMMA"]  # lib's NAME imported once, as NAME
    assert {r.origin.name for r in ours[1]} == {"start", "lib_pair", "item", "other", "__item_star_0"}

"""Parse tables on which the parser would reduce forever without reading input are refused at compile time
(issue 29: lark's `start: (a+)*` with `!a.1: "A" |` compiled in 6 ms and its first mask allocated without
bound); cyclic grammars whose priorities keep the parser out of the cycle still compile and parse as lark."""

import functools

import numpy as np
import pytest

from analysis.lark_oracle import LarkSide
from cad_outlines.engine.compile import compile_grammar
from cad_outlines.engine.frontend.grammar_load import load_rules
from cad_outlines.engine.frontend.lalr import parse_tables
from cad_outlines.engine.frontend.parser_loops import cyclic_rules, looping_floors
from cad_outlines.engine.matcher import Matcher
from cad_outlines.engine.vocabulary import Vocabulary
from cad_outlines.errors import GrammarCompileError
from tests.fixture_data import SMALL

SHARED_NODE = '!start: (a+)*\n!a.1: "A" |\n'  # lark's test_resolve_ambiguity_with_shared_node


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")


@functools.lru_cache(maxsize=None)  # asked once per case, not once per lazy/eager compile
def lark_verdict(grammar: str, text: str) -> str:
    """"accept", "reject" or "loops" (lark's own LALR parser, stopped after half a second of CPU)."""
    return LarkSide(grammar, parse_seconds=0.5).verdict(text)


def tables(grammar: str):
    lk = load_rules(grammar)
    return parse_tables(lk.rules, "start")


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("grammar, text, words", [
    (SHARED_NODE, "", ["rule a:", "at the start, on $END", "a -> <empty>",
                       "__start_plus_0 -> __start_plus_0 a", "the repetition __start_plus_0 in start"]),
    ('start: a\na: b | "x"\nb.2: a\n', "x", ["rule a:", "after X, on $END", "a -> b; b -> a", "a, b derive"]),
    ('start: a\na: a? "x" | b\nb.1: a\n', "xx", ["rule a:", "after X, on", "a -> b; b -> a"]),
])
def test_a_reachable_cycle_of_reductions_is_refused_naming_its_rules(grammar, text, words, lazy, vocab):
    assert lark_verdict(grammar, text) == "loops"  # what the message says: lark's parser loops on it too
    with pytest.raises(GrammarCompileError) as info:
        compile_grammar(grammar, vocab, cache=False, lazy=lazy, progress=False)
    err = info.value
    assert err.kind == "rule" and "reduce forever without reading input" in str(err)
    for w in words:
        assert w in str(err), str(err)


@pytest.mark.parametrize("grammar, texts", [
    ('start.2: a\na: b | "x"\nb: a\n', ["x", "", "xx"]),  # cyclic, the priority keeps start -> a
    ('start: c\nc: a c | "x"\na: \n', ["x", "", "xx"]),  # c =>+ c through the empty a; shift wins
    ("start: start?\n", ["", "a"]),
    ('start: b "x"\nb: b "y" | \n', ["x", "yyx", "y", ""]),  # an empty rule that is not cyclic
])
def test_cyclic_grammars_lark_parses_keep_compiling(grammar, texts, vocab):
    compiled = compile_grammar(grammar, vocab, cache=False, progress=False)
    for text in texts:
        want = lark_verdict(grammar, text)
        assert want in ("accept", "reject")
        m = Matcher(compiled)
        ids = [vocab.token_bytes.index(bytes([c])) for c in text.encode()]
        ok = m.validate(ids) == len(ids)
        if ok:
            m.advance_many(ids)
        assert (ok and m.is_accepting()) == (want == "accept"), (grammar, text)


def test_grammars_that_cannot_loop_skip_the_search():
    for name, start in [("python", "file_input"), ("json", None), ("sql", None), ("copy_edit", None)]:
        lk = load_rules(name, start=start)
        t = parse_tables(lk.rules, lk.options.start[0])
        assert not cyclic_rules(t) and not looping_floors(t)


def test_the_looping_floors_of_the_shared_node_grammar():
    t = tables(SHARED_NODE)
    assert cyclic_rules(t) >= {"__start_plus_0"}
    floors = looping_floors(t)
    assert floors and {term for _, term, _ in floors} <= {"A", "$END"}
    assert np.all([nt in {"a", "__start_plus_0", "__start_star_1"} for _, _, nt in floors])

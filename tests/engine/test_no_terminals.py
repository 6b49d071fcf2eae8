"""Grammars with no terminals (issue 29): `start: ` and `start: start?` crashed the compile ("need at least
one array to concatenate"); lark accepts exactly the empty text for them, and so must we."""

import numpy as np
import pytest

from analysis.lark_oracle import LarkSide
from cad_outlines.cli import main
from cad_outlines.engine.compile import compile_grammar
from cad_outlines.engine.matcher import Matcher
from cad_outlines.engine.vocabulary import Vocabulary
from tests.fixture_data import SMALL

GPT2 = SMALL / "tokenizers" / "gpt2"
GRAMMARS = ["start: ", "start: start?", "start: a\na: ", "start: a b\na: \nb: a", "%declare X\nstart: X?",
            "start: \n%ignore \" \""]


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.from_tokenizer(GPT2)


def lark_accepts(grammar: str, text: str) -> bool:
    return LarkSide(grammar).verdict(text) == "accept"


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("grammar", GRAMMARS)
def test_accepts_exactly_what_lark_accepts(grammar, lazy, vocab, tmp_path):
    compiled = compile_grammar(grammar, vocab, cache=tmp_path, lazy=lazy, progress=False)
    m = Matcher(compiled)
    allowed = set(np.flatnonzero(m.allowed_mask()).tolist())
    assert lark_accepts(grammar, "") and m.is_accepting()
    space = vocab.token_bytes.index(b" ")
    ignores_space = lark_accepts(grammar, " ")
    assert allowed == set(vocab.eos_token_ids) | ({space} if ignores_space else set())
    for text in ["a", "X", "\n", "  x"]:
        assert not lark_accepts(grammar, text)
    if ignores_space:
        m.advance(space)
        assert m.is_accepting() and set(np.flatnonzero(m.allowed_mask()).tolist()) == allowed
    m.advance(vocab.eos_token_ids[0])
    assert m.is_finished()
    # a warm load of the cached file gives the same matcher
    again = Matcher(compile_grammar(grammar, vocab, cache=tmp_path, lazy=lazy, progress=False))
    assert again.is_accepting()


def test_analyze_reports_a_grammar_without_terminals(tmp_path, capsys):
    grammar = tmp_path / "empty.lark"
    grammar.write_text("start: start?\n")
    code = main(["analyze", str(grammar), "--tokenizer", str(GPT2), "--no-cache", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (tmp_path / "empty.analysis.md").is_file() and "Traceback" not in captured.err

"""engine/frontend/grammar_load.py: lark's rules without lark's parser; imported files parsed once."""

from pathlib import Path

import lark
import lark.indenter
import lark.load_grammar as lark_load
import pytest

from cad_outlines.errors import GrammarError

from cad_outlines.engine.frontend import grammar_load, lark_rules
from cad_outlines.engine.frontend.grammar_load import load_rules

DATA = Path(__file__).resolve().parents[2] / "data" / "grammars"


def _summary(g):
    return (repr([(t.name, t.pattern, t.priority) for t in g.terminals]),
            repr([(r.origin, r.expansion, r.alias, r.order, r.options) for r in g.rules]), sorted(g.ignore_tokens))


@pytest.mark.parametrize("path", [DATA / "outlines" / "json.lark", DATA / "lark" / "python.lark",
                                  DATA / "syncode" / "sql.lark"])
def test_rules_and_terminals_are_lark_own(path):
    """The same terminals and BNF rules as lark.Lark(...) builds, with the import cache cold,
    then warm (the cached tree of an imported file is not changed by a load)."""
    kw = {"start": "file_input", "postlex": lark.indenter.PythonIndenter()} if path.stem == "python" else {}
    lk = lark.Lark(path.read_text(), parser="lalr", lexer="basic", import_paths=[str(path.parent)], **kw)
    want = _summary(lk)
    grammar_load._IMPORTED.clear()
    start = kw.get("start")
    cold = _summary(load_rules(path, start=start))
    warm = _summary(load_rules(path, start=start))
    assert cold[0] == want[0] and cold[2] == want[2]
    assert cold[1] == want[1]
    assert warm == cold


def test_an_imported_file_is_parsed_once_and_lark_is_left_as_it_was():
    """The hand-written reader parses json.lark's common.lark once per process; a grammar
    left to lark (here with %override) goes through lark's reader, whose imported files are
    parsed once too, and lark's function is restored afterwards."""
    original = lark_load._parse_grammar
    calls = []

    def counting(text, name, start="start"):
        calls.append(name)
        return original(text, name, start)

    lark_rules._PARSED.clear()
    lark_load._parse_grammar = counting
    try:
        load_rules(DATA / "outlines" / "json.lark")
        load_rules(DATA / "outlines" / "json.lark")
    finally:
        lark_load._parse_grammar = original
    assert calls == []  # lark's reader not used at all
    assert len(lark_rules._PARSED) == 1  # common.lark

    text = (DATA / "outlines" / "json.lark").read_text() + '%override value: object | array | ESCAPED_STRING\n'
    grammar_load._IMPORTED.clear()
    load_rules(text)
    assert len(grammar_load._IMPORTED) == 1  # its common.lark
    assert lark_load._parse_grammar is original
    lark_load._parse_grammar = counting
    try:
        load_rules(text)
    finally:
        lark_load._parse_grammar = original
    assert calls == ["<string>"]  # the grammar's own text only


def test_an_error_in_an_imported_file_is_raised_and_not_cached(tmp_path):
    (tmp_path / "broken.lark").write_text("X: \"a\"\nY: ::: \n")
    (tmp_path / "main.lark").write_text("%import .broken.X\nstart: X\n")
    with pytest.raises(GrammarError, match="in an %import-ed grammar, line 2 column 4: 'Y: :::'") as info:
        load_rules(tmp_path / "main.lark")  # not main.lark's line 2
    assert info.value.file is None and isinstance(info.value.__cause__, lark.exceptions.GrammarError)
    assert not any("broken" in text for text, _ in grammar_load._IMPORTED)

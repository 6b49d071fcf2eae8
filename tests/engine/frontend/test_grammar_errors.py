"""Grammars by name, start rules, and grammars that would decode nothing (issue 12, items 3 and 6).

Each test uses the input that failed (or failed silently) before."""

import lark
import pytest

from cad_outlines import GrammarCompileError, compile_grammar
from cad_outlines.engine.compile import load_lark
from cad_outlines.engine.frontend.grammar_load import load_rules
from cad_outlines.engine.matcher import Matcher
from cad_outlines.grammars import available_grammars, grammar_dir, grammar_path, grammar_source
from tests.helpers import ToyVocab, encode


@pytest.fixture(scope="module")
def vocab():
    return ToyVocab.make()


def test_shipped_grammars_load_by_name():
    assert {"copy_edit", "json", "python", "sql"} <= set(available_grammars())
    for name in ("json", "json.lark", "sql", "copy_edit"):
        assert load_lark(name).options.start == ["start"]
    py = load_lark("python")
    assert py.options.start == ["file_input"]  # from the grammar's `// cad_outlines: start=` line
    assert type(py.options.postlex).__name__ == "PythonIndenter"


def test_shipped_grammars_keep_their_licence_notices():
    notice = (grammar_dir() / "NOTICE.md").read_text(encoding="utf-8")
    assert "Erez Shinan" in notice and "Shubham Ugare" in notice
    for name, holder in (("json", "Erez Shinan"), ("python", "Erez Shinan"), ("sql", "Shubham Ugare")):
        text = grammar_path(name).read_text(encoding="utf-8")
        assert holder in text.split("\n\n")[0] and "MIT" in text.split("\n\n")[0]
    assert "BSD 3-Clause" in grammar_path("sql").read_text(encoding="utf-8")


def test_json_by_bare_file_name_compiles(vocab, tmp_path):
    """README's `compile_grammar("json.lark", ...)` gave FileNotFoundError."""
    cg = compile_grammar("json.lark", vocab, cache=tmp_path, progress=False)
    m = Matcher(cg)
    m.advance_many(encode(vocab, b'{"a": [1, true, null]}'))
    assert m.is_accepting()


def test_missing_grammar_file_lists_the_shipped_ones():
    with pytest.raises(FileNotFoundError, match=", ".join(available_grammars())):
        grammar_source("jsn.lark")
    assert grammar_source('start: "a"').name == "grammar"  # one-line grammar text is still text
    assert grammar_source("x" * 300).text == "x" * 300  # a name too long for the file system is text


def test_python_lark_without_start_lists_the_rules_that_could_start(tmp_path):
    """lark's python.lark without start= failed with `Using an undefined rule: NonTerminal('start')`."""
    text = grammar_path("python").read_text(encoding="utf-8").replace("// cad_outlines: start=file_input", "")
    path = tmp_path / "python.lark"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GrammarCompileError) as info:
        load_lark(path)
    msg = str(info.value)
    assert msg.startswith("rule start: the grammar has no rule 'start'")
    assert "file_input" in msg and "single_input" in msg and "eval_input" in msg and "start=NAME" in msg
    assert isinstance(info.value.__cause__, lark.exceptions.GrammarError)
    with pytest.raises(GrammarCompileError, match="no rule 'fileinput'"):
        load_lark(path, start="fileinput")
    assert load_lark(path, start="file_input").options.start == ["file_input"]
    # the compile's own loader (lark's reader without its parser) says the same
    with pytest.raises(GrammarCompileError) as info:
        load_rules(path)
    assert str(info.value) == msg and "// cad_outlines: start=NAME" in msg
    with pytest.raises(GrammarCompileError, match="no rule 'fileinput'"):
        load_rules(path, start="fileinput")
    assert load_rules(path, start="file_input").options.start == ["file_input"]


def test_other_grammar_errors_are_lark_s():
    with pytest.raises(lark.exceptions.GrammarError, match="used but not defined"):
        load_lark("start: a\n")


def test_a_terminal_that_never_matches_is_an_error(vocab):
    """`/(?=a)b/` compiled, and the first mask allowed nothing, not even EOS."""
    for grammar in ("start: X\nX: /(?=a)b/\n", 'start: "a" X?\nX: /(?=a)b/\n'):
        with pytest.raises(GrammarCompileError, match=r"terminal X: '\(\?=a\)b' can never match any text"):
            compile_grammar(grammar, vocab, cache=False, progress=False)


def test_declared_indent_without_postlexer_is_an_empty_language(vocab):
    """`%declare _INDENT _DEDENT` with postlex=None compiled to a matcher that allowed nothing."""
    grammar = 'start: _INDENT "a" _DEDENT\n%declare _INDENT _DEDENT\n'
    with pytest.raises(GrammarCompileError) as info:
        compile_grammar(grammar, vocab, cache=False, progress=False, postlex=None)
    msg = str(info.value)
    assert msg.startswith("rule start: the grammar's language is empty")
    assert "_DEDENT, _INDENT" in msg and "%declare'd" in msg and info.value.kind == "rule"


def test_declared_indent_without_newline_terminal_says_why(vocab):
    """Without postlex=None the message talked about a "postlexer's NEWLINE terminal"."""
    with pytest.raises(GrammarCompileError) as info:
        compile_grammar('start: _INDENT "a" _DEDENT\n%declare _INDENT _DEDENT\n', vocab, cache=False, progress=False)
    msg = str(info.value)
    assert msg.startswith("terminal _NEWLINE:") and "%declares _INDENT _DEDENT" in msg and "postlex=None" in msg


def test_a_rule_that_needs_an_ignored_terminal_is_an_empty_language(vocab):
    """lark drops %ignore'd lexemes before the parser: `start: WS "a"` with `%ignore WS` accepts nothing."""
    with pytest.raises(GrammarCompileError) as info:
        compile_grammar('start: WS "a"\n%import common.WS\n%ignore WS\n', vocab, cache=False, progress=False)
    assert "language is empty" in str(info.value) and "WS is %ignore'd" in str(info.value)


def test_rules_that_never_end_are_an_empty_language(vocab):
    with pytest.raises(GrammarCompileError, match="rule start: the grammar's language is empty.*never end"):
        compile_grammar('start: b\nb: b "x"\n', vocab, cache=False, progress=False)
    compile_grammar('start: "a" | b\nb: b "x"\n', vocab, cache=False, progress=False)  # not empty: fine


@pytest.mark.parametrize("text, where, says", [
    ("start: A\nA: /[/\n", "terminal A", "invalid regex '['"),  # was regex._regex_core.error, terminal unnamed
    ("start A\nb: \"x\"\n", "line 1, column 7", "missing colon"),  # was lark.exceptions.GrammarError
    ("start: a b\na: \"x\"\n", "rule b", "used but not defined"),
    ("start: (\n", "line 1, column", "unclosed parenthesis"),  # lark's syntax errors
])
def test_every_grammar_mistake_is_a_grammar_error_in_one_line(vocab, text, where, says):
    from cad_outlines.errors import GrammarError

    with pytest.raises(GrammarError) as info:
        compile_grammar(text, vocab, cache=False, progress=False)
    msg = str(info.value)
    assert where in msg and says.lower() in msg.lower() and "\n" not in msg


def test_grammar_errors_name_the_file(vocab, tmp_path):
    from cad_outlines.errors import GrammarError

    (tmp_path / "bad.lark").write_text('start: A B\nA: "a"\nB: /[/\n')
    with pytest.raises(GrammarError, match=r"^bad\.lark: terminal B: invalid regex") as info:
        compile_grammar(tmp_path / "bad.lark", vocab, cache=False, progress=False)
    assert info.value.file == "bad.lark" and info.value.name == "B"
    (tmp_path / "syntax.lark").write_text('start: A\nA "a"\n')
    with pytest.raises(GrammarError, match=r"^syntax\.lark:2:\d+: ") as info:
        compile_grammar(tmp_path / "syntax.lark", vocab, cache=False, progress=False)
    assert info.value.line == 2

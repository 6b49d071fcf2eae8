"""The incremental LALR parser against lark's own parser."""

import random
import sysconfig
from pathlib import Path

import lark
import pytest
from lark.indenter import PythonIndenter
from lark.lexer import Token

from cad_outlines import load_grammar_text
from cad_outlines.engine.frontend.parse_tables import END, IndentTracker, ParseTables
from cad_outlines.engine.reference.parser import IncrementalParser

JSON = r"""
?start: value
?value: object | array | STRING | NUMBER | "true" | "false" | "null"
array: "[" [value ("," value)*] "]"
object: "{" [pair ("," pair)*] "}"
pair: STRING ":" value
STRING: /"[^"]*"/
NUMBER: /-?[0-9]+/
%ignore " "
"""


def lark_accepts(lk, types):
    """Does lark's own LALR parser accept this terminal sequence (END = whole sentence)?"""
    state = lk.parse_interactive("").parser_state.copy()
    try:
        for t in types:
            if t == END:
                state.feed_token(Token(END, ""), is_end=True)
            else:
                state.feed_token(Token(t, "x"))
    except lark.exceptions.UnexpectedToken:
        return False
    return True


@pytest.mark.parametrize("grammar", [JSON, load_grammar_text("copy_edit")])
def test_random_terminal_sequences_agree_with_lark(grammar):
    lk = lark.Lark(grammar, parser="lalr", lexer="basic")
    tables = ParseTables(lk)
    names = sorted(t.name for t in lk.terminals) + [END]
    rng = random.Random(7)
    agree = 0
    for _ in range(1500):
        parser = IncrementalParser(tables)
        seq = []
        for _ in range(rng.randint(1, 12)):
            # mostly legal moves, sometimes a random one, so both answers are exercised
            legal = [t for t in names if parser.accepts([t])]
            t = rng.choice(legal) if legal and rng.random() < 0.85 else rng.choice(names)
            seq.append(t)
            expected = lark_accepts(lk, seq)
            assert parser.accepts([t]) == expected, seq
            agree += 1
            if not expected or t == END:
                break
            parser.consume([t])
    assert agree > 3000


def test_consume_is_atomic_and_fork_is_independent():
    lk = lark.Lark(JSON, parser="lalr", lexer="basic")
    parser = IncrementalParser(ParseTables(lk))
    parser.consume(["LSQB", "NUMBER"])
    before = parser.key()
    with pytest.raises(ValueError, match="expected one of"):
        parser.consume(["COMMA", "RSQB"])  # COMMA fine, RSQB after COMMA is not
    assert parser.key() == before
    child = parser.fork()
    child.consume(["RSQB"])
    assert child.is_accepting() and not parser.is_accepting()
    assert parser.key() == before


@pytest.fixture(scope="module")
def python_parser(small_data):
    src = (small_data / "grammars/lark/python.lark").read_text()
    lk = lark.Lark(src, parser="lalr", lexer="basic", start="file_input")
    full = lark.Lark(src, parser="lalr", lexer="basic", postlex=PythonIndenter(), start="file_input")
    return lk, full, ParseTables(lk), IndentTracker.from_postlex(PythonIndenter())


def _feed_all(parser, tracker, toks):
    for t in toks:
        item = (t.type, tracker.indent_of(t.value)) if t.type == "_NEWLINE" else t.type
        if not parser.accepts([item]):
            return False
        parser.consume([item])
    return True


def test_python_stdlib_files_are_accepted_with_python_indentation(python_parser):
    lk, full, tables, tracker = python_parser
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    checked = 0
    for name in ("bisect.py", "colorsys.py", "keyword.py", "this.py", "heapq.py", "fnmatch.py"):
        text = (stdlib / name).read_text(encoding="utf-8")
        full.parse(text)  # lark accepts the file
        parser = IncrementalParser(tables, tracker)
        assert _feed_all(parser, tracker, lk.lex(text)), name
        assert parser.is_accepting(), name
        checked += 1
    assert checked == 6


@pytest.mark.parametrize(
    "text, ok",
    [
        ("if x:\n    y\n", True),
        ("if x:\n      y\n", True),  # any deeper indentation opens a block
        ("if x:\n\ty\n", True),
        ("if x:\n    if y:\n        z\n    w\n", True),
        ("if x:\n    y\n  z\n", False),  # a dedent must land on an enclosing level
        ("if x:\ny\n", False),
        ("x = (1,\n  2)\n", True),  # NEWLINE inside brackets is ignored
        ("x = 1\n    y = 2\n", False),
    ],
)
def test_indentation_rules_match_lark(python_parser, text, ok):
    lk, full, tables, tracker = python_parser
    try:
        full.parse(text)
        lark_ok = True
    except lark.exceptions.LarkError:
        lark_ok = False
    assert lark_ok == ok
    parser = IncrementalParser(tables, tracker)
    assert (_feed_all(parser, tracker, lk.lex(text)) and parser.is_accepting()) == ok


def test_end_is_rejected_inside_an_open_block(python_parser):
    lk, full, tables, tracker = python_parser
    toks = list(lk.lex("def f():\n    return 1\n"))
    parser = IncrementalParser(tables, tracker)
    assert _feed_all(parser, tracker, toks[:6])  # up to and including the NEWLINE with its indent
    assert not parser.is_accepting()
    assert not parser.accepts([("_NEWLINE", 0)])  # a block needs its body
    assert _feed_all(parser, tracker, toks[6:]) and parser.is_accepting()

"""The edit language: grammar, parser, text form, errors."""

import itertools

import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad_outlines import (Copy, EditProgram, Gen, IncompleteProgramError, ProgramSyntaxError, gen_ops,
                          load_grammar_text, parse_program)
from cad_outlines.errors import ProgramError
from cad_outlines.edits import ProgramScanner


@pytest.fixture(scope="module")
def lark_parser():
    return lark.Lark(load_grammar_text("copy_edit"), parser="lalr", lexer="basic")


def test_grammar_is_lalr_and_parses_a_program(lark_parser):
    tree = lark_parser.parse('<copy lines="1-3"/>\n<gen>x</gen></program>')
    assert [t.data for t in tree.children[:-1]] == ["copy", "gen"]


def test_gen_terminal_stops_at_first_close():
    import re

    src = load_grammar_text("copy_edit")
    gen = re.compile(re.search(r"^GEN: /(.*)/$", src, re.M).group(1))
    alphabet = "</gen>x"
    for n in range(7):
        for chars in itertools.product(alphabet, repeat=n):
            body = "".join(chars)
            assert bool(gen.fullmatch(f"<gen>{body}</gen>")) == ("</gen>" not in body), body


PIECES = list("ab<>/gen\n\r é😀") + ["</gen>", "<gen>", "</program>", '<copy lines="1-2"/>', "</ge"]
texts = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)
op_groups = st.one_of(st.builds(lambda i, j: [Copy(i, j)], st.integers(1, 120), st.integers(1, 120)), texts.map(gen_ops))


@given(st.lists(op_groups, max_size=6), st.sampled_from(["\n", ""]), st.booleans())
@settings(max_examples=300, deadline=None)
def test_text_round_trip_and_agreement_with_lark(groups, sep, header):
    program = EditProgram([op for group in groups for op in group])
    text = program.to_text(header=header, sep=sep)
    assert parse_program(text) == program
    body = text[len("<program>") :] if header else text
    lark.Lark(load_grammar_text("copy_edit"), parser="lalr", lexer="basic").parse(body)


@given(texts)
def test_gen_ops_split_text_with_close_tag(text):
    pieces = gen_ops(text)
    assert "".join(p.text for p in pieces) == text
    assert all("</gen>" not in p.text for p in pieces)
    assert parse_program(EditProgram(pieces).to_text()).ops == tuple(pieces)


def test_gen_rejects_close_tag():
    with pytest.raises(ValueError, match="gen_ops"):
        Gen("a</gen>b")


@pytest.mark.parametrize(
    "text, pos, message",
    [
        ('<copy lines="0-3"/></program>', 13, "malformed copy"),
        ('<copy lines="1-"/></program>', 15, "malformed copy"),
        ('<copy lines="12"/></program>', 15, "malformed copy"),
        ("<gen>a</gen>\n\n</program>", 13, "second newline"),
        ("hello</program>", 0, "expected"),
        ("</program>x", 10, "after </program>"),
    ],
)
def test_syntax_errors_give_position(text, pos, message):
    with pytest.raises(ProgramSyntaxError, match=message) as info:
        parse_program(text)
    assert info.value.pos == pos
    assert info.value.line == text.count("\n", 0, pos) + 1


@pytest.mark.parametrize("text, ops, trailing, detail", [
    ("<gen>abc", (), "<gen>abc", "inside an unclosed gen op"),
    ('<copy lines="1-2"/>', (Copy(1, 2),), "", ""),
    ('<program><copy lines="1-2"/>\n<gen>x</gen><copy lines="3-', (Copy(1, 2), Gen("x")), '<copy lines="3-', ""),
])
def test_a_cut_off_program_raises_incomplete_program_error(text, ops, trailing, detail):
    """docs/edit_language.md says a cut-off program raises IncompleteProgramError; parse_program raised
    ProgramSyntaxError. It is a ProgramError (not a syntax error) and carries what was read."""
    with pytest.raises(IncompleteProgramError, match="program ended before </program>") as info:
        parse_program(text)
    assert isinstance(info.value, ProgramError) and not isinstance(info.value, ProgramSyntaxError)
    assert detail in str(info.value) and f"cut off after {len(ops)} op" in str(info.value)
    assert info.value.program.ops == ops and info.value.program.trailing == trailing
    assert info.value.partial_text is None  # no document: nothing resolved
    assert parse_program(text, partial=True) == info.value.program


def test_syntax_error_line_and_column():
    with pytest.raises(ProgramSyntaxError) as info:
        parse_program('<copy lines="1-2"/>\n<gne>x</gen></program>')
    assert (info.value.line, info.value.column) == (2, 1)


def test_lark_agrees_on_rejections(lark_parser):
    for bad in ['<copy lines="0-3"/></program>', "<gen>a</gen>\n\n</program>", "x</program>", '<copy lines="1-2"/>']:
        with pytest.raises(IncompleteProgramError if bad.endswith("/>") else ProgramSyntaxError):
            parse_program(bad)
        with pytest.raises(lark.exceptions.LarkError):
            lark_parser.parse(bad)


def test_partial_parse_returns_completed_ops():
    program = parse_program('<copy lines="1-2"/>\n<gen>new li', partial=True)
    assert program.ops == (Copy(1, 2),)
    assert not program.complete
    assert program.trailing == "<gen>new li"


def test_scanner_streams_gen_text_without_the_close_tag():
    scanner = ProgramScanner()
    events = []
    for ch in "<gen>ab</ge</gen></program>":
        events += scanner.feed(ch)
    streamed = "".join(v for k, v in events if k == "gen_text")
    assert streamed == "ab</ge"
    assert events[-1] == ("end", None)
    assert [v for k, v in events if k == "gen"] == [Gen("ab</ge")]

"""Line rules: the prompt's line numbers are cheap, full and exact (they read back to the document)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad_outlines import number_lines, split_lines, unnumber_lines
from cad_outlines.decoding.prompt import build_prompt
from cad_outlines.edits.lines import NO_NEWLINE_MARK


def test_every_line_shows_its_full_number_then_one_space():
    doc = "".join(f"line {i}\n" for i in range(1, 13))
    numbered = number_lines(doc).splitlines()
    assert numbered[0] == "1 line 1" and numbered[8] == "9 line 9" and numbered[11] == "12 line 12"


def test_indentation_empty_lines_crlf_and_missing_final_newline():
    doc = "def f():\n    return 1\n\nx = 2\r\n\r\ny"
    assert number_lines(doc) == "1 def f():\n2     return 1\n3\n4 x = 2\r\n5\r\n6 y\n" + NO_NEWLINE_MARK
    assert number_lines("") == ""
    assert number_lines("a\n") == "1 a\n"


@pytest.mark.parametrize("doc", ["", "a", "a\n", "\n", "\n\n", " \n", "\r\n", "\r", "x\r", "1 2\n3", "\\ No newline at end of file\n",
                                 "\\ No newline at end of file"])
def test_round_trip_edge_cases(doc):
    assert unnumber_lines(number_lines(doc)) == doc


@given(st.lists(st.text(st.characters(codec="utf-8"), max_size=8), max_size=15), st.booleans())
@settings(max_examples=300, deadline=None)
def test_round_trip_property(parts, final_newline):
    doc = "\n".join(parts) + ("\n" if final_newline and parts else "")
    numbered = number_lines(doc)
    assert unnumber_lines(numbered) == doc
    lines = split_lines(doc)
    shown = split_lines(numbered)
    assert all(shown[k].startswith(str(k + 1)) for k in range(len(lines)))  # every number written out


@pytest.mark.parametrize("bad, where", [("2 a\n", "line 1"), ("1 a\n3 b\n", "line 2"), ("1a\n", "line 1"),
                                        ("1 a\n2 b", "line 2"), (NO_NEWLINE_MARK, "no-newline mark")])
def test_unnumber_names_the_line_that_is_not_numbered(bad, where):
    with pytest.raises(ValueError, match=where):
        unnumber_lines(bad)


def test_prompt_says_how_lines_are_shown_and_holds_the_numbered_document():
    doc = "a = 1\n\nb = 2\n"
    prompt = build_prompt(None, doc, "Set b to 20")
    assert "after its line number and one space" in prompt
    assert prompt.endswith("Document:\n1 a = 1\n2\n3 b = 2\n\n<program>")

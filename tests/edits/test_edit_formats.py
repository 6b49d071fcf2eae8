"""The diff-style edit formats: each applier and oracle writer round-trips (the embedded examples,
random edits, and the shared corpora), the applier's rules (unique, in order, anchors, empty hunks,
final newline), the parsers' errors, and the format registry."""

import gzip
import json
from pathlib import Path

import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad_outlines.edits.formats import (EDIT_FORMATS, Hunk, HunkProgram, InexpressibleEditError, MatchError,
                                        StrReplace, apply_format, get_format, oracle_text)
from cad_outlines.edits.formats import apply_patch, search_replace, str_replace, udiff
from cad_outlines.errors import IncompleteProgramError, ParameterError, ProgramSyntaxError
from cad_outlines.grammars import load_grammar_text

FORMATS = [f for f in EDIT_FORMATS if f != "copy"]
EXAMPLES = json.loads((Path(__file__).resolve().parents[2] / "cad_outlines" / "examples" / "edits.json").read_text())
PARSERS = {f: lark.Lark(load_grammar_text(get_format(f).grammar), parser="lalr", lexer="basic") for f in FORMATS}


def round_trip(fmt: str, before: str, after: str) -> str | None:
    """The oracle's text, checked: it parses under the format's grammar and applies to `after`. None
    where the format cannot write the edit."""
    f = get_format(fmt)
    try:
        text = f.render(f.oracle(before, after))
    except InexpressibleEditError:
        return None
    PARSERS[fmt].parse(text)
    assert f.apply(f.parse(text), before) == after
    assert apply_format(text, before, fmt) == after and oracle_text(before, after, fmt) == text
    return text


@pytest.mark.parametrize("fmt", FORMATS)
def test_embedded_examples_round_trip(fmt):
    for ex in EXAMPLES:
        assert round_trip(fmt, ex["before"], ex["after"]) is not None, ex["name"]


line = st.sampled_from(["a", "b", "", "x = 1", "  y", "é", "a\r", "=", "@@ z"])
doc = st.tuples(st.lists(line, max_size=10), st.booleans()).map(
    lambda t: "\n".join(t[0]) + ("\n" if t[0] and t[1] else ""))


@settings(max_examples=150, deadline=None)
@given(doc, doc)
def test_random_edits_round_trip_or_say_why_not(before, after):
    for fmt in FORMATS:
        text = round_trip(fmt, before, after)
        line_format = fmt != "str_replace"
        changes_final_newline = bool(after) and after.endswith("\n") != (not before or before.endswith("\n"))
        if text is None:
            assert (line_format and changes_final_newline) or (fmt == "str_replace" and not before)
        elif before == after:
            assert text == ("*** End Patch" if fmt == "apply_patch" else "")


def test_hunks_are_minimal_and_widened_until_unique():
    before = "def f():\n    return 1\n\ndef g():\n    return 1\n"
    after = before.replace("    return 1\n\ndef g", "    return 1\n\ndef g").replace("return 1\n", "return 1\n", 1)
    after = "def f():\n    return 1\n\ndef g():\n    return 2\n"
    assert udiff.render(udiff.oracle(before, after).hunks) == "@@ ... @@\n def g():\n-    return 1\n+    return 2\n"
    assert search_replace.render(search_replace.oracle(before, after).hunks) == (
        "<<<<<<< SEARCH\ndef g():\n    return 1\n=======\ndef g():\n    return 2\n>>>>>>> REPLACE\n")
    # a unique changed line needs no context at all
    assert udiff.render(udiff.oracle("a\nb\nc\n", "a\nB\nc\n").hunks) == "@@ ... @@\n-b\n+B\n"
    # a pure insertion: a context line in udiff, none where apply_patch's cursor already is
    assert udiff.render(udiff.oracle("a\nb\n", "new\na\nb\n").hunks) == "@@ ... @@\n+new\n a\n"
    assert apply_patch.render(apply_patch.oracle("a\nb\n", "new\na\nb\n").hunks) == "@@\n+new\n*** End Patch"
    # appending at the end: an empty search (aider's rule)
    assert search_replace.render(search_replace.oracle("a\n", "a\nz\n").hunks) == (
        "<<<<<<< SEARCH\n=======\nz\n>>>>>>> REPLACE\n")


def test_applier_wants_each_hunk_once_and_in_order():
    doc = "x\ny\nx\ny\n"
    with pytest.raises(MatchError, match=r"hunk 1: .* occur more than once in the document \(lines 1 and 3\)"):
        search_replace.apply("<<<<<<< SEARCH\nx\n=======\nz\n>>>>>>> REPLACE\n", doc)
    with pytest.raises(MatchError, match=r"hunk 1: .*'q'.* do not occur in the document"):
        udiff.apply("@@ ... @@\n-q\n", doc)
    # after the previous hunk: "x" at line 3 is unique there
    assert udiff.apply("@@ ... @@\n x\n-y\n+Y\n x\n@@ ... @@\n-y\n+Z\n", doc) == "x\nY\nx\nZ\n"
    with pytest.raises(MatchError, match=r"hunk 2: .* do not occur at or after line 4 \(they occur before it"):
        udiff.apply("@@ ... @@\n-x\n-y\n-x\n+w\n@@ ... @@\n-x\n", doc)
    assert isinstance(MatchError("m", 1), ValueError)


def test_anchors_and_empty_hunks():
    doc = "class A:\n    def f(self):\n        pass\nclass B:\n    def f(self):\n        pass\n"
    patch = "@@ class B:\n@@     def f(self):\n-        pass\n+        return 1\n*** End Patch"
    assert apply_patch.apply(patch, doc) == doc[:doc.index("class B")] + "class B:\n    def f(self):\n        return 1\n"
    assert apply_patch.parse(patch).hunks[0].anchors == ("class B:", "    def f(self):")
    with pytest.raises(MatchError, match="anchor @@ 'class C:' does not occur"):
        apply_patch.apply("@@ class C:\n+x\n*** End Patch", doc)
    # apply_patch's + only hunk inserts at the cursor; udiff's appends at the end
    assert apply_patch.apply("@@ class B:\n+# b\n*** End Patch", "class A:\nclass B:\nend\n") == (
        "class A:\nclass B:\n# b\nend\n")
    assert udiff.apply("@@ ... @@\n+# b\n", "class A:\nend\n") == "class A:\nend\n# b\n"
    assert search_replace.apply("<<<<<<< SEARCH\n=======\nz\n>>>>>>> REPLACE\n", "") == "z\n"


def test_line_formats_keep_the_final_newline_str_replace_can_change_it():
    assert udiff.apply("@@ ... @@\n-b\n+c\n", "a\nb") == "a\nc"
    assert udiff.apply("@@ ... @@\n a\n-b\n", "a\nb") == "a"
    with pytest.raises(InexpressibleEditError, match="ends with a newline"):
        udiff.oracle("a\nb", "a\nb\n")
    program = str_replace.oracle("a\nb", "a\nb\n")
    assert program.hunks == (StrReplace("b", "b\n"),)
    assert str_replace.apply(program, "a\nb") == "a\nb\n"
    # CRLF lines keep their "\r": search text must carry it
    assert search_replace.apply("<<<<<<< SEARCH\nb\r\n=======\nB\r\n>>>>>>> REPLACE\n", "a\r\nb\r\n") == "a\r\nB\r\n"
    with pytest.raises(InexpressibleEditError, match="marker"):
        search_replace.oracle("a\n=======\nb\n", "a\nb\n")


def test_str_replace_old_str_is_whole_lines_and_json():
    doc = "ab\nb\n"
    assert str_replace.apply('{"old_str": "b\\n", "new_str": "c\\n"}\n', doc) == "ab\nc\n"  # not inside "ab"
    assert str_replace.parse('{"command": "str_replace", "path": "x.py", "old_str": "b\\n", "new_str": ""}\n').hunks
    with pytest.raises(ProgramSyntaxError, match="old_str is empty"):
        str_replace.parse('{"old_str": "", "new_str": "x"}\n')
    with pytest.raises(ProgramSyntaxError, match="not a JSON object"):
        str_replace.parse('{"old_str": "b\n')


@pytest.mark.parametrize("fmt, text, where", [
    ("search_replace", "<<<<<<< SEARCH\na\n<<<<<<< SEARCH\n", 17),
    ("search_replace", "hello\n", 0),
    ("udiff", "@@ ... @@\n a\n@@ ... @@\n+b\n", 0),
    ("udiff", "@@ ... @@\nno tag\n", 10),
    ("apply_patch", "@@\n a\nfoo\n*** End Patch", 6),
    ("apply_patch", "@@\n+a\n*** End Patch\nmore", 20),
])
def test_malformed_programs_name_the_offset(fmt, text, where):
    with pytest.raises(ProgramSyntaxError) as info:
        get_format(fmt).parse(text)
    assert info.value.pos == where


@pytest.mark.parametrize("fmt, text", [("search_replace", "<<<<<<< SEARCH\na\n=======\n"),
                                       ("udiff", "@@ ... @@\n a\n"), ("apply_patch", "@@\n-a\n"),
                                       ("str_replace", '{"old_str": "a')])
def test_cut_off_programs_are_incomplete(fmt, text):
    f = get_format(fmt)
    with pytest.raises(IncompleteProgramError):
        f.parse(text)
    program = f.parse(text, partial=True)
    assert not program.complete and isinstance(program, HunkProgram) and program.trailing


def test_unknown_format_names_the_known_ones():
    with pytest.raises(ParameterError, match="unknown edit format 'diff'.*search_replace, udiff, apply_patch"):
        get_format("diff")
    assert set(FORMATS) | {"copy"} == set(EDIT_FORMATS)
    assert get_format("copy").numbered and not get_format("udiff").numbered
    assert get_format("udiff").header("a.py") == "--- a.py\n+++ a.py\n"
    assert get_format("apply_patch").header("a.py") == "*** Begin Patch\n*** Update File: a.py\n"
    with pytest.raises(ValueError, match="tag"):
        Hunk([("?", "x")])


CORPORA = [f"edits/humanevalpack/{lang}/humanevalpack.jsonl" for lang in ("python", "js", "cpp", "go", "java", "rust")]


def _pairs(data_dir, rel):
    path = data_dir / rel
    if rel.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for raw in f:
                d = json.loads(raw)
                yield d["before"], d["after"]
        return
    for raw in path.read_text(encoding="utf-8").splitlines():
        d = json.loads(raw)
        if "input" in d:
            yield d["input"], d["output"]
        else:
            yield d["declaration"] + d["buggy_solution"], d["declaration"] + d["canonical_solution"]


@pytest.mark.parametrize("rel", CORPORA + ["edits/editeval/edit_eval.jsonl", "edits/commits/click.jsonl.gz",
                                           "edits/commits/requests.jsonl.gz"])
def test_every_real_case_round_trips(data_dir, rel):
    n = written = 0
    for before, after in _pairs(data_dir, rel):
        n += 1
        for fmt in FORMATS:
            written += round_trip(fmt, before, after) is not None
    # only EditEval holds edits of the final newline (21 of 194), which the line formats cannot write
    assert written == len(FORMATS) * n - (3 * 21 if "editeval" in rel else 0)

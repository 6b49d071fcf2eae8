"""edit_tool (a function-calling tool for agent frameworks) and resolve_text (programs from any
model's answer)."""

import json

import pytest

from cad_outlines import (Copy, IncompleteProgramError, ProgramSyntaxError, SpanError, edit_tool, extract_program,
                          resolve_text)

DOC = "a = 1\nb = 2\nc = 3\n"
ANSWER = ('Here is the edit:\n```xml\n<program>\n<copy lines="1-1"/>\n<gen>b = 20\n</gen>\n<copy lines="3-3"/>\n'
          '</program>\n```\nIt changes b.')


def test_resolve_text_finds_the_program_in_a_chatty_answer():
    assert resolve_text(ANSWER, DOC) == "a = 1\nb = 20\nc = 3\n"
    # an answer continuing the prompt's <program>: it starts at the first op
    assert resolve_text('<copy lines="2-3"/></program>', DOC) == "b = 2\nc = 3\n"
    # a </program> inside gen text does not end the program
    assert resolve_text('<program><gen>x </program>\n</gen></program> ok', DOC) == "x </program>\n"
    assert extract_program(ANSWER).endswith("</program>") and extract_program(ANSWER).startswith("<program>")


def test_resolve_text_errors_name_what_is_wrong():
    with pytest.raises(ProgramSyntaxError, match="no edit program in the answer"):
        resolve_text("I cannot do that.", DOC)
    with pytest.raises(SpanError, match='copy lines="2-7" ends after the last line'):
        resolve_text('<program><copy lines="2-7"/></program>', DOC)
    with pytest.raises(IncompleteProgramError, match="program ended before </program>") as info:
        resolve_text('<program><copy lines="1-1"/>', DOC)
    assert info.value.partial_text == "a = 1\n" and info.value.program.ops == (Copy(1, 1),)
    assert resolve_text('<program><copy lines="1-1"/>', DOC, partial=True) == "a = 1\n"
    assert issubclass(IncompleteProgramError, ValueError)


def test_spec_is_a_json_schema_function():
    spec, _ = edit_tool(lambda prompt: ANSWER)
    json.dumps(spec)
    assert spec["name"] == "edit_document"
    params = spec["parameters"]
    assert params["type"] == "object" and params["required"] == ["instruction"]
    assert set(params["properties"]) == {"document", "path", "instruction"}
    assert all(p["type"] == "string" and p["description"] for p in params["properties"].values())


def test_handler_with_a_hosted_model_callable():
    prompts = []
    _, handler = edit_tool(lambda prompt: prompts.append(prompt) or ANSWER)
    out = handler(instruction="Set b to 20", document=DOC)
    assert out["ok"] and out["error"] is None and out["text"] == "a = 1\nb = 20\nc = 3\n"
    assert "-b = 2\n+b = 20\n" in out["diff"] and out["program"] == ANSWER
    assert prompts[0].endswith("<program>") and "\n2 b = 2\n" in prompts[0] and "Set b to 20" in prompts[0]


@pytest.mark.parametrize("call,words", [
    (dict(document=DOC), "instruction is missing"),
    (dict(instruction="x"), "exactly one of document"),
    (dict(instruction="x", document=DOC, path="f.txt"), "exactly one of document"),
    (dict(instruction="x", path="../outside.txt"), "outside the folder"),
    (dict(instruction="x", path="missing.txt"), "FileNotFoundError"),
    (dict(instruction="x", document=DOC, color="red"), "unknown argument(s) color"),
])
def test_bad_calls_are_error_values(tmp_path, call, words):
    _, handler = edit_tool(lambda prompt: ANSWER, root=tmp_path)
    out = handler(**call)
    assert out["ok"] is False and words in out["error"] and out["text"] is None


def test_bad_answers_are_error_values():
    _, handler = edit_tool(lambda prompt: '<program><copy lines="5-5"/></program>')
    out = handler(instruction="x", document=DOC)
    assert not out["ok"] and out["error"].startswith("SpanError: copy lines=\"5-5\"")


def test_path_is_edited_and_written_only_when_asked(tmp_path):
    path = tmp_path / "code.py"
    path.write_bytes(DOC.replace("\n", "\r\n").encode())
    answer = '<copy lines="1-1"/><gen>b = 20\r\n</gen><copy lines="3-3"/></program>'
    _, read_only = edit_tool(lambda prompt: answer, root=tmp_path)
    out = read_only(instruction="x", path="code.py")
    assert out["ok"] and not out["written"] and path.read_bytes() == DOC.replace("\n", "\r\n").encode()
    _, writer = edit_tool(lambda prompt: answer, root=tmp_path, write=True)
    out = writer(instruction="x", path="code.py")
    assert out["written"] and path.read_bytes() == b"a = 1\r\nb = 20\r\nc = 3\r\n"


def test_handler_with_a_local_copy_as_decode_editor(editor):
    """A CopyEditor on the tiny model: a cut-off program is an error value and writes nothing."""
    _, handler = edit_tool(editor, max_new_tokens=5)
    out = handler(instruction="x", document=DOC)
    assert out["ok"] is False and "cut off (max_new_tokens)" in out["error"]
    assert out["program"].startswith("<program>") and out["complete"] is False


def test_editor_must_be_an_editor_or_callable():
    with pytest.raises(TypeError, match="CopyEditor or a callable"):
        edit_tool(42)


def test_handler_names_a_wrong_type_instead_of_crashing_inside():
    _, handler = edit_tool(lambda prompt: ANSWER)
    for kwargs, words in (({"document": b"a = 1\n"}, "document must be a string, not bytes"),
                          ({"path": 3}, "path must be a string, not int"),
                          ({"document": None, "path": None}, "give exactly one of document")):
        out = handler(instruction="x", **kwargs)
        assert not out["ok"] and words in out["error"], out


def test_diff_keeps_the_path_as_given(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(DOC)
    _, handler = edit_tool(lambda prompt: ANSWER, root=tmp_path)
    out = handler(instruction="Set b to 20", path="src/app.py")
    assert out["ok"] and out["diff"].startswith("--- a/src/app.py\n+++ b/src/app.py\n"), out["diff"]


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / "latin1.py").write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    _, handler = edit_tool(lambda prompt: ANSWER, root=tmp_path)
    out = handler(instruction="x", path="latin1.py")
    assert not out["ok"] and "latin1.py" in out["error"] and "not UTF-8 text" in out["error"], out["error"]


def test_an_edit_that_deletes_every_line_is_not_written_unless_allowed(tmp_path):
    path = tmp_path / "code.py"
    path.write_text(DOC)
    _, writer = edit_tool(lambda prompt: "<program></program>", root=tmp_path, write=True)
    out = writer(instruction="x", path="code.py")
    assert not out["ok"] and not out["written"] and path.read_text() == DOC
    assert "deletes every line" in out["error"] and "allow_delete_all=True" in out["error"]
    assert out["text"] == "" and out["diff"]  # nothing lost: the edit is returned
    _, allowed = edit_tool(lambda prompt: "<program></program>", root=tmp_path, write=True, allow_delete_all=True)
    out = allowed(instruction="x", path="code.py")
    assert out["ok"] and out["written"] and path.read_text() == ""


@pytest.mark.parametrize("fmt, answer", [
    ("search_replace", "```\n<<<<<<< SEARCH\nb = 2\n=======\nb = 20\n>>>>>>> REPLACE\n```\nDone."),
    ("udiff", "```diff\n--- document\n+++ document\n@@ ... @@\n-b = 2\n+b = 20\n```"),
    ("apply_patch", "*** Begin Patch\n*** Update File: document\n@@\n-b = 2\n+b = 20\n*** End Patch"),
    ("str_replace", '{"old_str": "b = 2\\n", "new_str": "b = 20\\n"}'),
])
def test_handler_in_each_format_with_a_hosted_model_callable(fmt, answer):
    prompts = []
    _, handler = edit_tool(lambda prompt: prompts.append(prompt) or answer, format=fmt)
    out = handler(instruction="Set b to 20", document=DOC)
    assert out["ok"] and out["text"] == "a = 1\nb = 20\nc = 3\n", out["error"]
    assert "\nb = 2\n" in prompts[0] and " | " not in prompts[0]  # the plain document: no line numbers
    assert resolve_text(answer, DOC, format=fmt) == out["text"]


def test_handler_reports_a_hunk_that_does_not_apply_and_unknown_formats_are_refused():
    _, handler = edit_tool(lambda prompt: "@@ ... @@\n-b = 3\n+b = 20\n", format="udiff")
    out = handler(instruction="x", document=DOC)
    assert not out["ok"] and out["error"].startswith("MatchError: hunk 1:") and "do not occur" in out["error"]
    from cad_outlines.errors import ParameterError

    with pytest.raises(ParameterError, match="unknown edit format 'v4a'.*apply_patch"):
        edit_tool(lambda prompt: "", format="v4a")
    with pytest.raises(ParameterError, match="unknown edit format"):
        resolve_text("x", DOC, format="patch")


def test_handler_with_a_local_editor_in_another_format(editor):
    _, handler = edit_tool(editor, format="udiff", max_new_tokens=3)
    out = handler(instruction="x", document=DOC)
    assert out["complete"] is False or out["ok"]  # a tiny model: cut off or a program that applies
    assert not out["program"].startswith("<program>")

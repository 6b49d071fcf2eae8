"""Edit runs as a newcomer meets them (issue 12, items 8-10), on the real tiny model
(stories260K: a 512-position context)."""

import pytest

from cad_outlines import IncompleteProgramError, ProgramSyntaxError, SpanError, parse_program, resolve
from cad_outlines.cli import main
from cad_outlines.generators.copy_decode import CopyEditor
from tests.fixture_data import SMALL

DOC = "Once upon a time there was a cat.\nThe cat liked milk.\nOne day the cat saw a dog.\nThey became friends.\n"
MODEL = SMALL / "models" / "stories260K_hf"


def test_resolve_takes_program_text():
    """`resolve("<program>...", doc)` raised AttributeError: 'str' object has no attribute 'ops'."""
    assert resolve('<program><copy lines="1-1"/><gen>X\n</gen></program>', "a\nb\n") == "a\nX\n"
    assert resolve('<copy lines="2-2"/></program>', "a\nb\n") == "b\n"
    with pytest.raises(ProgramSyntaxError, match="text after </program>"):
        resolve("<program></program>tail", "a\n")
    with pytest.raises(TypeError, match="not list"):
        resolve([], "a\n")


def test_execute_rejects_text_after_the_program_and_bad_spans(editor):
    """`execute` accepted text after `</program>`."""
    with pytest.raises(ProgramSyntaxError, match="text after </program>"):
        editor.execute(DOC, '<copy lines="1-4"/></program> and more')
    with pytest.raises(IncompleteProgramError, match="program ended before </program>"):
        editor.execute(DOC, '<copy lines="1-4"/>')
    with pytest.raises(SpanError, match="ends after the last line"):
        editor.execute(DOC, '<copy lines="1-9"/></program>')
    # with or without the header, the same run
    a = editor.execute(DOC, '<copy lines="1-2"/></program>')
    b = editor.execute(DOC, '<program><copy lines="1-2"/></program>')
    assert a.text == b.text == "".join(DOC.splitlines(True)[:2]) and a.program_text == b.program_text


def test_negative_max_new_tokens_is_an_error(editor):
    with pytest.raises(ValueError, match="max_new_tokens must be >= 0, not -5"):
        editor.edit(DOC, "x", max_new_tokens=-5)


LONG = '<copy lines="1-1"/>\n<gen>' + "and the cat ran. " * 80 + "</gen>\n</program>"


def test_a_run_stops_at_the_model_context(editor):
    """The 512-token default ran past the model's 512-position context without a word."""
    assert editor.max_positions == 512
    result = editor.edit(DOC, "x", script=LONG, max_new_tokens=10**6)  # teacher-forced far past 512 positions
    s = result.stats
    assert not result.complete and result.stop_reason == "context_length"
    # the last token was chosen, but the forward that would feed it did not fit
    assert s.prompt_tokens + (s.generated_tokens - 1) + s.fast_forwarded_tokens + s.copied_tokens == 512
    # the text holds what the program wrote, the unclosed gen op's text included (as stream() passed it on)
    assert result.text.startswith(DOC.splitlines(True)[0] + "and the cat ran. and the cat")
    assert result.text == resolve(result.program_text, DOC, partial=True)
    assert result.program_text.startswith('<program><copy lines="1-1"/>\n<gen>and the cat ran. and the cat')
    # teacher-forced execution measures forwards, so it does not stop (the model's predictions are unused)
    assert editor.execute(DOC, LONG).complete


def test_an_incomplete_diff_does_not_delete_what_was_not_reached(editor):
    """An incomplete run's diff showed the whole document deleted."""
    result = editor.edit(DOC, "x", script=LONG, max_new_tokens=60)
    assert not result.complete and result.stop_reason == "max_new_tokens"
    diff = result.diff()
    assert "-The cat liked milk." not in diff and "-They became friends." not in diff
    assert diff.rstrip().endswith("(incomplete program: document lines 2-4 were not reached and are not in this diff)")
    assert not [ln for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]


def test_a_prompt_longer_than_the_context_is_one_clear_error(capsys, tmp_path):
    doc = tmp_path / "long.txt"
    doc.write_text("The cat sat on the mat and looked at the dog.\n" * 40)
    code = main(["edit", str(doc), "--instruction", "x", "--model", str(MODEL)])
    err = capsys.readouterr().err
    ours = [ln for ln in err.splitlines() if ln.startswith("cad-outlines")]  # transformers prints a loading bar
    assert code == 2 and len(ours) == 1 and "Traceback" not in err
    assert "is 1074 tokens: it leaves no room in the model's context of 512 positions" in ours[0]


def test_cli_keeps_crlf(capsys, tmp_path, monkeypatch):
    """The CLI's diff dropped `\\r` on CRLF files (the file was read with newline translation)."""
    program = '<copy lines="1-1"/>\n<gen>The cat liked fish.\r\n</gen>\n<copy lines="3-4"/>\n</program>'
    plain_edit = CopyEditor.edit
    monkeypatch.setattr(CopyEditor, "edit", lambda self, document, instruction, **kw: plain_edit(
        self, document, instruction, script=program, max_new_tokens=10**6))
    doc, out = tmp_path / "crlf.txt", tmp_path / "new.txt"
    doc.write_bytes(DOC.replace("\n", "\r\n").encode())
    code = main(["edit", str(doc), "--instruction", "fish", "--model", str(MODEL), "--output", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "-The cat liked milk.\r\n+The cat liked fish.\r\n" in captured.out
    assert out.read_bytes() == DOC.replace("milk", "fish").replace("\n", "\r\n").encode()


def test_stream_events_say_what_they_are(editor):
    """README's stream example printed `None 'T'`: event.op is None for gen text."""
    program = '<copy lines="1-1"/>\n<gen>Hi\n</gen>\n</program>'
    events = list(editor.stream(DOC, "x", script=program, max_new_tokens=10**6))
    kinds = [e.kind for e in events]
    assert kinds[0] == "copy" and kinds[-1] == "end" and "gen" in kinds and "gen_text" in kinds
    assert "".join(e.text for e in events if e.kind == "gen_text") == "Hi\n"
    result = events[-1].result
    assert result.program_text.startswith("<program>")  # program_text had no header
    assert parse_program(result.program_text).ops == result.program.ops

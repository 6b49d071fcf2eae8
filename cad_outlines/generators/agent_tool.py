"""A document-editing tool for agent frameworks (function calling).

``spec, handler = edit_tool(editor)`` gives a JSON-Schema function spec (the
``{"name", "description", "parameters"}`` shape OpenAI-style tool APIs and most agent
frameworks register) and the function that runs a call. The handler never raises for a
bad call: it returns ``{"ok": False, "error": "..."}`` naming what is wrong, so the agent
can read it and retry.

`editor` is either a :class:`~.copy_decode.CopyEditor` (a local transformers model:
Copy-as-Decode) or any callable ``prompt -> answer`` (e.g. a hosted API model): the
handler then prompts it with :func:`~cad_outlines.decoding.prompt.build_prompt` and resolves the edit
program in its answer with :func:`~cad_outlines.edits.answers.resolve_text`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..decoding.prompt import build_prompt
from ..edits.answers import resolve_text
from ..edits.documents import read_document, write_document
from ..edits.formats import get_format
from ..edits.lines import unified_diff

__all__ = ["edit_tool"]


def _spec(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": ("Edit a text document as an instruction asks and return the new text and a unified diff. "
                        "Give the document either inline (`document`) or as a file path (`path`)."),
        "parameters": {
            "type": "object",
            "properties": {
                "document": {"type": "string", "description": "the document's full text (or give `path`)"},
                "path": {"type": "string", "description": "a text file to edit (or give `document`)"},
                "instruction": {"type": "string", "description": "what to change, in words"},
            },
            "required": ["instruction"],
            "additionalProperties": False,
        },
    }


def edit_tool(editor: Any, *, name: str = "edit_document", root: str | Path | None = None, write: bool = False,
              allow_delete_all: bool = False, format: str | None = None,
              **edit_kwargs: Any) -> tuple[dict[str, Any], Callable[..., dict[str, Any]]]:
    """(function spec, handler) for an agent framework.

    The handler takes ``instruction`` and one of ``document`` / ``path`` and returns
    ``{"ok", "text", "diff", "program", "complete", "written", "error"}``: `text` is the
    new document, `diff` a unified diff from the old one, `program` the edit program the
    model wrote, `error` None or one line saying what went wrong (then ``ok`` is False).
    A `path` must lie under `root` (default: the current folder); with `write` a completed
    edit is written back to it (byte for byte: line endings kept), except one that deletes every line of the
    file (``<program></program>``), which is returned with an error and not written unless
    `allow_delete_all`. The diff's headers name the path as given (``a/src/app.py``). `edit_kwargs` go to
    :meth:`~.copy_decode.CopyEditor.edit` (``max_new_tokens``, ``sampling``...).

    `format`: the edit format the model writes (``copy``, ``search_replace``, ``udiff``,
    ``apply_patch``, ``str_replace``; default: a CopyEditor's own, else ``copy``); an unknown one
    raises :class:`~cad_outlines.errors.ParameterError` here. A callable model is prompted in that
    format and its answer applied (a hunk that does not apply is the call's error).
    """
    base = Path(root or ".").resolve()
    local = hasattr(editor, "edit") and hasattr(editor, "grammar")
    if not local and not callable(editor):
        raise TypeError("editor must be a CopyEditor or a callable prompt -> answer")
    if format is None:
        format = getattr(editor, "format", "copy") if local else "copy"
    fmt = get_format(format).name

    def handler(instruction: str | None = None, document: str | None = None, path: str | None = None,
                **unknown: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": False, "text": None, "diff": None, "program": None, "complete": False,
                               "written": False, "error": None}
        try:
            if unknown:
                raise ValueError(f"unknown argument(s) {', '.join(sorted(unknown))}; "
                                 "the tool takes instruction and document or path")
            if not isinstance(instruction, str) or not instruction.strip():
                raise ValueError("instruction is missing: say what to change")
            if (document is None) == (path is None):
                raise ValueError("give exactly one of document (the text) or path (a file)")
            for name, value in (("document", document), ("path", path)):
                if value is not None and not isinstance(value, str):
                    raise TypeError(f"{name} must be a string, not {type(value).__name__}")
            file = None
            if path is not None:
                file = (base / path).resolve()
                if not file.is_relative_to(base):
                    raise ValueError(f"path {path!r} is outside the folder this tool may edit ({base})")
                document = read_document(file)
            shown = Path(path).as_posix() if path else "document"
            if local:
                result = editor.edit(document, instruction, format=fmt, name=shown, **edit_kwargs)
                text, program, complete = result.text, result.program_text, result.complete
                if result.error:
                    raise ValueError(f"the edit program does not apply: {result.error}")
                if not complete:
                    out["error"] = (f"the edit program was cut off ({result.stop_reason}); text holds what it "
                                    "wrote so far and nothing was written")
            else:
                answer = editor(build_prompt(None, document, instruction, format=fmt, name=shown))
                if not isinstance(answer, str):
                    raise ValueError(f"the model returned a {type(answer).__name__}, not text")
                text, program, complete = resolve_text(answer, document, format=fmt), answer, True
            out.update(text=text, program=program, complete=complete,
                       diff=unified_diff(document, text, f"a/{shown}", f"b/{shown}"))
            if complete and write and file is not None:
                write_document(file, document, text, allow_delete_all=allow_delete_all,
                               flag="edit_tool(..., allow_delete_all=True)")
                out["written"] = True
            out["ok"] = complete
        except Exception as e:  # an error value, not an exception: the agent reads it
            out["error"] = " ".join(f"{type(e).__name__}: {e}".split())
        return out

    return _spec(name), handler

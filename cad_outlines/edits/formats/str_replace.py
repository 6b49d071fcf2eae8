"""str_replace calls, the edit command of Anthropic's text editor tool, for one document.

The model writes one call per line, the tool input as a JSON object with these two keys in this
order (``json.dumps``' spacing)::

    {"old_str": "    return a\\n", "new_str": "    return a + b\\n"}

``old_str`` is a run of whole document lines, each with its line ending (the document's last line
may have none), exactly as in the document, occurring once after the previous call's match (see
:mod:`.hunks`: str_replace counts line-aligned runs; Anthropic's tool counts every occurrence, also
inside a longer line). ``new_str`` is any text: it replaces ``old_str``'s text exactly, so unlike the
line formats a call can add or drop the document's last newline. ``old_str`` may not be empty (the
tool's ``insert`` and ``create`` commands are not in this subset, so an empty document cannot be
edited). The parser also accepts the tool's ``command`` (``"str_replace"``) and ``path`` keys, and
ignores the path. Grammar: ``grammars/str_replace.lark``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import ProgramSyntaxError
from ..lines import split_lines
from .hunks import DocumentLines, HunkProgram, InexpressibleEditError, check_complete, locate_hunks
from .oracle import oracle_runs

__all__ = ["StrReplace", "render", "parse", "apply", "oracle"]

NAME = "str_replace"


@dataclass(frozen=True)
class StrReplace:
    """One call: `old_str` (whole lines with their endings) replaced by `new_str`."""

    old_str: str
    new_str: str
    anchors: tuple = ()

    @property
    def old(self) -> list[str]:
        """The lines `old_str` must match, with their endings."""
        return split_lines(self.old_str)


def render(calls: Sequence[StrReplace]) -> str:
    return "".join(json.dumps({"old_str": c.old_str, "new_str": c.new_str}, ensure_ascii=False) + "\n"
                   for c in calls)


def parse(text: str, *, partial: bool = False) -> HunkProgram:
    """The calls of program text, one JSON object per line. A line that is not such an object raises
    :class:`ProgramSyntaxError`; a text that stops inside a line is incomplete
    (:class:`~cad_outlines.errors.IncompleteProgramError` unless `partial`)."""
    calls = []
    pos = 0
    while pos < len(text):
        end = text.find("\n", pos)
        if end < 0:
            break
        try:
            call = json.loads(text[pos:end])
        except ValueError as e:
            raise ProgramSyntaxError(f"not a JSON object: {e}", text, pos) from None
        if not isinstance(call, dict) or set(call) - {"command", "path", "old_str", "new_str"} or \
                not isinstance(call.get("old_str"), str) or not isinstance(call.get("new_str"), str) or \
                call.get("command", "str_replace") != "str_replace":
            raise ProgramSyntaxError('expected {"old_str": "...", "new_str": "..."}', text, pos)
        if not call["old_str"]:
            raise ProgramSyntaxError("old_str is empty", text, pos)
        calls.append(StrReplace(call["old_str"], call["new_str"]))
        pos = end + 1
    complete = pos == len(text)
    return check_complete(HunkProgram(NAME, calls, complete, text[pos:]), partial, "the end of a call's line")


def apply(program: HunkProgram | str, document: str) -> str:
    """The new document: each call's old_str replaced by its new_str, in order."""
    if isinstance(program, str):
        program = parse(program)
    doc = DocumentLines(split_lines(document))
    spans = locate_hunks(doc, program.hunks, "end")
    out: list[str] = []
    pos = 0
    for (s, k), call in zip(spans, program.hunks):
        out.extend(doc.bodies[pos:s])
        out.append(call.new_str)
        pos = s + k
    out.extend(doc.bodies[pos:])
    return "".join(out)


def oracle(before: str, after: str) -> HunkProgram:
    """Minimal calls, old_str widened until unique (see :mod:`.oracle`)."""
    if not before and after:
        raise InexpressibleEditError("str_replace cannot edit an empty document (old_str may not be empty)")
    runs = oracle_runs(split_lines(before), split_lines(after), empty_old=None)
    calls = [StrReplace("".join(u for t, u in run if t != "+"), "".join(u for t, u in run if t != "-"))
             for run in runs]
    return HunkProgram(NAME, calls)

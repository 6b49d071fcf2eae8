"""Unified-diff hunks without line numbers, aider's "udiff" edit format, for one document.

The prompt ends with the file header (``--- NAME`` / ``+++ NAME``); the model writes hunks::

    @@ ... @@
     a context line (a space, then the line)
    -a removed line
    +an added line

Each hunk starts with the literal header ``@@ ... @@`` (aider's: no line numbers) and holds at least
one ``-`` or ``+`` line; every line ends with ``"\\n"``. A hunk's context and removed lines, in order,
are its old lines: they must be the document's lines exactly, once, after the previous hunk (see
:mod:`.hunks`). A hunk with only ``+`` lines appends them at the end of the document (aider's rule).
Not in this subset: aider's repairs (hunks out of order, a context line missing its space, fuzzy
whitespace, hunks retried with less context), ``\\ No newline at end of file`` and several files.
Grammar: ``grammars/udiff.lark``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ProgramSyntaxError
from .hunks import Hunk, HunkProgram, apply_line_program, check_complete
from .oracle import oracle_hunks

__all__ = ["HUNK_HEADER", "render", "parse", "apply", "oracle", "prompt_header", "EMPTY_OLD"]

HUNK_HEADER = "@@ ... @@"
EMPTY_OLD = "end"
NAME = "udiff"


def prompt_header(name: str) -> str:
    """The file header the prompt ends with (the model writes the hunks after it)."""
    return f"--- {name}\n+++ {name}\n"


def render(hunks: Sequence[Hunk]) -> str:
    return "".join(HUNK_HEADER + "\n" + "".join(t + b + "\n" for t, b in hunk.lines) for hunk in hunks)


def parse(text: str, *, partial: bool = False) -> HunkProgram:
    """The hunks of program text (after the file header). A malformed line raises
    :class:`ProgramSyntaxError`; a text that stops inside a line is incomplete
    (:class:`~cad_outlines.errors.IncompleteProgramError` unless `partial`)."""
    hunks: list[Hunk] = []
    lines: list[tuple[str, str]] | None = None
    header_at = 0
    pos = 0

    def close(at: int) -> None:
        if lines is not None:
            if all(t == " " for t, _ in lines):
                raise ProgramSyntaxError("a hunk without a '-' or '+' line", text, header_at)
            hunks.append(Hunk(lines))

    while pos < len(text):
        end = text.find("\n", pos)
        if end < 0:
            break
        line = text[pos:end]
        if line == HUNK_HEADER:
            close(pos)
            lines, header_at = [], pos
        elif lines is not None and line[:1] in (" ", "-", "+"):
            lines.append((line[0], line[1:]))
        else:
            want = f"{HUNK_HEADER!r}" if lines is None else f"{HUNK_HEADER!r} or a line starting ' ', '-' or '+'"
            raise ProgramSyntaxError(f"expected {want}", text, pos)
        pos = end + 1
    complete = pos == len(text) and (lines is None or any(t != " " for t, _ in lines))
    if complete:
        close(pos)
    trailing = "" if complete else text[header_at if lines is not None else pos:]
    return check_complete(HunkProgram(NAME, hunks, complete, trailing), partial)


def apply(program: HunkProgram | str, document: str) -> str:
    """The new document (program text is parsed first; see :mod:`.hunks` for the rules)."""
    return apply_line_program(program, document, parse, EMPTY_OLD)


def oracle(before: str, after: str) -> HunkProgram:
    """Minimal hunks, context widened until unique (see :mod:`.oracle`)."""
    return HunkProgram(NAME, oracle_hunks(before, after, empty_old=EMPTY_OLD))

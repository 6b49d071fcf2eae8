"""apply_patch, OpenAI's V4A patch format, for one document.

The prompt ends with the envelope's first two lines (``*** Begin Patch`` and ``*** Update File: NAME``);
the model writes hunks and the end marker::

    @@ class Foo
    @@     def bar(self):
     a context line
    -a removed line
    +an added line
    *** End Patch

Each hunk starts with one or more ``@@`` lines: a bare ``@@``, or ``@@ TEXT``, an *anchor* that moves
the cursor to just after the first line at or after it whose text is TEXT (the reference
implementation's skip-ahead). Then its lines: ``" "`` context, ``"-"`` removed, ``"+"`` added. The
context and removed lines, in order, must be the document's lines exactly, once, after the cursor
(see :mod:`.hunks`); a hunk with only ``+`` lines inserts them at the cursor. The patch ends with
``*** End Patch`` (a newline after it is accepted). Not in this subset: ``*** Add File``,
``*** Delete File``, ``*** Move to``, ``*** End of File``, several files, and the reference's fuzzy
matching (trailing or all whitespace ignored). Grammar: ``grammars/apply_patch.lark`` (OpenAI's Lark
grammar for the tool, restricted to the above).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ProgramSyntaxError
from .hunks import Hunk, HunkProgram, apply_line_program, check_complete
from .oracle import oracle_hunks

__all__ = ["BEGIN", "UPDATE", "END", "render", "parse", "apply", "oracle", "prompt_header", "EMPTY_OLD"]

BEGIN = "*** Begin Patch"
UPDATE = "*** Update File: "
END = "*** End Patch"
ANCHOR = "@@"
EMPTY_OLD = "cursor"
NAME = "apply_patch"


def prompt_header(name: str) -> str:
    """The envelope's first lines, which the prompt ends with."""
    return f"{BEGIN}\n{UPDATE}{name}\n"


def render(hunks: Sequence[Hunk]) -> str:
    out = []
    for hunk in hunks:
        out.extend(f"{ANCHOR} {a}\n" for a in hunk.anchors)
        if not hunk.anchors:
            out.append(ANCHOR + "\n")
        out.extend(t + b + "\n" for t, b in hunk.lines)
    return "".join(out) + END


def parse(text: str, *, partial: bool = False) -> HunkProgram:
    """The hunks of program text (after the envelope's first lines). A malformed line raises
    :class:`ProgramSyntaxError`; a text that stops before ``*** End Patch`` is incomplete
    (:class:`~cad_outlines.errors.IncompleteProgramError` unless `partial`)."""
    hunks: list[Hunk] = []
    anchors: list[str] = []
    lines: list[tuple[str, str]] = []
    in_hunk = False
    hunk_at = 0
    pos = 0
    complete = False
    while pos < len(text):
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        if line == END or (end < 0 and line.startswith(END)):
            if line != END:
                raise ProgramSyntaxError(f"text after {END!r}", text, pos + len(END))
            if in_hunk and not lines:
                raise ProgramSyntaxError("a hunk without lines before the end", text, pos)
            if in_hunk:
                hunks.append(Hunk(lines, anchors))
            rest = text[end + 1:] if end >= 0 else ""
            if rest:
                raise ProgramSyntaxError(f"text after {END!r}", text, end + 1)
            complete, pos, in_hunk = True, len(text), False
            break
        if end < 0:
            break
        if line == ANCHOR or (line.startswith(ANCHOR + " ") and len(line) > len(ANCHOR) + 1):
            if in_hunk and lines:
                hunks.append(Hunk(lines, anchors))
                anchors, lines, in_hunk = [], [], False
            if not in_hunk:
                hunk_at, in_hunk = pos, True
            if line != ANCHOR:
                anchors.append(line[len(ANCHOR) + 1:])
        elif in_hunk and line[:1] in (" ", "-", "+"):
            lines.append((line[0], line[1:]))
        else:
            want = "'@@'" if not in_hunk else "'@@', a line starting ' ', '-' or '+', or " + repr(END)
            raise ProgramSyntaxError(f"expected {want}", text, pos)
        pos = end + 1
    trailing = "" if complete else text[hunk_at if in_hunk else pos:]
    return check_complete(HunkProgram(NAME, hunks, complete, trailing), partial, repr(END))


def apply(program: HunkProgram | str, document: str) -> str:
    """The new document (program text is parsed first; see :mod:`.hunks` for the rules)."""
    return apply_line_program(program, document, parse, EMPTY_OLD)


def oracle(before: str, after: str) -> HunkProgram:
    """Minimal hunks, context widened until unique (see :mod:`.oracle`); a bare ``@@`` each."""
    return HunkProgram(NAME, oracle_hunks(before, after, empty_old=EMPTY_OLD))

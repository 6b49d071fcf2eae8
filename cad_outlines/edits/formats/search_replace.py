"""Search/replace blocks, aider's "diff" edit format, for one document.

The model writes blocks (and nothing else; an optional blank line between them)::

    <<<<<<< SEARCH
    old lines, exactly as in the document
    =======
    new lines
    >>>>>>> REPLACE

Every line, the last marker's included, ends with ``"\\n"``. A line that is exactly one of the three
markers is always that marker (aider's parser reads them so too), so a document line that is a
marker cannot be searched for. Not in this subset: aider's file path line and code fence before each
block (the document is given), and its fuzzy matching (whitespace, elided ``...`` lines): here the
search text must be the document's lines exactly, once (see :mod:`.hunks`). An empty SEARCH section
appends the REPLACE lines at the end of the document (aider's rule for a new or appended file).
Grammar: ``grammars/search_replace.lark``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ProgramSyntaxError
from .hunks import Hunk, HunkProgram, InexpressibleEditError, apply_line_program, check_complete
from .oracle import oracle_hunks

__all__ = ["SEARCH", "DIVIDER", "REPLACE", "render", "parse", "apply", "oracle", "EMPTY_OLD"]

SEARCH = "<<<<<<< SEARCH"
DIVIDER = "======="
REPLACE = ">>>>>>> REPLACE"
MARKERS = (SEARCH, DIVIDER, REPLACE)
EMPTY_OLD = "end"
NAME = "search_replace"


def render(hunks: Sequence[Hunk]) -> str:
    """The blocks of `hunks`, back to back (each hunk's old lines, then its new lines)."""
    out = []
    for hunk in hunks:
        out.append(SEARCH + "\n")
        out.extend(b + "\n" for b in hunk.old)
        out.append(DIVIDER + "\n")
        out.extend(b + "\n" for b in hunk.new)
        out.append(REPLACE + "\n")
    return "".join(out)


def parse(text: str, *, partial: bool = False) -> HunkProgram:
    """The hunks of program text (blocks as above). A malformed line raises
    :class:`ProgramSyntaxError` at its offset; a text that stops inside a block is incomplete
    (:class:`~cad_outlines.errors.IncompleteProgramError` unless `partial`)."""
    hunks: list[Hunk] = []
    section, old, new = "out", [], []
    pos = 0
    block_start = 0
    while pos < len(text):
        end = text.find("\n", pos)
        if end < 0:  # a last line without its newline: unfinished
            break
        line = text[pos:end]
        if section == "out":
            if line == SEARCH:
                section, old, new, block_start = "search", [], [], pos
            elif line:
                raise ProgramSyntaxError(f"expected {SEARCH!r} or a blank line", text, pos)
        elif section == "search":
            if line == DIVIDER:
                section = "replace"
            elif line in MARKERS:
                raise ProgramSyntaxError(f"{line!r} inside a SEARCH section (expected {DIVIDER!r})", text, pos)
            else:
                old.append(line)
        else:
            if line == REPLACE:
                hunks.append(Hunk.replace(old, new))
                section = "out"
            elif line in MARKERS:
                raise ProgramSyntaxError(f"{line!r} inside a REPLACE section (expected {REPLACE!r})", text, pos)
            else:
                new.append(line)
        pos = end + 1
    trailing = text[block_start:] if section != "out" else text[pos:]
    complete = section == "out" and pos == len(text)
    return check_complete(HunkProgram(NAME, hunks, complete, "" if complete else trailing), partial,
                          f"the end of a block ({REPLACE!r})")


def apply(program: HunkProgram | str, document: str) -> str:
    """The new document (program text is parsed first)."""
    return apply_line_program(program, document, parse, EMPTY_OLD)


def oracle(before: str, after: str) -> HunkProgram:
    """The fewest, smallest blocks that turn `before` into `after` (see :mod:`.oracle`); an edit whose
    changed lines include a marker line raises :class:`InexpressibleEditError`."""
    hunks = oracle_hunks(before, after, empty_old=EMPTY_OLD)
    for hunk in hunks:
        for body in hunk.old + hunk.new:
            if body in MARKERS:
                raise InexpressibleEditError(f"a block would hold the line {body!r}, which search/replace "
                                             "reads as its marker")
    return HunkProgram(NAME, hunks)

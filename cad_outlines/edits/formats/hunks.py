"""Hunks: what every diff-style edit format says, and the one exact applier they share.

A hunk names a run of whole document lines (its *old* lines: search text, or context and removed
lines) and what replaces them. The formats differ in how they write hunks (see the format modules);
they agree on where a hunk applies:

- a hunk's old lines must occur **exactly once** as a run of consecutive whole lines among the
  lines at or after the *cursor*, the line after the previous hunk's match (0 for the first hunk):
  hunks apply in order and never overlap;
- a line matches by its *body*: its text without the ``"\\n"`` that ends it (a ``"\\r"`` before it
  is part of the body, so CRLF documents need CRLF search text);
- apply_patch's ``@@ text`` anchors move the cursor first, to just after the first line at or after
  it whose body is ``text`` (its reference implementation's skip-ahead);
- a hunk with no old lines appends at the end of the document (``empty_old="end"``: aider's
  search/replace and udiff) or inserts at the cursor (``empty_old="cursor"``: apply_patch).

Line formats write every line with a ``"\\n"``, so they say nothing about the end of the file: a
document keeps its last newline, or its lack of one (the document is its line bodies joined by
``"\\n"``, plus a final ``"\\n"`` when it had one; the empty document counts as ending with one).
``str_replace`` replaces text, so it can change that too (see :mod:`.str_replace`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import IncompleteProgramError, InexpressibleEditError, MatchError

__all__ = ["Hunk", "HunkProgram", "MatchError", "InexpressibleEditError", "DocumentLines", "locate_hunks",
           "apply_line_hunks", "apply_line_program", "line_bodies", "check_complete"]


@dataclass(frozen=True)
class Hunk:
    """One hunk. `lines` are ``(tag, body)`` pairs in the order a diff writes them: ``" "`` context,
    ``"-"`` removed, ``"+"`` added; bodies carry no ``"\\n"``. `anchors` are apply_patch's ``@@ text``
    skip-ahead lines (empty for the other formats)."""

    lines: tuple[tuple[str, str], ...]
    anchors: tuple[str, ...] = ()

    def __init__(self, lines: Sequence[tuple[str, str]] = (), anchors: Sequence[str] = ()):
        for tag, body in lines:
            if tag not in (" ", "-", "+"):
                raise ValueError(f"hunk line tag must be ' ', '-' or '+', not {tag!r}")
            if "\n" in body:
                raise ValueError(f"hunk line body contains a newline: {body!r}")
        object.__setattr__(self, "lines", tuple((t, b) for t, b in lines))
        object.__setattr__(self, "anchors", tuple(anchors))

    @classmethod
    def replace(cls, old: Sequence[str], new: Sequence[str]) -> Hunk:
        """A hunk that replaces the run `old` by `new` (search/replace's shape: no context lines)."""
        return cls([("-", b) for b in old] + [("+", b) for b in new])

    @property
    def old(self) -> tuple[str, ...]:
        """The bodies the hunk matches: context and removed lines, in order."""
        return tuple(b for t, b in self.lines if t != "+")

    @property
    def new(self) -> tuple[str, ...]:
        """The bodies that replace them: context and added lines, in order."""
        return tuple(b for t, b in self.lines if t != "-")


@dataclass(frozen=True)
class HunkProgram:
    """The hunks of an edit in one format. `complete` is False for a program cut off before its end;
    `trailing` then holds the text of the part left unfinished."""

    format: str
    hunks: tuple = ()
    complete: bool = True
    trailing: str = ""

    def __init__(self, format: str, hunks: Sequence = (), complete: bool = True, trailing: str = ""):
        object.__setattr__(self, "format", format)
        object.__setattr__(self, "hunks", tuple(hunks))
        object.__setattr__(self, "complete", complete)
        object.__setattr__(self, "trailing", trailing)

    def __len__(self) -> int:
        return len(self.hunks)

    def __iter__(self):
        return iter(self.hunks)


def check_complete(program: HunkProgram, partial: bool, expected: str = "the end of a hunk") -> HunkProgram:
    """`program`, or :class:`IncompleteProgramError` when it was cut off and `partial` is not set."""
    if not program.complete and not partial:
        raise IncompleteProgramError(program, expected=expected, unit="hunk")
    return program


def line_bodies(text: str) -> tuple[list[str], bool]:
    """`text`'s line bodies and whether it ends with a newline (the empty text does, by convention:
    lines added to it end with one)."""
    if not text:
        return [], True
    bodies = text.split("\n")
    terminated = bodies[-1] == ""
    if terminated:
        bodies.pop()
    return bodies, terminated


class DocumentLines:
    """A document's lines (`units`: their bodies for the line formats, the lines with their endings
    for str_replace), indexed for the applier and the oracle writers: where each line occurs, and
    how many times a run of lines occurs after a line."""

    def __init__(self, units: Sequence[str], terminated: bool = True):
        self.bodies = list(units)
        self.terminated = terminated
        self.n = len(self.bodies)
        self.where: dict[str, list[int]] = {}
        for i, b in enumerate(self.bodies):
            self.where.setdefault(b, []).append(i)

    @classmethod
    def of(cls, text: str) -> DocumentLines:
        """The line bodies of `text` (the line formats' view)."""
        return cls(*line_bodies(text))

    def occurrences(self, run: Sequence[str], start: int = 0, limit: int = 2) -> list[int]:
        """0-based first lines of up to `limit` occurrences of the line run `run` at or after line
        `start` (a run matches lines by body)."""
        if not run:
            return []
        out = []
        k = len(run)
        first = self.where.get(run[0], ())
        for s in first:
            if s < start or s + k > self.n:
                continue
            if all(self.bodies[s + j] == run[j] for j in range(1, k)):
                out.append(s)
                if len(out) >= limit:
                    break
        return out


def _excerpt(run: Sequence[str]) -> str:
    head = run[0] if len(run[0]) <= 60 else run[0][:57] + "..."
    return f"{len(run)} line{'s' * (len(run) != 1)} starting {head!r}"


def locate_hunks(doc: DocumentLines, hunks: Sequence[Hunk], empty_old: str) -> list[tuple[int, int]]:
    """Where each hunk applies: (first line, number of old lines), 0-based, in order; a
    :class:`MatchError` for the first hunk that does not match exactly once after the previous one."""
    spans = []
    cursor = 0
    for h, hunk in enumerate(hunks, 1):
        for anchor in hunk.anchors:
            hit = next((i for i in doc.where.get(anchor, ()) if i >= cursor), None)
            if hit is None:
                raise MatchError(f"hunk {h}: anchor @@ {anchor!r} does not occur at or after line {cursor + 1} "
                                 f"(the document has {doc.n} lines)", h)
            cursor = hit + 1
        old = hunk.old
        if not old:
            at = doc.n if empty_old == "end" else cursor
            spans.append((at, 0))
            cursor = at
            continue
        hits = doc.occurrences(old, cursor)
        if len(hits) != 1:
            after = f"at or after line {cursor + 1}" if cursor else "in the document"
            if not hits:
                why = f"do not occur {after}"
                if doc.occurrences(old, 0, 1):
                    why += " (they occur before it: hunks apply in order and never overlap)"
            else:
                why = f"occur more than once {after} (lines {hits[0] + 1} and {hits[1] + 1}): add context lines"
            raise MatchError(f"hunk {h}: its old lines ({_excerpt(old)}) {why}", h)
        spans.append((hits[0], len(old)))
        cursor = hits[0] + len(old)
    return spans


def apply_line_hunks(document: str, hunks: Sequence[Hunk], empty_old: str) -> str:
    """The new document: each hunk's old lines replaced by its new lines (see the module docstring
    for where a hunk applies and for the final newline)."""
    doc = DocumentLines.of(document)
    spans = locate_hunks(doc, hunks, empty_old)
    out: list[str] = []
    pos = 0
    for (s, k), hunk in zip(spans, hunks):
        out.extend(doc.bodies[pos:s])
        out.extend(hunk.new)
        pos = s + k
    out.extend(doc.bodies[pos:])
    if not out:
        return ""
    return "\n".join(out) + ("\n" if doc.terminated else "")


def apply_line_program(program, document: str, parse, empty_old: str) -> str:
    """A line format's applier: `program` (a :class:`HunkProgram`, or its text, read with `parse`)
    applied to `document`."""
    if isinstance(program, str):
        program = parse(program)
    return apply_line_hunks(document, program.hunks, empty_old)

"""Edit programs: the ops, the program, its text form and its parser.

The language is defined by ``grammars/copy_edit.lark``; :class:`ProgramScanner` is the
incremental reader of that language (it can stop anywhere and resume), and the test
suite checks it against lark on the grammar itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..errors import IncompleteProgramError, ProgramSyntaxError

__all__ = [
    "Copy",
    "Gen",
    "Op",
    "EditProgram",
    "ProgramSyntaxError",
    "ProgramScanner",
    "IncompleteProgramError",
    "parse_program",
    "gen_ops",
    "PROGRAM_START",
    "PROGRAM_END",
    "GEN_OPEN",
    "GEN_CLOSE",
    "COPY_OPEN",
    "COPY_CLOSE",
]

PROGRAM_START = "<program>"
PROGRAM_END = "</program>"
GEN_OPEN = "<gen>"
GEN_CLOSE = "</gen>"
COPY_OPEN = '<copy lines="'
COPY_CLOSE = '"/>'


@dataclass(frozen=True)
class Copy:
    """``<copy lines="start-end"/>``: document lines start..end, 1-based, inclusive.

    Any ints are accepted here; a span that does not fit a document is reported by the
    resolver, which knows the document's length.
    """

    start: int
    end: int

    def to_text(self) -> str:
        return f'{COPY_OPEN}{self.start}-{self.end}{COPY_CLOSE}'


@dataclass(frozen=True)
class Gen:
    """``<gen>text</gen>``: `text` inserted verbatim. `text` cannot contain ``</gen>``:
    build such text with :func:`gen_ops`, which splits it over adjacent gen ops."""

    text: str

    def __post_init__(self) -> None:
        if GEN_CLOSE in self.text:
            raise ValueError(
                f"gen text contains {GEN_CLOSE!r} at index {self.text.index(GEN_CLOSE)}; "
                "use gen_ops(text) to split it over adjacent gen ops"
            )

    def to_text(self) -> str:
        return f"{GEN_OPEN}{self.text}{GEN_CLOSE}"


Op = Copy | Gen


def gen_ops(text: str) -> list[Gen]:
    """Gen ops whose texts concatenate to `text`, split inside each ``</gen>``."""
    pieces = text.split(GEN_CLOSE)
    if len(pieces) == 1:
        return [Gen(text)]
    # "a</gen>b" -> "a</ge" + "n>b": each cut lands inside the forbidden string.
    out, carry = [], ""
    for piece in pieces[:-1]:
        out.append(Gen(carry + piece + GEN_CLOSE[:-2]))
        carry = GEN_CLOSE[-2:]
    out.append(Gen(carry + pieces[-1]))
    return out


@dataclass(frozen=True)
class EditProgram:
    """A sequence of ops. `complete` is False for a program cut off before
    ``</program>``; `trailing` then holds the text of the unfinished op, if any."""

    ops: tuple[Op, ...]
    complete: bool = True
    trailing: str = ""

    def __init__(self, ops: Iterable[Op] = (), complete: bool = True, trailing: str = ""):
        object.__setattr__(self, "ops", tuple(ops))
        object.__setattr__(self, "complete", complete)
        object.__setattr__(self, "trailing", trailing)

    def to_text(self, *, header: bool = True, sep: str = "\n") -> str:
        """The program as the model writes it. `header` adds the leading ``<program>``
        (which the prompt supplies during generation); `sep` ("\\n" or "") goes
        between ops."""
        if sep not in ("\n", ""):
            raise ValueError('sep must be "\\n" or ""')
        body = sep.join(op.to_text() for op in self.ops)
        head = PROGRAM_START + sep if header else ""
        tail = (sep if self.ops else "") + PROGRAM_END if self.complete else ""
        return head + body + tail + (self.trailing if not self.complete else "")

    def __len__(self) -> int:
        return len(self.ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)


def require_text(value: object, parameter: str, function: str) -> str:
    """`value` if it is a str; else a TypeError naming the function, the parameter, the type
    received and what is expected (bytes: decode them first)."""
    if isinstance(value, str):
        return value
    got = type(value).__name__
    if isinstance(value, (bytes, bytearray)):
        raise TypeError(f"{function}: {parameter} must be str, not {got}: decode it first "
                        f"({parameter}.decode('utf-8'))")
    raise TypeError(f"{function}: {parameter} must be str, not {got}")


def unfinished_gen_text(trailing: str) -> str:
    """The body text of a gen op cut off in `trailing` (an :class:`EditProgram`'s unfinished
    op), without a tail that could still begin ``</gen>``: what a streaming reader has
    already passed on. Empty when the unfinished op is not a gen op."""
    if not trailing.startswith(GEN_OPEN):
        return ""
    body = trailing[len(GEN_OPEN):]
    for k in range(min(len(GEN_CLOSE) - 1, len(body)), 0, -1):
        if GEN_CLOSE.startswith(body[len(body) - k:]):
            return body[:len(body) - k]
    return body


_COPY_RE = re.compile(r'<copy lines="([1-9][0-9]*)-([1-9][0-9]*)"/>')
_COPY_PREFIX_TAIL = re.compile(r'(?:[1-9][0-9]*(?:-(?:[1-9][0-9]*(?:"/?)?)?)?)?')
_EXPECTED = '<copy lines="i-j"/>, <gen>, </program> or a newline'


def _is_copy_prefix(s: str) -> bool:
    if len(s) <= len(COPY_OPEN):
        return COPY_OPEN.startswith(s)
    return s.startswith(COPY_OPEN) and _COPY_PREFIX_TAIL.fullmatch(s, len(COPY_OPEN)) is not None


@dataclass
class ProgramScanner:
    """Reads program text incrementally: :meth:`feed` text as it arrives and get the
    events it completes. Events are ``("copy", Copy)``, ``("gen_text", str)`` (a piece of
    the current gen body, emitted as soon as it cannot be part of ``</gen>``),
    ``("gen", Gen)`` (a whole gen op, once closed) and ``("end", None)``.

    The scanner never guesses: text that cannot continue a program raises
    :class:`ProgramSyntaxError` at its offset; :meth:`close` raises if the program is
    unfinished unless asked for the partial result.
    """

    expect_header: bool = False
    text: str = ""
    pos: int = 0
    ops: list[Op] = field(default_factory=list)
    done: bool = False
    _in_gen: bool = False
    _gen_body_start: int = 0
    _gen_emitted: int = 0
    _nl_ok: bool = True

    def feed(self, chunk: str) -> list[tuple[str, object]]:
        self.text += chunk
        events: list[tuple[str, object]] = []
        while self._step(events):
            pass
        return events

    def _step(self, events: list) -> bool:
        t, p = self.text, self.pos
        if self.done:
            if p < len(t):
                raise ProgramSyntaxError(f"text after {PROGRAM_END}", t, p)
            return False
        if self.expect_header:
            if len(t) - p < len(PROGRAM_START):
                if not PROGRAM_START.startswith(t[p:]):
                    raise ProgramSyntaxError(f"expected {PROGRAM_START}", t, p)
                return False
            if not t.startswith(PROGRAM_START, p):
                raise ProgramSyntaxError(f"expected {PROGRAM_START}", t, p)
            self.pos += len(PROGRAM_START)
            self.expect_header = False
            return True
        if self._in_gen:
            return self._step_gen(events)
        if p >= len(t):
            return False
        if t[p] == "\n":
            if not self._nl_ok:
                raise ProgramSyntaxError(f"a second newline between ops; expected {_EXPECTED}", t, p)
            self.pos += 1
            self._nl_ok = False
            return True
        rest = t[p:]
        if rest.startswith(GEN_OPEN):
            self._in_gen = True
            self._gen_body_start = self._gen_emitted = p + len(GEN_OPEN)
            self.pos = self._gen_body_start
            return True
        if rest.startswith(PROGRAM_END):
            self.pos += len(PROGRAM_END)
            self.done = True
            events.append(("end", None))
            return True
        m = _COPY_RE.match(t, p)
        if m:
            op = Copy(int(m.group(1)), int(m.group(2)))
            self.ops.append(op)
            events.append(("copy", op))
            self.pos = m.end()
            self._nl_ok = True
            return True
        if GEN_OPEN.startswith(rest) or PROGRAM_END.startswith(rest) or _is_copy_prefix(rest):
            return False  # a prefix of something valid: wait for more text
        bad = p
        if rest.startswith(COPY_OPEN):
            bad = p + len(COPY_OPEN)
            while bad < len(t) and _is_copy_prefix(t[p : bad + 1]):
                bad += 1
            raise ProgramSyntaxError('malformed copy op: expected <copy lines="i-j"/> with i, j >= 1', t, bad)
        raise ProgramSyntaxError(f"expected {_EXPECTED}", t, bad)

    def _step_gen(self, events: list) -> bool:
        t = self.text
        end = t.find(GEN_CLOSE, self._gen_body_start)
        if end < 0:
            # Hold back a tail that could be the start of "</gen>".
            safe = len(t)
            for k in range(min(len(GEN_CLOSE) - 1, len(t) - self._gen_emitted), 0, -1):
                if GEN_CLOSE.startswith(t[len(t) - k :]):
                    safe = len(t) - k
                    break
            if safe > self._gen_emitted:
                events.append(("gen_text", t[self._gen_emitted : safe]))
                self._gen_emitted = safe
            self.pos = len(t)
            return False
        if end > self._gen_emitted:
            events.append(("gen_text", t[self._gen_emitted : end]))
        op = Gen(t[self._gen_body_start : end])
        self.ops.append(op)
        events.append(("gen", op))
        self._in_gen = False
        self.pos = end + len(GEN_CLOSE)
        self._nl_ok = True
        return True

    def pending_text(self) -> str:
        """Text of an op that has started but not finished."""
        start = self._gen_body_start - len(GEN_OPEN) if self._in_gen else self.pos
        return self.text[start:]

    def close(self, *, partial: bool = False) -> EditProgram:
        """The program read so far. Unless `partial`, it must have ended with
        ``</program>``: else :class:`~cad_outlines.errors.IncompleteProgramError` carrying
        the program read so far."""
        program = EditProgram(self.ops, complete=self.done, trailing="" if self.done else self.pending_text())
        if not self.done and not partial:
            raise IncompleteProgramError(program, detail=" (inside an unclosed gen op)" if self._in_gen else "")
        return program


def parse_program(text: str, *, partial: bool = False) -> EditProgram:
    """Parse program text, with or without its leading ``<program>``.

    Raises :class:`ProgramSyntaxError` with the offending position, and
    :class:`~cad_outlines.errors.IncompleteProgramError` (its ``program`` holds the ops read)
    for a text cut off before ``</program>``; with `partial` such a text returns the ops
    completed so far and ``complete=False`` instead. A `text` that is not a str raises
    TypeError.
    """
    require_text(text, "text", "parse_program")
    scanner = ProgramScanner(expect_header=text.startswith(PROGRAM_START))
    scanner.feed(text)
    return scanner.close(partial=partial)

"""The resolver: program + document -> new document, exact and deterministic."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..errors import IncompleteProgramError, SpanError
from .lines import split_lines
from .program import EditProgram, Gen, Op, ProgramScanner, parse_program, require_text, unfinished_gen_text

__all__ = ["SpanError", "IncompleteProgramError", "resolve", "resolve_op", "StreamingResolver", "iter_resolve"]


def resolve_op(op: Op, lines: list[str]) -> str:
    """The text one op contributes, given the document's lines."""
    if isinstance(op, Gen):
        return op.text
    if not (1 <= op.start <= op.end <= len(lines)):
        raise SpanError(op, len(lines))
    return "".join(lines[op.start - 1 : op.end])


def resolve(program: EditProgram | str, document: str, *, partial: bool = False) -> str:
    """The new document. `program` is an :class:`EditProgram` or program text (parsed by
    :func:`~.program.parse_program`, with or without ``<program>``; see
    :func:`resolve_text` for a model's whole answer). Raises
    :class:`~.program.ProgramSyntaxError` for malformed text, :class:`SpanError` for a
    span outside the document and :class:`IncompleteProgramError` (carrying the program and
    the text it resolves to) for a cut-off program unless `partial` is set. A cut-off
    program's text includes the body of a gen op it left open (as
    :class:`StreamingResolver` passes it on)."""
    if isinstance(program, str):
        program = parse_program(program, partial=True)
    elif not isinstance(program, EditProgram):
        if isinstance(program, (bytes, bytearray)):
            require_text(program, "program", "resolve")
        raise TypeError(f"resolve: program must be an EditProgram or program text (str), not {type(program).__name__}")
    require_text(document, "document", "resolve")
    lines = split_lines(document)
    text = "".join(resolve_op(op, lines) for op in program.ops)
    if not program.complete:
        text += unfinished_gen_text(program.trailing)
    if not program.complete and not partial:
        raise IncompleteProgramError(program, text)
    return text


@dataclass
class StreamingResolver:
    """Resolve program text as it arrives: :meth:`feed` returns the new document text
    that the fed chunk completes (gen bodies stream character by character, a copy op
    arrives whole). :meth:`close` checks the program ended."""

    document: str
    expect_header: bool = False
    _lines: list[str] = field(init=False)
    _scanner: ProgramScanner = field(init=False)
    _out: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        require_text(self.document, "document", "StreamingResolver")
        self._lines = split_lines(self.document)
        self._scanner = ProgramScanner(expect_header=self.expect_header)

    def feed(self, chunk: str) -> str:
        pieces = []
        for kind, value in self._scanner.feed(chunk):
            if kind == "gen_text":
                pieces.append(value)
            elif kind == "copy":
                pieces.append(resolve_op(value, self._lines))
        text = "".join(pieces)
        self._out.append(text)
        return text

    @property
    def ops(self) -> list[Op]:
        return list(self._scanner.ops)

    @property
    def done(self) -> bool:
        return self._scanner.done

    def pending_text(self) -> str:
        """Program text of the op in progress (empty between ops)."""
        return self._scanner.pending_text()

    def close(self, *, partial: bool = False) -> EditProgram:
        """The program read; raises :class:`IncompleteProgramError` if it did not end
        with ``</program>`` unless `partial`."""
        program = self._scanner.close(partial=True)
        if not program.complete and not partial:
            raise IncompleteProgramError(program, "".join(self._out))
        return program


def iter_resolve(chunks: Iterable[str], document: str, *, expect_header: bool = False) -> Iterator[str]:
    """Yield resolved text as program `chunks` arrive; raises at the end if the program
    is incomplete (after yielding everything it could)."""
    resolver = StreamingResolver(document, expect_header=expect_header)
    for chunk in chunks:
        text = resolver.feed(chunk)
        if text:
            yield text
    resolver.close()

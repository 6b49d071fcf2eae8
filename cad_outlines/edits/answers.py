"""Edit programs from any model's answer: a hosted API model, a local one, a person.

Such an answer holds the program among other text (a sentence before it, a code fence
around it, a remark after it). :func:`extract_program` finds it: from ``<program>`` (or,
when the prompt already supplied that, from the first op) to the ``</program>`` that
ends it as the program grammar reads it (a ``</program>`` inside a gen body's text does
not end it). :func:`resolve_text` then parses it strictly and resolves it.
"""

from __future__ import annotations

from .program import (COPY_OPEN, GEN_OPEN, PROGRAM_END, PROGRAM_START, EditProgram, ProgramSyntaxError, parse_program,
                      require_text)
from .resolve import resolve

__all__ = ["extract_program", "program_from_answer", "resolve_text"]

_AFTER_END = f"text after {PROGRAM_END}"


def extract_program(answer: str) -> str:
    """The program text in `answer`, from ``<program>`` (added if the answer starts at
    the first op) through its ``</program>``; text around it is dropped. Raises
    :class:`~.program.ProgramSyntaxError` if there is no program in it."""
    require_text(answer, "answer", "extract_program")
    start = answer.find(PROGRAM_START)
    if start < 0:
        firsts = [i for i in (answer.find(COPY_OPEN), answer.find(GEN_OPEN), answer.find(PROGRAM_END)) if i >= 0]
        if not firsts:
            raise ProgramSyntaxError(f"no edit program in the answer (no {PROGRAM_START}, <copy or {GEN_OPEN})",
                                     answer, 0)
        body = PROGRAM_START + answer[min(firsts):]
    else:
        body = answer[start:]
    try:
        parse_program(body, partial=True)
    except ProgramSyntaxError as e:
        if str(e).startswith(_AFTER_END):
            return body[:e.pos]
        raise
    return body


def program_from_answer(answer: str, *, partial: bool = False) -> EditProgram:
    """The :class:`~.program.EditProgram` in a model's answer (see :func:`extract_program`);
    a program cut off before ``</program>`` raises unless `partial`."""
    return parse_program(extract_program(answer), partial=partial)


def resolve_text(answer: str, document: str, *, partial: bool = False, format: str = "copy") -> str:
    """The new document from a model's answer holding an edit program: the entry point
    for programs written by any model (e.g. a hosted API model prompted with
    :func:`~cad_outlines.decoding.prompt.build_prompt`). Raises
    :class:`~.program.ProgramSyntaxError`, :class:`~.resolve.SpanError` or
    :class:`~.resolve.IncompleteProgramError` (unless `partial`; it carries the program and the
    text it resolves to) naming what is wrong; a non-str `answer` or `document` raises TypeError.
    With `partial`, a cut-off program gives the text it reached, a gen op left open included.

    `format`: the edit format the answer is written in (:mod:`.formats`; an unknown one raises
    ParameterError); for a diff-style format the program is read from the answer by
    :func:`~.formats.program_in_answer` and applied (a hunk that does not apply raises
    :class:`~.formats.MatchError`)."""
    from .formats import get_format, program_in_answer

    require_text(answer, "answer", "resolve_text")
    require_text(document, "document", "resolve_text")
    fmt = get_format(format)
    if fmt.name != "copy":
        return fmt.apply(fmt.parse(program_in_answer(answer, fmt.name), partial=partial), document)
    return resolve(program_from_answer(answer, partial=True), document, partial=partial)

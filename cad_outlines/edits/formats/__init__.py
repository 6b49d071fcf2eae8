"""Edit formats: the ways a model can write an edit of one document, each with an exact applier, an
oracle writer and a grammar (``grammars/<grammar>.lark``).

- ``copy``: Copy-as-Decode programs (:mod:`cad_outlines.edits.program`), over a line-numbered prompt;
- ``search_replace``: aider's SEARCH/REPLACE blocks (:mod:`.search_replace`);
- ``udiff``: unified-diff hunks without line numbers, aider's udiff (:mod:`.udiff`);
- ``apply_patch``: OpenAI's V4A patches (:mod:`.apply_patch`);
- ``str_replace``: Anthropic's text editor ``str_replace`` calls, as JSON (:mod:`.str_replace`).

The diff-style formats share where a hunk applies (:mod:`.hunks`: its old lines, once, in order) and
the oracle (:mod:`.oracle`: minimal hunks widened until unique). :func:`get_format` gives a format by
name; an unknown name raises :class:`~cad_outlines.errors.ParameterError` listing the known ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import ParameterError
from ..oracle import oracle_program
from ..program import PROGRAM_START, EditProgram, parse_program
from ..resolve import resolve
from . import apply_patch, search_replace, str_replace, udiff
from .hunks import Hunk, HunkProgram, InexpressibleEditError, MatchError
from .str_replace import StrReplace

__all__ = ["EDIT_FORMATS", "EditFormat", "get_format", "oracle_text", "apply_format", "program_in_answer", "Hunk",
           "HunkProgram", "StrReplace", "MatchError", "InexpressibleEditError"]


@dataclass(frozen=True)
class EditFormat:
    """One edit format.

    - `grammar`: the shipped grammar the model writes under (``grammars/<grammar>.lark``);
    - `header(name)`: the text the prompt ends with, before the model's first token (``<program>``,
      a diff's file header, the patch envelope; empty for search/replace and str_replace);
    - `render(program)`: the program's text as the model writes it (after the header);
    - `parse(text, partial=False)`: the program in that text;
    - `apply(program or text, document)`: the new document, exactly, or a
      :class:`~cad_outlines.errors.ProgramError` naming what does not apply;
    - `oracle(before, after)`: the program of a known edit (minimal; search text unique);
    - `numbered`: whether the prompt numbers the document's lines (``copy`` only);
    - `empty_old`: where a hunk with no old lines applies ("end", "cursor"), None where there is none.
    """

    name: str
    grammar: str
    header: Callable[[str], str]
    render: Callable[[Any], str]
    parse: Callable[..., Any]
    apply: Callable[[Any, str], str]
    oracle: Callable[[str, str], Any]
    numbered: bool = False
    empty_old: str | None = None


def _copy_render(program: EditProgram) -> str:
    return program.to_text(header=False)


def _copy_parse(text: str, *, partial: bool = False) -> EditProgram:
    return parse_program(text, partial=partial)


def _hunk_render(module) -> Callable[[Any], str]:
    return lambda program: module.render(program.hunks if isinstance(program, HunkProgram) else program)


_FORMATS = {
    "copy": EditFormat("copy", "copy_edit", lambda name: PROGRAM_START, _copy_render, _copy_parse, resolve,
                       oracle_program, numbered=True),
    "search_replace": EditFormat("search_replace", "search_replace", lambda name: "",
                                 _hunk_render(search_replace), search_replace.parse, search_replace.apply,
                                 search_replace.oracle, empty_old=search_replace.EMPTY_OLD),
    "udiff": EditFormat("udiff", "udiff", udiff.prompt_header, _hunk_render(udiff), udiff.parse, udiff.apply,
                        udiff.oracle, empty_old=udiff.EMPTY_OLD),
    "apply_patch": EditFormat("apply_patch", "apply_patch", apply_patch.prompt_header, _hunk_render(apply_patch),
                              apply_patch.parse, apply_patch.apply, apply_patch.oracle,
                              empty_old=apply_patch.EMPTY_OLD),
    "str_replace": EditFormat("str_replace", "str_replace", lambda name: "", _hunk_render(str_replace),
                              str_replace.parse, str_replace.apply, str_replace.oracle),
}

EDIT_FORMATS: tuple[str, ...] = tuple(_FORMATS)


def get_format(name: str) -> EditFormat:
    """The format called `name`; a :class:`ParameterError` naming the known formats otherwise."""
    fmt = _FORMATS.get(name) if isinstance(name, str) else None
    if fmt is None:
        raise ParameterError(f"unknown edit format {name!r}: use one of {', '.join(EDIT_FORMATS)}")
    return fmt


def oracle_text(before: str, after: str, format: str = "copy") -> str:
    """The oracle program of an edit in `format`, as the model writes it after the prompt's header."""
    fmt = get_format(format)
    return fmt.render(fmt.oracle(before, after))


def apply_format(text: str, document: str, format: str = "copy") -> str:
    """The new document from program text in `format` (what the model wrote after the header)."""
    fmt = get_format(format)
    return fmt.apply(fmt.parse(text), document)


_STARTS = {"search_replace": (search_replace.SEARCH,), "udiff": (udiff.HUNK_HEADER, "@@"),
           "apply_patch": ("@@",), "str_replace": ('{"old_str"', '{"command"')}


def program_in_answer(answer: str, format: str) -> str:
    """The program text of a diff-style format in a model's whole answer: from the first line that
    starts the format's program (a SEARCH marker, an ``@@`` line, a JSON call) on, without code-fence
    lines, the headers the prompt already gave (``--- ``/``+++ `` file lines, ``*** Begin Patch``,
    ``*** Update File:``) and text after the program's end (its closing fence, apply_patch's
    ``*** End Patch``); a last line without its newline gets one. The text comes back as it is
    where no program start is found (the parser then says what is wrong)."""
    fmt = get_format(format)
    if fmt.name == "copy":
        raise ValueError("a copy program is read from an answer by cad_outlines.edits.answers.extract_program")
    lines = answer.splitlines(keepends=True)
    starts = _STARTS[fmt.name]
    first = next((i for i, line in enumerate(lines) if line.startswith(starts)), None)
    if first is None:
        return answer
    fenced = sum(line.startswith("```") for line in lines[:first]) % 2 == 1  # inside an open fence
    keep = []
    for line in lines[first:]:
        if line.startswith("```"):
            if fenced:
                break  # a fenced program ends at its closing fence
            continue
        if fmt.name == "udiff" and line.startswith(("--- ", "+++ ")) and not keep:
            continue
        if fmt.name == "apply_patch" and line.startswith((apply_patch.BEGIN, apply_patch.UPDATE)):
            continue
        keep.append(line)
        if fmt.name == "apply_patch" and line.rstrip("\n") == apply_patch.END:
            keep[-1] = apply_patch.END
            break
    text = "".join(keep)
    if fmt.name != "apply_patch" and text and not text.endswith("\n"):
        text += "\n"  # an answer's last line may lack its newline
    return text

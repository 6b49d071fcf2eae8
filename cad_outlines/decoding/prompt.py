"""The prompt of an edit: the format's instructions, the instruction and the document (with line
numbers for ``copy`` only), ending with the format's header, so the model's first token starts the
program: ``<program>`` for copy, the file header for udiff, the patch envelope for apply_patch, nothing
for search/replace and str_replace."""

from __future__ import annotations

from ..edits.formats import get_format
from ..edits.lines import number_lines

__all__ = ["DEFAULT_INSTRUCTIONS", "INSTRUCTIONS", "build_prompt"]

_REWRITE = "Rewrite the document below as the instruction asks. "

DEFAULT_INSTRUCTIONS = (
    _REWRITE + "Each of its lines is shown after its line number and one space. Answer with an edit program: "
    '<copy lines="i-j"/> reuses lines i to j of the document verbatim, <gen>TEXT</gen> writes new text; '
    "end with </program>."
)

INSTRUCTIONS = {
    "copy": DEFAULT_INSTRUCTIONS,
    "search_replace": (
        _REWRITE + "Answer with SEARCH/REPLACE blocks, nothing else. Each block is a line <<<<<<< SEARCH, "
        "the document's lines to change exactly as they are (with enough unchanged lines around them to "
        "occur only once), a line =======, the lines that replace them, and a line >>>>>>> REPLACE. "
        "Blocks go in document order."),
    "udiff": (
        _REWRITE + "Answer with a unified diff of the document without line numbers, like diff -U0. Each "
        "hunk starts with a line @@ ... @@, then the document's lines it covers, each marked ' ' (kept), "
        "'-' (removed) or '+' (added), with enough kept lines for the hunk to occur only once. Hunks go "
        "in document order."),
    "apply_patch": (
        _REWRITE + "Answer with a patch in the V4A diff format. Each hunk starts with a line @@ (or "
        "@@ followed by a line of the document, such as a def or class line, to jump past it), then the "
        "document's lines it covers, each marked ' ' (kept), '-' (removed) or '+' (added), with enough "
        "kept lines to occur only once after that point. Hunks go in document order. End with "
        "*** End Patch."),
    "str_replace": (
        _REWRITE + "Answer with str_replace calls of the text editor tool, one JSON object per line: "
        '{"old_str": "...", "new_str": "..."}. old_str is whole lines of the document with their line '
        "endings, exactly as they are, occurring only once; new_str is the text that replaces them. "
        "Calls go in document order."),
}


def build_prompt(tokenizer, document: str, instruction: str, *, format: str = "copy",
                 name: str = "document") -> str:
    """Instructions, the instruction and the document (numbered for ``copy``:
    :func:`~cad_outlines.edits.lines.number_lines`), through the chat
    template when the tokenizer has one (`tokenizer` may be None: no template), ending with the
    format's header (`name`: the document's name in the udiff and apply_patch headers). An unknown
    `format` raises :class:`~cad_outlines.errors.ParameterError`."""
    fmt = get_format(format)
    if fmt.numbered:
        shown = number_lines(document)
    else:
        shown = document if document.endswith("\n") or not document else document + "\n"
    body = f"{INSTRUCTIONS[fmt.name]}\n\nInstruction: {instruction}\n\nDocument:\n{shown}"
    header = fmt.header(name)
    template = getattr(tokenizer, "chat_template", None)
    if template:
        prefix = tokenizer.apply_chat_template([{"role": "user", "content": body}], tokenize=False,
                                               add_generation_prompt=True)
        return prefix + header
    return body + "\n" + header

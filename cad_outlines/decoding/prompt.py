"""The prompt of a Copy-as-Decode edit: the instruction and the numbered document, ending with
``<program>`` so the model's first token starts an op."""

from __future__ import annotations

from ..edits.lines import number_lines

__all__ = ["DEFAULT_INSTRUCTIONS", "build_prompt"]

DEFAULT_INSTRUCTIONS = (
    "Rewrite the document below as the instruction asks. Each of its lines is shown after its line number "
    "and one space. Answer with an edit program: "
    '<copy lines="i-j"/> reuses lines i to j of the document verbatim, <gen>TEXT</gen> writes new text; '
    "end with </program>."
)


def build_prompt(tokenizer, document: str, instruction: str) -> str:
    """Instruction + the document with its line numbers (:func:`~cad_outlines.edits.lines.number_lines`),
    through the chat template when the tokenizer has one (`tokenizer` may be None: no template), ending
    with ``<program>``."""
    body = f"{DEFAULT_INSTRUCTIONS}\n\nInstruction: {instruction}\n\nDocument:\n{number_lines(document)}"
    template = getattr(tokenizer, "chat_template", None)
    if template:
        prefix = tokenizer.apply_chat_template([{"role": "user", "content": body}], tokenize=False,
                                               add_generation_prompt=True)
        return prefix + "<program>"
    return body + "\n<program>"

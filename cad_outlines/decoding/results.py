"""What a Copy-as-Decode edit run gives back, the same for the in-process loop
(:class:`~cad_outlines.generators.copy_decode.CopyEditor`) and the served one
(:class:`~cad_outlines.serving.ServedEditor`): the streaming events, the result and its costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..edits.lines import split_lines, unified_diff
from ..edits.program import Copy, EditProgram, Op
from ..edits.resolve import StreamingResolver

__all__ = ["EditEvent", "EditResult", "EditStats", "resolver_events"]


@dataclass
class EditStats:
    """What a run cost: forwards by kind, tokens by how they entered the cache, and seconds."""

    forwards: dict[str, int] = field(
        default_factory=lambda: {"prompt": 0, "decode": 0, "copy": 0, "fast_forward": 0, "verify": 0})
    prompt_tokens: int = 0
    prompt_reused_tokens: int = 0  # prompt positions copied from a kept prompt's KV (CopyEditor prompt_cache)
    generated_tokens: int = 0
    copied_tokens: int = 0
    fast_forwarded_tokens: int = 0
    drafted_tokens: int = 0  # speculative: draft tokens put into verify forwards
    accepted_tokens: int = 0  # speculative: draft tokens kept
    wall_s: float = 0.0
    prompt_s: float = 0.0  # from the start to the prompt forward's logits
    mask_s: float = 0.0
    model_s: float = 0.0
    model_s_by_kind: dict[str, float] = field(default_factory=dict)  # model_s split by forward kind
    tokenize_s: float = 0.0

    @property
    def total_forwards(self) -> int:
        return sum(self.forwards.values())


@dataclass
class EditResult:
    """The program the model wrote, the document it resolves to, and what it cost.

    For ``format="copy"`` `program` is an :class:`EditProgram` and `program_text` starts with
    ``<program>``; for the diff-style formats `program` is a
    :class:`~cad_outlines.edits.formats.HunkProgram` (None if the text does not parse) and
    `program_text` is what the model wrote after the prompt's header. `error` says why a program
    decoded without the grammar (``constrained=False``) does not parse or apply (then `text` is the
    document unchanged); it is None otherwise."""

    document: str
    program: Any
    program_text: str  # what the model wrote (copy: with its leading <program>, which parse_program reads)
    text: str  # the new document (resolved so far, if the program is incomplete)
    complete: bool
    stop_reason: str  # "end" (</program> or EOS), "max_new_tokens", "context_length"
    stats: EditStats
    format: str = "copy"
    error: str | None = None

    def diff(self, context: int = 3, from_name: str = "before", to_name: str = "after") -> str:
        """Unified diff from the document to the new text (line endings kept, ``\r\n``
        included), its headers `from_name` and `to_name` (``a/src/app.py``...). For an incomplete program, only the document lines up to the last line
        it copied are compared (the rest was not reached, not deleted), and a last line
        says so."""
        before, after = split_lines(self.document), split_lines(self.text)
        note = ""
        if not self.complete and isinstance(self.program, EditProgram):
            reached = max((op.end for op in self.program.ops if isinstance(op, Copy)), default=0)
            if reached < len(before):
                note = (f"(incomplete program: document lines {reached + 1}-{len(before)} were not reached "
                        "and are not in this diff)\n")
            before = before[:reached]
        return unified_diff(before, after, from_name, to_name, context) + note


@dataclass(frozen=True)
class EditEvent:
    """One streaming step. `kind` says which:

    - ``"copy"``: a copy op completed: `op` is the :class:`Copy`, `text` the lines it copied;
    - ``"gen_text"``: new text of the gen op being written, token by token (`op` is None:
      the op is not finished);
    - ``"gen"``: a gen op closed: `op` is the whole :class:`Gen` (its text came before);
    - ``"end"``: the last event: `result` holds the :class:`EditResult`.
    """

    op: Op | None = None
    text: str = ""
    result: EditResult | None = None  # set on the last event
    kind: str = ""


def resolver_events(resolver: StreamingResolver, text: str) -> list[EditEvent]:
    """Feed program text to `resolver` char by char (so a copy's text lands right after
    its tag) and return the events it makes: ``copy`` (the op and its lines), ``gen`` (a
    closed gen op), ``gen_text`` (new gen text)."""
    events: list[EditEvent] = []
    for ch in text:
        before = len(resolver.ops)
        piece = resolver.feed(ch)
        new_ops = resolver.ops[before:]
        for op in new_ops:
            is_copy = isinstance(op, Copy)
            events.append(EditEvent(op=op, text=piece if is_copy else "", kind="copy" if is_copy else "gen"))
        if piece and not any(isinstance(op, Copy) for op in new_ops):
            events.append(EditEvent(text=piece, kind="gen_text"))
    return events

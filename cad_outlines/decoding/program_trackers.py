"""What a decode loop knows of the program being written, per edit format: the events it completes,
the document's constraint on the next token beside the grammar, the bytes the document forces, and
the result when the run ends. Shared by the in-process loop
(:mod:`cad_outlines.generators.copy_decode`) and the served one (:mod:`cad_outlines.serving.editing`).

- :class:`CopyTracker` (``copy``): the streaming resolver, and the line-span constraint of copy ops
  (:mod:`~cad_outlines.decoding.spans`); a copy event's lines are prefilled by the loop.
- :class:`HunkTracker` (the diff-style formats): the document constraint
  (:mod:`~cad_outlines.decoding.document_constraint`), hunk events as hunks complete, and the applier
  at the end. The program ends with EOS.

With ``constrained=False`` neither constrains anything (the grammar is not used either): the text is
read as it comes, and applied at the end (an error is reported, not raised).
"""

from __future__ import annotations

import numpy as np

from .document_constraint import DocumentConstraint
from .encoding import TokenEncoder
from .results import EditEvent, resolver_events
from .spans import SpanConstraint
from ..edits.formats import get_format
from ..edits.lines import split_lines
from ..edits.program import COPY_OPEN, PROGRAM_START
from ..edits.resolve import StreamingResolver, resolve
from ..engine.matcher import Matcher
from ..engine.vocabulary import Vocabulary
from ..errors import ProgramError

__all__ = ["CopyTracker", "HunkTracker", "tracker_for", "forced_run"]


class CopyTracker:
    """A Copy-as-Decode program: done at ``</program>``."""

    format = "copy"
    ends_with_eos = False

    def __init__(self, document: str, *, monotonic: bool, constrained: bool, token_text: list, lt_tokens):
        self.document = document
        self.resolver = StreamingResolver(document)
        self.spans = SpanConstraint(len(split_lines(document)), monotonic)
        self.constrained = constrained
        self.token_text, self.lt_tokens = token_text, lt_tokens
        self.last_end = 0  # the end line of the last copy (for monotonic spans)
        self.error: str | None = None
        self.ended = False

    @property
    def done(self) -> bool:
        return self.resolver.done or self.ended

    def feed(self, data: bytes, text: str) -> list[EditEvent]:
        try:
            events = resolver_events(self.resolver, text)
        except ProgramError as e:  # only without the grammar: the text stops being a program
            self.error, self.ended = f"{type(e).__name__}: {e}", True
            return []
        for event in events:
            if event.kind == "copy":
                self.last_end = event.op.end
        return events

    def filter(self, mask: np.ndarray) -> np.ndarray:
        """`mask` without the tokens that would name a line outside the document (or, monotonic,
        before the last copy)."""
        pending = self.resolver.pending_text()
        # inside (or maybe opening) a copy tag every token is checked; elsewhere only tokens that could open one
        in_tag = bool(pending) and (COPY_OPEN.startswith(pending) or pending.startswith(COPY_OPEN))
        return self.spans.filter(mask, pending, self.token_text, self.last_end, None if in_tag else self.lt_tokens)

    def forced_bytes(self) -> bytes:
        return b""

    def eos_ok(self) -> bool:
        """A copy program ends with ``</program>``, never with EOS."""
        return False

    def allows(self, data: bytes) -> bool:
        return True

    def any_allowed(self, prefix: bytes, ids: np.ndarray) -> bool:
        return len(ids) > 0

    def in_free_text(self) -> bool:
        """Inside a gen body (where speculative drafts go)."""
        return self.resolver.pending_text().startswith("<gen>")

    def end(self) -> list[EditEvent]:
        self.ended = True
        return []

    def finish(self, program_text: str):
        """(program, program text with its header, new text, complete, error)."""
        program = self.resolver.close(partial=True)
        text = resolve(program, self.document, partial=True)
        return program, PROGRAM_START + program_text, text, program.complete and not self.error, self.error


class HunkTracker:
    """A diff-style program (search/replace, udiff, apply_patch, str_replace): done at EOS."""

    ends_with_eos = True

    def __init__(self, format: str, document: str, vocab: Vocabulary, *, constrained: bool):
        self.format = format
        self.fmt = get_format(format)
        self.document = document
        self.constraint = DocumentConstraint(format, document, vocab) if constrained else None
        self.text = ""
        self.hunks = 0
        self.ended = False

    @property
    def done(self) -> bool:
        return self.ended

    def feed(self, data: bytes, text: str) -> list[EditEvent]:
        if self.constraint is not None:
            self.constraint.feed(data)
        self.text += text
        if "\n" not in text and self.format != "apply_patch":
            return []
        return self._hunk_events()

    def _hunk_events(self) -> list[EditEvent]:
        """Events for the hunks closed since the last call (a udiff hunk stays open until the next
        header or the end)."""
        try:
            program = self.fmt.parse(self.text, partial=True)
        except ProgramError:
            return []
        closed = len(program.hunks) - (1 if self.format == "udiff" and not self.ended and program.hunks else 0)
        new = program.hunks[self.hunks:closed]
        self.hunks += len(new)
        return [EditEvent(op=h, kind="hunk") for h in new]

    def filter(self, mask: np.ndarray) -> np.ndarray:
        return mask & self.constraint.mask()

    def forced_bytes(self) -> bytes:
        return self.constraint.forced_bytes()

    def eos_ok(self) -> bool:
        """Whether the program may end here (every hunk applies)."""
        return self.constraint is None or self.constraint.eos_ok()

    def allows(self, data: bytes) -> bool:
        return self.constraint.allows(data)

    def any_allowed(self, prefix: bytes, ids: np.ndarray) -> bool:
        """Whether the document allows one of the tokens `ids` after `prefix`."""
        probe = self.constraint.fork()
        if not probe.allows(prefix):
            return False
        probe.feed(prefix)
        return bool(probe.mask()[ids].any())

    def in_free_text(self) -> bool:
        return False

    def end(self) -> list[EditEvent]:
        """The program ended (EOS): the events of the hunks it closed."""
        self.ended = True
        return self._hunk_events()

    def finish(self, program_text: str):
        """(program, program text, new text, complete, error); the document unchanged where the
        program does not parse or apply (only possible with ``constrained=False``)."""
        try:
            program = self.fmt.parse(self.text, partial=True)
        except ProgramError as e:
            return None, program_text, self.document, False, f"{type(e).__name__}: {e}"
        complete = program.complete and self.ended
        try:
            text = self.fmt.apply(program, self.document)
        except ProgramError as e:
            return program, program_text, self.document, False, f"{type(e).__name__}: {e}"
        return program, program_text, text, complete, None


def tracker_for(format: str, document: str, vocab: Vocabulary, *, constrained: bool, monotonic: bool,
                token_text: list, lt_tokens) -> CopyTracker | HunkTracker:
    if format == "copy":
        return CopyTracker(document, monotonic=monotonic, constrained=constrained, token_text=token_text,
                           lt_tokens=lt_tokens)
    return HunkTracker(format, document, vocab, constrained=constrained)


def forced_run(matcher: Matcher, tracker: CopyTracker | HunkTracker, encoder: TokenEncoder,
               mask: np.ndarray | None = None) -> list[int]:
    """The tokens to fast-forward from here, as every loop (in process, served, and a script's
    tokenization) takes them: the grammar's forced run if there is one (`mask`: this state's grammar
    mask, if the caller has it), else the document's (search text once one candidate is left),
    encoded as the loops encode text, as far as the grammar accepts them, and without a last token
    that a longer token legal under both could replace (so the model keeps its own tokenization
    where the run ends)."""
    forced = matcher.forced_tokens(encoder.encode, mask=mask)
    if forced:
        return forced
    data = tracker.forced_bytes()
    if not data:
        return []
    ids = encoder.encode_bytes(data)
    ids = ids[: matcher.validate(ids)] if ids else ids
    if ids:
        grammar = matcher.grammar
        probe = matcher.fork()
        probe.advance_many(ids[:-1])
        longer = grammar.tokens_extending(grammar.token_bytes(ids[-1]))
        longer = longer[probe.allowed_mask()[longer]]
        if len(longer) and tracker.any_allowed(b"".join(grammar.token_bytes(t) for t in ids[:-1]), longer):
            ids.pop()
    return ids

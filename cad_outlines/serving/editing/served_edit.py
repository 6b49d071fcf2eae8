"""Copy-as-Decode through a serving engine: one edit as a sequence of requests.

The edit is driven from the client with token-id prompts, nothing re-tokenised:

1. request = prompt + program so far; the engine decodes under ``copy_edit`` with the
   line-span constraint (:class:`~cad_outlines.serving.constraints.vllm_processor.CadLogitsProcessor`)
   and ends the request with EOS as soon as a ``<copy lines="i-j"/>`` tag closes, or where
   the grammar forces a run of ``forced_min_run`` tokens or more (`` lines="`` after
   ``<copy``, ``program>`` after ``</``);
2. the client appends the copied lines' tokens, and any grammar-forced run, to the prompt
   (a prompt extension: the engine computes the run in one forward instead of decoding it
   a token per step) and sends the next request of the same edit;
3. the engine's prefix cache makes everything already sent free: each request computes
   only what was appended and the tail of its last partly filled KV block.

:class:`ServedEdit` is that loop without any I/O (it says what to send and takes what
came back), so the same edit runs on an in-process engine, an AsyncLLM or an
OpenAI-compatible server (:mod:`cad_outlines.serving.editing.backends`).
"""

from __future__ import annotations

import codecs
import itertools
import time
import uuid
from dataclasses import dataclass, field

from ...decoding.encoding import TokenEncoder
from ...decoding.program_trackers import forced_run, tracker_for
from ...decoding.prompt import build_prompt
from ...decoding.results import EditEvent, EditResult, EditStats
from ...edits.formats import get_format
from ...edits.lines import split_lines
from ...edits.program import PROGRAM_START
from ...engine.compiled_grammar import CompiledGrammar
from ...engine.matcher import Matcher
from ...errors import ParameterError, ProgramError, ServingError
from ..constraints.request import ConstraintRequest, EditSegment, GrammarSpec

__all__ = ["ONE_REQUEST", "REQUEST_PER_OP", "Segment", "SegmentOutcome", "ServedEdit", "ServedEditStats",
           "ServingError", "script_program_ids"]


@dataclass(frozen=True)
class Segment:
    """One request to send: token-id prompt, sampling limits, ``extra_args``."""

    prompt_ids: list[int]
    max_tokens: int
    extra_args: dict
    stop_token_ids: tuple[int, ...]
    temperature: float = 0.0
    seed: int | None = None
    top_p: float = 1.0


@dataclass(frozen=True)
class SegmentOutcome:
    """How a request ended: finish reason and the prompt tokens the engine found in its
    prefix cache (None if the engine did not say)."""

    finish_reason: str | None
    cached_tokens: int | None = None


ONE_REQUEST = "one_request"  # the edit is one engine request; copies and forced runs are appended as its input
REQUEST_PER_OP = "request_per_op"  # a new request per copy and per forced run (prefix cache for what was sent)


@dataclass
class ServedEditStats(EditStats):
    """:class:`EditStats` plus what serving adds: how the edit ran on the engine
    (``engine_path``: :data:`ONE_REQUEST` or :data:`REQUEST_PER_OP`), requests sent
    (segments: one per turn of the single request on the one-request path), prompt
    tokens sent and found in the prefix cache (so the model computed only sent - cached of
    them), and :attr:`computed_tokens`."""

    engine_path: str = REQUEST_PER_OP
    requests: int = 0
    prompt_tokens_sent: int = 0  # one request per edit: only what each turn appended (the engine keeps the rest)
    cached_tokens: int = 0
    steps: int = 0  # tokens the engine sampled for this edit, EOS included: one engine step each
    forced_runs: int = 0  # grammar-forced runs appended to a prompt (their tokens: fast_forwarded_tokens)
    segment_latencies_s: list[float] = field(default_factory=list)

    @property
    def computed_tokens(self) -> int:
        """Tokens the model ran a forward over: uncached prompt tokens + one per step
        (every sampled token, the EOS that ends a request included). With one request per
        edit that is prompt + copied + forced-run tokens - prefix-cache hits + steps; with a
        request per op every request adds the recomputed tail of its last KV block."""
        return self.prompt_tokens_sent - self.cached_tokens + self.steps


def _tracker(format: str, document: str, grammar: CompiledGrammar, monotonic: bool = False):
    return tracker_for(format, document, grammar.vocab, constrained=True, monotonic=monotonic, token_text=None,
                       lt_tokens=None)


def script_program_ids(grammar: CompiledGrammar, encoder: TokenEncoder, script: str, *, format: str = "copy",
                       document: str = "") -> list[int]:
    """The program tokens a teacher-forced run of `script` produces, exactly as
    :meth:`CopyEditor.stream` with ``script=`` would (a copy `script` with or without its
    leading ``<program>``): forced runs (the grammar's, and for the diff-style formats the
    search text `document` forces) encoded as the editor encodes them, everything else the
    script's own next token."""
    if format == "copy" and script.startswith(PROGRAM_START):
        script = script[len(PROGRAM_START):]
    m = Matcher(grammar)
    tracker = _tracker(format, document, grammar)
    data = script.encode("utf-8")
    ids: list[int] = []
    pos = 0
    while pos < len(data):
        forced = forced_run(m, tracker, encoder)
        if not forced:
            forced = [encoder.next_token(data, pos)]
        m.advance_many(forced)
        ids.extend(forced)
        step = b"".join(grammar.token_bytes(t) for t in forced)
        tracker.feed(step, step.decode("utf-8", "replace"))
        pos += len(step)
    spelled = b"".join(grammar.token_bytes(t) for t in ids)
    if spelled != data:
        at = next((i for i, (a, b) in enumerate(zip(spelled, data)) if a != b), min(len(spelled), len(data)))
        raise ProgramError(f"the script's tokens do not spell the script from byte {at} on "
                           f"({data[at:at + 20]!r} spelled as {spelled[at:at + 20]!r})")
    return ids


_counter = itertools.count()


class ServedEdit:
    """One Copy-as-Decode edit as a sequence of engine requests (no I/O here).

    Use: ``seg = edit.next_segment()``; send it; pass new output tokens to
    :meth:`on_tokens` as they stream (events come back) and the end to
    :meth:`on_segment_end`; repeat until ``next_segment()`` is None; :meth:`result`.

    ``copy_mode="prefill"`` (default): a copy ends the request (turn) and its lines go into
    the next prompt, so the model sees them. ``copy_mode="skip"`` (as :class:`CopyEditor`'s):
    copied lines never enter the context and a copy does not end the request; with
    ``forced_min_run=0`` the whole edit is one request of prompt + program tokens.
    """

    def __init__(self, grammar: CompiledGrammar, encoder: TokenEncoder, document: str, instruction: str = "", *,
                 max_new_tokens: int = 512, prompt: str | None = None, script: str | None = None,
                 monotonic: bool = False, temperature: float = 0.0, seed: int | None = None, top_p: float = 1.0,
                 session: str | None = None, tag: str | None = None, forced_min_run: int = 2,
                 max_context: int | None = None, copy_mode: str = "prefill", format: str = "copy",
                 name: str = "document"):
        if forced_min_run < 0:
            raise ParameterError(f"forced_min_run must be >= 0 (0: forced runs are decoded), not {forced_min_run}")
        if copy_mode not in ("prefill", "skip"):
            raise ParameterError(f"copy_mode must be 'prefill' or 'skip', not {copy_mode!r}")
        self.copy_mode = copy_mode  # skip: copied lines never enter the context, so a copy does not end a request
        self.format = get_format(format).name  # `grammar` is that format's (ServedEditor.grammar_for)
        self.grammar, self.encoder, self.document = grammar, encoder, document
        self.max_new_tokens, self.monotonic, self.forced_min_run = max_new_tokens, monotonic, forced_min_run
        self.temperature, self.seed, self.top_p = temperature, seed, top_p
        self.max_context = max_context  # the model's context (max_model_len): the edit stops before it is full
        self.session = session or f"edit-{uuid.uuid4().hex[:12]}-{next(_counter)}"
        self.tag = tag or self.session
        self.started = time.perf_counter()
        self.stats = ServedEditStats()
        self.n_lines = len(split_lines(document))
        t0 = time.perf_counter()
        text = prompt if prompt is not None else build_prompt(encoder.tokenizer, document, instruction,
                                                              format=self.format, name=name)
        self.prompt_ids = encoder.encode(text)
        self.script_ids = (script_program_ids(grammar, encoder, script, format=self.format, document=document)
                           if script is not None else None)
        self.stats.tokenize_s += time.perf_counter() - t0
        self.stats.prompt_tokens = len(self.prompt_ids)
        self.context: list[int] = list(self.prompt_ids)  # everything the engine has seen
        self.program_ids: list[int] = []
        self.matcher = Matcher(grammar)
        self.tracker = _tracker(self.format, document, grammar, monotonic)
        self._program_bytes = bytearray()
        self._chars: list[str] = []
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._copy_closed = False
        self._segment_tokens = 0  # program tokens the request in flight produced
        self._next_kind = "prompt"  # what the next request's new prompt tokens are (stats.forwards)
        self._sent_at = 0.0
        self._in_flight = False
        self.one_request = False  # set by the run loop (use_one_request) when the engine keeps the edit's request
        self._engine_len = 0  # one request per edit: tokens of `context` the engine already holds
        self.stop_reason: str | None = None
        self.eos_ids = tuple(grammar.eos_token_ids)

    # -- requests ----------------------------------------------------------------------------
    def use_one_request(self, on: bool = True) -> None:
        """Say how the engine runs this edit (before its first segment): in ONE request whose
        input grows by what each segment appends (the engine keeps its KV blocks and every
        token it sampled but the last, the EOS that ends a turn), or a request per segment."""
        if self.stats.requests:
            raise RuntimeError("the engine path of an edit is set before its first segment")
        self.one_request = on
        self.stats.engine_path = ONE_REQUEST if on else REQUEST_PER_OP

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    @property
    def engine_context(self) -> list[int]:
        """One request per edit: the tokens the engine's request holds (the chunks sent and
        every program token it sampled; not the EOS that ends a turn, not what is still to send)."""
        return self.context[: self._engine_len]

    def next_segment(self) -> Segment | None:
        """The next request to send, or None when the edit is over."""
        if self.done:
            return None
        if self._in_flight:
            raise RuntimeError("a segment of this edit is still in flight")
        left = self.max_new_tokens - self.stats.generated_tokens
        if left <= 0:
            self.stop_reason = "max_new_tokens"
            return None
        # one more token than the budget: the EOS that ends a segment at a copy
        budget = left + 1
        if self.max_context is not None:
            room = self.max_context - len(self.context)
            if room <= 1:  # no room for a program token and the EOS after it
                self.stop_reason = "context_length"
                return None
            budget = min(budget, room)
        request = ConstraintRequest(
            grammar=GrammarSpec(name=get_format(self.format).grammar),
            edit=EditSegment(n_lines=self.n_lines, monotonic=self.monotonic, program_ids=tuple(self.program_ids),
                             session=self.session, stop_at_copy=self.copy_mode == "prefill",
                             stop_at_forced=self.forced_min_run, format=self.format,
                             document=None if self.format == "copy" else self.document),
            script_ids=tuple(self.script_ids) if self.script_ids is not None else None, tag=self.tag)
        self._in_flight = True
        self._copy_closed = False
        self._segment_tokens = 0
        self._sent_at = time.perf_counter()
        self.stats.requests += 1
        self.stats.prompt_tokens_sent += len(self.context) - (self._engine_len if self.one_request else 0)
        self._engine_len = len(self.context)
        self.stats.forwards[self._next_kind] += 1
        return Segment(list(self.context), budget, request.to_extra_args(), self.eos_ids, self.temperature,
                       self.seed, self.top_p)

    def on_tokens(self, token_ids: list[int]) -> list[EditEvent]:
        """New output tokens of the segment in flight; returns the events they make."""
        events: list[EditEvent] = []
        for tok in token_ids:
            self.stats.steps += 1
            if tok in self.eos_ids:
                continue  # the end of a segment (after a copy, at a forced run, or after </program>)
            if self._copy_closed or self.tracker.done:
                raise ServingError(f"the engine went on after a segment should have ended (token {tok}); is the "
                                   "CadLogitsProcessor loaded?", self.result(partial=True))
            self.matcher.advance(tok)  # the server applied the same grammar: a refusal is a protocol error
            self._engine_len += 1  # a sampled program token stays in the engine's sequence (not so the EOS)
            self.stats.generated_tokens += 1
            self.stats.forwards["decode"] += 1
            self._segment_tokens += 1
            events.extend(self._feed([tok]))
        return events

    def _feed(self, ids: list[int]) -> list[EditEvent]:
        self.program_ids.extend(ids)
        self.context.extend(ids)
        data = b"".join(self.grammar.token_bytes(t) for t in ids)
        self._program_bytes.extend(data)
        events = self.tracker.feed(data, self._decode(data))
        for event in events:
            if event.kind == "copy" and self.copy_mode == "prefill":  # the copied lines go into the next prompt
                copy_ids = self.encoder.encode(event.text)
                self.context.extend(copy_ids)
                self.stats.copied_tokens += len(copy_ids)
                self._copy_closed = True
        return events

    def _decode(self, data: bytes) -> str:
        text = self._utf8.decode(data)
        self._chars.append(text)
        return text

    def on_segment_end(self, outcome: SegmentOutcome) -> list[EditEvent]:
        """The request in flight ended; returns events (of a forced run appended to the
        next prompt: after a copy, or where the engine stopped at one)."""
        self._in_flight = False
        self.stats.segment_latencies_s.append(time.perf_counter() - self._sent_at)
        if outcome.cached_tokens is not None:
            self.stats.cached_tokens += outcome.cached_tokens
        if self.tracker.done:
            self.stop_reason = "end"
            return []
        if self._copy_closed:
            self._next_kind = "copy"
            return self._extend(forced_run(self.matcher, self.tracker, self.encoder))
        if outcome.finish_reason == "length" or self.stats.generated_tokens >= self.max_new_tokens:
            full = self.max_context is not None and len(self.context) + 1 >= self.max_context
            self.stop_reason = "context_length" if full and self.stats.generated_tokens < self.max_new_tokens \
                else "max_new_tokens"
            return []
        if outcome.finish_reason == "stop" and self.forced_min_run and self._segment_tokens:
            forced = forced_run(self.matcher, self.tracker, self.encoder)
            if forced:  # the engine ended the request where a run is forced (cad_stop_at_forced)
                self._next_kind = "fast_forward"
                return self._extend(forced)
        if outcome.finish_reason == "stop" and self.tracker.ends_with_eos and self.matcher.is_accepting() \
                and self.tracker.eos_ok():
            self.stop_reason = "end"  # the engine sampled EOS where the program may end
            return self.tracker.end()
        raise ServingError(
            f"request of edit {self.tag} ended ({outcome.finish_reason}) before </program> and not at a copy: "
            "the engine refused it (see the server log for the cad_outlines error of this cad_tag)",
            self.result(partial=True))

    def _extend(self, forced: list[int]) -> list[EditEvent]:
        """Append a grammar-forced run to the context (the next request's prompt) and the
        program; if that closes a copy, the copied lines and the run after them too."""
        events: list[EditEvent] = []
        while forced:
            self._copy_closed = False
            self.matcher.advance_many(forced)
            self.stats.fast_forwarded_tokens += len(forced)
            self.stats.forced_runs += 1
            events.extend(self._feed(forced))
            if self._copy_closed:  # the run closed a copy: its lines go into the next prompt too
                self._next_kind = "copy"
                forced = forced_run(self.matcher, self.tracker, self.encoder)
            else:
                forced = []
        if self.tracker.done:
            self.stop_reason = "end"
        return events

    def fail(self, message: str) -> ServingError:
        """A :class:`ServingError` carrying the partial edit (for engine/server failures)."""
        return ServingError(f"edit {self.tag}: {message}; partial program: {''.join(self._chars)!r}",
                            self.result(partial=True))

    def result(self, *, partial: bool = False) -> EditResult:
        program, program_text, text, complete, error = self.tracker.finish("".join(self._chars))
        self.stats.wall_s = time.perf_counter() - self.started
        stop = self.stop_reason or ("error" if partial else "end")
        return EditResult(self.document, program, program_text, text, complete, stop, self.stats,
                          format=self.format, error=error)

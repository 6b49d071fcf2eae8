"""cad_outlines as a vLLM (v1) logits processor: any request gets a Lark grammar.

Start an engine with it (``LLM(..., logits_processors=[CadLogitsProcessor])``, or on a
server ``--logits-processors cad_outlines.serving.vllm_processor:CadLogitsProcessor``); a
request turns it on with ``SamplingParams(extra_args=...)`` / ``vllm_xargs`` (the keys:
:mod:`cad_outlines.serving.request`). Requests without ``cad_*`` keys are untouched.

- Grammars are compiled once per process for the engine's tokenizer and kept
  (:class:`GrammarLibrary`; the mask stores also sit in the on-disk cache). A grammar
  should reach the engine compiled: a :class:`~.grammar_gate.GrammarGate` in the frontend
  holds its request until a worker process has put it in the on-disk cache, and the
  engine only loads it. One that arrives uncompiled is compiled here, which stops the
  engine's steps for every request meanwhile; a warning says so.
- Each step the masks of every constrained request are computed together
  (:func:`batch_masks`) and applied to the logits in place.
- A malformed request or a grammar that does not load fails at admission, that request
  alone (``validate_params``: ``LLM.generate`` raises, the HTTP server answers 400). A
  failure the engine process only meets later (compiling the mask store, a state that
  admits nothing) cannot fail one request from inside a logits processor -- an exception
  there kills the engine -- so that request is masked to EOS (it ends at once, without
  the text its grammar wanted) and the error is logged with its ``cad_tag`` and kept in
  :attr:`CadLogitsProcessor.errors`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from ..generators.encoding import TokenEncoder
from .constraint_state import SequenceConstraint, SessionStore, TokenTables, batch_masks
from .grammar_library import GrammarLibrary, check_grammar
from .request import ConstraintRequest, RequestError
from .tokenizer import load_tokenizer, shared_vocabulary

__all__ = ["CadLogitsProcessor", "load_tokenizer"]

log = logging.getLogger("cad_outlines.serving")

@dataclass
class _Engine:
    """What the processor keeps per tokenizer per process: the grammar library, token
    tables per grammar (span filter) and the encoder forced runs are counted with."""

    library: GrammarLibrary
    encoder: TokenEncoder
    tables: dict[str, TokenTables] = field(default_factory=dict)


_ENGINES: dict[tuple[str, int], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _engine_state(tokenizer_path: str, model_vocab_size: int) -> _Engine:
    with _ENGINES_LOCK:
        got = _ENGINES.get((tokenizer_path, model_vocab_size))
        if got is None:
            tokenizer, vocab = shared_vocabulary(tokenizer_path, model_vocab_size)
            got = _ENGINES[(tokenizer_path, model_vocab_size)] = _Engine(GrammarLibrary(vocab),
                                                                         TokenEncoder(tokenizer, vocab))
        return got


class CadLogitsProcessor(LogitsProcessor):
    """Grammar-constrained decoding (and Copy-as-Decode segments) for vLLM v1."""

    errors_kept = 256

    @classmethod
    def validate_params(cls, sampling_params) -> None:
        """Admission check (frontend process): the ``cad_*`` arguments are well formed
        and a grammar given by name exists / by text loads in lark. Raises ValueError."""
        request = ConstraintRequest.from_extra_args(getattr(sampling_params, "extra_args", None))
        if request is None or request.grammar is None:
            return
        check_grammar(request.grammar)  # the verdict is kept per grammar: a lookup after the first time

    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
        model_config = vllm_config.model_config
        self.tokenizer_path = str(model_config.tokenizer)
        self.model_vocab_size = int(model_config.get_vocab_size())
        self.device = device
        self.states: dict[int, SequenceConstraint] = {}
        self.sessions = SessionStore()
        self.errors: deque[tuple[str | None, str]] = deque(maxlen=self.errors_kept)
        self.mask_s = 0.0  # time spent computing masks (for studies)
        self.compile_s = 0.0  # time spent loading or compiling grammars in the engine
        # the vocabulary now, at engine start, not on the first constrained request's step
        self._engine = _engine_state(self.tokenizer_path, self.model_vocab_size)

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token wins

    # -- batch bookkeeping ------------------------------------------------------------------
    def _state_for(self, params, output_ids: list[int]) -> SequenceConstraint | None:
        try:
            request = ConstraintRequest.from_extra_args(getattr(params, "extra_args", None))
        except RequestError as e:  # validate_params normally caught it already
            self._record(None, str(e))
            return SequenceConstraint(ConstraintRequest(), None, output_ids, eos_ids=self._eos_ids(), error=str(e))
        if request is None:
            return None
        grammar, error = None, None
        if request.grammar is not None:
            try:
                grammar = self._grammar(request)
            except RequestError as e:
                error = str(e)
        tables = None
        if grammar is not None and request.edit is not None:
            tables = self._engine.tables.get(request.grammar.key)
            if tables is None:
                tables = self._engine.tables[request.grammar.key] = TokenTables.for_grammar(grammar)
        state = SequenceConstraint(request, grammar, output_ids, tables=tables, eos_ids=self._eos_ids(),
                                   sessions=self.sessions, error=error, encode=self._engine.encoder.encode)
        if state.error is not None:
            self._record(request.tag, state.error)
        return state

    def _grammar(self, request: ConstraintRequest):
        """The request's grammar: already here, loaded from the on-disk cache (a GrammarGate
        compiled it before admission), or -- warned about -- compiled in the engine."""
        library, spec = self._engine.library, request.grammar
        grammar = library.loaded(spec)
        if grammar is not None:
            return grammar
        t0 = time.perf_counter()
        if not library.on_disk(spec):
            log.warning("cad_outlines: grammar %s (request %s) was not compiled before it reached the engine; "
                        "compiling it now stops this engine's steps for every request until it is done. Put a "
                        "GrammarGate in front (the HTTP middleware or ServedEditor/AsyncLLMBackend do; see "
                        "docs/serving.md)", spec.name or "by text", request.tag or "(no cad_tag)")
        try:
            return library.get(spec)
        finally:
            self.compile_s += time.perf_counter() - t0

    def _eos_ids(self) -> tuple[int, ...]:
        return tuple(self._engine.library.vocab.eos_token_ids)

    def _record(self, tag: str | None, message: str) -> None:
        self.errors.append((tag, message))
        log.error("cad_outlines request %s failed, masked to EOS: %s", tag or "(no cad_tag)", message)

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            state = self.states.pop(index, None)
            if state is not None:
                state.ended()
        for index, params, _prompt_ids, output_ids in batch_update.added:
            old = self.states.pop(index, None)
            if old is not None:
                old.ended()
            state = self._state_for(params, output_ids)
            if state is not None:
                self.states[index] = state
        for a, b, direction in batch_update.moved:
            sa, sb = self.states.pop(a, None), self.states.pop(b, None)
            if sa is not None:
                self.states[b] = sa
            if direction == MoveDirectionality.SWAP and sb is not None:
                self.states[a] = sb
            elif sb is not None:
                sb.ended()

    # -- masking ------------------------------------------------------------------------------
    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.states:
            return logits
        t0 = time.perf_counter()
        rows = sorted(i for i in self.states if i < logits.shape[0])
        states = [self.states[i] for i in rows]
        errors_before = [s.error for s in states]
        width = logits.shape[-1]
        bitmask = batch_masks(states, width)
        for s, before in zip(states, errors_before):
            if s.error is not None and before is None:
                self._record(s.request.tag, s.error)
        allowed = _unpack_torch(torch.from_numpy(bitmask), width).to(logits.device)
        index = torch.tensor(rows, dtype=torch.long, device=logits.device)
        logits[index] = logits[index].masked_fill(~allowed, float("-inf"))
        self.mask_s += time.perf_counter() - t0
        return logits


_SHIFTS = torch.arange(32, dtype=torch.int32)


def _unpack_torch(bitmask: torch.Tensor, width: int) -> torch.Tensor:
    """Packed int32 rows -> bool rows of `width` columns."""
    bits = (bitmask.unsqueeze(-1) >> _SHIFTS) & 1
    return bits.reshape(bitmask.shape[0], -1)[:, :width].bool()

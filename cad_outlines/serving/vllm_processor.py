"""cad_outlines as a vLLM (v1) logits processor: any request gets a Lark grammar.

Start an engine with it (``LLM(..., logits_processors=[CadLogitsProcessor])``, or on a
server ``--logits-processors cad_outlines.serving.vllm_processor:CadLogitsProcessor``); a
request turns it on with ``SamplingParams(extra_args=...)`` / ``vllm_xargs`` (the keys:
:mod:`cad_outlines.serving.request`). Requests without ``cad_*`` keys are untouched.

- Grammars are compiled once per process for the engine's tokenizer and kept
  (:class:`GrammarLibrary`; the mask stores also sit in the on-disk cache).
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
from collections import OrderedDict, deque
from pathlib import Path

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from ..engine.vocabulary import Vocabulary
from .constraint_state import SequenceConstraint, SessionStore, TokenTables, batch_masks
from .grammar_library import GrammarLibrary, check_grammar
from .request import ConstraintRequest, RequestError

__all__ = ["CadLogitsProcessor"]

log = logging.getLogger("cad_outlines.serving")

_LIBRARIES: dict[tuple[str, int], tuple[GrammarLibrary, dict]] = {}
_LIBRARIES_LOCK = threading.Lock()
_CHECKED: OrderedDict[str, str | None] = OrderedDict()  # grammar key -> error (None: loads)


def load_tokenizer(path: str):
    """A Hugging Face tokenizer for `path`: the fast class straight from tokenizer.json
    when there is one (AutoTokenizer may pick a slow class whose pre-tokenizer differs)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if (Path(path) / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def _library(tokenizer_path: str, model_vocab_size: int) -> tuple[GrammarLibrary, dict]:
    """One grammar library (and token tables per grammar) per tokenizer per process."""
    key = (tokenizer_path, model_vocab_size)
    with _LIBRARIES_LOCK:
        got = _LIBRARIES.get(key)
        if got is None:
            vocab = Vocabulary.from_tokenizer(load_tokenizer(tokenizer_path), model_vocab_size=model_vocab_size)
            got = _LIBRARIES[key] = (GrammarLibrary(vocab), {})
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
        key = request.grammar.key
        if key not in _CHECKED:
            try:
                check_grammar(request.grammar)
                _CHECKED[key] = None
            except RequestError as e:
                _CHECKED[key] = str(e)
            while len(_CHECKED) > 1024:
                _CHECKED.popitem(last=False)
        if _CHECKED[key] is not None:
            raise RequestError(_CHECKED[key])

    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
        model_config = vllm_config.model_config
        self.tokenizer_path = str(model_config.tokenizer)
        self.model_vocab_size = int(model_config.get_vocab_size())
        self.device = device
        self.states: dict[int, SequenceConstraint] = {}
        self.sessions = SessionStore()
        self.errors: deque[tuple[str | None, str]] = deque(maxlen=self.errors_kept)
        self.mask_s = 0.0  # time spent computing masks (for studies)
        self.compile_s = 0.0
        self._library: GrammarLibrary | None = None
        self._tables: dict | None = None

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
        if self._library is None:
            self._library, self._tables = _library(self.tokenizer_path, self.model_vocab_size)
        grammar, error = None, None
        if request.grammar is not None:
            t0 = time.perf_counter()
            try:
                grammar = self._library.get(request.grammar)
            except RequestError as e:
                error = str(e)
            self.compile_s += time.perf_counter() - t0
        tables = None
        if grammar is not None and request.edit is not None:
            tables = self._tables.get(request.grammar.key)
            if tables is None:
                tables = self._tables[request.grammar.key] = TokenTables.for_grammar(grammar)
        state = SequenceConstraint(request, grammar, output_ids, tables=tables, eos_ids=self._eos_ids(),
                                   sessions=self.sessions, error=error)
        if state.error is not None:
            self._record(request.tag, state.error)
        return state

    def _eos_ids(self) -> tuple[int, ...]:
        if self._library is None:
            self._library, self._tables = _library(self.tokenizer_path, self.model_vocab_size)
        return tuple(self._library.vocab.eos_token_ids)

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

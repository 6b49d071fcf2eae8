"""cad_outlines as a vLLM (v1) logits processor: any request gets a Lark grammar or a JSON Schema.

Start an engine with it (``LLM(..., logits_processors=[CadLogitsProcessor])``, or on a
server ``--logits-processors cad_outlines.serving:CadLogitsProcessor``); a
request turns it on with ``SamplingParams(extra_args=...)`` / ``vllm_xargs`` (the keys:
:mod:`cad_outlines.serving.constraints.request`), or with vLLM's own ``structured_outputs``, which
``validate_params`` moves into ``extra_args`` (:mod:`.request_fields`). Requests without either are untouched.

- Grammars are compiled once per process for the engine's tokenizer and kept
  (:class:`GrammarLibrary`; the mask stores also sit in the on-disk cache). A grammar
  should reach the engine compiled: a :class:`~.grammar_gate.GrammarGate` in the frontend
  holds its request until a worker process has put it in the on-disk cache, and the
  engine only loads it. One that arrives uncompiled is compiled by a worker process under
  the server's limits (:mod:`..limits`) while the engine's steps wait (at most
  ``compile_timeout_s``); a warning says so. Loaded grammars are kept least recently used
  first out (``max_loaded_grammars``).
- Every request's ``cad_*`` arguments are checked again when it joins the batch (types,
  lengths, token ids within the vocabulary: :func:`~.admission.admit`), so nothing done
  inside a step is unbounded or indexes out of range, whatever reached the engine.
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

import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from ...decoding.encoding import TokenEncoder
from ...engine.compile import cache_dir
from .admission import admission_vocab_size, admit, gate_required
from .constraint_state import SequenceConstraint, SessionStore, TokenTables, batch_masks
from .grammar_gate import compile_in_worker
from .grammar_library import GrammarLibrary, check_grammar, known_check
from ..limits import server_limits, serving_logger
from .request import ConstraintRequest, RequestError
from .request_fields import REWRITTEN_PATHS, take_structured_outputs
from ..tokenizer import load_tokenizer, shared_vocabulary

__all__ = ["CadLogitsProcessor", "load_tokenizer"]

log = serving_logger()

@dataclass
class _Engine:
    """What the processor keeps per tokenizer per process: the grammar library, token
    tables per grammar (span filter) and the encoder forced runs are counted with."""

    library: GrammarLibrary
    encoder: TokenEncoder
    tokenizer_path: str
    model_vocab_size: int
    tables: OrderedDict[str, TokenTables] = field(default_factory=OrderedDict)  # least recently used out


_ENGINES: dict[tuple[str, int], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _engine_state(tokenizer_path: str, model_vocab_size: int) -> _Engine:
    with _ENGINES_LOCK:
        got = _ENGINES.get((tokenizer_path, model_vocab_size))
        if got is None:
            tokenizer, vocab = shared_vocabulary(tokenizer_path, model_vocab_size)
            library = GrammarLibrary(vocab, max_loaded=server_limits().max_loaded_grammars)
            got = _ENGINES[(tokenizer_path, model_vocab_size)] = _Engine(library, TokenEncoder(tokenizer, vocab),
                                                                         tokenizer_path, model_vocab_size)
        return got


class CadLogitsProcessor(LogitsProcessor):
    """Grammar-constrained decoding (and Copy-as-Decode segments) for vLLM v1."""

    errors_kept = 256

    @classmethod
    def validate_params(cls, sampling_params) -> None:
        """Admission check (frontend process; vLLM calls it from ``InputProcessor.process_inputs``
        for every request, on the server's event loop): the ``cad_*`` arguments are well formed
        and within the server's limits (:func:`~.admission.admit`), and a grammar given by name
        exists / by text loads in lark. Raises ValueError (vLLM answers 400), never anything else.

        Behind the HTTP middleware this repeats checks already passed and the grammar verdict
        is a lookup (the middleware's worker reached it); without a gate a new grammar is
        loaded here, blocking the caller.

        ``structured_outputs`` (vLLM's JSON Schema, regex, choice, grammar) is ours too: it is moved
        into ``extra_args`` here and set to None (:func:`~.request_fields.take_structured_outputs`),
        before vLLM copies the parameters for its engine, so vLLM's own backend never runs for it;
        what we cannot honour is refused, naming the field."""
        try:
            fields = take_structured_outputs(sampling_params)
            # the vocabulary check needs the served model's size: on a server (the middleware's gate noted it;
            # one model per process); in-process LLMs may hold several models, and their engine step guards ids
            vocab_size = admission_vocab_size() if gate_required() else None
            request = admit(getattr(sampling_params, "extra_args", None), vocab_size=vocab_size)
            if request is None or request.grammar is None:
                return
            if gate_required():  # a server with the middleware: its gate reached a verdict, or it was bypassed
                known, refusal = known_check(request.grammar)
                if not known and fields is not None:
                    raise RequestError(
                        f"{fields.field} (vLLM's structured_outputs) did not pass the cad_outlines admission gate: "
                        f"this server translates response_format and structured_outputs in the JSON bodies of "
                        f"{', '.join(REWRITTEN_PATHS)}; a structured output vLLM derives elsewhere (/v1/responses' "
                        "text.format, /v1/messages' output_config, a forced tool call) is not constrained here")
                if not known:
                    raise RequestError("the grammar did not pass the cad_outlines admission gate (send cad_* "
                                       "arguments in the JSON body of the request)")
                if refusal is not None:
                    raise RequestError(refusal) if fields is None else fields.refusal(refusal)
                return
            try:
                check_grammar(request.grammar)  # the verdict is kept per grammar: a lookup after the first time
            except RequestError as e:
                raise e if fields is None else fields.refusal(e) from None
        except ValueError:
            raise
        except Exception as e:  # anything unexpected is still this request's fault, not a server error
            raise RequestError(f"cad_outlines arguments refused: {type(e).__name__}: {e}") from e

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
        try:  # validate_params normally caught it already; never unbounded work or a bad index here
            request = admit(getattr(params, "extra_args", None), vocab_size=self._engine.library.vocab.tokenizer_size)
        except RequestError as e:
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
            except Exception as e:  # noqa: BLE001 - never out of the engine's step: this request ends, the rest go on
                error = f"the grammar could not be loaded or compiled: {type(e).__name__}: {e}"
        tables = None
        if grammar is not None and request.edit is not None:
            all_tables, key = self._engine.tables, request.grammar.key
            tables = all_tables.get(key)
            if tables is None:
                tables = all_tables[key] = TokenTables.for_grammar(grammar)
                while len(all_tables) > self._engine.library.max_loaded:
                    all_tables.popitem(last=False)
            all_tables.move_to_end(key)
        state = SequenceConstraint(request, grammar, output_ids, tables=tables, eos_ids=self._eos_ids(),
                                   sessions=self.sessions, error=error, encode=self._engine.encoder.encode)
        if state.error is not None:
            self._record(request.tag, state.error)
        return state

    def _grammar(self, request: ConstraintRequest):
        """The request's grammar: already here, loaded from the on-disk cache (a GrammarGate
        compiled it before admission), or -- warned about -- compiled by a worker process
        under the server's limits while this engine's step waits (at most
        ``compile_timeout_s``)."""
        library, spec = self._engine.library, request.grammar
        grammar = library.loaded(spec)
        if grammar is not None:
            return grammar
        t0 = time.perf_counter()
        try:
            if not library.on_disk(spec) and library.cache is not False:
                log.warning("cad_outlines: grammar %s (request %s) was not compiled before it reached the engine; "
                            "compiling it now (in a worker, at most compile_timeout_s) stops this engine's steps "
                            "for every request until it is done. Put a GrammarGate in front (the HTTP middleware "
                            "or ServedEditor/AsyncLLMBackend do; see docs/serving.md)", spec.label,
                            request.tag or "(no cad_tag)")
                folder = cache_dir() if library.cache is True else Path(library.cache)
                compile_in_worker(spec, self._engine.tokenizer_path, self._engine.model_vocab_size, folder)
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

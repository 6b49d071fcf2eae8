"""Per-request constraint state and the batch mask step, independent of vLLM.

A :class:`SequenceConstraint` follows one request's output tokens: its matcher (the
grammar), and for a Copy-as-Decode segment the program read so far (copy spans within
the document; the request ends when a copy closes, and, if the request asks, where the
grammar forces a run of tokens, which the client then appends to the next prompt); for an
edit in another format (search/replace, udiff, apply_patch, str_replace) the document
constraint (search text that can still occur once; the request may end where the document
forces the rest of a search line). :func:`batch_masks` computes the
packed masks of a whole batch: the grammar part in ONE call (:func:`fill_grammar_masks`,
the place to use the engine's batch API), then each request's own restrictions.

A request that goes wrong at decode time (its grammar state admits nothing, a script
token the grammar refuses, its matcher stopped by a decode-time limit:
``Limits.max_reductions_per_token`` and the rest) is not allowed to take the batch down: its
``error`` is set and it may only emit EOS from then on, so it ends; the processor logs the
error. The others' masks are computed as if it were not there.
"""

from __future__ import annotations

import codecs
import copy
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...decoding.document_constraint import DocumentConstraint, scanner_for
from ...decoding.spans import SpanConstraint
from ...edits.program import COPY_OPEN, ProgramScanner
from ...errors import ProgramError
from ...engine import matcher as matcher_module
from ...engine.compiled_grammar import CompiledGrammar
from ...engine.matcher import InvalidTokenError, Matcher, forced_tokens
from ...errors import MatcherLimitError
from .request import ConstraintRequest

__all__ = ["SequenceConstraint", "TokenTables", "SessionStore", "batch_masks", "fill_grammar_masks",
           "packed_words", "unpack_rows"]


def packed_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def fill_grammar_masks(matchers: Sequence[Matcher], bitmask: np.ndarray) -> dict[int, MatcherLimitError]:
    """Write the legal next tokens of ``matchers[i]`` into ``bitmask[i]`` (packed int32
    words, llguidance/xgrammar layout). The only place the batch's grammar masks are
    computed: it uses the engine's ``fill_next_token_bitmask_batch`` when there is one.
    Returns the matchers a decode-time limit stopped, by index, with why (their rows allow
    only EOS; every other row is filled)."""
    if not len(matchers):
        return {}
    batch = getattr(matcher_module, "fill_next_token_bitmask_batch", None) or getattr(
        Matcher, "fill_next_token_bitmask_batch", None)
    if batch is not None:
        try:
            batch(list(matchers), bitmask)
        except MatcherLimitError as e:
            return {i: matchers[i].error for i in e.indices}
        return {}
    stopped = {}
    for i, m in enumerate(matchers):
        try:
            m.fill_next_token_bitmask(bitmask[i])
        except MatcherLimitError as e:
            stopped[i] = e
    return stopped


def unpack_rows(bitmask: np.ndarray, width: int) -> np.ndarray:
    """Packed int32 rows -> bool rows of `width` columns."""
    bits = np.unpackbits(np.ascontiguousarray(bitmask).view(np.uint8).reshape(len(bitmask), -1), axis=1,
                         bitorder="little")
    return bits[:, :width].astype(bool)


def _set_bit(row: np.ndarray, token: int) -> None:
    row.view(np.uint32)[token // 32] |= np.uint32(1 << (token % 32))


def _pack_row(row: np.ndarray, out: np.ndarray) -> None:
    padded = np.zeros(out.shape[-1] * 32, dtype=bool)
    padded[: len(row)] = row
    out[...] = np.packbits(padded, bitorder="little").view("<u4").view(np.int32)


@dataclass
class TokenTables:
    """What the span filter needs about a vocabulary: each token's text (None if not
    UTF-8 alone) and the tokens that contain "<" (the only ones that can open a copy)."""

    token_text: list[str | None]
    lt_tokens: np.ndarray

    @classmethod
    def for_grammar(cls, grammar: CompiledGrammar) -> TokenTables:
        texts = []
        for b in grammar.vocab.token_bytes:
            try:
                texts.append(b.decode("utf-8"))
            except UnicodeDecodeError:
                texts.append(None)
        lt = np.array([i for i, t in enumerate(texts) if t and "<" in t], dtype=np.int64)
        return cls(texts, lt)


@dataclass
class _Program:
    """A Copy-as-Decode program being read: scanner, UTF-8 decoder, end of the last copy."""

    scanner: ProgramScanner = field(default_factory=ProgramScanner)
    utf8: codecs.IncrementalDecoder = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")())
    last_end: int = 0

    def feed(self, data: bytes) -> bool:
        """Feed a token's bytes; True if a copy op closed."""
        closed = False
        for kind, value in self.scanner.feed(self.utf8.decode(data)):
            if kind == "copy":
                self.last_end = value.end
                closed = True
        return closed

    def clone(self) -> _Program:
        other = _Program(copy.deepcopy(self.scanner), codecs.getincrementaldecoder("utf-8")(), self.last_end)
        other.utf8.setstate(self.utf8.getstate())
        return other


class _DocumentProgram:
    """A diff-style edit's program being read (search/replace, udiff, apply_patch, str_replace): its
    document constraint. Documents' indexes are shared by content (:func:`_scanner`)."""

    last_end = 0

    def __init__(self, constraint: DocumentConstraint):
        self.constraint = constraint

    @classmethod
    def start(cls, format: str, document: str, grammar: CompiledGrammar) -> _DocumentProgram:
        return cls(DocumentConstraint(format, document, grammar.vocab, scanner=_scanner(format, document)))

    def feed(self, data: bytes) -> bool:
        """Feed a token's bytes (a ProgramError where they break the constraint); never a copy."""
        self.constraint.feed(data)
        return False

    def clone(self) -> _DocumentProgram:
        return _DocumentProgram(self.constraint.fork())


_SCANNERS: OrderedDict = OrderedDict()


def _scanner(format: str, document: str):
    """The document's index for `format`, by content (the segments of one edit, and edits of one
    document, share it; 16 kept, least recently used out)."""
    key = (format, hashlib.sha256(document.encode("utf-8", "surrogatepass")).digest())
    got = _SCANNERS.pop(key, None) or scanner_for(format, document)
    _SCANNERS[key] = got
    while len(_SCANNERS) > 16:
        _SCANNERS.popitem(last=False)
    return got


class SessionStore:
    """Matcher and program state of Copy-as-Decode segments that ended at a copy, by
    session id, so the next segment of the same edit resumes instead of replaying the
    whole program (bounded, least recently used first out)."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self._items: OrderedDict[str, tuple[tuple[int, ...], Matcher, _Program]] = OrderedDict()
        self.hits = self.misses = 0

    def put(self, session: str, program_ids: tuple[int, ...], matcher: Matcher, program: _Program) -> None:
        self._items[session] = (program_ids, matcher, program)
        self._items.move_to_end(session)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def take(self, session: str, program_ids: tuple[int, ...]) -> tuple[int, Matcher, _Program] | None:
        """(tokens of `program_ids` already consumed, matcher, program) if the stored
        state is of a prefix of `program_ids`; the entry is removed."""
        got = self._items.pop(session, None)
        if got is None or got[0] != program_ids[: len(got[0])]:
            self.misses += 1
            return None
        self.hits += 1
        return len(got[0]), got[1], got[2]


class SequenceConstraint:
    """The constraint state of one request, following its output tokens."""

    def __init__(self, request: ConstraintRequest, grammar: CompiledGrammar | None, output_ids: list[int],
                 *, tables: TokenTables | None = None, eos_ids: Sequence[int] = (),
                 sessions: SessionStore | None = None, error: str | None = None,
                 encode: Callable[[str], list[int]] | None = None):
        self.request, self.grammar, self.output_ids = request, grammar, output_ids
        self.tables, self.sessions = tables, sessions
        self.encode = encode  # text -> token ids as the client encodes (for cad_stop_at_forced)
        self.eos_ids = tuple(eos_ids) or (tuple(grammar.eos_token_ids) if grammar is not None else ())
        self.error = error
        self.consumed = 0
        self.program_tokens = 0  # output tokens the matcher took (not the EOS after a copy)
        # those tokens: vLLM clears a streaming-input request's output list before its next turn re-adds it
        self.taken: list[int] = []
        self.stop = False  # a copy closed, or a forced run begins: the segment ends with EOS
        self.matcher: Matcher | None = None
        self.program: _Program | None = None
        self.spans: SpanConstraint | None = None
        self.resumed = False
        if error is None and grammar is not None:
            self._start()

    def _start(self) -> None:
        edit = self.request.edit
        self.matcher = Matcher(self.grammar)
        if edit is None:
            return
        if edit.format == "copy":
            self.spans = SpanConstraint(edit.n_lines, edit.monotonic)
            self.program = _Program()
        else:
            self.program = _DocumentProgram.start(edit.format, edit.document, self.grammar)
        done = 0
        if edit.session and self.sessions is not None:
            got = self.sessions.take(edit.session, edit.program_ids)
            if got is not None:
                done, self.matcher, self.program = got[0], got[1].fork(), got[2].clone()
                self.resumed = True
        try:
            rest = list(edit.program_ids[done:])
            self.matcher.advance_many(rest)
            for t in rest:
                self.program.feed(self.grammar.token_bytes(t))
        except MatcherLimitError as e:
            self._fail(f"cad_program_ids: {e}")
        except (InvalidTokenError, ProgramError, ValueError) as e:
            self._fail(f"cad_program_ids are not a valid program prefix: {e}")

    # -- following the output --------------------------------------------------------
    def _fail(self, message: str) -> None:
        if self.error is None:
            self.error = message

    @property
    def script_pos(self) -> int:
        edit = self.request.edit
        return (len(edit.program_ids) if edit is not None else 0) + self.consumed

    def sync(self) -> None:
        """Consume the output tokens the engine appended since the last call."""
        while self.consumed < len(self.output_ids):
            tok = self.output_ids[self.consumed]
            self.consumed += 1
            if self.error is not None or self.stop or self.matcher is None:
                continue
            if self.matcher.is_finished():
                continue
            try:
                self.matcher.advance(tok)
            except InvalidTokenError as e:
                self._fail(f"output token refused by the grammar: {e}")
                continue
            except MatcherLimitError as e:
                self._fail(str(e))
                continue
            self.program_tokens += 1
            self.taken.append(tok)
            if self.program is not None and not self.matcher.is_finished():
                try:
                    closed = self.program.feed(self.grammar.token_bytes(tok))
                except ProgramError as e:
                    self._fail(f"program text does not parse or apply: {e}")
                    continue
                if closed and self.request.edit.stop_at_copy:
                    self.stop = True

    @property
    def wants_grammar_mask(self) -> bool:
        return (self.error is None and not self.stop and self.matcher is not None
                and not self.matcher.is_finished())

    def eos_only(self, row: np.ndarray) -> None:
        row[...] = 0
        for t in self.eos_ids:
            _set_bit(row, t)

    def finish_row(self, row: np.ndarray, width: int) -> None:
        """Complete this request's packed mask row: the grammar part (already in `row`
        when :attr:`wants_grammar_mask`), then spans and script; EOS only when the
        request is over (copy closed, EOS consumed, error, script exhausted)."""
        if not self.wants_grammar_mask:
            if self.grammar is None and self.error is None and self.request.script_ids is not None:
                self._script_only(row)
            else:
                self.eos_only(row)
            return
        needs_spans = self.spans is not None
        document = self.program.constraint if isinstance(self.program, _DocumentProgram) else None
        script = self.request.script_ids
        if not needs_spans and document is None and script is None:
            return
        allowed = unpack_rows(row[None, :], width)[0]
        try:
            forced_run = self._forced_run_begins(allowed)
        except MatcherLimitError as e:
            self._fail(str(e))
            self.eos_only(row)
            return
        if forced_run:
            self.stop = True
            self.eos_only(row)
            return
        if needs_spans:
            pending = self.program.scanner.pending_text()
            in_tag = bool(pending) and (COPY_OPEN.startswith(pending) or pending.startswith(COPY_OPEN))
            allowed = self.spans.filter(allowed, pending, self.tables.token_text, self.program.last_end,
                                        None if in_tag else self.tables.lt_tokens)
        if document is not None:
            allowed = allowed & document.mask()[: len(allowed)]
        if script is not None:
            k = self.script_pos
            if k >= len(script):
                if not any(t < len(allowed) and allowed[t] for t in self.eos_ids):
                    self._fail(f"the script ended after {len(script)} tokens but the grammar wants more")
                self.eos_only(row)
                return
            tok = script[k]
            if not (tok < len(allowed) and allowed[tok]):
                self._fail(f"script token {tok} at position {k} is not allowed by the grammar here")
                self.eos_only(row)
                return
            allowed = np.zeros_like(allowed)
            allowed[tok] = True
        if not allowed.any():
            self._fail("no token is allowed: the grammar and the span constraint admit nothing here")
            self.eos_only(row)
            return
        _pack_row(allowed, row)

    def _forced_run_begins(self, allowed: np.ndarray) -> bool:
        """A Copy-as-Decode segment that asked for it (``cad_stop_at_forced`` = k) ends
        here if the grammar now forces k or more tokens, counted as the client will
        append them (:func:`~cad_outlines.engine.matcher.forced_tokens` with the same
        encoder). Never on a segment's first token: the client appended any forced run
        before sending it."""
        edit = self.request.edit
        if edit is None or not edit.stop_at_forced or self.encode is None or self.program_tokens == 0:
            return False
        n = len(forced_tokens(self.matcher, self.encode, mask=allowed))
        if not n and isinstance(self.program, _DocumentProgram):  # search text the document forces
            data = self.program.constraint.forced_bytes()
            n = len(self.encode(data.decode("utf-8", "ignore"))) if data else 0
        return n >= edit.stop_at_forced

    def _script_only(self, row: np.ndarray) -> None:
        """No grammar: only the script's next token, then EOS."""
        script, k = self.request.script_ids, self.consumed
        row[...] = 0
        if k >= len(script):
            self.eos_only(row)
            return
        if script[k] >= row.size * 32:  # admission refuses such ids; never index past the row
            self._fail(f"script token {script[k]} at position {k} is outside the logits ({row.size * 32} wide)")
            self.eos_only(row)
            return
        _set_bit(row, script[k])

    def ended(self) -> None:
        """The request left the batch: keep a segment that stopped at a copy for the next
        segment of its edit."""
        edit = self.request.edit
        if (edit is not None and edit.session and self.sessions is not None and self.stop
                and self.error is None and self.matcher is not None):
            ids = tuple(edit.program_ids) + tuple(self.taken)
            self.sessions.put(edit.session, ids, self.matcher, self.program)


def batch_masks(states: Sequence[SequenceConstraint], width: int) -> np.ndarray:
    """Packed masks (``len(states)`` rows of ``packed_words(width)`` int32) for a batch:
    every state synced, the grammar masks in one :func:`fill_grammar_masks` call, then
    each state's own restrictions."""
    for s in states:
        s.sync()
    bitmask = np.zeros((len(states), packed_words(width)), dtype=np.int32)
    rows = [i for i, s in enumerate(states) if s.wants_grammar_mask]
    if rows:
        sub = np.zeros((len(rows), bitmask.shape[1]), dtype=np.int32)
        stopped = fill_grammar_masks([states[i].matcher for i in rows], sub)
        for k, error in stopped.items():
            states[rows[k]]._fail(str(error))
        bitmask[rows] = sub
    for i, s in enumerate(states):
        s.finish_row(bitmask[i], width)
    return bitmask

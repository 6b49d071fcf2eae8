"""Copy-as-Decode: an LLM writes an edit program under copy_edit.lark; each copy op enters
the KV cache in ONE forward, and so does every run of grammar-forced tokens. With ``format=``
the same loop runs the other edit formats (search/replace, udiff, apply_patch, str_replace:
:mod:`cad_outlines.edits.formats`) under their grammars and the document constraint, search
text forced once unique (:mod:`cad_outlines.decoding.document_constraint`).

Boundaries (the choices this module makes):

- The prompt ends with ``<program>`` (after the chat template's assistant header when
  the tokenizer has one); the model writes ops after it.
- ``copy_mode="prefill"`` (default): when a ``<copy lines="i-j"/>`` tag closes, lines
  i..j are tokenized on their own (no special tokens) and appended after the tag's last
  token in the same forward; the model continues at an op boundary, having "seen" the
  copied text. ``copy_mode="skip"``: the copied text is not put in the context; the
  model sees only the tag, so a copy costs no forward of its own.
- Forced text (e.g. ``opy lines="`` after ``<c``; search text the document forces) is
  tokenized with the tokenizer, except a last token that a longer legal token could replace.
- Forwards are lazy: a chosen token, the forced run after it and a copy's lines enter the
  KV cache in ONE forward, when the next choice needs logits; nothing is forwarded after
  the program's last token.
- Line numbers: beyond the grammar, 1 <= i <= j <= n for the document (and with
  ``monotonic`` spans never go backwards).
- ``max_new_tokens`` counts sampled tokens; a run cut off returns the partial program
  with ``complete=False``. Nothing is repaired. A run also stops (``stop_reason=
  "context_length"``) where the next forward would pass the model's context
  (``config.max_position_embeddings``); a prompt that does not fit raises
  :class:`ContextLengthError`.

Speculative gen bodies (``speculative=k`` > 0, off by default): inside a ``<gen>`` body,
after a token is chosen, draft tokens are proposed by prompt lookup
(:class:`~.ngram.NgramLookup`: the longest suffix n-gram, n <= 3, of the tokens written so far --
program, forced and copied tokens -- found first in the document's own tokens, then in
the written tokens, leftmost occurrence with a continuation). The draft is cut after the
token that closes the gen op and to the longest prefix the matcher accepts
(``Matcher.validate``), then [chosen token + draft] enters the KV cache in ONE "verify"
forward that returns logits at every position. The loop then decides each position
exactly as it would without a draft (same grammar mask, same span filter, computed on the
real matcher as it advances): greedy takes the masked argmax, so a draft token is kept
while it equals that argmax and the first differing argmax is the next ("bonus") token;
with sampling a draft token d is kept with probability p(d) under the masked,
temperature/top-p distribution p, and on rejection the token is drawn from p without d,
renormalized (the speculative-sampling rule for a deterministic draft), so outputs have the
distribution of plain sampling. Rejected positions are cropped from the cache. Greedy
results are token-for-token those of ``speculative=0`` (up to float differences between
a multi-token forward and single steps, which only matter at exact ties); with `script`
a draft token is kept while it equals the script's next token. The draft length follows
transformers' heuristic schedule for assisted generation: it starts at max(1, k // 2), grows
by 2 (up to k) after a draft kept whole and shrinks by 1 (down to 1) after a rejection, so a
verify forward, which computes logits at every position, stays short where lookups miss.
``EditStats`` counts ``drafted`` / ``accepted`` tokens, ``forwards["verify"]`` and the model
time per forward kind.
"""

from __future__ import annotations

import codecs
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..decoding.attention import use_gqa_attention
from ..decoding.encoding import TokenEncoder
from ..decoding.kv import append, cache_len, clone_cache, crop_cache, new_cache
from ..decoding.program_trackers import forced_run, tracker_for
from ..decoding.prompt import build_prompt
from ..decoding.results import EditEvent, EditResult, EditStats
from ..edits.formats import get_format
from ..edits.program import GEN_CLOSE, GEN_OPEN, PROGRAM_START, parse_program
from ..engine.compile import compile_grammar
from ..engine.compiled_grammar import CompiledGrammar
from ..engine.matcher import Matcher
from ..engine.vocabulary import Vocabulary, model_mismatch
from ..errors import ContextLengthError, ParameterError, ProgramError
from ..grammars import grammar_path
from .ngram import NgramLookup
from .sampling import Sampling, sample_token, verify_token

# The Copy-as-Decode API (README): the loop's own names, and the types and helpers its callers pass and get
# back, re-exported from where they live.
__all__ = [
    "ContextLengthError",
    "CopyEditor",
    "EditEvent",
    "EditResult",
    "EditStats",
    "Sampling",
    "apply_edit",
    "build_prompt",
]

GEN_CLOSE_BYTES = GEN_CLOSE.encode()


@dataclass
class _KeptPrompt:
    """A prompt's token ids, its KV cache right after the prompt, and the logits there."""

    ids: tuple[int, ...]
    cache: object
    logits: object


def _shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class _ContextFull(Exception):
    """The next forward would pass the model's context (``max_position_embeddings``)."""


class CopyEditor:
    """Applies edits with a transformers causal LM: Copy-as-Decode programs under copy_edit.lark by
    default, or the diff-style formats (``format=``: search/replace, udiff, apply_patch, str_replace)
    under their grammars and the document constraint."""

    def __init__(self, model, tokenizer, *, grammar: CompiledGrammar | None = None, cache=True,
                 progress: bool = False, prefill_chunk: int | None = 1024, prompt_cache: int = 0,
                 gqa_attention: bool = True, format: str = "copy"):
        """`format`: the edit format runs use unless they name another (see
        :mod:`cad_outlines.edits.formats`; an unknown one raises ParameterError). `grammar`: its
        compiled grammar, if the caller has it (other formats' grammars are compiled on first use).

        `prefill_chunk`: a copy longer than this many tokens enters the KV cache in forwards
        of at most this many (None: always one forward); the one-forward speedup has flattened
        out well before 512 tokens, while one forward of thousands of tokens over a long context
        builds an attention matrix of that many rows at once.

        `prompt_cache`: keep the KV of the last this many prompts (0: none). A run whose
        prompt shares a prefix with a kept one starts from a copy of that KV cut to the shared
        prefix and prefills only the rest (several programs sampled for one edit, or retries,
        pay the prompt once). Logits then equal a fresh prefill's up to float rounding. Each
        kept prompt holds its whole KV cache in memory.

        `gqa_attention`: switch an ``sdpa`` model with grouped KV heads to
        :func:`~cad_outlines.decoding.attention.gqa_sdpa_forward`, which attends over the cache
        without copying it per query head in forwards of several tokens (copies, forced runs,
        verifies: at 12,000 positions on CPU a 2-token forward 2.8x cheaper, an 11-token one
        1.9x); same outputs up to float rounding.
        This changes `model` for its other users too."""
        if prefill_chunk is not None and prefill_chunk < 1:
            raise ParameterError(f"prefill_chunk must be >= 1 or None, not {prefill_chunk}")
        if not isinstance(prompt_cache, int) or isinstance(prompt_cache, bool) or prompt_cache < 0:
            raise ParameterError(f"prompt_cache must be an int >= 0, not {prompt_cache!r}")
        self.format = get_format(format).name
        self.prefill_chunk = prefill_chunk
        self.prompt_cache = prompt_cache
        self.cache, self.progress = cache, progress
        if gqa_attention:
            use_gqa_attention(model)
        self._prompts: list[_KeptPrompt] = []  # most recently used last
        self.model, self.tokenizer = model, tokenizer
        size = getattr(model.config, "vocab_size", None)
        n_tokens = grammar.vocab.tokenizer_size if grammar is not None else len(tokenizer)
        mismatch = model_mismatch(n_tokens, size, getattr(model.config, "eos_token_id", None))
        if mismatch:
            raise ParameterError(f"the tokenizer does not belong to this model: {mismatch}; give the model's own "
                                 "tokenizer")
        if grammar is None:
            self.vocab = Vocabulary.from_tokenizer(tokenizer, model_vocab_size=size)
            self._grammars: dict[str, CompiledGrammar] = {}
        else:
            self.vocab = grammar.vocab
            self._grammars = {self.format: grammar}
        self.grammar = self.grammar_for(self.format)
        # the model's context: a run stops before passing it (None: not known, no limit)
        self.max_positions: int | None = getattr(model.config, "max_position_embeddings", None)
        self._encoder = TokenEncoder(tokenizer, self.vocab)
        self._special: dict[str, int] | None = None  # special-token text -> id (see encode_prompt)
        self._special_re = None
        self._token_text = [self._text_of(b) for b in self.vocab.token_bytes]
        self._lt_tokens = np.array([i for i, t in enumerate(self._token_text) if t and "<" in t], dtype=np.int64)
        self._open_mask: np.ndarray | None = None

    def grammar_for(self, format: str) -> CompiledGrammar:
        """The compiled grammar of an edit format (compiled, or loaded from the cache, on first use)."""
        name = get_format(format).name
        grammar = self._grammars.get(name)
        if grammar is None:
            grammar = self._grammars[name] = compile_grammar(grammar_path(get_format(name).grammar), self.vocab,
                                                             cache=self.cache, progress=self.progress)
        return grammar

    def open_mask(self) -> np.ndarray:
        """Every token a model may write without a grammar: all but the special ones, and EOS."""
        if self._open_mask is None:
            mask = np.ones(self.vocab.size, dtype=bool)
            mask[list(self.vocab.special_ids)] = False
            mask[list(self.vocab.eos_token_ids)] = True
            self._open_mask = mask
        return self._open_mask

    @classmethod
    def from_outlines(cls, model, **kwargs) -> CopyEditor:
        """From an ``outlines.from_transformers(...)`` model."""
        return cls(model.model, model.tokenizer.tokenizer, **kwargs)

    @staticmethod
    def _text_of(data: bytes) -> str | None:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def encode(self, text: str) -> list[int]:
        """Token ids whose bytes are exactly `text`'s (see :meth:`TokenEncoder.encode`)."""
        return self._encoder.encode(text)

    def encode_prompt(self, text: str) -> list[int]:
        """A prompt's token ids: the tokenizer's special tokens written in it (a chat template's
        ``<|im_start|>``...) as those tokens, the text between them by :meth:`encode`. (Encoding
        the whole prompt byte-exactly would spell the markers out as plain text, and fall
        back to a greedy tokenization of the whole prompt that matches no tokenization of
        the same text elsewhere.)"""
        if self._special is None:
            added = getattr(self.tokenizer, "added_tokens_decoder", None) or {}
            self._special = {tok.content: i for i, tok in added.items() if getattr(tok, "special", False)
                             and tok.content}
            self._special_re = (re.compile("|".join(map(re.escape, sorted(self._special, key=len, reverse=True))))
                                if self._special else None)
        if self._special_re is None:
            return self.encode(text)
        ids: list[int] = []
        pos = 0
        for m in self._special_re.finditer(text):
            if m.start() > pos:
                ids += self.encode(text[pos : m.start()])
            ids.append(self._special[m.group()])
            pos = m.end()
        if pos < len(text):
            ids += self.encode(text[pos:])
        return ids

    def _kept_prompt(self, ids: list[int]) -> tuple[_KeptPrompt | None, int]:
        """The kept prompt sharing the longest prefix with `ids`, and that prefix's length."""
        best, n = None, 0
        for kept in self._prompts:
            k = _shared_prefix(kept.ids, ids)
            if k > n:
                best, n = kept, k
        return best, n

    def _keep_prompt(self, ids: list[int], cache, logits) -> None:
        if not self.prompt_cache:
            return
        key = tuple(ids)
        same = [k for k in self._prompts if k.ids == key]
        self._prompts = [k for k in self._prompts if k.ids != key]
        # a prompt kept already moves to the end as it is (its KV is the same: no second copy)
        self._prompts.append(same[0] if same else _KeptPrompt(key, clone_cache(self.model, cache), logits.clone()))
        del self._prompts[: -self.prompt_cache]

    def forget_prompts(self) -> None:
        """Drop the kept prompts' KV caches (see `prompt_cache`)."""
        self._prompts.clear()

    def _greedy(self, data: bytes) -> list[int]:
        return self._encoder.greedy(data)

    # -- editing -----------------------------------------------------------------------------
    def stream(self, document: str, instruction: str, *, max_new_tokens: int = 512,
               sampling: Sampling = Sampling(), copy_mode: str = "prefill", monotonic: bool = False,
               prompt: str | None = None, script: str | None = None,
               speculative: int = 0, stop_at_context: bool = True, format: str | None = None,
               constrained: bool = True, name: str = "document") -> Iterator[EditEvent]:
        """Decode an edit program, yielding ops and new text as they happen; the last
        event carries the :class:`EditResult`.

        `format` (default: the editor's): the edit format; its prompt (:func:`build_prompt`, the
        document named `name` in diff headers) and grammar. Copy programs stream ``copy``,
        ``gen_text`` and ``gen`` events; the diff-style formats a ``hunk`` event per hunk, and end
        with EOS.

        With `script` (program text as the model writes it after the prompt's header, for copy
        with or without ``<program>``) the model is teacher-forced through that program instead
        of sampling: its tokens one forward each, forced tokens fast-forwarded and copies
        prefilled exactly as in a sampled run, so the cost of an edit can be measured whatever
        the model's quality.

        `constrained=False`: no grammar, no document constraint, no forced runs: every token of
        the program is chosen by the model (decoded one at a time), and the program is applied at
        the end (a program that does not apply gives ``result.error`` and the document unchanged).

        `speculative` > 0 drafts up to that many tokens at a time inside gen bodies (copy format)
        and verifies them in one forward (see the module docstring).

        With `stop_at_context` (the default) a run stops with ``stop_reason=
        "context_length"`` where the next forward would pass the model's context
        (:attr:`max_positions`), and a prompt that leaves no room raises
        :class:`ContextLengthError` (a ValueError)."""
        fmt = get_format(self.format if format is None else format).name
        if copy_mode not in ("prefill", "skip"):
            raise ParameterError(f"copy_mode must be 'prefill' or 'skip', not {copy_mode!r}")
        if speculative < 0:
            raise ParameterError(f"speculative must be >= 0, not {speculative}")
        if speculative and fmt != "copy":
            raise ParameterError(f"speculative drafts go in the copy format's gen bodies, not in {fmt!r} programs")
        if max_new_tokens < 0:
            raise ParameterError(f"max_new_tokens must be >= 0, not {max_new_tokens}")
        run = _EditRun(self, document, max_new_tokens=max_new_tokens, sampling=sampling, copy_mode=copy_mode,
                       monotonic=monotonic, script=script, speculative=speculative, stop_at_context=stop_at_context,
                       format=fmt, constrained=constrained)
        if prompt is None:
            prompt = build_prompt(self.tokenizer, document, instruction, format=fmt, name=name)
        yield from run.events(prompt)

    def _next_token(self, data: bytes, pos: int) -> int:
        """The first token of `data[pos:]` as this editor encodes text."""
        return self._encoder.next_token(data, pos)

    def execute(self, document: str, program_text: str, instruction: str = "", **kwargs) -> EditResult:
        """Teacher-force a given program (see `script` in :meth:`stream`; a copy program with or
        without its leading ``<program>``): ``execute(document, program_text, instruction)`` -- the
        program second, unlike ``edit(document, instruction)``, since the instruction is optional
        here. The program is checked first: a program that does not parse, is cut off, or does not
        apply to the document (a span outside it, a search text that is not there once) raises a
        :class:`~cad_outlines.errors.ProgramError` before the model runs; arguments given in
        ``edit``'s order (an instruction where the program belongs, the program third) raise
        :class:`~cad_outlines.errors.ParameterError` saying so. The model's context is not enforced
        (``stop_at_context=False``: its predictions are not used, only the cost of the forwards is
        measured) unless asked for."""
        fmt = get_format(kwargs.get("format") or self.format)
        script = program_text.removeprefix(PROGRAM_START) if fmt.name == "copy" else program_text
        try:
            program = fmt.parse(script)
        except ProgramError:
            if instruction and _parses(fmt, instruction.removeprefix(PROGRAM_START)):
                raise ParameterError("execute(document, program_text, instruction): the program comes second and "
                                     "the instruction third; these look swapped (the third argument is a "
                                     "program, the second is not)") from None
            raise
        fmt.apply(program, document)
        kwargs.setdefault("stop_at_context", False)
        return self.edit(document, instruction, script=script, max_new_tokens=10**9, **kwargs)

    def edit(self, document: str, instruction: str, **kwargs) -> EditResult:
        """Run :meth:`stream` to the end and return its result."""
        result = None
        for event in self.stream(document, instruction, **kwargs):
            result = event.result or result
        return result


def _parses(fmt, text: str) -> bool:
    try:
        fmt.parse(text)
    except ProgramError:
        return False
    return True


class _EditRun:
    """One run of :meth:`CopyEditor.stream`: its state (KV cache, matcher, program tracker, speculative
    draft, stats) and the named steps of the loop. :meth:`events` is the loop.

    Forwards are lazy: a chosen token, the forced run after it and the lines of a copy it closes wait
    in `pending` and enter the KV cache together, in one forward, when the next choice needs logits
    (and never, after the program's last token)."""

    def __init__(self, editor: CopyEditor, document: str, *, max_new_tokens: int, sampling: Sampling,
                 copy_mode: str, monotonic: bool, script: str | None, speculative: int,
                 stop_at_context: bool, format: str, constrained: bool) -> None:
        import torch

        self.started = time.perf_counter()
        self.editor, self.document = editor, document
        self.format, self.constrained = format, constrained
        self.max_new_tokens, self.sampling, self.copy_mode = max_new_tokens, sampling, copy_mode
        self.script, self.speculative = script, speculative
        self.limit = editor.max_positions if stop_at_context else None
        self.stats = EditStats()
        self.generator = torch.Generator().manual_seed(sampling.seed)
        self.grammar = editor.grammar_for(format)
        self.matcher = Matcher(self.grammar) if constrained else None
        self.tracker = tracker_for(format, document, editor.vocab, constrained=constrained, monotonic=monotonic,
                                   token_text=editor._token_text, lt_tokens=editor._lt_tokens)
        self.eos = frozenset(editor.vocab.eos_token_ids)
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.program_chars: list[str] = []
        self.program_bytes = bytearray()
        self.script_bytes = script.encode("utf-8") if script is not None else b""
        self.lookup: NgramLookup | None = None
        if speculative:
            t0 = time.perf_counter()
            self.lookup = NgramLookup(editor.encode(document))
            self.stats.tokenize_s += time.perf_counter() - t0
        # speculative state: draft tokens in the cache not yet decided, and the logits rows after each of them
        self.draft: list[int] = []
        self.rows: list = []
        self.draft_len = max(1, speculative // 2)  # the current draft length (see the module docstring)
        self.pending: list[int] = []  # tokens taken but not in the cache yet (see the class docstring)
        self.pending_kind = ""  # "copy", "decode" (a chosen token), "fast_forward" (forced tokens only)
        self.cache = None
        self.logits = None  # the logits after the last token in the cache (or the first undecided draft token)

    # -- the loop --------------------------------------------------------------------------
    def events(self, prompt: str) -> Iterator[EditEvent]:
        """Prefill `prompt`, then decode until the program ends, `max_new_tokens` or the model's context;
        the last event carries the result."""
        self.prefill_prompt(prompt)
        stop = "end"
        try:
            while not self.tracker.done:
                mask = self.editor.open_mask()
                if self.constrained:
                    mask, forced = self.grammar_mask()
                    if forced:
                        yield from self.fast_forward(forced)
                        continue
                if self.stats.generated_tokens >= self.max_new_tokens:
                    self.drop_draft()
                    stop = "max_new_tokens"
                    break
                if self.constrained:
                    mask = self.document_mask(mask)
                    if self.tracker.ends_with_eos and mask[list(self.eos)].any() and mask.sum() == 1:
                        yield from self.tracker.end()  # only EOS is left: the program ends, no forward
                        break
                self.flush()
                tok = self.choose(mask)
                if tok in self.eos:
                    self.stats.generated_tokens += 1
                    yield from self.tracker.end()
                    break
                yield from self.take(tok)
        except _ContextFull:  # the next forward would pass the model's context
            stop = "end" if self.tracker.done else "context_length"
        yield self.finish(stop)

    def prefill_prompt(self, prompt: str) -> None:
        """The prompt's tokens into a new cache in one forward (a prompt that leaves no room in the
        model's context raises :class:`ContextLengthError`)."""
        t0 = time.perf_counter()
        prompt_ids = self.editor.encode_prompt(prompt)
        self.stats.tokenize_s += time.perf_counter() - t0
        self.stats.prompt_tokens = len(prompt_ids)
        if self.limit is not None and len(prompt_ids) >= self.limit:
            raise ContextLengthError(f"the prompt (instruction and document) is {len(prompt_ids)} tokens: it "
                                     f"leaves no room in the model's context of {self.limit} positions")
        editor = self.editor
        kept, shared = editor._kept_prompt(prompt_ids) if editor.prompt_cache else (None, 0)
        if kept is None:
            self.cache = new_cache(editor.model)
            self.logits = self.forward(prompt_ids, "prompt")
        else:
            self.cache = clone_cache(editor.model, kept.cache)
            if shared == len(prompt_ids) == len(kept.ids):
                self.logits = kept.logits.clone()
            else:  # cut to the shared prefix (leaving at least one token to forward for the logits)
                shared = min(shared, len(prompt_ids) - 1)
                crop_cache(self.cache, shared)
                self.logits = self.forward(prompt_ids[shared:], "prompt")
            self.stats.prompt_reused_tokens = shared
        editor._keep_prompt(prompt_ids, self.cache, self.logits)
        self.stats.prompt_s = time.perf_counter() - self.started

    def grammar_mask(self) -> tuple[np.ndarray, list[int]]:
        """The tokens the grammar allows next, and the run of tokens the grammar or the document forces
        from here (may be empty; see :func:`~cad_outlines.decoding.program_trackers.forced_run`)."""
        t0 = time.perf_counter()
        mask = self.matcher.allowed_mask()
        forced = forced_run(self.matcher, self.tracker, self.editor._encoder, mask)
        self.stats.mask_s += time.perf_counter() - t0
        return mask, forced

    def fast_forward(self, forced: list[int]) -> list[EditEvent]:
        """Forced tokens (and the lines of a copy they close) into the program; they enter the cache with
        the next forward."""
        self.drop_draft()
        self.matcher.advance_many(forced)
        events, copy_ids = self.feed(forced)
        self.stats.fast_forwarded_tokens += len(forced)
        self.stats.copied_tokens += len(copy_ids)
        self.add_pending(forced + copy_ids, "copy" if copy_ids else "fast_forward")
        return events

    def document_mask(self, mask: np.ndarray) -> np.ndarray:
        """`mask` without the tokens the document rules out (a copy span outside it; search text that
        cannot occur once); a RuntimeError if nothing is left."""
        t0 = time.perf_counter()
        mask = self.tracker.filter(mask)
        self.stats.mask_s += time.perf_counter() - t0
        if not mask.any():
            raise RuntimeError("no token is allowed: the grammar and the document constraint admit nothing here")
        return mask

    def choose(self, mask: np.ndarray) -> int:
        """The next token under `mask`: the script's, the decision on the first draft token, or a sample."""
        if self.script is not None:
            tok = self.script_next()
            if not mask[tok]:
                raise ProgramError(f"the script is not a valid program here: "
                                   f"{self.script_bytes[len(self.program_bytes):][:40]!r}")
            return tok
        if self.draft:
            return verify_token(self.logits, mask, self.sampling, self.generator, self.draft[0])
        return sample_token(self.logits, mask, self.sampling, self.generator)

    def take(self, tok: int) -> list[EditEvent]:
        """A chosen token into the program; into the cache with the next forward, unless it is the draft
        token already there."""
        if self.matcher is not None:
            self.matcher.advance(tok)
        self.stats.generated_tokens += 1
        events, copy_ids = self.feed([tok])
        self.stats.copied_tokens += len(copy_ids)
        if self.draft and tok == self.draft[0]:
            self.keep_draft_token(copy_ids)
        else:
            self.drop_draft()
            self.add_pending([tok] + copy_ids, "copy" if copy_ids else "decode")
        return events

    def keep_draft_token(self, copy_ids: list[int]) -> None:
        """The first draft token was chosen: it is already in the cache, its logits row is next."""
        self.stats.accepted_tokens += 1
        self.draft.pop(0)
        self.logits = self.rows.pop(0)
        if not self.draft:  # all kept: longer drafts
            self.draft_len = min(self.speculative, self.draft_len + 2)
        if copy_ids or self.tracker.done:  # the draft ends here
            self.drop_draft(rejected=False)
            if copy_ids:
                self.add_pending(copy_ids, "copy")

    def add_pending(self, ids: list[int], kind: str) -> None:
        """Tokens for the next forward; its kind is the strongest among them (copy > decode > fast_forward)."""
        self.pending += ids
        order = ("", "fast_forward", "decode", "copy")
        self.pending_kind = max(self.pending_kind, kind, key=order.index)

    def flush(self) -> None:
        """The pending tokens into the cache in one forward: with a new draft after a lone chosen token
        inside a gen body (one verify forward), else alone."""
        if not self.pending:
            return
        ids, kind = self.pending, self.pending_kind
        self.pending, self.pending_kind = [], ""
        new_draft = self.make_draft() if kind == "decode" and len(ids) == 1 else []
        if new_draft:
            out = self.forward(ids + new_draft, "verify", all_logits=True)
            self.logits, self.rows[:] = out[0], list(out[1:])
            self.draft[:] = new_draft
            self.stats.drafted_tokens += len(new_draft)
        else:
            self.logits = self.forward(ids, kind)

    def finish(self, stop: str) -> EditEvent:
        """The last event: the program so far, the document it resolves to, and the costs."""
        self.drop_draft()
        program, program_text, text, complete, error = self.tracker.finish("".join(self.program_chars))
        self.stats.wall_s = time.perf_counter() - self.started
        result = EditResult(self.document, program, program_text, text, complete, stop, self.stats,
                            format=self.format, error=error)
        return EditEvent(result=result, kind="end")

    # -- the steps' parts ------------------------------------------------------------------
    def forward(self, ids: list[int], kind: str, all_logits: bool = False):
        """`ids` into the cache (a copy in chunks of `prefill_chunk`), timed and counted under `kind`;
        :class:`_ContextFull` where they would pass the model's context."""
        if self.limit is not None and cache_len(self.cache) + len(ids) > self.limit:
            raise _ContextFull
        t0 = time.perf_counter()
        chunk = self.editor.prefill_chunk if kind == "copy" else None
        out = append(self.editor.model, self.cache, ids, all_logits=all_logits, chunk=chunk)
        dt = time.perf_counter() - t0
        self.stats.model_s += dt
        self.stats.model_s_by_kind[kind] = self.stats.model_s_by_kind.get(kind, 0.0) + dt
        self.stats.forwards[kind] += -(-len(ids) // chunk) if chunk else 1
        return out

    def drop_draft(self, rejected: bool = True) -> None:
        """Crop the undecided draft tokens from the cache (after a rejection: shorter drafts)."""
        if self.draft:
            crop_cache(self.cache, cache_len(self.cache) - len(self.draft))
            self.draft.clear()
            if rejected:  # draft length schedule: shorter after a rejection
                self.draft_len = max(1, self.draft_len - 1)
            self.rows.clear()

    def feed(self, ids: list[int]) -> tuple[list[EditEvent], list[int]]:
        """Program text of `ids` into the tracker: events, and the tokens of any copy that closed (to
        put in the cache right after `ids`)."""
        copy_ids: list[int] = []
        data = b"".join(self.editor.vocab.token_bytes[t] for t in ids)
        self.program_bytes.extend(data)
        text = self.utf8.decode(data)
        self.program_chars.append(text)
        if self.lookup is not None:
            self.lookup.extend(ids)
        events = self.tracker.feed(data, text)
        for event in events:
            if event.kind == "copy" and (self.copy_mode == "prefill" or self.lookup is not None):
                t0 = time.perf_counter()
                piece_ids = self.editor.encode(event.text)
                self.stats.tokenize_s += time.perf_counter() - t0
                if self.lookup is not None:
                    self.lookup.extend(piece_ids)
                if self.copy_mode == "prefill":
                    copy_ids.extend(piece_ids)
        return events, copy_ids

    def make_draft(self) -> list[int]:
        """Draft tokens to follow the token just taken: only inside a gen body, cut after the token that
        closes it, and only as far as the grammar allows."""
        if self.lookup is None or not self.tracker.in_free_text():
            return []
        pending = self.tracker.resolver.pending_text()
        t0 = time.perf_counter()
        # room for the draft after the pending chosen token
        room = self.draft_len if self.limit is None else min(self.draft_len, self.limit - cache_len(self.cache) - 1)
        cand = self.lookup.propose(min(room, self.max_new_tokens - self.stats.generated_tokens))
        body = bytearray(pending[len(GEN_OPEN):].encode("utf-8"))
        for i, t in enumerate(cand):
            body.extend(self.editor.vocab.token_bytes[t])
            if GEN_CLOSE_BYTES in body:
                cand = cand[: i + 1]
                break
        if cand and self.matcher is not None:
            cand = cand[: self.matcher.validate(cand)]
        self.stats.mask_s += time.perf_counter() - t0
        return cand

    def script_next(self) -> int:
        """The script's next token (as it continues the program bytes so far); EOS at its end for the
        formats that end with EOS."""
        done = bytes(self.program_bytes)
        if self.tracker.ends_with_eos and len(self.script_bytes) == len(done) and self.script_bytes == done:
            return min(self.eos)
        if not self.script_bytes.startswith(done) or len(self.script_bytes) == len(done):
            raise ProgramError(f"the script diverged or ended early after {done[-40:]!r}")
        return self.editor._next_token(self.script_bytes, len(done))


def apply_edit(model, tokenizer, document: str, instruction: str, *, format: str = "copy", **kwargs) -> EditResult:
    """One edit with a transformers model + tokenizer (or an Outlines model with
    ``tokenizer=None``) in `format` (``copy``, ``search_replace``, ``udiff``, ``apply_patch``,
    ``str_replace``; an unknown one raises ParameterError). Keyword arguments go to
    :meth:`CopyEditor.stream`."""
    get_format(format)
    editor = (CopyEditor.from_outlines(model, format=format) if tokenizer is None
              else CopyEditor(model, tokenizer, format=format))
    return editor.edit(document, instruction, **kwargs)

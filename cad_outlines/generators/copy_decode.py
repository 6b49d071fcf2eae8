"""Copy-as-Decode: an LLM writes an edit program under copy_edit.lark; each copy op enters
the KV cache as ONE forward, and so does every run of grammar-forced tokens.

Boundaries (the choices this module makes):

- The prompt ends with ``<program>`` (after the chat template's assistant header when
  the tokenizer has one); the model writes ops after it.
- ``copy_mode="prefill"`` (default): when a ``<copy lines="i-j"/>`` tag closes, lines
  i..j are tokenized on their own (no special tokens) and appended after the tag's last
  token in the same forward; the model continues at an op boundary, having "seen" the
  copied text. ``copy_mode="skip"``: the copied text is not put in the context; the
  model sees only the tag, so a copy costs no forward of its own.
- Forced text (e.g. ``opy lines="`` after ``<c``) is tokenized with the tokenizer and
  fed in one forward, except a last token that a longer legal token could replace.
- Line numbers: beyond the grammar, 1 <= i <= j <= n for the document (and with
  ``monotonic`` spans never go backwards).
- ``max_new_tokens`` counts sampled tokens; a run cut off returns the partial program
  with ``complete=False``. Nothing is repaired.
"""

from __future__ import annotations

import codecs
import difflib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..edits.lines import number_lines, split_lines
from ..edits.program import COPY_OPEN, Copy, EditProgram, Op
from ..edits.resolve import StreamingResolver, resolve
from ..engine.compile import compile_grammar
from ..engine.compiled import CompiledGrammar
from ..engine.matcher import Matcher
from ..engine.vocabulary import Vocabulary
from ..grammars import grammar_path
from .kv import append, new_cache
from .spans import SpanConstraint

__all__ = ["Sampling", "EditStats", "EditResult", "EditEvent", "CopyEditor", "apply_edit", "build_prompt"]

DEFAULT_INSTRUCTIONS = (
    "Rewrite the document below as the instruction asks. Answer with an edit program: "
    '<copy lines="i-j"/> reuses lines i to j of the document verbatim, <gen>TEXT</gen> writes new text; '
    "end with </program>."
)


@dataclass(frozen=True)
class Sampling:
    """Greedy when `temperature` is 0; else temperature and nucleus (top-p) sampling,
    seeded."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


@dataclass
class EditStats:
    forwards: dict[str, int] = field(default_factory=lambda: {"prompt": 0, "decode": 0, "copy": 0, "fast_forward": 0})
    prompt_tokens: int = 0
    generated_tokens: int = 0
    copied_tokens: int = 0
    fast_forwarded_tokens: int = 0
    wall_s: float = 0.0
    mask_s: float = 0.0
    model_s: float = 0.0
    tokenize_s: float = 0.0

    @property
    def total_forwards(self) -> int:
        return sum(self.forwards.values())


@dataclass
class EditResult:
    """The program the model wrote, the document it resolves to, and what it cost."""

    document: str
    program: EditProgram
    program_text: str
    text: str  # the new document (resolved so far, if the program is incomplete)
    complete: bool
    stop_reason: str  # "end" (</program>), "max_new_tokens"
    stats: EditStats

    def diff(self, context: int = 3) -> str:
        """Unified diff from the document to the new text."""
        return "".join(difflib.unified_diff(split_lines(self.document), split_lines(self.text),
                                            "before", "after", n=context))


@dataclass(frozen=True)
class EditEvent:
    """One streaming step: `op` when an op completes, `text` the new document text
    that became known (a copy arrives whole; gen text token by token)."""

    op: Op | None = None
    text: str = ""
    result: EditResult | None = None  # set on the last event


def build_prompt(tokenizer, document: str, instruction: str) -> str:
    """Instruction + the document with visible line numbers, through the chat template
    when the tokenizer has one, ending with ``<program>``."""
    body = f"{DEFAULT_INSTRUCTIONS}\n\nInstruction: {instruction}\n\nDocument:\n{number_lines(document)}"
    template = getattr(tokenizer, "chat_template", None)
    if template:
        prefix = tokenizer.apply_chat_template([{"role": "user", "content": body}], tokenize=False,
                                               add_generation_prompt=True)
        return prefix + "<program>"
    return body + "\n<program>"


def _sample(logits, mask: np.ndarray, sampling: Sampling, generator) -> int:
    import torch

    keep = torch.from_numpy(mask[: logits.shape[-1]]).to(logits.device)
    scores = logits[: keep.shape[0]].masked_fill(~keep, float("-inf"))
    if sampling.temperature <= 0:
        return int(torch.argmax(scores))
    probs = torch.softmax(scores / sampling.temperature, dim=-1)
    if sampling.top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        cut = torch.cumsum(sorted_p, 0) - sorted_p >= sampling.top_p
        sorted_p[cut] = 0
        probs = torch.zeros_like(probs).scatter(0, order, sorted_p)
    return int(torch.multinomial(probs / probs.sum(), 1, generator=generator))


class CopyEditor:
    """Applies edits with a transformers causal LM under copy_edit.lark."""

    def __init__(self, model, tokenizer, *, grammar: CompiledGrammar | None = None, cache=True,
                 progress: bool = False):
        self.model, self.tokenizer = model, tokenizer
        size = getattr(model.config, "vocab_size", None)
        if grammar is None:
            vocab = Vocabulary.from_tokenizer(tokenizer, model_vocab_size=size)
            grammar = compile_grammar(grammar_path("copy_edit"), vocab, cache=cache, progress=progress)
        self.grammar = grammar
        self.vocab = grammar.vocab
        self._token_text = [self._text_of(b) for b in self.vocab.token_bytes]
        self._lt_tokens = np.array([i for i, t in enumerate(self._token_text) if t and "<" in t], dtype=np.int64)

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
        """Token ids whose bytes are exactly `text`'s, as the text continues a sequence:
        the tokenizer's own encoding when it spells the text exactly, else (e.g. a
        SentencePiece tokenizer adding a word-start space) greedy longest-match over the
        vocabulary's bytes."""
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        data = text.encode("utf-8")
        if b"".join(self.vocab.token_bytes[i] for i in ids) == data:
            return ids
        return self._greedy(data)

    def _greedy(self, data: bytes) -> list[int]:
        if not hasattr(self, "_by_bytes"):
            self._by_bytes = {}
            for i, b in enumerate(self.vocab.token_bytes):
                if b and i not in self.vocab.special_ids:
                    self._by_bytes.setdefault(b, i)
            self._max_len = max(map(len, self._by_bytes))
        out, pos = [], 0
        while pos < len(data):
            for n in range(min(self._max_len, len(data) - pos), 0, -1):
                tok = self._by_bytes.get(data[pos : pos + n])
                if tok is not None:
                    out.append(tok)
                    pos += n
                    break
            else:
                raise ValueError(f"byte {data[pos]:#x} has no token in this vocabulary")
        return out

    # -- the loop --------------------------------------------------------------------------
    def stream(self, document: str, instruction: str, *, max_new_tokens: int = 512,
               sampling: Sampling = Sampling(), copy_mode: str = "prefill", monotonic: bool = False,
               prompt: str | None = None, script: str | None = None) -> Iterator[EditEvent]:
        """Decode an edit program, yielding ops and new text as they happen; the last
        event carries the :class:`EditResult`.

        With `script` (program text, without ``<program>``) the model is teacher-forced
        through that program instead of sampling: its tokens one forward each, forced
        tokens fast-forwarded and copies prefilled exactly as in a sampled run, so the
        cost of an edit can be measured whatever the model's quality."""
        import torch

        if copy_mode not in ("prefill", "skip"):
            raise ValueError(f"copy_mode must be 'prefill' or 'skip', not {copy_mode!r}")
        started = time.perf_counter()
        stats = EditStats()
        lines = split_lines(document)
        spans = SpanConstraint(len(lines), monotonic)
        generator = torch.Generator().manual_seed(sampling.seed)
        matcher = Matcher(self.grammar)
        resolver = StreamingResolver(document)
        utf8 = codecs.getincrementaldecoder("utf-8")()
        program_chars: list[str] = []
        last_end = 0

        def timed_append(ids: list[int], kind: str):
            t0 = time.perf_counter()
            out = append(self.model, cache, ids)
            stats.model_s += time.perf_counter() - t0
            stats.forwards[kind] += 1
            return out

        t0 = time.perf_counter()
        prompt_ids = self.encode(prompt if prompt is not None else build_prompt(self.tokenizer, document, instruction))
        stats.tokenize_s += time.perf_counter() - t0
        stats.prompt_tokens = len(prompt_ids)
        cache = new_cache(self.model)
        logits = timed_append(prompt_ids, "prompt")

        def feed(ids: list[int]) -> tuple[list[EditEvent], list[int]]:
            """Program text of `ids` into the resolver: events, and the tokens of any copy
            that closed (to append after `ids` in the same forward)."""
            nonlocal last_end
            events, copy_ids = [], []
            text = utf8.decode(b"".join(self.vocab.token_bytes[t] for t in ids))
            program_chars.append(text)
            for ch in text:  # char by char so a copy's text lands right after its tag
                before_ops = len(resolver.ops)
                piece = resolver.feed(ch)
                new_ops = resolver.ops[before_ops:]
                for op in new_ops:
                    events.append(EditEvent(op=op, text=piece if isinstance(op, Copy) else ""))
                    if isinstance(op, Copy):
                        last_end = op.end
                        if copy_mode == "prefill":
                            t1 = time.perf_counter()
                            copy_ids.extend(self.encode(piece))
                            stats.tokenize_s += time.perf_counter() - t1
                if piece and not any(isinstance(op, Copy) for op in new_ops):
                    events.append(EditEvent(text=piece))
            return events, copy_ids

        stop = "end"
        while not resolver.done:
            t1 = time.perf_counter()
            mask = matcher.allowed_mask()
            forced = matcher.forced_tokens(self.encode, mask=mask)
            stats.mask_s += time.perf_counter() - t1
            if forced:
                matcher.advance_many(forced)
                events, copy_ids = feed(forced)
                stats.fast_forwarded_tokens += len(forced)
                stats.copied_tokens += len(copy_ids)
                logits = timed_append(forced + copy_ids, "copy" if copy_ids else "fast_forward")
                yield from events
                continue
            if stats.generated_tokens >= max_new_tokens:
                stop = "max_new_tokens"
                break
            t1 = time.perf_counter()
            pending = resolver.pending_text()
            # inside (or maybe opening) a copy tag every token is checked; elsewhere only
            # tokens that could open one
            in_tag = bool(pending) and (COPY_OPEN.startswith(pending) or pending.startswith(COPY_OPEN))
            candidates = None if in_tag else self._lt_tokens
            mask = spans.filter(mask, pending, self._token_text, last_end, candidates)
            stats.mask_s += time.perf_counter() - t1
            if not mask.any():
                raise RuntimeError("no token is allowed: the grammar and the span constraint admit nothing here")
            if script is None:
                tok = _sample(logits, mask, sampling, generator)
            else:
                done_text = "".join(program_chars)
                if not script.startswith(done_text) or len(script) == len(done_text):
                    raise ValueError(f"the script diverged or ended early after {done_text[-40:]!r}")
                tok = self.encode(script[len(done_text) :])[0]
                if not mask[tok]:
                    raise ValueError(f"the script is not a valid program here: {script[len(done_text):][:40]!r}")
            matcher.advance(tok)
            stats.generated_tokens += 1
            events, copy_ids = feed([tok])
            stats.copied_tokens += len(copy_ids)
            if not resolver.done:
                logits = timed_append([tok] + copy_ids, "copy" if copy_ids else "decode")
            yield from events
        program = resolver.close(partial=True)
        text = resolve(program, document, partial=True)
        stats.wall_s = time.perf_counter() - started
        result = EditResult(document, program, "".join(program_chars), text, program.complete, stop, stats)
        yield EditEvent(result=result)

    def execute(self, document: str, program_text: str, instruction: str = "", **kwargs) -> EditResult:
        """Teacher-force a given program (see `script` in :meth:`stream`)."""
        return self.edit(document, instruction, script=program_text, max_new_tokens=10**9, **kwargs)

    def edit(self, document: str, instruction: str, **kwargs) -> EditResult:
        """Run :meth:`stream` to the end and return its result."""
        result = None
        for event in self.stream(document, instruction, **kwargs):
            result = event.result or result
        return result


def apply_edit(model, tokenizer, document: str, instruction: str, **kwargs) -> EditResult:
    """One edit with a transformers model + tokenizer (or an Outlines model with
    ``tokenizer=None``). Keyword arguments go to :meth:`CopyEditor.stream`."""
    editor = CopyEditor.from_outlines(model) if tokenizer is None else CopyEditor(model, tokenizer)
    return editor.edit(document, instruction, **kwargs)

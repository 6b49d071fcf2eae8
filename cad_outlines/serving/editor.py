"""The client-side entry point: Copy-as-Decode edits on a served model."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from ..engine.compile import compile_grammar
from ..engine.vocabulary import Vocabulary
from ..generators.copy_decode import EditEvent, EditResult
from ..generators.encoding import TokenEncoder
from ..grammars import grammar_path
from .backends import EngineBackend, HTTPBackend, run_edits, stream_edits
from .served_edit import ServedEdit

__all__ = ["ServedEditor"]


class ServedEditor:
    """Applies edits through a serving engine (in-process ``vllm.LLM`` or HTTP server).

    The client needs the model's tokenizer (prompts go as token ids) and compiles
    ``copy_edit`` for it (forced tokens, checking what comes back); the engine needs
    :class:`~cad_outlines.serving.vllm_processor.CadLogitsProcessor` loaded."""

    def __init__(self, backend, tokenizer, *, model_vocab_size: int | None = None, cache=True):
        self.backend, self.tokenizer = backend, tokenizer
        vocab = Vocabulary.from_tokenizer(tokenizer, model_vocab_size=model_vocab_size)
        self.grammar = compile_grammar(grammar_path("copy_edit"), vocab, cache=cache, progress=False)
        self.encoder = TokenEncoder(tokenizer, vocab)

    @classmethod
    def from_llm(cls, llm, **kwargs) -> ServedEditor:
        """For an in-process ``vllm.LLM``."""
        from .vllm_processor import load_tokenizer

        config = llm.llm_engine.model_config
        return cls(EngineBackend(llm), load_tokenizer(str(config.tokenizer)),
                   model_vocab_size=config.get_vocab_size(), **kwargs)

    @classmethod
    def from_server(cls, base_url: str, model: str, tokenizer: str | Path, *, model_vocab_size: int | None = None,
                    timeout_s: float = 600.0, **kwargs) -> ServedEditor:
        """For an OpenAI-compatible server; `tokenizer` is the model's tokenizer folder."""
        from .vllm_processor import load_tokenizer

        return cls(HTTPBackend(base_url, model, timeout_s=timeout_s), load_tokenizer(str(tokenizer)),
                   model_vocab_size=model_vocab_size, **kwargs)

    def new_edit(self, document: str, instruction: str = "", **kwargs) -> ServedEdit:
        """A :class:`ServedEdit` (keyword arguments: max_new_tokens, prompt, script,
        monotonic, temperature, seed, tag)."""
        return ServedEdit(self.grammar, self.encoder, document, instruction, **kwargs)

    def stream(self, document: str, instruction: str = "", **kwargs) -> Iterator[EditEvent]:
        """One edit's events as its ops resolve; the last carries the result."""
        for _, event in stream_edits(self.backend, [self.new_edit(document, instruction, **kwargs)]):
            yield event

    def edit(self, document: str, instruction: str = "", **kwargs) -> EditResult:
        return run_edits(self.backend, [self.new_edit(document, instruction, **kwargs)])[0]

    def edit_many(self, jobs: Sequence[tuple[str, str] | dict], **kwargs) -> list[EditResult]:
        """Many edits at once (the engine batches them): (document, instruction) pairs or
        dicts of :meth:`new_edit` arguments."""
        edits = [self.new_edit(**job, **kwargs) if isinstance(job, dict) else self.new_edit(*job, **kwargs)
                 for job in jobs]
        return run_edits(self.backend, edits)

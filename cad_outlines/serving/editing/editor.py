"""The client-side entry point: Copy-as-Decode edits (or edits in another format, ``format=``) on a
served model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

from ...decoding.encoding import TokenEncoder
from ...decoding.results import EditEvent, EditResult
from ...edits.formats import get_format
from ...engine.compile import compile_grammar
from ...engine.vocabulary import Vocabulary
from ...grammars import grammar_path
from .async_backend import AsyncLLMBackend
from .backends import EngineBackend, HTTPBackend
from .edit_run import arun_edits, astream_edits, run_edits, stream_edits
from ..constraints.request import RequestError
from .served_edit import ServedEdit
from .session_channel import EngineSessionBackend, supports_sessions
from ..tokenizer import shared_vocabulary

__all__ = ["ServedEditor"]


class ServedEditor:
    """Applies edits through a serving engine: an in-process ``vllm.LLM``, an ``AsyncLLM``
    (the ``a*`` methods, on its event loop) or an OpenAI-compatible server over HTTP.

    The client needs the model's tokenizer (prompts go as token ids) and compiles
    ``copy_edit`` for it (forced tokens, checking what comes back; the on-disk cache it
    writes is where an engine on this machine loads it from); the engine needs
    :class:`~cad_outlines.serving.constraints.vllm_processor.CadLogitsProcessor` loaded."""

    def __init__(self, backend, tokenizer, *, model_vocab_size: int | None = None, vocab: Vocabulary | None = None,
                 cache=True, max_context: int | None = None, format: str = "copy"):
        """`format`: the edit format of this editor's edits unless one names another (``new_edit(...,
        format=...)``); an unknown one raises :class:`~cad_outlines.errors.ParameterError`."""
        self.backend, self.tokenizer = backend, tokenizer
        self.max_context = max_context  # the model's context (max_model_len), when known: edits stop before it
        self.format = get_format(format).name
        self.vocab = vocab or Vocabulary.from_tokenizer(tokenizer, model_vocab_size=model_vocab_size)
        self.cache = cache
        self._grammars: dict = {}
        self.grammar = self.grammar_for(self.format)
        self.encoder = TokenEncoder(tokenizer, self.vocab)

    def grammar_for(self, format: str):
        """The compiled grammar of an edit format (compiled, or loaded from the cache, on first use)."""
        name = get_format(format).grammar
        if name not in self._grammars:
            self._grammars[name] = compile_grammar(grammar_path(name), self.vocab, cache=self.cache, progress=False)
        return self._grammars[name]

    @classmethod
    def _for_model(cls, backend, tokenizer: str | Path, model_vocab_size: int | None, **kwargs) -> ServedEditor:
        tok, vocab = shared_vocabulary(tokenizer, model_vocab_size)
        return cls(backend, tok, vocab=vocab, **kwargs)

    @classmethod
    def from_llm(cls, llm, *, one_request: bool | None = None, **kwargs) -> ServedEditor:
        """For an in-process ``vllm.LLM``. Each edit is ONE engine request where the engine
        takes streaming input (vLLM >= 0.32; `one_request=False`: a request per op)."""
        config = llm.llm_engine.model_config
        kwargs.setdefault("max_context", config.max_model_len)
        supported = supports_sessions(llm.llm_engine)
        if one_request and not supported:
            raise RequestError("this engine takes no streaming input (vLLM >= 0.32): one request per edit is not "
                               "available; use one_request=False")
        backend = EngineSessionBackend(llm) if (supported if one_request is None else one_request) \
            else EngineBackend(llm)
        return cls._for_model(backend, str(config.tokenizer), config.get_vocab_size(), **kwargs)

    @classmethod
    def from_async_llm(cls, engine, *, one_request: bool | None = None, **kwargs) -> ServedEditor:
        """For an in-process ``AsyncLLM``: use :meth:`astream`, :meth:`aedit`, :meth:`aedit_many`.
        Each edit is ONE engine request where the engine takes streaming input (vLLM >= 0.32;
        `one_request=False`: a request per op); ``result.stats.engine_path`` says which."""
        config = engine.model_config
        kwargs.setdefault("max_context", config.max_model_len)
        return cls._for_model(AsyncLLMBackend(engine, one_request=one_request), str(config.tokenizer),
                              config.get_vocab_size(), **kwargs)

    @classmethod
    def from_server(cls, base_url: str, model: str, tokenizer: str | Path, *, model_vocab_size: int | None = None,
                    timeout_s: float = 600.0, **kwargs) -> ServedEditor:
        """For an OpenAI-compatible server; `tokenizer` is the model's tokenizer folder."""
        return cls._for_model(HTTPBackend(base_url, model, timeout_s=timeout_s), str(tokenizer), model_vocab_size,
                              **kwargs)

    def new_edit(self, document: str, instruction: str = "", **kwargs) -> ServedEdit:
        """A :class:`ServedEdit` (keyword arguments: max_new_tokens, prompt, script,
        monotonic, temperature, seed, top_p, tag, forced_min_run, max_context, copy_mode, format,
        name)."""
        kwargs.setdefault("max_context", self.max_context)
        fmt = get_format(kwargs.pop("format", None) or self.format).name
        return ServedEdit(self.grammar_for(fmt), self.encoder, document, instruction, format=fmt, **kwargs)

    def _edits(self, jobs: Sequence[tuple[str, str] | dict], kwargs: dict) -> list[ServedEdit]:
        return [self.new_edit(**job, **kwargs) if isinstance(job, dict) else self.new_edit(*job, **kwargs)
                for job in jobs]

    def _backend(self, asynchronous: bool):
        is_async = hasattr(self.backend, "channel")
        if is_async != asynchronous:
            raise TypeError(f"this editor's backend is {'an async' if is_async else 'a blocking'} one: use "
                            f"{'astream/aedit/aedit_many' if is_async else 'stream/edit/edit_many'}")
        return self.backend

    # -- blocking backends (LLM, HTTP) ---------------------------------------------------------
    def stream(self, document: str, instruction: str = "", **kwargs) -> Iterator[EditEvent]:
        """One edit's events as its ops resolve; the last carries the result."""
        for _, event in stream_edits(self._backend(False), [self.new_edit(document, instruction, **kwargs)]):
            yield event

    def edit(self, document: str, instruction: str = "", **kwargs) -> EditResult:
        return run_edits(self._backend(False), [self.new_edit(document, instruction, **kwargs)])[0]

    def edit_many(self, jobs: Sequence[tuple[str, str] | dict], **kwargs) -> list[EditResult]:
        """Many edits at once (the engine batches them): (document, instruction) pairs or
        dicts of :meth:`new_edit` arguments."""
        return run_edits(self._backend(False), self._edits(jobs, kwargs))

    # -- AsyncLLM, on its event loop ------------------------------------------------------------
    async def astream(self, document: str, instruction: str = "", **kwargs) -> AsyncIterator[EditEvent]:
        """:meth:`stream` on the event loop."""
        async for _, event in astream_edits(self._backend(True), [self.new_edit(document, instruction, **kwargs)]):
            yield event

    async def aedit(self, document: str, instruction: str = "", **kwargs) -> EditResult:
        """:meth:`edit` on the event loop; many of them may run at once (``asyncio.gather``)."""
        return (await arun_edits(self._backend(True), [self.new_edit(document, instruction, **kwargs)]))[0]

    async def aedit_many(self, jobs: Sequence[tuple[str, str] | dict], **kwargs) -> list[EditResult]:
        """:meth:`edit_many` on the event loop."""
        return await arun_edits(self._backend(True), self._edits(jobs, kwargs))

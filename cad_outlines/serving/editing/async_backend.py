"""An in-process vLLM ``AsyncLLM`` as a backend: Copy-as-Decode edits and constrained
generation on one event loop.

Start the engine with our processor and prefix caching::

    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=..., enable_prefix_caching=True,
                                                       logits_processors=[CadLogitsProcessor]))
    editor = ServedEditor.from_async_llm(engine)
    results = await asyncio.gather(editor.aedit(doc1, "..."), editor.aedit(doc2, "..."))

Every edit loop (:func:`~.edit_run.astream_edits`) opens a channel whose streamed outputs
come back through its queue, so any number of edits run concurrently on the loop and vLLM
batches their requests: a :class:`~.session_channel.SessionChannel` (vLLM >= 0.32: each
edit is ONE ``AsyncLLM.generate`` request with streaming input; copies and forced runs
are appended to it) or a :class:`Channel` (each segment of the edit is its own request).
:meth:`AsyncLLMBackend.generate` is plain constrained generation
(a grammar by name or text, or vLLM's ``structured_outputs``), its grammar compiled by the
:class:`~..constraints.grammar_gate.GrammarGate`
before the request is admitted.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

from .backends import sampling_params, update_from_output
from .edit_run import ALL, Update
from ..constraints.grammar_gate import GrammarGate
from ..constraints.request import ConstraintRequest, GrammarSpec, RequestError
from ..constraints.request_fields import constraint_of_fields
from .served_edit import Segment
from .session_channel import SessionChannel, supports_sessions

__all__ = ["AsyncLLMBackend", "Channel"]


class Channel:
    """The requests of one edit loop on an ``AsyncLLM``: ``submit`` starts a request,
    ``await get()`` gives the next :class:`Update` of any of them, ``await close()``
    aborts those still running."""

    def __init__(self, engine):
        self.engine = engine
        self.updates: asyncio.Queue[Update] = asyncio.Queue()
        self.tasks: dict[str, asyncio.Task] = {}

    def submit(self, request_id: str, segment: Segment) -> None:
        self.tasks[request_id] = asyncio.get_running_loop().create_task(self._run(request_id, segment))

    async def _run(self, request_id: str, segment: Segment) -> None:
        from vllm.v1.engine.exceptions import EngineDeadError

        put = self.updates.put_nowait
        try:
            async for out in self.engine.generate({"prompt_token_ids": segment.prompt_ids}, sampling_params(segment),
                                                  request_id):
                put(update_from_output(out, request_id))
        except asyncio.CancelledError:
            raise  # close(): generate() aborts the request in the engine
        except EngineDeadError as e:  # every request in flight is lost
            put(Update(ALL, [], True, error=f"engine died: {type(e).__name__}: {e}"))
        except Exception as e:  # a refused request, an engine error for this one
            put(Update(request_id, [], True, error=f"{type(e).__name__}: {e}"))
        finally:
            self.tasks.pop(request_id, None)

    async def get(self) -> Update:
        return await self.updates.get()

    async def close(self) -> None:
        tasks = list(self.tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class AsyncLLMBackend:
    """A ``vllm.v1.engine.async_llm.AsyncLLM`` started with
    ``logits_processors=[CadLogitsProcessor]`` and ``enable_prefix_caching=True``."""

    def __init__(self, engine, gate: GrammarGate | None = None, *, one_request: bool | None = None):
        """`one_request`: run each edit as ONE engine request (vLLM's streaming-input
        sessions, :class:`~.session_channel.SessionChannel`); None (default): where the
        engine supports it, else a request per op. True on an engine without it raises
        :class:`RequestError`."""
        self.engine = engine
        self.gate = gate or GrammarGate.for_model_config(engine.model_config)
        supported = supports_sessions(engine)
        if one_request and not supported:
            raise RequestError("this engine takes no streaming input (vLLM >= 0.32 AsyncLLM): one request per edit "
                               "is not available; use one_request=False")
        self.one_request = supported if one_request is None else one_request

    def channel(self) -> Channel | SessionChannel:
        """A channel for one edit loop: one request per edit where :attr:`one_request`."""
        return SessionChannel(self.engine) if self.one_request else Channel(self.engine)

    async def generate(self, prompt: str | list[int], *, grammar: str | None = None, grammar_text: str | None = None,
                       start: str | None = None, request_id: str | None = None, tag: str | None = None,
                       **sampling) -> AsyncIterator:
        """``AsyncLLM.generate`` under a grammar (a shipped name, or Lark text) or vLLM's
        ``structured_outputs=`` (a ``StructuredOutputsParams`` or its dict: JSON Schema, regex, choice,
        Lark grammar; :mod:`~..constraints.request_fields`), yielding vLLM ``RequestOutput`` s;
        `sampling`: the other ``SamplingParams`` fields. The request waits for its grammar's compile (on
        a worker process, see :class:`GrammarGate`) before it is admitted; the engine's other requests go
        on meanwhile. Raises :class:`RequestError` for a grammar that does not compile."""
        from vllm import SamplingParams

        structured = sampling.pop("structured_outputs", None)
        if sum(x is not None for x in (grammar, grammar_text, structured)) != 1:
            raise RequestError("give grammar (a shipped name), grammar_text or structured_outputs, exactly one")
        fields = constraint_of_fields(structured_outputs=structured) if structured is not None else None
        if structured is not None and fields is None:
            raise RequestError("structured_outputs asks for no constraint (give json, regex, choice or grammar)")
        spec = fields.spec if fields is not None else GrammarSpec(name=grammar, text=grammar_text, start=start)
        try:
            await self.gate.ready(spec)
        except RequestError as e:
            raise e if fields is None else fields.refusal(e) from None
        params = SamplingParams(**sampling, extra_args=ConstraintRequest(grammar=spec, tag=tag).to_extra_args())
        source = {"prompt": prompt} if isinstance(prompt, str) else {"prompt_token_ids": list(prompt)}
        async for out in self.engine.generate(source, params, request_id or f"cad-{uuid.uuid4().hex}"):
            yield out

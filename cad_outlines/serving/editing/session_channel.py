"""One engine request per Copy-as-Decode edit on an ``AsyncLLM``: vLLM's streaming-input
sessions.

vLLM 0.32's ``AsyncLLM.generate`` takes an async generator of ``StreamingInput`` s as its
prompt (``vllm/v1/engine/async_llm.py``, ``_add_streaming_input_request``): every chunk is
added to the SAME request (``resumable=True``). When a turn stops (EOS, max_tokens) the
scheduler keeps the request and its KV blocks (``_handle_stopped_request``: status
``WAITING_FOR_STREAMING_REQ``), drops the last sampled token (it was never computed) and
keeps every other sampled token as input; the next chunk's tokens are appended and
prefilled from the computed frontier, with no prefix-cache lookup and no block tail
recomputed (``_update_request_as_session``; ``schedule``: a waiting request with
``num_computed_tokens > 0`` resumes there). The model runner re-adds the request to the
batch with the chunk's ``SamplingParams`` (``_update_streaming_request``), so the logits
processor sees the next segment's ``cad_*`` arguments and resumes the edit's matcher from
its session store.

:class:`SessionChannel` maps the edit loop's segments (:mod:`.edit_run`) onto that: the
first segment of an edit opens its request, each later one appends what the client added
since (copied lines, forced runs), and the end of the edit closes the input stream, which
ends the request. The channel checks that every segment's prompt extends exactly what the
engine holds (the chunks sent and the sampled tokens but each turn's last), so a client
and engine that disagree fail loudly instead of decoding from a wrong context.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from .backends import sampling_params
from .edit_run import ALL, Update
from .served_edit import Segment, SegmentOutcome

__all__ = ["EngineSessionBackend", "SessionChannel", "SessionTokens", "supports_sessions"]


def supports_sessions(engine) -> bool:
    """Whether `engine` takes streaming input: vLLM >= 0.32 has
    ``vllm.engine.protocol.StreamingInput``; an ``AsyncLLM`` takes an async generator of them
    as ``generate``'s prompt, and an ``LLMEngine`` (``LLM.llm_engine``) the same resumable
    requests through its input/output processors (what ``AsyncLLM`` does inside)."""
    try:
        from vllm.engine.protocol import StreamingInput  # noqa: F401
        from vllm.v1.engine.async_llm import AsyncLLM
        from vllm.v1.engine.llm_engine import LLMEngine
    except ImportError:
        return False
    if isinstance(engine, AsyncLLM):
        return hasattr(AsyncLLM, "_add_streaming_input_request")
    return isinstance(engine, LLMEngine) and all(
        hasattr(engine, a) for a in ("input_processor", "output_processor", "engine_core"))


@dataclass
class SessionTokens:
    """What the engine holds of one edit's request, to turn a segment's whole prompt into
    the chunk to append: the chunks sent and every sampled token but each turn's last."""

    held: list[int] = field(default_factory=list)  # the engine's sequence after the last turn (and chunk)
    turn: list[int] = field(default_factory=list)  # output tokens of the turn in flight
    turns: int = 0

    def chunk(self, prompt: list[int]) -> list[int]:
        """The tokens `prompt` adds to what the engine holds (recorded as sent). Raises
        ValueError if it does not extend it, or adds nothing."""
        held = self.held
        if prompt[: len(held)] != held:
            raise ValueError("the prompt does not extend what the engine holds")
        if len(prompt) == len(held):
            raise ValueError("the prompt adds nothing")
        chunk = prompt[len(held):]
        held.extend(chunk)
        return chunk

    def output(self, ids: list[int], finish_reason: str | None) -> bool:
        """New output tokens; True when they end a turn (the engine then keeps all of the
        turn's tokens but the last, which it never computed)."""
        self.turn.extend(ids)
        if finish_reason is None:
            return False
        self.turns += 1
        self.held.extend(self.turn[:-1])
        self.turn = []
        return True


@dataclass
class _Session:
    """One edit's live request: its input queue, what the engine holds, the turn in flight."""

    key: str
    inputs: asyncio.Queue = field(default_factory=asyncio.Queue)
    tokens: SessionTokens = field(default_factory=SessionTokens)
    rid: str = ""  # the edit loop's id of the segment in flight
    task: asyncio.Task | None = None
    closed: bool = False


class SessionChannel:
    """The edits of one edit loop on an ``AsyncLLM``, ONE engine request per edit.

    ``submit(rid, segment)`` opens the edit's request (its first segment) or appends the new
    tokens of the segment's prompt to it; ``await get()`` gives the next :class:`Update`;
    ``finish(session)`` ends an edit's request; ``await close()`` aborts those still live.
    A segment's end is the end of a turn (the output's ``finish_reason``), not of the request."""

    one_request = True

    def __init__(self, engine):
        self.engine = engine
        self.updates: asyncio.Queue[Update] = asyncio.Queue()
        self.sessions: dict[str, _Session] = {}
        self._ending: set[asyncio.Task] = set()  # requests of finished edits, winding down in the engine

    def submit(self, request_id: str, segment: Segment) -> None:
        from vllm.engine.protocol import StreamingInput
        from vllm.inputs.engine import tokens_input

        key = segment.extra_args.get("cad_session")
        if not key:
            raise ValueError("a segment for one request per edit carries its edit's cad_session")
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = _Session(key)
        try:
            if session.closed:
                raise ValueError("its request is over")
            chunk = session.tokens.chunk(list(segment.prompt_ids))
            params = sampling_params(segment)
        except ValueError as e:  # a prompt that does not extend the request, parameters vLLM refuses
            self.updates.put_nowait(Update(request_id, [], True, error=f"edit {key}: cannot append: {e}"))
            return
        session.rid = request_id
        session.inputs.put_nowait(StreamingInput(tokens_input(chunk), params))
        if session.task is None:
            session.task = asyncio.get_running_loop().create_task(self._run(session, segment))

    async def _inputs(self, session: _Session) -> AsyncIterator:
        while True:
            item = await session.inputs.get()
            if item is None:
                return
            yield item

    async def _run(self, session: _Session, first: Segment) -> None:
        from vllm.v1.engine.exceptions import EngineDeadError

        put = self.updates.put_nowait
        try:
            async for out in self.engine.generate(self._inputs(session), sampling_params(first), session.key):
                c = out.outputs[0]
                ids = list(c.token_ids)
                if session.tokens.output(ids, c.finish_reason):  # a turn is over; the request goes on
                    cached = out.num_cached_tokens if session.tokens.turns == 1 else 0  # only the first turn looks
                    put(Update(session.rid, ids, True, SegmentOutcome(c.finish_reason, cached)))
                elif ids:
                    put(Update(session.rid, ids))
        except asyncio.CancelledError:
            raise  # close(): generate() aborts the request in the engine
        except EngineDeadError as e:  # every request in flight is lost
            put(Update(ALL, [], True, error=f"engine died: {type(e).__name__}: {e}"))
        except Exception as e:  # a refused chunk, an engine error for this request
            put(Update(session.rid, [], True, error=f"{type(e).__name__}: {e}"))
        finally:
            session.closed = True

    def finish(self, session_key: str) -> None:
        """The edit is over: close its input stream, which ends its request in the engine."""
        session = self.sessions.pop(session_key, None)
        if session is not None and not session.closed:
            session.inputs.put_nowait(None)
            if session.task is not None:
                self._ending.add(session.task)
                session.task.add_done_callback(self._ending.discard)

    async def get(self) -> Update:
        return await self.updates.get()

    async def close(self) -> None:
        """Abort every request still live (an edit left early, a failed run); wait for the
        ended ones to wind down."""
        tasks = [s.task for s in self.sessions.values() if s.task is not None and not s.task.done()]
        for t in tasks:
            t.cancel()
        self.sessions.clear()
        # the finished edits' requests end as the engine reads their closed input streams
        await asyncio.gather(*tasks, *self._ending, return_exceptions=True)


class EngineSessionBackend:
    """A blocking in-process engine (``vllm.LLM`` or its ``LLMEngine``), ONE request per
    edit: the same resumable requests ``AsyncLLM`` makes of a streaming input (its
    ``_add_streaming_input_request``), added through the engine's input processor, output
    processor and engine core, and stepped here (``submit``, ``poll``, ``finish``)."""

    one_request = True

    def __init__(self, llm):
        self.engine = getattr(llm, "llm_engine", llm)
        self.sessions: dict[str, tuple[str, SessionTokens, list[str]]] = {}  # key -> (engine id, tokens, [rid])
        self.pending: list[Update] = []

    def _add(self, engine_id: str, key: str, tokens: list[int], params, resumable: bool) -> None:
        from vllm.inputs.engine import tokens_input

        e = self.engine
        req = e.input_processor.process_inputs(engine_id, tokens_input(tokens), params,
                                               supported_tasks=e.get_supported_tasks(), resumable=resumable)
        req.external_req_id = key  # outputs come back under the edit's session key
        e.output_processor.add_request(req, None, None, 0)
        e.engine_core.add_request(req)

    def submit(self, request_id: str, segment: Segment) -> None:
        import uuid

        key = segment.extra_args.get("cad_session")
        if not key:
            raise ValueError("a segment for one request per edit carries its edit's cad_session")
        if key not in self.sessions:
            self.sessions[key] = (f"{key}-{uuid.uuid4().hex[:8]}", SessionTokens(), [request_id])
        engine_id, tokens, rid = self.sessions[key]
        rid[0] = request_id
        try:
            chunk = tokens.chunk(list(segment.prompt_ids))
            self._add(engine_id, key, chunk, sampling_params(segment), True)
        except Exception as e:  # a refused chunk
            self.pending.append(Update(request_id, [], True, error=f"edit {key}: {type(e).__name__}: {e}"))

    def poll(self) -> list[Update]:
        if self.pending:
            out, self.pending = self.pending, []
            return out
        try:
            outputs = self.engine.step()
        except Exception as e:  # EngineDeadError and friends: every request in flight is lost
            return [Update(ALL, [], True, error=f"engine failed: {type(e).__name__}: {e}")]
        updates = []
        for o in outputs:
            got = self.sessions.get(o.request_id)
            if got is None:
                continue
            _, tokens, rid = got
            c = o.outputs[0]
            ids = list(c.token_ids)
            if tokens.output(ids, c.finish_reason):
                cached = o.num_cached_tokens if tokens.turns == 1 else 0
                updates.append(Update(rid[0], ids, True, SegmentOutcome(c.finish_reason, cached)))
            elif ids:
                updates.append(Update(rid[0], ids))
        return updates

    def finish(self, session_key: str) -> None:
        """The edit is over: the empty final request that ends a streaming-input session."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        got = self.sessions.pop(session_key, None)
        if got is not None:
            self._add(got[0], session_key, [0], SamplingParams(max_tokens=1, output_kind=RequestOutputKind.DELTA),
                      False)

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

__all__ = ["SessionChannel", "supports_sessions"]


def supports_sessions(engine) -> bool:
    """Whether `engine` (an ``AsyncLLM`` or other ``EngineClient``) takes streaming input:
    vLLM >= 0.32 has ``vllm.engine.protocol.StreamingInput`` and ``AsyncLLM`` takes an
    async generator of them as ``generate``'s prompt."""
    try:
        from vllm.engine.protocol import StreamingInput  # noqa: F401
        from vllm.v1.engine.async_llm import AsyncLLM
    except ImportError:
        return False
    return isinstance(engine, AsyncLLM) and hasattr(AsyncLLM, "_add_streaming_input_request")


@dataclass
class _Session:
    """One edit's live request: its input queue, what the engine holds, the turn in flight."""

    key: str
    inputs: asyncio.Queue = field(default_factory=asyncio.Queue)
    held: list[int] = field(default_factory=list)  # the engine's sequence after the last turn (and chunk)
    turn: list[int] = field(default_factory=list)  # output tokens of the turn in flight
    rid: str = ""  # the edit loop's id of the segment in flight
    turns: int = 0
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
        prompt = list(segment.prompt_ids)
        if session is None:
            session = self.sessions[key] = _Session(key)
            chunk = prompt
        else:
            held = session.held
            if session.closed or prompt[: len(held)] != held or len(prompt) == len(held):
                why = ("its request is over" if session.closed else
                       "the prompt adds nothing" if prompt[: len(held)] == held else
                       "the prompt does not extend what the engine holds")
                self.updates.put_nowait(Update(request_id, [], True, error=f"edit {key}: cannot append: {why}"))
                return
            chunk = prompt[len(held):]
        session.rid = request_id
        session.held.extend(chunk)
        session.inputs.put_nowait(StreamingInput(tokens_input(chunk), sampling_params(segment)))
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
                session.turn.extend(ids)
                if c.finish_reason is None:
                    if ids:
                        put(Update(session.rid, ids))
                    continue
                # the turn is over: the engine keeps what it sampled but the last token (never computed)
                cached = out.num_cached_tokens if session.turns == 0 else 0
                session.turns += 1
                session.held.extend(session.turn[:-1])
                session.turn = []
                put(Update(session.rid, ids, True, SegmentOutcome(c.finish_reason, cached)))
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
        await asyncio.gather(*tasks, return_exceptions=True)

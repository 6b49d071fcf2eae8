"""Many Copy-as-Decode edits at once over one engine: the bookkeeping, and its two loops.

:class:`EditRun` keeps one request in flight per edit and says what to send next and
which events came back (no I/O). The loops around it only move requests and updates:

- :func:`stream_edits` / :func:`run_edits` for a blocking backend (``submit`` and
  ``poll``: :class:`~.backends.EngineBackend`, :class:`~.backends.HTTPBackend`);
- :func:`astream_edits` / :func:`arun_edits` on an event loop, for a backend that opens
  channels (``channel()`` with ``submit``, ``async get`` and ``async close``:
  :class:`~.async_backend.AsyncLLMBackend`); every call has its own channel, so any number
  of them run concurrently on one loop.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ...decoding.results import EditEvent, EditResult
from .served_edit import Segment, SegmentOutcome, ServedEdit, ServingError

__all__ = ["EditRun", "Step", "Update", "arun_edits", "astream_edits", "run_edits", "stream_edits"]

ALL = "*"  # an Update for this request id concerns every request in flight (the engine died)


@dataclass(frozen=True)
class Update:
    """Progress of one request: new output tokens; at its end the outcome (finish reason,
    prompt tokens found in the prefix cache) or the error that ended it."""

    request_id: str
    token_ids: list[int]
    finished: bool = False
    outcome: SegmentOutcome | None = None  # how it ended, when it ended without error
    error: str | None = None  # the engine/server failed for this request (ALL: for every one)


@dataclass
class Step:
    """What one update (or the start) leads to: requests to send, events to hand out, and
    the sessions (edits) that are over (an engine that keeps one request per edit ends it)."""

    send: list[tuple[str, Segment]] = field(default_factory=list)
    events: list[tuple[ServedEdit, EditEvent]] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)


_ids = itertools.count()


class EditRun:
    """Edits driven concurrently, one request in flight each (no I/O).

    ``start()`` and then ``handle(update)`` for each update return a :class:`Step`; an
    edit's last event carries its :class:`EditResult`. A failed request raises
    :class:`ServingError` with the first failing edit's partial result (all of them in
    :attr:`ServingError.partials`)."""

    def __init__(self, edits: Iterable[ServedEdit]):
        self.edits = list(edits)
        self.active: dict[str, ServedEdit] = {}

    @property
    def running(self) -> bool:
        return bool(self.active)

    def start(self) -> Step:
        step = Step()
        for edit in self.edits:
            self._next(edit, step)
        return step

    def handle(self, update: Update) -> Step:
        step = Step()
        if update.error is not None:
            failed = list(self.active.values()) if update.request_id == ALL else [self.active.get(update.request_id)]
            failed = [e for e in failed if e is not None]
            err = failed[0].fail(update.error) if failed else ServingError(update.error)
            err.partials = [e.result(partial=True) for e in failed]
            raise err
        edit = self.active.get(update.request_id)
        if edit is None:
            return step
        step.events.extend((edit, ev) for ev in edit.on_tokens(update.token_ids))
        if update.finished:
            del self.active[update.request_id]
            step.events.extend((edit, ev) for ev in edit.on_segment_end(update.outcome))
            self._next(edit, step)
        return step

    def _next(self, edit: ServedEdit, step: Step) -> None:
        """Queue the edit's next request, or its final event when it is over."""
        seg = edit.next_segment()
        if seg is None:
            step.ended.append(edit.session)
            step.events.append((edit, EditEvent(result=edit.result(), kind="end")))
            return
        rid = f"{edit.session}-{next(_ids)}"
        self.active[rid] = edit
        step.send.append((rid, seg))


def _engine_path(target, edits: list[ServedEdit]) -> None:
    """Tell the edits whether `target` (a backend or channel) keeps one request per edit
    (its ``one_request`` attribute: True where the engine supports appending input to a
    live request)."""
    one = bool(getattr(target, "one_request", False))
    for edit in edits:
        edit.use_one_request(one)


def _finish(target, step: Step) -> None:
    """End the engine requests of the edits that are over (one request per edit)."""
    finish = getattr(target, "finish", None)
    if finish is not None:
        for session in step.ended:
            finish(session)


def stream_edits(backend, edits: Iterable[ServedEdit]) -> Iterator[tuple[ServedEdit, EditEvent]]:
    """Run `edits` concurrently on a blocking `backend`, yielding (edit, event) as ops
    resolve (see :class:`EditRun`)."""
    run = EditRun(edits)
    _engine_path(backend, run.edits)

    def apply(step: Step) -> list[tuple[ServedEdit, EditEvent]]:
        _finish(backend, step)
        for rid, seg in step.send:
            backend.submit(rid, seg)
        return step.events

    yield from apply(run.start())
    while run.running:
        for update in backend.poll():
            yield from apply(run.handle(update))


async def astream_edits(backend, edits: Iterable[ServedEdit]) -> AsyncIterator[tuple[ServedEdit, EditEvent]]:
    """Run `edits` concurrently on an async `backend` (one channel of its own), yielding
    (edit, event) as ops resolve; leaving early aborts the requests still in flight."""
    run = EditRun(edits)
    channel = backend.channel()
    _engine_path(channel, run.edits)
    try:
        step = run.start()
        while True:
            _finish(channel, step)
            for rid, seg in step.send:
                channel.submit(rid, seg)
            for item in step.events:
                yield item
            if not run.running:
                return
            step = run.handle(await channel.get())
    finally:
        await channel.close()


class _Results:
    """Results of a run, by edit, in the order given; each event passed to `on_event`."""

    def __init__(self, edits: list[ServedEdit], on_event: Callable[[ServedEdit, EditEvent], None] | None):
        self.edits, self.on_event = edits, on_event
        self.by_edit: dict[int, EditResult] = {}

    def add(self, edit: ServedEdit, event: EditEvent) -> None:
        if self.on_event is not None:
            self.on_event(edit, event)
        if event.result is not None:
            self.by_edit[id(edit)] = event.result

    def ordered(self) -> list[EditResult]:
        return [self.by_edit[id(e)] for e in self.edits]


def run_edits(backend, edits: Iterable[ServedEdit],
              on_event: Callable[[ServedEdit, EditEvent], None] | None = None) -> list[EditResult]:
    """Run `edits` concurrently to the end; their results, in order."""
    results = _Results(list(edits), on_event)
    for edit, event in stream_edits(backend, results.edits):
        results.add(edit, event)
    return results.ordered()


async def arun_edits(backend, edits: Iterable[ServedEdit],
                     on_event: Callable[[ServedEdit, EditEvent], None] | None = None) -> list[EditResult]:
    """:func:`run_edits` on an event loop."""
    results = _Results(list(edits), on_event)
    async for edit, event in astream_edits(backend, results.edits):
        results.add(edit, event)
    return results.ordered()

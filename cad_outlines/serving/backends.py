"""Engines a :class:`ServedEdit` runs on, and the driver that runs many edits at once.

A backend takes requests (:class:`Segment`) and reports progress as
:class:`Update` s: new output tokens, and at the end the finish reason and the prompt
tokens found in the prefix cache. :func:`run_edits` keeps one request in flight per edit,
sends the edit's next request the moment one ends, and streams events.

- :class:`EngineBackend`: an in-process ``vllm.LLM`` (its ``LLMEngine``), stepped here.
- :class:`HTTPBackend`: an OpenAI-compatible vLLM server (``/v1/completions`` with
  token-id prompts, ``vllm_xargs``, streamed token ids); one thread per request in flight.
"""

from __future__ import annotations

import itertools
import json
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ..generators.copy_decode import EditEvent, EditResult
from .served_edit import Segment, SegmentOutcome, ServedEdit, ServingError

__all__ = ["Update", "EngineBackend", "HTTPBackend", "run_edits", "stream_edits"]


@dataclass(frozen=True)
class Update:
    request_id: str
    token_ids: list[int]
    finished: bool = False
    outcome: SegmentOutcome | None = None
    error: str | None = None  # the engine/server failed for this request


class EngineBackend:
    """An in-process engine: a ``vllm.LLM`` (or its ``LLMEngine``) started with
    ``logits_processors=[CadLogitsProcessor]`` and ``enable_prefix_caching=True``."""

    def __init__(self, llm):
        self.engine = getattr(llm, "llm_engine", llm)

    def submit(self, request_id: str, segment: Segment) -> None:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(max_tokens=segment.max_tokens, temperature=segment.temperature, seed=segment.seed,
                                stop_token_ids=list(segment.stop_token_ids), extra_args=segment.extra_args,
                                output_kind=RequestOutputKind.DELTA, detokenize=False)
        self.engine.add_request(request_id, {"prompt_token_ids": segment.prompt_ids}, params)

    def poll(self) -> list[Update]:
        out = []
        try:
            outputs = self.engine.step()
        except Exception as e:  # EngineDeadError and friends: every request in flight is lost
            return [Update("*", [], True, error=f"engine failed: {type(e).__name__}: {e}")]
        for o in outputs:
            c = o.outputs[0]
            outcome = SegmentOutcome(c.finish_reason, o.num_cached_tokens) if o.finished else None
            out.append(Update(o.request_id, list(c.token_ids), o.finished, outcome))
        return out


class HTTPBackend:
    """An OpenAI-compatible vLLM server on `base_url` (e.g. ``http://127.0.0.1:8000``),
    started with ``--logits-processors cad_outlines.serving.vllm_processor:CadLogitsProcessor``,
    ``--enable-prefix-caching`` and ``--enable-prompt-tokens-details`` (for the cached
    token counts)."""

    def __init__(self, base_url: str, model: str, *, timeout_s: float = 600.0):
        self.base_url, self.model, self.timeout_s = base_url.rstrip("/"), model, timeout_s
        self._updates: queue.Queue[Update] = queue.Queue()
        self._threads: dict[str, threading.Thread] = {}

    def payload(self, segment: Segment) -> dict:
        body = {"model": self.model, "prompt": segment.prompt_ids, "max_tokens": segment.max_tokens,
                "temperature": segment.temperature, "stop_token_ids": list(segment.stop_token_ids),
                "vllm_xargs": segment.extra_args, "stream": True, "return_token_ids": True,
                "stream_options": {"include_usage": True}, "skip_special_tokens": False}
        if segment.seed is not None:
            body["seed"] = segment.seed
        return body

    def submit(self, request_id: str, segment: Segment) -> None:
        t = threading.Thread(target=self._run, args=(request_id, self.payload(segment)), daemon=True)
        self._threads[request_id] = t
        t.start()

    def _run(self, request_id: str, body: dict) -> None:
        put = self._updates.put
        finish, cached = None, None
        try:
            req = urllib.request.Request(f"{self.base_url}/v1/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                for raw in resp:
                    line = raw.decode("utf-8").strip()
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if "error" in chunk:
                        raise ServingError(f"server error: {chunk['error']}")
                    for choice in chunk.get("choices") or []:
                        ids = choice.get("token_ids") or []
                        if ids:
                            put(Update(request_id, list(ids)))
                        if choice.get("finish_reason"):
                            finish = choice["finish_reason"]
                    usage = chunk.get("usage")
                    if usage:
                        details = usage.get("prompt_tokens_details") or {}
                        cached = details.get("cached_tokens", cached)
            if finish is None:
                raise ServingError("the server closed the stream before the request finished")
            put(Update(request_id, [], True, SegmentOutcome(finish, cached)))
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:2000]
            put(Update(request_id, [], True, error=f"HTTP {e.code}: {detail}"))
        except Exception as e:  # connection refused/reset, timeouts, a dead server
            put(Update(request_id, [], True, error=f"{type(e).__name__}: {e}"))
        finally:
            self._threads.pop(request_id, None)

    def poll(self) -> list[Update]:
        try:
            out = [self._updates.get(timeout=self.timeout_s)]
        except queue.Empty:
            return [Update("*", [], True, error=f"no word from the server in {self.timeout_s:.0f} s")]
        while True:
            try:
                out.append(self._updates.get_nowait())
            except queue.Empty:
                return out


_ids = itertools.count()


def stream_edits(backend, edits: Iterable[ServedEdit]) -> Iterator[tuple[ServedEdit, EditEvent]]:
    """Run `edits` concurrently on `backend`, yielding (edit, event) as ops resolve; an
    edit's last event carries its :class:`EditResult`. A failure of the engine raises
    :class:`ServingError` with the first failing edit's partial result (the others are
    in :attr:`ServingError.partials`)."""
    edits = list(edits)
    active: dict[str, ServedEdit] = {}

    def send(edit: ServedEdit) -> bool:
        seg = edit.next_segment()
        if seg is None:
            return False
        rid = f"{edit.session}-{next(_ids)}"
        active[rid] = edit
        backend.submit(rid, seg)
        return True

    for edit in edits:
        if not send(edit):
            yield edit, EditEvent(result=edit.result())
    while active:
        for upd in backend.poll():
            if upd.error is not None:
                failed = list(active.values()) if upd.request_id == "*" else [active.get(upd.request_id)]
                failed = [e for e in failed if e is not None]
                err = failed[0].fail(upd.error) if failed else ServingError(upd.error)
                err.partials = [e.result(partial=True) for e in failed]
                raise err
            edit = active.get(upd.request_id)
            if edit is None:
                continue
            for event in edit.on_tokens(upd.token_ids):
                yield edit, event
            if upd.finished:
                del active[upd.request_id]
                for event in edit.on_segment_end(upd.outcome):
                    yield edit, event
                if not send(edit):
                    yield edit, EditEvent(result=edit.result())


def run_edits(backend, edits: Iterable[ServedEdit],
              on_event: Callable[[ServedEdit, EditEvent], None] | None = None) -> list[EditResult]:
    """Run `edits` concurrently to the end; their results, in order."""
    edits = list(edits)
    results: dict[int, EditResult] = {}
    for edit, event in stream_edits(backend, edits):
        if on_event is not None:
            on_event(edit, event)
        if event.result is not None:
            results[id(edit)] = event.result
    return [results[id(e)] for e in edits]

"""Blocking engines a :class:`ServedEdit` runs on (the loop: :mod:`.edit_run`).

A backend takes requests (:class:`Segment`) and reports progress as
:class:`~.edit_run.Update` s: new output tokens, and at the end the finish reason and the
prompt tokens found in the prefix cache.

- :class:`EngineBackend`: an in-process ``vllm.LLM`` (its ``LLMEngine``), stepped here.
- :class:`HTTPBackend`: an OpenAI-compatible vLLM server (``/v1/completions`` with
  token-id prompts, ``vllm_xargs``, streamed token ids); one thread per request in flight.

(:class:`~.async_backend.AsyncLLMBackend` is the same for an ``AsyncLLM`` on an event loop.)
:func:`sampling_params` and :func:`update_from_output` are the one translation between a
:class:`Segment` and vLLM's own request and output objects, for the in-process engines.
"""

from __future__ import annotations

import json
import queue
import threading
import urllib.error
import urllib.request

from .edit_run import ALL, Update
from .served_edit import Segment, SegmentOutcome, ServingError

__all__ = ["EngineBackend", "HTTPBackend", "Update", "sampling_params", "update_from_output"]


def sampling_params(segment: Segment):
    """vLLM ``SamplingParams`` of a segment: streamed deltas of token ids, no detokenizing."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(max_tokens=segment.max_tokens, temperature=segment.temperature, seed=segment.seed,
                          top_p=segment.top_p, stop_token_ids=list(segment.stop_token_ids),
                          extra_args=segment.extra_args,
                          output_kind=RequestOutputKind.DELTA, detokenize=False)


def update_from_output(output, request_id: str | None = None) -> Update:
    """An :class:`Update` from a vLLM ``RequestOutput`` (delta kind), for `request_id`
    (default: the output's own)."""
    c = output.outputs[0]
    outcome = SegmentOutcome(c.finish_reason, output.num_cached_tokens) if output.finished else None
    return Update(request_id or output.request_id, list(c.token_ids), output.finished, outcome)


class EngineBackend:
    """An in-process engine: a ``vllm.LLM`` (or its ``LLMEngine``) started with
    ``logits_processors=[CadLogitsProcessor]`` and ``enable_prefix_caching=True``."""

    def __init__(self, llm):
        self.engine = getattr(llm, "llm_engine", llm)

    def submit(self, request_id: str, segment: Segment) -> None:
        self.engine.add_request(request_id, {"prompt_token_ids": segment.prompt_ids}, sampling_params(segment))

    def poll(self) -> list[Update]:
        try:
            outputs = self.engine.step()
        except Exception as e:  # EngineDeadError and friends: every request in flight is lost
            return [Update(ALL, [], True, error=f"engine failed: {type(e).__name__}: {e}")]
        return [update_from_output(o) for o in outputs]


class HTTPBackend:
    """An OpenAI-compatible vLLM server on `base_url` (e.g. ``http://127.0.0.1:8000``),
    started with ``--logits-processors cad_outlines.serving:CadLogitsProcessor``,
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
        if segment.top_p != 1.0:
            body["top_p"] = segment.top_p
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
            return [Update(ALL, [], True, error=f"no word from the server in {self.timeout_s:.0f} s")]
        while True:
            try:
                out.append(self._updates.get_nowait())
            except queue.Empty:
                return out

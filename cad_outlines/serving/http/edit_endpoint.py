"""``POST /v1/cad/edits``: Copy-as-Decode edits (or edits in another format) run inside the
OpenAI-compatible vLLM server.

The client sends a document and an instruction (and, optionally, ``format``: ``copy``, the
default, ``search_replace``, ``udiff``, ``apply_patch`` or ``str_replace``; ``max_tokens``,
``temperature``, ``top_p``, ``seed``, ``model``); the server runs the edit on its own
engine (one engine request per edit where the engine takes streaming input, see
:mod:`..editing.session_channel`) and streams NDJSON, one JSON object a line:

- ``{"event": "copy", "lines": [i, j], "text": ...}``: a copy op resolved, with the lines it copied;
- ``{"event": "gen_text", "text": ...}``: new text of the gen op being written;
- ``{"event": "gen", "text": ...}``: a gen op closed (its whole text);
- ``{"event": "hunk", "old": ..., "new": ...}``: a hunk of another format closed (the text it
  replaces and its new text; ``anchors``: apply_patch's ``@@`` lines);
- ``{"event": "end", "complete", "stop_reason", "program", "text", "diff", "stats"}``: the last line;
- ``{"event": "error", "message": ...}``: the edit failed after the stream began (the last line).

A bad request is answered before any streaming with a 4xx and one JSON error (OpenAI's
shape, ``{"error": {"message", "type", "code"}}``): a body over the size limit (413), not
UTF-8, not a JSON object, an unknown or ill-typed field, an unknown format, a missing document, a document
whose prompt leaves no room in the model's context (400). A client that disconnects
mid-edit aborts the edit's request in the engine.

Two ways onto a server: ``python -m cad_outlines.serving`` (vLLM's server with
this route; :mod:`.api_server`), or vLLM's endpoint-plugin hook for an installed package
(:class:`EditEndpointPlugin`, entry point ``vllm.endpoint_plugins: cad_edits``, loaded
only when ``VLLM_PLUGINS`` names it).
"""

import asyncio
import json
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ...decoding.results import EditEvent
from ...edits.formats import EDIT_FORMATS, StrReplace
from ...edits.program import Copy, Gen
from ...errors import RequestError
from ..limits import server_limits, serving_logger

__all__ = ["EDIT_ROUTE", "EditEndpointPlugin", "EditJob", "EditService", "edit_router", "parse_edit_body"]


EDIT_ROUTE = "/v1/cad/edits"
DEFAULT_MAX_TOKENS = 1024
FIELDS = ("document", "instruction", "model", "max_tokens", "temperature", "top_p", "seed", "format")


class EditRequestError(RequestError):
    """A bad ``/v1/cad/edits`` request: `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class EditJob:
    """A validated edit request."""

    document: str
    instruction: str
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    options: dict = field(default_factory=dict)  # more ServedEdit arguments (tests, studies)
    format: str = "copy"  # the edit format (cad_outlines.edits.formats)


def _number(body: dict, key: str, lo: float, hi: float, *, lo_open: bool = False) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise EditRequestError(f"{key} must be a number, not {value!r}")
    if value < lo or (lo_open and value == lo) or value > hi:
        raise EditRequestError(f"{key} must be in {'(' if lo_open else '['}{lo}, {hi}], not {value!r}")
    return float(value)


def _integer(body: dict, key: str, lo: int, hi: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise EditRequestError(f"{key} must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise EditRequestError(f"{key} must be in [{lo}, {hi}], not {value}")
    return value


def parse_edit_body(raw: bytes, *, served_models: tuple[str, ...] = ()) -> EditJob:
    """Validate a ``/v1/cad/edits`` body (bytes as received). Raises :class:`EditRequestError`
    with one line naming what is wrong."""
    cap = server_limits().max_edit_body_bytes
    if len(raw) > cap:
        raise EditRequestError(f"the body is {len(raw)} bytes; the limit is {cap}", 413)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise EditRequestError(f"the body is not UTF-8 (byte {e.start})") from None
    try:
        body = json.loads(text)
    except json.JSONDecodeError as e:
        raise EditRequestError(f"the body is not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(body, dict):
        raise EditRequestError(f"the body must be a JSON object, not {type(body).__name__}")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise EditRequestError(f"unknown field(s) {unknown}; known: {list(FIELDS)}")
    document, instruction = body.get("document"), body.get("instruction")
    if document is None:
        raise EditRequestError("document is missing (the text to edit, a string)")
    if not isinstance(document, str):
        raise EditRequestError(f"document must be a string, not {type(document).__name__}")
    if instruction is None:
        raise EditRequestError("instruction is missing (what to change, a string)")
    if not isinstance(instruction, str):
        raise EditRequestError(f"instruction must be a string, not {type(instruction).__name__}")
    for name, value in (("document", document), ("instruction", instruction)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from a \ud800 escape
            raise EditRequestError(f"{name} is not valid Unicode (a lone surrogate)") from None
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or (served_models and model not in served_models)):
        raise EditRequestError(f"model {model!r} is not served here; served: {list(served_models)}", 404)
    fmt = body.get("format", "copy")
    if fmt not in EDIT_FORMATS:
        shown = repr(fmt) if isinstance(fmt, str) and len(fmt) <= 40 else f"a {type(fmt).__name__}"
        raise EditRequestError(f"unknown format {shown}: use one of {', '.join(EDIT_FORMATS)}")
    job = EditJob(document, instruction)
    max_tokens = _integer(body, "max_tokens", 1, 2**31 - 1)
    temperature = _number(body, "temperature", 0.0, 2.0)  # vLLM's range
    top_p = _number(body, "top_p", 0.0, 1.0, lo_open=True)
    seed = _integer(body, "seed", -(2**63), 2**63 - 1)
    return EditJob(document, instruction, max_tokens if max_tokens is not None else job.max_tokens,
                   temperature if temperature is not None else job.temperature,
                   top_p if top_p is not None else job.top_p, seed, format=fmt)


def event_line(event: EditEvent) -> dict:
    """The NDJSON object of one edit event."""
    if event.result is not None:
        r = event.result
        s = r.stats
        stats = {k: getattr(s, k) for k in ("engine_path", "requests", "prompt_tokens", "prompt_tokens_sent",
                                           "cached_tokens", "steps", "computed_tokens", "generated_tokens",
                                           "copied_tokens", "fast_forwarded_tokens", "forced_runs") if hasattr(s, k)}
        stats["wall_s"] = round(s.wall_s, 4)
        return {"event": "end", "complete": r.complete, "stop_reason": r.stop_reason, "format": r.format,
                "program": r.program_text, "text": r.text, "diff": r.diff(), "stats": stats}
    if event.kind == "hunk":
        op = event.op
        if isinstance(op, StrReplace):
            return {"event": "hunk", "old": op.old_str, "new": op.new_str}
        return {"event": "hunk", "old": "".join(b + "\n" for b in op.old), "new": "".join(b + "\n" for b in op.new),
                "anchors": list(op.anchors)}
    if event.kind == "copy" and isinstance(event.op, Copy):
        return {"event": "copy", "lines": [event.op.start, event.op.end], "text": event.text}
    if event.kind == "gen" and isinstance(event.op, Gen):
        return {"event": "gen", "text": event.op.text}
    return {"event": event.kind or "gen_text", "text": event.text}


class EditService:
    """The route's state: a :class:`~..editing.editor.ServedEditor` on the server's own engine."""

    def __init__(self, engine_client, served_models: tuple[str, ...] = ()):
        from ..editing.editor import ServedEditor

        self.engine = engine_client
        self.editor = ServedEditor.from_async_llm(engine_client)  # compiles copy_edit (on-disk cache) once
        self.served_models = tuple(served_models)
        self.max_context = int(engine_client.model_config.max_model_len)

    @classmethod
    async def start(cls, engine_client, served_models: tuple[str, ...] = ()) -> "EditService":
        """Build it off the event loop (the tokenizer load and the copy_edit compile block)."""
        return await asyncio.to_thread(cls, engine_client, served_models)

    def prepare(self, job: EditJob):
        """The job's :class:`~..editing.served_edit.ServedEdit` (its prompt tokenized: call it off the
        event loop); :class:`EditRequestError` if the prompt leaves no room in the model's
        context for the program."""
        edit = self.editor.new_edit(job.document, job.instruction, max_new_tokens=job.max_tokens,
                                    temperature=job.temperature, top_p=job.top_p, seed=job.seed, format=job.format,
                                    **job.options)
        n = edit.stats.prompt_tokens
        if n + 2 > self.max_context:
            raise EditRequestError(f"the document is too long: its prompt is {n} tokens and the model's context is "
                                   f"{self.max_context} (max_model_len), leaving no room for the edit")
        return edit

    async def stream(self, edit) -> AsyncIterator[bytes]:
        """The edit's NDJSON lines. Leaving early (a client disconnect) aborts its request."""
        from ..editing.edit_run import astream_edits

        done = False
        try:
            async for _, event in astream_edits(self.editor.backend, [edit]):
                yield (json.dumps(event_line(event)) + "\n").encode("utf-8")
            done = True
        except Exception as e:  # the stream has begun: the error is its last line (ServingError: the engine's word)
            done = True
            serving_logger().error("cad_outlines edit failed: %s: %s", type(e).__name__, e)
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            yield (json.dumps({"event": "error", "message": message}) + "\n").encode("utf-8")
        finally:
            if not done:  # cancelled or closed mid-stream: the client left, and astream_edits aborted the requests
                serving_logger().info("cad_outlines edit left before its end (the client disconnected): its requests "
                                      "are aborted")


def _error(message: str, status: int):
    from fastapi.responses import JSONResponse

    kind = {413: "RequestTooLarge", 404: "NotFoundError"}.get(status, "BadRequestError")
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


async def _read_body(request) -> bytes:
    """The body, refused (413) as soon as it passes the limit (declared or read)."""
    cap = server_limits().max_edit_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise EditRequestError(f"the body is {declared} bytes; the limit is {cap}", 413)
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > cap:
            raise EditRequestError(f"the body is over the limit of {cap} bytes", 413)
    return bytes(data)


def edit_router():
    """The FastAPI router with ``POST /v1/cad/edits`` (its state: ``app.state.cad_edits``,
    an :class:`EditService`)."""
    from fastapi import APIRouter, Request
    from fastapi.responses import StreamingResponse

    router = APIRouter()

    @router.post(EDIT_ROUTE)
    async def cad_edit(request: Request):  # no `from __future__ import annotations` here: FastAPI reads this type
        service = getattr(request.app.state, "cad_edits", None)
        if service is None:
            return _error("the edit service is not running on this server (no engine)", 503)
        try:
            job = parse_edit_body(await _read_body(request), served_models=service.served_models)
            edit = await asyncio.to_thread(service.prepare, job)  # tokenizing a long document: off the event loop
        except EditRequestError as e:
            return _error(str(e), e.status)
        return StreamingResponse(service.stream(edit), media_type="application/x-ndjson")

    return router


def _served_models(args) -> tuple[str, ...]:
    names = getattr(args, "served_model_name", None) or [getattr(args, "model", None)]
    return tuple(str(n) for n in names if n)


class EditEndpointPlugin:
    """vLLM's endpoint-plugin contract (``vllm/plugins/endpoint_plugins/interface.py``): adds
    ``POST /v1/cad/edits`` to the API server; its state is an :class:`EditService` on the
    server's engine client."""

    name = "cad_edits"
    required_tasks = ("generate",)

    def attach_router(self, app) -> None:
        server_limits()  # read now: a bad or misspelled CAD_OUTLINES_ variable stops the server at start
        app.include_router(edit_router())

    async def init_state(self, engine_client, state, args) -> None:
        if engine_client is None:
            return  # the render-only server has no engine: the route answers 503
        state.cad_edits = await EditService.start(engine_client, _served_models(args))

"""ASGI middleware for vLLM's OpenAI-compatible server: the one gate every request passes.

Start the server with ``--middleware cad_outlines.serving.GrammarAdmissionMiddleware``
(next to ``--logits-processors ...CadLogitsProcessor``). It wraps the whole application, so
every HTTP request of every route -- ``/v1/completions``, ``/v1/chat/completions``,
``/v1/responses``, ``/v1/messages``, ``/invocations``, whatever a later vLLM or another module
adds -- goes through it, whatever its path:

1. The body is read with a size limit (``max_body_bytes``: 413 above it), in linear time.
2. A chat or completion request (``/v1/chat/completions``, ``/v1/completions``, ``/invocations``) that
   asks for structured output the usual way -- ``response_format`` (``json_schema``, ``json_object``) or
   ``structured_outputs`` (``json``, ``regex``, ``choice``, ``grammar`` as Lark, ``json_object``; vLLM's
   removed ``guided_*`` fields too) -- is
   rewritten: those fields are taken out of the body and their constraint goes into its ``vllm_xargs``
   (:func:`~..constraints.request_fields.rewrite_body`), so our engine decodes it and vLLM's own
   structured-output backend never sees it; what cannot be honoured is answered 400 naming the field.
3. Every JSON object in it that carries ``cad_*`` keys (``vllm_xargs``, a ``sampling_params``'
   ``extra_args``, or such an object sent as a JSON string) is checked: types, ranges,
   lengths, token ids within the real vocabulary (:func:`~..constraints.admission.admit`). A bad
   argument is answered 400 naming the key. A body that is not JSON but mentions ``cad_`` is
   refused: these arguments are read from JSON only.
4. A grammar is held for the server's :class:`~..constraints.grammar_gate.GrammarGate` (a worker process
   checks and compiles it under the compile limits; the event loop stays free, so streams of
   other requests keep flowing); one that does not compile, or runs past a limit, is answered
   400 with the reason.
5. The request is passed on (rewritten as in 2., or unchanged).

As a second line, the processor's ``validate_params`` (run by vLLM for every request on this
process) refuses a grammar this gate has not seen: nothing can reach the engine around it.
"""

from __future__ import annotations

import asyncio
import json
import re

from ...errors import CadOutlinesError
from ..constraints.admission import admit, check_limits, check_schema_text, require_gate
from ..constraints.grammar_gate import GrammarGate
from ..constraints.request_fields import REWRITTEN_PATHS, FieldConstraint, rewrite_body
from ..limits import ServerLimits, server_limits, serving_logger
from ..constraints.request import ConstraintRequest, GrammarSpec, RequestError

__all__ = ["GrammarAdmissionMiddleware", "cad_arguments_of_body", "grammar_of_body"]

log = serving_logger()

_MENTIONS = re.compile(rb"cad(_|%5f)|vllm_xargs|extra_args", re.IGNORECASE)
_FIELDS = re.compile(rb"response_format|structured_outputs|guided_|\\u00[0-7][0-9a-fA-F]")  # or with \u escapes
_STRING_KEYS = ("vllm_xargs", "extra_args")  # vLLM parses these from a JSON string too (form fields)
_PARSE_ON_THREAD = 256 * 1024  # larger bodies are parsed off the event loop


class BodyTooLarge(RequestError):
    """A request body over ``max_body_bytes`` (HTTP 413)."""


def cad_arguments_of_body(body: bytes) -> list[dict]:
    """Every JSON object of a request body that carries ``cad_*`` keys (its ``cad_*`` items),
    wherever it sits; objects sent as a JSON string under ``vllm_xargs`` / ``extra_args`` are
    read too. Raises :class:`RequestError` for a body that mentions ``cad_`` but is not JSON,
    and for a ``cad_*`` key given twice in one object."""
    if b"cad" not in body and b"\\u" not in body and b"%" not in body:  # no cad_ key, even escaped
        return []
    found: list[dict] = []
    strings: list[str] = []

    def hook(pairs):
        cad = [(k, v) for k, v in pairs if k.startswith("cad_")]
        if cad:
            keys = [k for k, _ in cad]
            if len(set(keys)) != len(keys):
                twice = sorted({k for k in keys if keys.count(k) > 1})
                raise RequestError(f"{twice[0]} is given twice in one object")
            found.append(dict(cad))
        strings.extend(v for k, v in pairs if k in _STRING_KEYS and isinstance(v, str) and "cad" in v)
        return dict(pairs)

    def parse(data) -> None:
        try:
            json.loads(data, object_pairs_hook=hook)
        except RequestError:
            raise
        except (ValueError, RecursionError, UnicodeDecodeError):
            if _MENTIONS.search(data if isinstance(data, bytes) else data.encode("utf-8", "replace")):
                raise RequestError("cad_outlines arguments (cad_*) are read from a JSON body only, and this body "
                                   "is not valid JSON") from None

    parse(body)
    for _ in range(4):  # a JSON string holding JSON holding ... (bounded)
        if not strings:
            break
        todo, strings[:] = list(strings), []
        for s in todo:
            parse(s)
    return found


def grammar_of_body(body: bytes) -> GrammarSpec | None:
    """The grammar a request body asks for (the first one); None when it asks for none or
    is malformed."""
    try:
        for args in cad_arguments_of_body(body):
            request = ConstraintRequest.from_extra_args(args)
            if request is not None and request.grammar is not None:
                return request.grammar
    except RequestError:
        return None
    return None


class GrammarAdmissionMiddleware:
    """Checks every request's ``cad_*`` arguments and holds it until its grammar is
    compiled (see the module doc). `limits`: the server's (default: from the environment)."""

    def __init__(self, app, limits: ServerLimits | None = None):
        self.app = app
        self._limits = limits
        require_gate()  # validate_params in this process refuses what did not come through here

    @property
    def limits(self) -> ServerLimits:
        return self._limits or server_limits()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._warm_before_startup_completes(scope, send))
            return
        if scope["type"] != "http":  # websockets carry no sampling params in vLLM's text routes
            await self.app(scope, receive, send)
            return
        try:
            body = await self._read_body(scope, receive)
        except BodyTooLarge as e:
            await _error(send, 413, str(e))
            return
        if body is None:  # the client went away
            return
        try:
            fields, rewritten = None, await self._rewrite(scope, body)
            if rewritten is not None:
                body, fields = rewritten
                scope = _with_length(scope, len(body))
            await self._admit(scope, body, fields)
        except CadOutlinesError as e:  # RequestError, ResourceLimitError...: this request's fault or a limit
            log.info("cad_outlines: %s %s refused: %s", scope.get("method"), scope.get("path"), e)
            await _error(send, 400, str(e))
            return
        await self.app(scope, _replay(body, receive), send)

    def _warm_before_startup_completes(self, scope, send):
        """A lifespan `send` that builds the gate's vocabulary (tokenizer load: seconds of
        Python holding the GIL) before the server reports it has started, not on the first
        request while the event loop serves others."""

        async def warm_send(message):
            if message.get("type") == "lifespan.startup.complete":
                try:
                    gate = self._gate(scope)
                    await gate.awarm()
                except Exception as e:  # noqa: BLE001 - no model config here (another app): warm on first use
                    log.info("cad_outlines: the admission gate's vocabulary is built on first use (%s: %s)",
                             type(e).__name__, e)
            await send(message)

        return warm_send

    async def _read_body(self, scope, receive) -> bytes | None:
        cap = self.limits.max_body_bytes
        for name, value in scope.get("headers") or ():
            if name.lower() == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > cap:
                    raise BodyTooLarge(f"request body of {declared} bytes is over max_body_bytes = {cap} (the server "
                                       "operator sets it with CAD_OUTLINES_MAX_BODY_BYTES)")
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                raise BodyTooLarge(f"request body over max_body_bytes = {cap} bytes (the server operator sets it "
                                   "with CAD_OUTLINES_MAX_BODY_BYTES)")
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)

    async def _rewrite(self, scope, body: bytes) -> tuple[bytes, FieldConstraint] | None:
        """(the rewritten body, the constraint of its fields) for a chat or completion request whose
        ``response_format`` / ``structured_outputs`` ask for one; None for any other request."""
        path, root = scope.get("path") or "", scope.get("root_path") or ""
        path = path[len(root):] if root and path.startswith(root) else path
        if path.rstrip("/") not in REWRITTEN_PATHS or not _FIELDS.search(body):
            return None

        def rewrite():
            try:
                data = json.loads(body)
            except RecursionError:
                raise RequestError("the request body nests too deeply to be read (response_format / "
                                   "structured_outputs are read from a JSON body)") from None
            except (ValueError, UnicodeDecodeError):
                return None  # not JSON: vLLM answers it
            if not isinstance(data, dict):
                return None
            fields = rewrite_body(data, limits=self.limits)
            return None if fields is None else (json.dumps(data).encode(), fields)

        return await self._off_loop(len(body), rewrite)

    async def _admit(self, scope, body: bytes, fields: FieldConstraint | None = None) -> None:
        found = await self._off_loop(len(body), cad_arguments_of_body, body)
        if not found:
            return
        requests = [admit(args, limits=self.limits) for args in found]  # types, lengths: no vocabulary needed
        requests = [r for r in requests if r is not None]
        if not requests:
            return
        for request in requests:  # a schema sent as cad_json_schema: JSON and nesting (a field's: checked already)
            schema = request.grammar.schema if request.grammar is not None else None
            if schema is not None and (fields is None or fields.spec != request.grammar):
                await self._off_loop(len(schema), check_schema_text, schema, "cad_json_schema", self.limits)
        gate = self._gate(scope)
        vocab_size = await gate.avocab_size()  # the tokenizer's, loaded once (off the event loop)
        for request in requests:
            check_limits(request, vocab_size=vocab_size, limits=self.limits)
        for request in requests:
            if request is not None and request.grammar is not None:
                try:
                    await gate.ready(request.grammar)
                except CadOutlinesError as e:  # a grammar a request field asked for: the 400 names the field
                    raise fields.refusal(e) if fields is not None and fields.spec == request.grammar else e

    @staticmethod
    async def _off_loop(size: int, fn, *args):
        """``fn(*args)``: on a thread when `size` (the bytes it parses) is large, else here."""
        if size > _PARSE_ON_THREAD:
            return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
        return fn(*args)

    @staticmethod
    def _gate(scope) -> GrammarGate:
        return GrammarGate.for_model_config(scope["app"].state.vllm_config.model_config)


def _with_length(scope, length: int):
    """`scope` with its Content-Length header set to `length` (the body was rewritten)."""
    headers = [(k, v) for k, v in scope.get("headers") or () if k.lower() != b"content-length"]
    return {**scope, "headers": [*headers, (b"content-length", str(length).encode())]}


def _replay(body: bytes, receive):
    """A `receive` that gives the body read already, then what the client sends next."""
    sent = False

    async def again():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


async def _error(send, status: int, message: str) -> None:
    """vLLM's error body (OpenAI style)."""
    kind = "BadRequestError" if status == 400 else "RequestEntityTooLarge"
    data = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": status}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})

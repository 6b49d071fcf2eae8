"""ASGI middleware for vLLM's OpenAI-compatible server: a request whose grammar is not
compiled yet waits for it here, and the engine goes on with the others.

Start the server with ``--middleware cad_outlines.serving.http_admission.GrammarAdmissionMiddleware``
(next to ``--logits-processors ...CadLogitsProcessor``). For ``POST /v1/completions`` and
``/v1/chat/completions`` carrying ``cad_grammar`` / ``cad_grammar_text`` in ``vllm_xargs``,
the middleware reads the body, waits on the server's :class:`~.grammar_gate.GrammarGate`
(a worker process compiles the grammar into the on-disk cache; the event loop stays
free, so streams of other requests keep flowing) and then passes the request on
unchanged. A grammar that does not compile is answered 400 with the reason, as vLLM
answers a bad request. Anything else passes straight through.
"""

from __future__ import annotations

import json

from .grammar_gate import GrammarGate
from .request import ConstraintRequest, GrammarSpec, RequestError

__all__ = ["GrammarAdmissionMiddleware", "grammar_of_body"]

PATHS = frozenset({"/v1/completions", "/v1/chat/completions"})


def grammar_of_body(body: bytes) -> GrammarSpec | None:
    """The grammar a request body asks for in ``vllm_xargs``; None when it asks for none
    or is malformed (vLLM's own checks answer those)."""
    try:
        xargs = json.loads(body).get("vllm_xargs")
        request = ConstraintRequest.from_extra_args(xargs if isinstance(xargs, dict) else None)
    except (ValueError, AttributeError, RequestError):
        return None
    return request.grammar if request is not None else None


class GrammarAdmissionMiddleware:
    """Holds a completion request until its grammar is compiled (see the module doc)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") not in PATHS:
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        spec = grammar_of_body(body)
        if spec is not None:
            try:
                await self._gate(scope).ready(spec)
            except RequestError as e:
                await _bad_request(send, str(e))
                return
        await self.app(scope, _replay(body, receive), send)

    @staticmethod
    def _gate(scope) -> GrammarGate:
        return GrammarGate.for_model_config(scope["app"].state.vllm_config.model_config)


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


async def _bad_request(send, message: str) -> None:
    """vLLM's error body (OpenAI style) with status 400."""
    data = json.dumps({"error": {"message": message, "type": "BadRequestError", "param": None,
                                 "code": 400}}).encode()
    await send({"type": "http.response.start", "status": 400,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})

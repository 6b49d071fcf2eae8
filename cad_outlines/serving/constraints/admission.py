"""Admission checks of a request's ``cad_*`` arguments against the server's limits.

:meth:`ConstraintRequest.from_extra_args` checks types and combinations; :func:`admit`
adds what depends on the server: lengths and ranges (:class:`~..limits.ServerLimits`) and
token ids within the real vocabulary (the tokenizer's ids, not the model's padded logits
width). The HTTP middleware runs it on every request body that carries ``cad_*``
arguments; the logits processor's ``validate_params`` and its per-request state run it again
as a second line, so a request that reaches the engine some other way cannot make it do
unbounded work or index out of range.
"""

from __future__ import annotations

import json
import sys

from ...errors import RequestError, ResourceLimitError
from ...limits import env_name
from ..limits import ServerLimits, server_limits
from .request import ConstraintRequest

__all__ = ["AdmissionError", "admission_vocab_size", "admit", "check_limits", "check_schema_text", "gate_required",
           "note_vocab_size", "require_gate", "text_bytes"]

_VOCAB_SIZES: set[int] = set()
_GATE_REQUIRED: list[bool] = [False]


def require_gate() -> None:
    """From now on this process's ``validate_params`` refuses a grammar that no gate has seen
    (the HTTP middleware calls it: on a server, every request passes the middleware first)."""
    _GATE_REQUIRED[0] = True


def gate_required() -> bool:
    return _GATE_REQUIRED[0]


def note_vocab_size(n: int) -> None:
    """Record the real vocabulary size of a model this process serves (the gate does, when it
    builds the vocabulary), for :func:`admission_vocab_size`."""
    _VOCAB_SIZES.add(int(n))


def admission_vocab_size() -> int | None:
    """The real vocabulary size for checks that have no model config at hand (vLLM's
    ``validate_params``): the one recorded in this process, None if none or several."""
    return next(iter(_VOCAB_SIZES)) if len(_VOCAB_SIZES) == 1 else None


class AdmissionError(RequestError, ResourceLimitError):
    """A request argument over a server limit (HTTP 400): names the key, the limit and its
    environment variable."""

    def __init__(self, key: str, limit: str, value, maximum):
        ResourceLimitError.__init__(self, limit, value, maximum, what=key,
                                    how=f"the server operator sets it with {env_name(limit)}")


def admit(extra: dict | None, *, vocab_size: int | None = None,
          limits: ServerLimits | None = None) -> ConstraintRequest | None:
    """The request's constraint (None without ``cad_*`` keys), checked against `limits` and,
    when given, a vocabulary of `vocab_size` real token ids. Raises :class:`RequestError`
    (or :class:`AdmissionError`, both HTTP 400) naming the bad key."""
    request = ConstraintRequest.from_extra_args(extra)
    if request is not None:
        check_limits(request, vocab_size=vocab_size, limits=limits)
    return request


def check_limits(request: ConstraintRequest, *, vocab_size: int | None = None,
                 limits: ServerLimits | None = None) -> None:
    """Raise for an argument of `request` over `limits` or a token id outside ``[0, vocab_size)``."""
    limits = limits or server_limits()
    grammar, edit = request.grammar, request.edit
    strings = {"cad_tag": request.tag}
    if grammar is not None:
        strings.update(cad_grammar=grammar.name, cad_start=grammar.start, cad_whitespace=grammar.whitespace,
                       cad_property_order=grammar.property_order)
        if grammar.text is not None:
            size = text_bytes(grammar.text, limits.max_grammar_text_bytes)
            if size > limits.max_grammar_text_bytes:
                raise AdmissionError("cad_grammar_text", "max_grammar_text_bytes", size, limits.max_grammar_text_bytes)
        if grammar.schema is not None:  # its size; its JSON and nesting are the frontend's (check_schema_text)
            size = text_bytes(grammar.schema, limits.max_schema_bytes)
            if size > limits.max_schema_bytes:
                raise AdmissionError("cad_json_schema", "max_schema_bytes", size, limits.max_schema_bytes)
    if edit is not None:
        strings["cad_session"] = edit.session
        if edit.n_lines > limits.max_n_lines:
            raise AdmissionError("cad_n_lines", "max_n_lines", edit.n_lines, limits.max_n_lines)
        if edit.stop_at_forced > limits.max_stop_at_forced:
            raise AdmissionError("cad_stop_at_forced", "max_stop_at_forced", edit.stop_at_forced,
                                 limits.max_stop_at_forced)
        if edit.document is not None:
            size = len(edit.document) if len(edit.document) * 4 <= limits.max_document_bytes else len(
                edit.document.encode("utf-8", "surrogatepass"))
            if size > limits.max_document_bytes:
                raise AdmissionError("cad_document", "max_document_bytes", size, limits.max_document_bytes)
    for key, value in strings.items():
        if value is not None and len(value) > limits.max_string_chars:
            raise AdmissionError(key, "max_string_chars", len(value), limits.max_string_chars)
    lists = {"cad_program_ids": edit.program_ids if edit is not None else (), "cad_script_ids": request.script_ids}
    for key, ids in lists.items():
        if not ids:
            continue
        if len(ids) > limits.max_ids:
            raise AdmissionError(key, "max_ids", len(ids), limits.max_ids)
        if vocab_size is not None:
            top = max(ids)
            if top >= vocab_size:
                raise RequestError(f"{key}: token id {top} is not in the vocabulary (ids 0..{vocab_size - 1})")


def text_bytes(text: str, cap: int) -> int:
    """The UTF-8 size of `text`, computed only where it may be over `cap` (a character is 1 to 4 bytes)."""
    return len(text) if len(text) * 4 <= cap else len(text.encode("utf-8", "surrogatepass"))


def check_schema_text(text: str, key: str, limits: ServerLimits | None = None):
    """The JSON Schema sent as `text` under `key` (a ``cad_json_schema`` or a request field), parsed:
    at most ``max_schema_bytes`` of UTF-8, valid JSON, a JSON object, objects and arrays nested at most
    ``max_schema_depth`` deep (the compile limit; checked without recursion). Raises :class:`AdmissionError` or
    :class:`RequestError` naming `key`. A parse and a walk (about 20 ms for a 1 MB schema): the frontend
    runs it once per request, off the event loop for a large one (:func:`check_limits` checks only the
    size, as the engine's second line does: the engine never parses a schema, it loads what a worker compiled)."""
    limits = limits or server_limits()
    size = text_bytes(text, limits.max_schema_bytes)
    if size > limits.max_schema_bytes:
        raise AdmissionError(key, "max_schema_bytes", size, limits.max_schema_bytes)
    try:
        schema = json.loads(text)
    except RecursionError:  # deeper than Python's own parser goes: far over any depth limit
        raise AdmissionError(key, "max_schema_depth", f"{sys.getrecursionlimit()}+",
                             limits.compile.max_schema_depth) from None
    except ValueError as e:
        raise RequestError(f"{key}: the JSON Schema is not valid JSON: {e}") from None
    check_schema_value(schema, key, limits)
    return schema


def check_schema_value(schema, key: str, limits: ServerLimits) -> None:
    """A parsed JSON Schema is an object nested at most ``max_schema_depth`` deep (the compile's own limit,
    checked here before the compile, naming the request's key: see :func:`check_schema_text`)."""
    if not isinstance(schema, dict):
        raise RequestError(f"{key}: a JSON Schema must be a JSON object, not {type(schema).__name__}")
    maximum = limits.compile.max_schema_depth
    level, depth = [schema], 1
    while level and maximum is not None:
        level = [c for node in level for c in (node.values() if isinstance(node, dict) else node)
                 if isinstance(c, (dict, list))]
        if level:
            depth += 1
            if depth > maximum:
                raise AdmissionError(key, "max_schema_depth", depth, maximum)

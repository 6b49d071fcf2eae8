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

from ...errors import RequestError, ResourceLimitError
from ...limits import env_name
from ..limits import ServerLimits, server_limits
from .request import ConstraintRequest

__all__ = ["AdmissionError", "admission_vocab_size", "admit", "check_limits", "gate_required", "note_vocab_size",
           "require_gate"]

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
        strings.update(cad_grammar=grammar.name, cad_start=grammar.start)
        if grammar.text is not None:
            size = len(grammar.text) if len(grammar.text) * 4 <= limits.max_grammar_text_bytes else len(
                grammar.text.encode("utf-8", "surrogatepass"))
            if size > limits.max_grammar_text_bytes:
                raise AdmissionError("cad_grammar_text", "max_grammar_text_bytes", size, limits.max_grammar_text_bytes)
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

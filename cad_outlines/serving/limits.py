"""The server's limits: what one request may ask and what one grammar compile may cost.

Every limit has a default and an environment variable (``CAD_OUTLINES_`` + the field name in
upper case, e.g. ``CAD_OUTLINES_COMPILE_TIMEOUT_S=30``: the package's one scheme,
:func:`cad_outlines.limits.read_env`), read when the server's middleware, gate or logits processor
first asks for them (:func:`server_limits`). :class:`ServerLimits` embeds the library's
:class:`~cad_outlines.limits.Limits` (``compile``: what a grammar compile may cost inside the
compiler, ``CAD_OUTLINES_MAX_GRAMMAR_BYTES``...), so one object and one environment describe a
server. docs/serving.md ("Limits and security") lists them all. A value that is not a positive
number, or a ``CAD_OUTLINES_MAX_*`` name that is no limit, is refused at start with a
:class:`~cad_outlines.errors.SettingError` naming the variable.

Request limits are checked at admission (:mod:`.admission`) and again, as a second line, by
the logits processor (a bad request there is masked to EOS, never raised inside the step).
Compile limits are enforced by the OS in the compile worker (``resource.setrlimit``:
address space, CPU seconds, file size) and by the gate (wall time: the worker is killed).
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, replace

from ..limits import DEFAULT_LIMITS, ENV_PREFIX, Limits, check_env_names, env_names, env_values, read_env

__all__ = ["ENV_PREFIX", "ServerLimits", "server_limits", "serving_logger", "set_server_limits"]

MiB = 2**20


@dataclass(frozen=True)
class ServerLimits:
    """Limits of one serving process (see the module doc); every field is an env var."""

    # -- requests ---------------------------------------------------------------------------------
    max_body_bytes: int = 32 * MiB  # an HTTP request body (413 above it)
    max_edit_body_bytes: int = 4 * MiB  # a POST /v1/cad/edits body (413 above it)
    max_ids: int = 32768  # cad_program_ids and cad_script_ids, each (replayed in the engine step)
    max_grammar_text_bytes: int = 256 * 1024  # cad_grammar_text (UTF-8), and a grammar a request field becomes
    max_schema_bytes: int = 1 * MiB  # a JSON Schema (cad_json_schema, response_format, structured_outputs.json)
    max_string_chars: int = 256  # cad_start, cad_session, cad_tag, cad_grammar
    max_n_lines: int = 10_000_000  # cad_n_lines
    max_stop_at_forced: int = 4096  # cad_stop_at_forced
    max_document_bytes: int = 4 * MiB  # cad_document (UTF-8): the document of a diff-style edit segment
    # -- grammar compiles (a worker process each) ---------------------------------------------------
    compile_workers: int = 2  # compiles at once
    compile_nice: int = 5  # the worker's nice increment (1-19): the engine first, yet the compile goes on
    max_pending_compiles: int = 32  # compiles running or waiting; more are refused (keep it well under 256)
    compile_timeout_s: float = 300.0  # wall time, then the worker is killed (the backstop: see compile_cpu_s)
    compile_cpu_s: int = 120  # RLIMIT_CPU of the worker: the measure of a grammar's cost, fair on a busy node
    compile_memory_bytes: int = 4096 * MiB  # RLIMIT_AS of the worker
    max_store_bytes: int = 512 * MiB  # RLIMIT_FSIZE of the worker: the largest file it may write
    refusal_ttl_s: float = 600.0  # a refused grammar is refused again without work for this long
    # -- what stays around --------------------------------------------------------------------------
    cache_max_bytes: int = 4096 * MiB  # the on-disk grammar cache, least recently used files out
    max_loaded_grammars: int = 32  # grammars held in memory per process, least recently used out
    # -- inside the compiler (the library's limits, CAD_OUTLINES_MAX_GRAMMAR_BYTES...) ------------------
    compile: Limits = DEFAULT_LIMITS

    @classmethod
    def from_env(cls, environ: dict | None = None) -> ServerLimits:
        """Defaults, overridden by ``CAD_OUTLINES_<FIELD>`` variables (the embedded compile limits'
        too); a bad value or an unknown ``CAD_OUTLINES_MAX_*`` name raises
        :class:`~cad_outlines.errors.SettingError` naming the variable."""
        environ = os.environ if environ is None else environ
        check_env_names(environ, env_names(cls))
        return read_env(cls, environ)

    def env(self) -> dict[str, str]:
        """These limits as environment variables (for a child process: :meth:`from_env` reads them back)."""
        return env_values(self)

    def replace(self, **changes) -> ServerLimits:
        """A copy with some limits changed."""
        return replace(self, **changes)


_LIMITS: ServerLimits | None = None


def server_limits() -> ServerLimits:
    """This process's limits (read from the environment once)."""
    global _LIMITS
    if _LIMITS is None:
        _LIMITS = ServerLimits.from_env()
    return _LIMITS


def set_server_limits(limits: ServerLimits | None) -> None:
    """Use `limits` in this process from now on (None: read the environment again)."""
    global _LIMITS
    _LIMITS = limits


def serving_logger() -> logging.Logger:
    """The logger of the serving layer: vLLM's (``vllm.cad_outlines.serving``), so an operator
    sees its lines wherever vLLM's own go; a plain logger of that name without vLLM."""
    name = "vllm.cad_outlines.serving"
    if "vllm" in sys.modules:
        try:
            from vllm.logger import init_logger

            return init_logger(name)
        except ImportError:  # pragma: no cover - a broken vLLM install
            pass
    return logging.getLogger(name)

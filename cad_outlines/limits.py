"""What one grammar compile may cost: sizes checked before the work they predict, and a wall-clock deadline
checked inside the long loops.

A grammar is untrusted input: a 31-byte regex can ask for a 400 MB store, a 5 MB literal for 20 GB of
memory. :class:`Limits` bounds each cost at the earliest point it is known (the grammar's bytes before it is
parsed, literals and terminal counts before any automaton, DFA states while determinising, lexer
configurations before the store is walked, store rows while it is built, the cache file before it is
written) and the whole compile in wall time. Exceeding one raises
:class:`~cad_outlines.errors.ResourceLimitError` naming the limit, the value and how to raise it.

The defaults are far above every real grammar we know (python.lark x Qwen2.5: 12 KB, 100 terminals, 35 s,
an 8.6 MiB cache file) so a library user never meets them by accident; a server passes tighter ones, and
enforces memory and CPU in the operating system as well (its compile workers run under ``setrlimit``).

This module imports only :mod:`cad_outlines.errors`, so every stage can read the active limits.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import ResourceLimitError

__all__ = ["Limits", "DEFAULT_LIMITS", "active_limits", "enforcing", "check_limit", "check_deadline"]


@dataclass(frozen=True)
class Limits:
    """Bounds on one grammar compile (``compile_grammar(..., limits=Limits(...))``); None: unbounded."""

    max_grammar_bytes: int | None = 1 << 20  # the grammar's text, UTF-8, before it is parsed
    max_literal_chars: int | None = 4096  # one terminal's string literal or regex source
    max_terminals: int | None = 2000  # terminals after %imports and inlining
    max_rules: int | None = 50_000  # BNF rules after EBNF expansion
    max_dfa_states: int | None = 10_000  # code-point DFA states of one terminal (minimising is superlinear)
    max_lexer_configs: int | None = 500_000  # lexer configurations (bounded by the byte automaton's states)
    max_store_rows: int | None = 50_000_000  # mask-store rows, summed over configurations
    max_cache_file_bytes: int | None = 2 << 30  # one compiled grammar's flat file
    max_compile_seconds: float | None = 900.0  # wall time of one compile, checked in its long loops

    @classmethod
    def from_env(cls, environ=None, base: Limits | None = None) -> Limits:
        """`base` (the defaults) with each limit overridden by ``CAD_OUTLINES_MAX_...`` where set (an operator's
        knob: ``CAD_OUTLINES_MAX_COMPILE_SECONDS=60``; ``none`` removes a limit). A bad value raises ValueError
        naming the variable."""
        import os

        environ = os.environ if environ is None else environ
        out = base if base is not None else cls()
        for f in dataclasses.fields(cls):
            var = f"CAD_OUTLINES_{f.name.upper()}"
            raw = environ.get(var)
            if raw is None or raw.strip() == "":
                continue
            if raw.strip().lower() == "none":
                out = dataclasses.replace(out, **{f.name: None})
                continue
            try:
                value = float(raw) if f.name == "max_compile_seconds" else int(raw)
            except ValueError:
                raise ValueError(f"{var}={raw!r}: not a number (or 'none')") from None
            if not value > 0 or value != value or value == float("inf"):
                raise ValueError(f"{var}={raw!r}: must be a positive finite number (or 'none')")
            out = dataclasses.replace(out, **{f.name: value})
        return out

    def replace(self, **changes) -> Limits:
        """A copy with some limits changed (``DEFAULT_LIMITS.replace(max_compile_seconds=30)``)."""
        return dataclasses.replace(self, **changes)


DEFAULT_LIMITS = Limits()


@dataclass
class _Active:
    limits: Limits
    deadline: float | None  # time.monotonic() value, or None
    started: float


_ACTIVE: contextvars.ContextVar[_Active | None] = contextvars.ContextVar("cad_outlines_limits", default=None)


def active_limits() -> Limits:
    """The limits of the compile running in this context (the defaults outside one)."""
    act = _ACTIVE.get()
    return act.limits if act is not None else DEFAULT_LIMITS


@contextlib.contextmanager
def enforcing(limits: Limits | None) -> Iterator[Limits]:
    """Run a compile under `limits` (None: the defaults): its deadline starts now. Nested calls keep the
    outer deadline when it is earlier."""
    limits = limits if limits is not None else DEFAULT_LIMITS
    now = time.monotonic()
    deadline = now + limits.max_compile_seconds if limits.max_compile_seconds is not None else None
    outer = _ACTIVE.get()
    if outer is not None and outer.deadline is not None and (deadline is None or outer.deadline < deadline):
        deadline, now = outer.deadline, outer.started
    token = _ACTIVE.set(_Active(limits, deadline, now))
    try:
        yield limits
    finally:
        _ACTIVE.reset(token)


def check_limit(name: str, value: int | float, what: str = "") -> None:
    """Raise :class:`ResourceLimitError` if `value` exceeds the active limit `name` (a :class:`Limits`
    field); `what` says what was measured (``"terminal NAME"``)."""
    maximum = getattr(active_limits(), name)
    if maximum is not None and value > maximum:
        raise ResourceLimitError(name, value, maximum, what=what, how=_how(name))


def check_deadline(where: str = "") -> None:
    """Raise :class:`ResourceLimitError` if the active compile has run past ``max_compile_seconds``.
    Cheap (one clock read): call it every few hundred iterations of a long loop."""
    act = _ACTIVE.get()
    if act is None or act.deadline is None:
        return
    now = time.monotonic()
    if now > act.deadline:
        raise ResourceLimitError("max_compile_seconds", round(now - act.started, 1), act.limits.max_compile_seconds,
                                 what=f"compile stopped{' in ' + where if where else ''}",
                                 how=_how("max_compile_seconds"))


def _how(name: str) -> str:
    return (f"raise it with compile_grammar(..., limits=Limits({name}=...)) (None: unbounded), "
            f"or on a server with CAD_OUTLINES_{name.upper()}")

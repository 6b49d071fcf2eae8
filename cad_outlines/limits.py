"""What one grammar compile may cost: sizes checked before the work they predict, and a wall-clock deadline
checked inside the long loops; and what one matcher's call may cost at decode time.

A grammar is untrusted input: a 31-byte regex can ask for a 400 MB store, a 5 MB literal for 20 GB of
memory. :class:`Limits` bounds each cost at the earliest point it is known (the grammar's bytes before it is
parsed, literals and terminal counts before any automaton, DFA states while determinising, lexer
configurations before the store is walked, store rows while it is built, the cache file before it is
written) and the whole compile in wall time. Exceeding one raises
:class:`~cad_outlines.errors.ResourceLimitError` naming the limit, the value and how to raise it.

Decode time is bounded the same way, in the native matcher itself: every mask, and every token of an advance or
a validate, may make at most ``max_reductions_per_token`` parser reductions, grow the parser stack to at most
``max_parser_stack_depth`` elements, and hold at most ``max_matcher_bytes`` (committed stacks, history, the
call's scratch). Exceeding one puts that matcher into a sticky error state (as llguidance's matchers): the
call and every later one raise :class:`~cad_outlines.errors.MatcherLimitError` (a ResourceLimitError), a mask
in a batch allows only EOS, and the other matchers go on. The grammars that would loop are refused when
compiled (``engine/frontend/parser_loops.py``); these limits stop whatever that check lets through.

The defaults are far above every real grammar we know (python.lark x Qwen2.5: 12 KB, 100 terminals, 35 s,
an 8.6 MiB cache file) so a library user never meets them by accident; a server passes tighter ones, and
enforces memory and CPU in the operating system as well (its compile workers run under ``setrlimit``).

Settings from the environment: one scheme for every limit of the package, read by :func:`read_env`. A limit
named ``field`` is the variable ``CAD_OUTLINES_<FIELD>`` (:func:`env_name`): :class:`Limits` here, and the
server's :class:`~cad_outlines.serving.limits.ServerLimits`, which embeds a :class:`Limits` (the one table:
docs/serving.md, "Limits and security"). A value is a positive number (or ``none`` where the limit may be
unbounded); anything else raises :class:`~cad_outlines.errors.SettingError` naming the variable.

This module imports only :mod:`cad_outlines.errors`, so every stage can read the active limits.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import MatcherLimitError, ResourceLimitError, SettingError

__all__ = ["Limits", "DEFAULT_LIMITS", "ENV_PREFIX", "MATCHER_LIMITS", "active_limits", "check_deadline",
           "check_env_names", "check_limit", "enforcing", "env_name", "env_names", "env_values", "matcher_limit_error",
           "read_env"]

ENV_PREFIX = "CAD_OUTLINES_"
_MAX_PREFIX = ENV_PREFIX + "MAX_"
# Variables of this scheme renamed before any release: a clear error instead of a silent no-op.
RENAMED = {"CAD_OUTLINES_EDIT_MAX_BODY_BYTES": "CAD_OUTLINES_MAX_EDIT_BODY_BYTES"}


def env_name(field: str) -> str:
    """The environment variable of the limit `field`: ``CAD_OUTLINES_`` + its name in upper case."""
    return ENV_PREFIX + field.upper()


def _settings(cls) -> Iterator[tuple[str, dataclasses.Field, str | None]]:
    """(field name, field, the name of the embedded limits dataclass holding it, or None) of every limit of
    `cls`, embedded limits dataclasses flattened (their fields are variables of their own)."""
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(f.default):
            for name, inner, _ in _settings(type(f.default)):
                yield name, inner, f.name
        else:
            yield f.name, f, None


def env_names(cls) -> list[str]:
    """The variables a limits dataclass reads (embedded ones included), in field order."""
    return [env_name(name) for name, _, _ in _settings(cls)]


def _annotation(f: dataclasses.Field) -> str:
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))


def _parse(var: str, raw: str, f: dataclasses.Field):
    """One variable's value for field `f`: a positive finite number (an int field takes an integer-valued
    one, ``1e9`` included), or None for ``none`` where the field may be None."""
    kind = _annotation(f)
    text = raw.strip()
    if text.lower() == "none":
        if "None" not in kind:
            raise SettingError(f"{var}={raw!r}: this limit cannot be removed ('none'); give a positive number")
        return None
    try:
        value = float(text)
    except ValueError:
        raise SettingError(f"{var}={raw!r}: not a number" + (" (or 'none')" if "None" in kind else "")) from None
    if not (value > 0 and value != float("inf")):
        raise SettingError(f"{var}={raw!r}: must be a positive finite number" + (" (or 'none')" if "None" in kind
                                                                                   else ""))
    if "float" in kind:
        return value
    try:
        return int(text)
    except ValueError:
        if not value.is_integer():
            raise SettingError(f"{var}={raw!r}: must be a whole number") from None
        return int(value)


def check_env_names(environ, known: list[str]) -> None:
    """Raise :class:`SettingError` for a ``CAD_OUTLINES_MAX_*`` variable in `environ` that is not one of
    `known` (a misspelled limit would otherwise be ignored), or for a renamed variable, naming the right one."""
    for var in environ:
        if var in RENAMED:
            raise SettingError(f"{var} is now {RENAMED[var]}")
        if var.startswith(_MAX_PREFIX) and var not in known:
            names = ", ".join(sorted(n for n in known if n.startswith(_MAX_PREFIX)))
            raise SettingError(f"{var} is not a limit; the CAD_OUTLINES_MAX_ limits are: {names}")


def read_env(cls, environ=None, base=None):
    """`base` (default: ``cls()``), a limits dataclass, with each limit overridden by its variable where
    `environ` (default: ``os.environ``) sets it (empty: not set). Limits of an embedded limits dataclass are
    read the same way, under their own names. A bad value raises :class:`SettingError` naming the variable."""
    import os

    environ = os.environ if environ is None else environ
    out = base if base is not None else cls()
    top: dict = {}
    inner: dict[str, dict] = {}
    for name, f, holder in _settings(cls):
        var = env_name(name)
        raw = environ.get(var)
        if raw is None or raw.strip() == "":
            continue
        (inner.setdefault(holder, {}) if holder else top)[name] = _parse(var, raw, f)
    for holder, changes in inner.items():
        top[holder] = dataclasses.replace(getattr(out, holder), **changes)
    return dataclasses.replace(out, **top) if top else out


def env_values(limits) -> dict[str, str]:
    """`limits` (a limits dataclass) as the variables that :func:`read_env` reads back to it (``none`` for an
    unbounded limit): for a child process."""
    out = {}
    for f in dataclasses.fields(limits):
        value = getattr(limits, f.name)
        if dataclasses.is_dataclass(value):
            out.update(env_values(value))
        else:
            out[env_name(f.name)] = "none" if value is None else repr(value)
    return out


@dataclass(frozen=True)
class Limits:
    """Bounds on one grammar compile (``compile_grammar(..., limits=Limits(...))``) and on every call of its
    matchers (the last three; ``Matcher(grammar, limits=...)``, by default the compile's); None: unbounded."""

    max_grammar_bytes: int | None = 1 << 20  # the grammar's text, UTF-8, before it is parsed
    max_literal_chars: int | None = 4096  # one terminal's string literal or regex source
    max_terminals: int | None = 2000  # terminals after %imports and inlining
    max_rules: int | None = 50_000  # BNF rules after EBNF expansion
    max_schema_depth: int | None = 256  # nesting of a JSON Schema document (objects and arrays in it)
    max_dfa_states: int | None = 10_000  # code-point DFA states of one terminal (minimising is superlinear)
    max_lexer_configs: int | None = 500_000  # lexer configurations (bounded by the byte automaton's states)
    max_store_rows: int | None = 50_000_000  # mask-store rows, summed over configurations
    max_cache_file_bytes: int | None = 2 << 30  # one compiled grammar's flat file
    max_compile_seconds: float | None = 900.0  # wall time of one compile, checked in its long loops
    max_reductions_per_token: int | None = 10_000_000  # parser reductions in one mask, or one token's advance
    max_parser_stack_depth: int | None = 1_000_000  # elements on one matcher's parser stack
    max_matcher_bytes: int | None = 512 << 20  # one matcher: committed stacks + history + one call's scratch

    @classmethod
    def from_env(cls, environ=None, base: Limits | None = None) -> Limits:
        """`base` (the defaults) with each limit overridden by ``CAD_OUTLINES_MAX_...`` where set (an operator's
        knob: ``CAD_OUTLINES_MAX_COMPILE_SECONDS=60``; ``none`` removes a limit), by :func:`read_env`. A bad
        value raises :class:`~cad_outlines.errors.SettingError` (a ValueError) naming the variable. Other
        variables are left alone: a server reads these with its own (and checks their names) in
        :meth:`~cad_outlines.serving.limits.ServerLimits.from_env`."""
        return read_env(cls, environ, base)

    def replace(self, **changes) -> Limits:
        """A copy with some limits changed (``DEFAULT_LIMITS.replace(max_compile_seconds=30)``)."""
        return dataclasses.replace(self, **changes)


DEFAULT_LIMITS = Limits()
# the fields the native matcher enforces, in the order its constructor takes them
MATCHER_LIMITS = ("max_reductions_per_token", "max_parser_stack_depth", "max_matcher_bytes")


def matcher_limit_error(limit: str, value: int, maximum: int, call: str) -> MatcherLimitError:
    """The error of a matcher that a decode-time limit stopped in `call` ("a mask", "an advance", ...);
    `value` -1: the system's memory ran out first."""
    what = f"the matcher stopped in {call}" + (" (the grammar's parser may loop)"
                                               if limit == "max_reductions_per_token" else "")
    err = MatcherLimitError(limit, value, maximum, what=what, how=_how(limit))
    if value < 0:
        own = f"its {limit} is {maximum}" if maximum >= 0 else f"its {limit} is unbounded"
        err.args = (f"{what}: the system ran out of memory ({own}); it refuses every later call",)
    return err


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
    if name in MATCHER_LIMITS:
        return (f"the matcher refuses every later call; raise it with Matcher(grammar, limits=Limits({name}=...)) "
                f"or compile_grammar(..., limits=...) (None: unbounded), or on a server with {env_name(name)}")
    return (f"raise it with compile_grammar(..., limits=Limits({name}=...)) (None: unbounded), "
            f"or on a server with {env_name(name)}")

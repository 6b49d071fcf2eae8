"""Every error cad_outlines raises on purpose, in one family.

``CadOutlinesError`` is the base; below it one class per kind of mistake, each also a subclass of the
built-in exception a caller would have caught before (``ValueError``, ``RuntimeError``, ``ImportError``),
so ``except ValueError`` keeps working:

- :class:`GrammarError`: a grammar that cannot be read or compiled (lark's syntax errors and bad regexes
  included), naming the file, line, and the rule or terminal at fault, and why;
  :class:`GrammarCompileError` is the engine's own kind of it (a terminal or rule we cannot compile);
  :class:`SchemaError` a JSON Schema keyword the JSON Schema front end cannot honour, with its JSON pointer.
- :class:`TokenError`: a token id that is invalid, out of range, or not allowed by the grammar here.
- :class:`ProgramError`: an edit program that does not parse (:class:`ProgramSyntaxError`), is cut off
  (:class:`IncompleteProgramError`), copies lines the document lacks (:class:`SpanError`) or, in another
  edit format, has a hunk that does not match exactly once (:class:`MatchError`);
  :class:`InexpressibleEditError`: an edit a format cannot write.
- :class:`DocumentError`: a document file that is not UTF-8 text, or an edit that would empty it.
- :class:`ServingError`: the serving layer (a malformed request: :class:`RequestError`; an engine failure).
- :class:`ParameterError`: a parameter out of its range (``Sampling(temperature=-1)``).
- :class:`ResourceLimitError`: an input that would cost more than a configured limit (time, memory,
  size), naming the limit, the value and how to raise it; :class:`MatcherLimitError` is a matcher's
  decode-time limit (it then refuses every later call).
- :class:`SettingError`: a ``CAD_OUTLINES_*`` environment variable with a bad value, or a limit's name
  misspelled, naming the variable.

This module imports nothing from the package, so every stage can import it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CadOutlinesError", "GrammarError", "GrammarCompileError", "SchemaError", "LexError", "TokenError",
    "InvalidTokenError", "ProgramError", "ProgramSyntaxError", "IncompleteProgramError", "SpanError", "DocumentError",
    "ServingError", "RequestError", "ResourceLimitError", "MatcherLimitError", "ContextLengthError", "CacheFileError",
    "UnsupportedPythonError", "ParameterError", "SettingError",
]


class CadOutlinesError(Exception):
    """Base of every error the library raises on purpose."""


# --- grammars --------------------------------------------------------------------------------------------

class GrammarError(CadOutlinesError, ValueError):
    """A grammar mistake: the message names where (file, line, rule or terminal) and why.

    ``file``, ``line``, ``column`` and ``name`` are None where unknown; ``kind`` is "terminal", "rule" or
    "grammar"."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 column: int | None = None, name: str | None = None, kind: str = "grammar"):
        self.file, self.line, self.column, self.name, self.kind = file, line, column, name, kind
        self.reason = message
        where = ""
        if file is not None:
            where = str(file) + (f":{line}" if line is not None else "") + (
                f":{column}" if line is not None and column is not None else "")
        elif line is not None:
            where = f"line {line}" + (f", column {column}" if column is not None else "")
        parts = [p for p in (where, f"{kind} {name}" if name else "") if p]
        super().__init__((": ".join(parts) + ": " if parts else "") + message)

    def in_file(self, file: str) -> GrammarError:
        """The same error, its message prefixed with the grammar's file name (once); returns self."""
        if self.file is None and file:
            self.file = file
            self.args = (f"{file}: {self.args[0]}" if self.args else file, *self.args[1:])
        return self


class GrammarCompileError(GrammarError):
    """A grammar that cannot be compiled or would decode nothing, naming the terminal (or rule,
    ``kind="rule"``) at fault, the construct and why."""

    def __init__(self, terminal: str, message: str, construct: str | None = None, position: int | None = None,
                 *, kind: str = "terminal"):
        self.terminal = terminal  # the terminal's or rule's name
        self.construct = construct
        self.position = position
        super().__init__(message, name=terminal, kind=kind)


class SchemaError(GrammarError):
    """A JSON Schema that cannot be compiled exactly: one line naming the keyword, its JSON pointer
    (``""`` is the root) and why. Nothing is dropped silently: a keyword that would change the
    language and cannot be honoured is refused this way."""

    def __init__(self, keyword: str, pointer: str, message: str):
        self.keyword, self.pointer = keyword, pointer
        super().__init__(f"at {pointer or '/'!r}: {message}", name=keyword, kind="keyword")


class LexError(CadOutlinesError, ValueError):
    """No terminal matches at `pos` (a character offset) of a text scanned with a grammar's terminals."""

    def __init__(self, pos: int, text: str):
        self.pos = pos
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"no terminal matches at line {line} column {col}: {text[pos:pos + 20]!r}")


# --- tokens ----------------------------------------------------------------------------------------------

class TokenError(CadOutlinesError, ValueError):
    """A token id that is not an integer id of the vocabulary (out of range, a float, a bool, a string)."""


class InvalidTokenError(TokenError):
    """A token id the grammar does not allow here; the matcher is unchanged."""


# --- edit programs ---------------------------------------------------------------------------------------

class ProgramError(CadOutlinesError, ValueError):
    """An edit program that cannot be resolved against its document."""


class ProgramSyntaxError(ProgramError):
    """Malformed program text; `pos` is the 0-based offset, `line`/`column` 1-based."""

    def __init__(self, message: str, text: str, pos: int):
        self.pos = pos
        self.line = text.count("\n", 0, pos) + 1
        self.column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        snippet = text[pos : pos + 20]
        super().__init__(f"{message} at line {self.line}, column {self.column} (offset {pos}): {snippet!r}")


class SpanError(ProgramError):
    """A copy op names lines the document does not have."""

    def __init__(self, op: Any, n_lines: int):
        self.op, self.n_lines = op, n_lines
        if op.start > op.end:
            why = "is inverted (start > end)"
        elif op.start < 1:
            why = "starts before line 1"
        else:
            why = f"ends after the last line ({n_lines})"
        super().__init__(f'copy lines="{op.start}-{op.end}" {why}: the document has {n_lines} lines')


class IncompleteProgramError(ProgramError):
    """The program was cut off before ``</program>`` (or, in another edit format, inside a hunk or
    before its end marker). ``program`` is what it holds (its ``trailing`` text is the op left unfinished); ``partial_text`` is the text it resolves
    to, or None where no document was given (parsing alone)."""

    def __init__(self, program: Any, partial_text: str | None = None, *, detail: str = "",
                 expected: str = "</program>", unit: str = "op"):
        self.program, self.partial_text = program, partial_text
        n = len(program)
        super().__init__(
            f"program ended before {expected}{detail} (cut off after {n} {unit}{'s' * (n != 1)}); "
            "pass partial=True to get what it has"
        )


class DocumentError(CadOutlinesError, ValueError):
    """A document file that cannot be read as text (naming the file), or a write of an edit that would lose
    the document (every line deleted) without the caller saying so."""


class MatchError(ProgramError):
    """A hunk of a diff-style edit (search/replace, udiff, apply_patch, str_replace) whose old lines do
    not occur exactly once after the previous hunk, or an anchor that does not occur: the message names
    the hunk (`hunk_index`, 1-based), its lines and where they were looked for."""

    def __init__(self, message: str, hunk_index: int):
        self.hunk_index = hunk_index
        super().__init__(message)


class InexpressibleEditError(CadOutlinesError, ValueError):
    """An oracle writer asked for an edit its format cannot write (a change of the final newline in a
    line format, a changed line that is one of the format's own markers, an edit of an empty document
    in str_replace)."""


# --- generation and serving ------------------------------------------------------------------------------

class ContextLengthError(CadOutlinesError, ValueError):
    """The prompt leaves no room in the model's context (``max_position_embeddings``)."""


class ServingError(CadOutlinesError, RuntimeError):
    """The serving layer failed; :attr:`partial` is the edit so far, where there is one."""

    def __init__(self, message: str, partial: Any = None):
        super().__init__(message)
        self.partial = partial


class RequestError(CadOutlinesError, ValueError):
    """A request's ``cad_*`` arguments are malformed, or its grammar does not compile (HTTP 400)."""


# --- limits and environment ------------------------------------------------------------------------------

class ResourceLimitError(CadOutlinesError, ValueError):
    """An input that would cost more than a limit allows.

    ``limit`` names the limit (e.g. ``"max_grammar_bytes"``), ``value`` what the input needed (or reached
    before it was stopped), ``maximum`` the limit's value; the message says how to raise it."""

    def __init__(self, limit: str, value: Any, maximum: Any, what: str = "", how: str | None = None):
        self.limit, self.value, self.maximum = limit, value, maximum
        how = self.how = how or f"raise it with Limits({limit}=...)"
        super().__init__(f"{what + ': ' if what else ''}{limit} exceeded ({value} > {maximum}); {how}")


class MatcherLimitError(ResourceLimitError):
    """A matcher stopped by a decode-time limit (``Limits.max_reductions_per_token``, ...): it is in a sticky
    error state and raises this again on every later call. From ``fill_next_token_bitmask_batch``,
    :attr:`indices` are the batch positions of every matcher in error (their rows allow only EOS; the other
    rows are filled); elsewhere it is empty."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.indices: list[int] = []


class ParameterError(CadOutlinesError, ValueError):
    """A parameter whose value is out of its range (a negative temperature, a top-p of 0): the
    message names the parameter, the value and the range."""


class SettingError(CadOutlinesError, ValueError):
    """A setting from the environment (``CAD_OUTLINES_*``) that is not a valid value, or a ``CAD_OUTLINES_MAX_*``
    name that is no limit: the message names the variable (and, for a misspelling, the known ones)."""


class CacheFileError(CadOutlinesError, ValueError):
    """A cache file that is truncated, corrupt or of another format version (it is rebuilt)."""


class UnsupportedPythonError(CadOutlinesError, ImportError):
    """The running Python's private regex internals are not the ones this library reads."""

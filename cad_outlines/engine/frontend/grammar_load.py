"""A Lark grammar loaded as data: its terminals and BNF rules as lark compiles them,
without building lark's parser or lexer.

``lark.Lark(...)`` also builds LALR tables (in Python: 0.65 s of its 0.9 s on python.lark)
and a lexer that checks every pair of terminals for collisions; the compile needs neither
(it builds the tables natively, :mod:`.lalr`, and its own terminal automata,
:mod:`.terminals`). :class:`LoadedGrammar` carries what the compile reads of a
``lark.Lark`` (``terminals``, ``rules``, ``ignore_tokens``, ``options``, ``lexer_conf``).

The rules come from :mod:`.lark_rules` (lark's reader and EBNF compiler redone without
lark's generic tree machinery: python.lark in ~25 ms instead of ~95) and, for what that
module leaves to lark (``%override``, ``%extend``, custom import loaders, every grammar
lark rejects), from lark's own ``load_grammar(...).compile(...)``: the two give equal
terminals and rules (tests/engine/frontend/test_lark_rules.py), and errors are always lark's.
"""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lark
import lark.load_grammar as _lark_load
from lark.common import LexerConf
from lark.load_grammar import load_grammar

from ...grammars import grammar_source
from .grammar_checks import missing_start_error
from .lark_rules import compile_lark_rules
from ...errors import GrammarError
from ...limits import check_limit
from .terminals import GrammarCompileError

__all__ = ["LoadOptions", "LoadedGrammar", "load_rules", "postlexer", "lark_grammar_error"]

_AT_LINE = re.compile(r"at line (\d+) column (\d+)")
_NAMED = re.compile(r"(Rule|Terminal) '([^']+)'")


def lark_grammar_error(e: Exception, file: str | None, text: str = "") -> GrammarError:
    """lark's error for a grammar it cannot read, as a :class:`~cad_outlines.errors.GrammarError`: one line
    naming the file, the line and column where lark gives them, the rule or terminal it names, and why.
    `text` is the grammar's own text: a position lark reports in an ``%import``ed file (its context line is
    not the grammar's) is said to be there, not attributed to the grammar."""
    full = str(e).strip()
    message = full.splitlines()[0] if full else type(e).__name__
    line = getattr(e, "line", None)
    column = getattr(e, "column", None)
    m = _AT_LINE.search(message)
    if m:
        line, column = int(m.group(1)), int(m.group(2))
        message = message[: m.start()].rstrip(" ,")
    if isinstance(line, int) and line < 0:
        line = column = None
    context = [c for c in full.splitlines()[1:] if c.strip() and c.strip() != "^"]
    if line is not None and text and context and not isinstance(e, lark.exceptions.UnexpectedInput):
        own = text.splitlines()[line - 1] if 0 < line <= len(text.splitlines()) else None
        if own is None or own.rstrip() != context[0].rstrip():
            message += f" (in an %import-ed grammar, line {line} column {column}: {context[0].strip()!r})"
            file = line = column = None
    named = _NAMED.search(str(e))
    name, kind = (named.group(2), named.group(1).lower()) if named else (None, "grammar")
    if isinstance(e, lark.exceptions.UnexpectedInput):
        token = getattr(e, "token", None)
        if token is not None and hasattr(token, "type"):
            message = f"syntax error: unexpected {token.type} {str(token)!r}"
        else:
            message = f"syntax error: unexpected {token!r}" if token is not None else "syntax error: unexpected input"
        expected = sorted(getattr(e, "expected", None) or getattr(e, "allowed", None) or ())
        if expected:
            message += f" (expected one of: {', '.join(expected[:8])}{', ...' if len(expected) > 8 else ''})"
        name, kind = None, "grammar"
    return GrammarError(message, file=file, line=line, column=column, name=name, kind=kind)


def _check_sizes(terminals, rules) -> None:
    """The limits known once the grammar is read: terminal and rule counts, each literal's length."""
    check_limit("max_terminals", len(terminals), "grammar")
    check_limit("max_rules", len(rules), "grammar")
    for t in terminals:
        check_limit("max_literal_chars", len(t.pattern.value), f"terminal {t.name}")


def _display(name: str) -> str | None:
    """A grammar's file name for messages; None for grammar text."""
    return None if name == "grammar" else name


@dataclass
class LoadOptions:
    """The part of ``lark.Lark.options`` the compile reads."""

    start: list[str]
    postlex: Any = None
    import_paths: list[str] = field(default_factory=list)


@dataclass
class LoadedGrammar:
    """A grammar's terminals and BNF rules as lark compiles them (no parser, no lexer)."""

    terminals: list
    rules: list
    ignore_tokens: list[str]
    options: LoadOptions
    lexer_conf: LexerConf
    source_grammar: str
    name: str = "grammar"  # the file name, or "grammar" for text (error messages)


def postlexer(text: str, postlex):
    """The postlexer to use: ``"auto"`` gives lark's ``PythonIndenter`` to a grammar that
    %declares _INDENT and _DEDENT, ``"python"`` always, None or an object as given."""
    if postlex == "auto":
        declares = "%declare" in text and "_INDENT" in text and "_DEDENT" in text
        postlex = "python" if declares else None
    if postlex == "python":
        from lark.indenter import PythonIndenter

        return PythonIndenter()
    return postlex


_IMPORTED: dict[tuple[str, str], Any] = {}  # (text, start) -> lark's parse tree of an imported file
_IMPORTED_LOCK = threading.Lock()


@contextmanager
def _imports_parsed_once():
    """While reading a grammar, an ``%import``ed file (``common.lark``...) is parsed once
    per process and text, not at every load: lark re-parses it for each grammar that
    imports it (3 ms of json.lark's 10). Safe because lark deep-copies an imported file's
    definitions before renaming them (``_mangle_definition_tree``) and never changes its
    tree; the grammar's own text (named ``<string>``) is parsed every time. Without lark's
    private ``_parse_grammar`` (another lark version) nothing is cached."""
    parse = getattr(_lark_load, "_parse_grammar", None)
    if parse is None:
        yield
        return

    def cached(text, name, start="start"):
        if name == "<string>":
            return parse(text, name, start)
        key = (text, start)
        tree = _IMPORTED.get(key)
        if tree is None:
            tree = _IMPORTED[key] = parse(text, name, start)
        return tree

    with _IMPORTED_LOCK:
        _lark_load._parse_grammar = cached
        try:
            yield
        finally:
            _lark_load._parse_grammar = parse


def load_rules(grammar: str | Path, *, start: str | None = None, import_paths=(), postlex="auto") -> LoadedGrammar:
    """Read a grammar (a shipped grammar's name, a .lark file or grammar text) into its
    terminals and rules, `%import`s resolved, exactly as ``lark.Lark(..., parser="lalr")``
    would before building its parser. A missing start rule raises
    :class:`GrammarCompileError` listing the rules that could start."""
    src = grammar_source(grammar)
    text, given = src.text, start or src.start  # None: lark's default, "start"
    check_limit("max_grammar_bytes", len(text.encode("utf-8", "surrogatepass")), f"grammar {src.name}")
    start = given or "start"
    paths = [*src.import_paths, *map(str, import_paths)]
    pl = postlexer(text, postlex)
    terminals_to_keep = set(pl.always_accept) if pl is not None else set()
    try:
        compiled = compile_lark_rules(text, paths, [start], terminals_to_keep)
        if compiled is None:  # a construct read by lark only, or an error lark reports
            with _imports_parsed_once():
                g, _ = load_grammar(text, "<string>", paths, False)
            compiled = g.compile([start], terminals_to_keep)
        terminals, rules, ignore = compiled
    except lark.exceptions.GrammarError as e:
        error = missing_start_error(text, paths, given)
        if error is None:
            raise lark_grammar_error(e, _display(src.name), text) from e
        raise error from e
    except lark.exceptions.UnexpectedInput as e:
        raise lark_grammar_error(e, _display(src.name), text) from e
    except OSError as e:  # an %import lark could not open
        raise GrammarError(f"cannot %import: {e.strerror or e} ({e.filename or ''}); looked in "
                           f"{', '.join(paths) or 'lark'}'s grammars", file=_display(src.name)) from e
    _check_sizes(terminals, rules)
    if not any(r.origin.name == start for r in rules):
        error = missing_start_error(text, paths, given)
        raise error or GrammarCompileError(start, f"the grammar has no rule {start!r}", kind="rule")
    conf = LexerConf(terminals, re, ignore, pl, {}, 0, use_bytes=False, strict=False)
    return LoadedGrammar(list(terminals), list(rules), list(ignore), LoadOptions([start], pl, paths), conf, text,
                         src.name)

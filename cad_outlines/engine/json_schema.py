"""JSON Schema -> compiled grammar, with Outlines' semantics and our engine.

Outlines users constrain generation by a JSON Schema; outlines-core turns the schema
into a regular expression (``build_regex_from_schema``: property order, whitespace,
string escapes, number formats as Outlines has them). Here that regex becomes the one
terminal of a Lark grammar (``start: JSON`` / ``JSON: /regex/``) and is compiled by
:func:`~.compile.compile_grammar` like any grammar: same mask store, cache and matcher.

A text is accepted when Python's ``re.match`` of the regex at its start is the whole
text (our lexer's rule for a terminal). For the regexes outlines-core writes, whose
every match ends at a closing quote, bracket or brace or is a greedy number, that is
``re.fullmatch``; ``tests/engine/test_json_schema.py`` checks it on valid and invalid texts.
Some string formats (``"format": "uri"``) give regexes of many kilobytes whose DFA takes
minutes to build (cached afterwards, like every store).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .compiled_grammar import CompiledGrammar
from .vocabulary import Vocabulary

__all__ = ["compile_json_schema", "schema_regex", "regex_grammar"]


def schema_regex(schema: dict | str, whitespace_pattern: str | None = None) -> str:
    """The regex outlines-core builds for a JSON Schema (a dict or its JSON text)."""
    from outlines_core.json_schema import build_regex_from_schema

    text = schema if isinstance(schema, str) else json.dumps(schema)
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"the schema is not valid JSON: {e}") from e
    try:
        return build_regex_from_schema(text, whitespace_pattern)
    except (ValueError, TypeError, RuntimeError) as e:  # outlines-core reports unsupported schemas this way
        raise ValueError(f"outlines-core cannot turn this schema into a regex: {e}") from e


def regex_grammar(regex: str, terminal: str = "JSON") -> str:
    """A Lark grammar whose language is one `regex` terminal: each ``/`` not already
    escaped is escaped (lark ends a regex literal at it), and line breaks (escaped or not) are
    written as escapes (lark refuses a line break in a regex literal)."""
    out, i = [], 0
    while i < len(regex):
        c = regex[i]
        if c == "\\" and i + 1 < len(regex):  # an escaped line break (re.escape writes them) as its escape
            out.append({"\n": "\\n", "\r": "\\r"}.get(regex[i + 1], regex[i:i + 2]))
            i += 2
            continue
        out.append({"/": "\\/", "\n": "\\n", "\r": "\\r"}.get(c, c))
        i += 1
    return f"start: {terminal}\n{terminal}: /{''.join(out)}/\n"


def compile_json_schema(schema: dict | str | Path, vocab: Vocabulary, *, whitespace_pattern: str | None = None,
                        **compile_options: Any) -> CompiledGrammar:
    """Compile a JSON Schema (a dict, its JSON text, or a ``.json`` file) for a
    vocabulary: outlines-core's regex for it, compiled by our engine. Keyword arguments
    go to :func:`~.compile.compile_grammar` (``cache``, ``progress``, ``streamline``)."""
    from .compile import compile_grammar

    if isinstance(schema, Path) or (isinstance(schema, str) and schema.endswith(".json") and "\n" not in schema
                                    and Path(schema).is_file()):
        schema = Path(schema).read_text(encoding="utf-8")
    return compile_grammar(regex_grammar(schema_regex(schema, whitespace_pattern)), vocab, **compile_options)

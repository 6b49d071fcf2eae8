"""Where the Lark grammars shipped with the package live, and how a grammar argument
(a shipped grammar's name, a file, or grammar text) becomes grammar text.

In a wheel they sit in ``cad_outlines/grammars/``; in a source checkout (editable
install) they are the repository's top-level ``grammars/``. Shipped: ``json``, ``python``
(lark's python.lark: Indenter, ``file_input`` start), ``sql``, ``copy_edit``; their
licence notices are in ``grammars/NOTICE.md`` and at the top of each file.

A grammar may name its default start rule in a comment line
``// cad_outlines: start=NAME`` (lark itself defaults to ``start``).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import GrammarError

__all__ = ["GrammarSource", "available_grammars", "grammar_dir", "grammar_path", "grammar_source",
           "load_grammar_text", "regex_grammar"]

_START = re.compile(r"^//\s*cad_outlines:\s*start\s*=\s*(\w+)\s*$", re.MULTILINE)


def grammar_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here / "grammars", here.parent / "grammars"):
        if (candidate / "copy_edit.lark").is_file():
            return candidate
    raise FileNotFoundError(f"shipped grammars not found next to {here}")


def available_grammars() -> list[str]:
    return sorted(p.stem for p in grammar_dir().glob("*.lark"))


def grammar_path(name: str) -> Path:
    """Path of a shipped grammar by name (``"copy_edit"``) or file name."""
    path = grammar_dir() / (name if name.endswith(".lark") else name + ".lark")
    if not _is_file(path):
        raise FileNotFoundError(f"no shipped grammar {name!r}; available: {', '.join(available_grammars())}")
    return path


def load_grammar_text(name: str) -> str:
    return grammar_path(name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class GrammarSource:
    """Grammar text and where lark looks for its ``%import``s."""

    text: str
    import_paths: tuple[str, ...]
    name: str  # the file name, or "grammar" for text
    start: str | None  # the default start rule the grammar names (``// cad_outlines: start=NAME``)


def _shipped(name: str) -> Path | None:
    if "/" in name or "\\" in name:
        return None
    try:
        return grammar_path(name)
    except FileNotFoundError:
        return None


def grammar_source(grammar: str | Path) -> GrammarSource:
    """Resolve a grammar argument. A :class:`Path`, or a one-line str naming an existing
    file, is read (its folder searched first for ``%import``s); a one-line str that is a
    shipped grammar's name (``"python"``, ``"json.lark"``) is that grammar; a one-line str
    ending in ``.lark`` or holding a path separator that is neither raises
    :class:`FileNotFoundError` listing the shipped grammars; a short one-line str with no ``:``
    (no rule or terminal definition, and no ``%`` directive: a misspelt name, ``"jsno"``) raises
    :class:`~cad_outlines.errors.GrammarError` with the shipped names closest to it;
    anything else is grammar text. A grammar with no definitions at all (empty, or only
    comments) raises :class:`~cad_outlines.errors.GrammarError` saying it is empty; a
    `grammar` that is neither str nor Path raises TypeError."""
    if not isinstance(grammar, (str, Path)):
        got = type(grammar).__name__
        hint = ": decode it first (grammar.decode('utf-8'))" if isinstance(grammar, (bytes, bytearray)) else ""
        raise TypeError(f"grammar must be a shipped grammar's name, a .lark path or grammar text (str or Path), "
                        f"not {got}{hint}")
    if isinstance(grammar, Path) or (isinstance(grammar, str) and "\n" not in grammar
                                     and (grammar.endswith(".lark") or _is_file(grammar)
                                          or _shipped(grammar) is not None)):
        path = Path(grammar)
        if not path.is_file():
            shipped = _shipped(str(grammar)) if isinstance(grammar, str) else None
            if shipped is None:
                raise FileNotFoundError(f"grammar file {str(grammar)!r} not found; grammars shipped by name: "
                                        f"{', '.join(available_grammars())}")
            path = shipped
        text = path.read_text(encoding="utf-8")
        _check_not_empty(text, str(path))
        return GrammarSource(text, (str(path.resolve().parent),), path.name, _declared_start(text))
    text = str(grammar)
    _check_not_empty(text, None)
    if ("\n" not in text.strip() and ":" not in text and len(text.strip()) <= _NAME_LIMIT
            and not text.strip().startswith("%")):  # a lone directive (`%import ...`) is grammar text
        close = difflib.get_close_matches(text.strip(), available_grammars(), n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        raise GrammarError(f"{text.strip()!r} is not a shipped grammar, a .lark file, or grammar text (it defines "
                           f"no rule or terminal: no `name: ...`); {hint}grammars shipped by name: "
                           f"{', '.join(available_grammars())}")
    return GrammarSource(text, (), "grammar", _declared_start(text))


_NAME_LIMIT = 100  # a one-line argument this short with no definition in it is a (misspelt) name, not text
_COMMENT = re.compile(r"//[^\n]*|#[^\n]*")


def _check_not_empty(text: str, file: str | None) -> None:
    """An empty grammar (nothing but blank lines and comments) is refused here, by name,
    instead of as a missing start rule with no candidates."""
    if not _COMMENT.sub("", text).strip():
        raise GrammarError("the grammar is empty: it defines no rules (a grammar needs at least its start rule, "
                           "e.g. `start: ...`)", file=file)


def _is_file(name: str | Path) -> bool:
    try:
        return Path(name).is_file()
    except (OSError, ValueError):  # e.g. a name too long for the file system
        return False


def _declared_start(text: str) -> str | None:
    m = _START.search(text)
    return m.group(1) if m else None


def regex_grammar(regex: str, terminal: str = "REGEX") -> str:
    """Lark text whose language is one `regex` terminal (a request's or an Outlines output type's regex):
    each ``/`` not already escaped is escaped (lark ends a regex literal at it), and line breaks, escaped
    or not, are written as escapes (lark refuses a line break in a regex literal). The terminal matches as
    our lexer's terminals do (Python's ``re.match`` order: docs/engine_semantics.md)."""
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

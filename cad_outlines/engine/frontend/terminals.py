"""A Lark grammar's terminals as byte-level DFAs, with lark's basic-lexer semantics.

Our language is "lark LALR with ``lexer="basic"``". We use the basic lexer, not lark's
default contextual one, because the contextual lexer makes lexing depend on the parser
state (each LALR state lexes with only the terminals it accepts), so a lexeme could not be
decided from the text alone. For an LALR grammar every text the basic lexer lexes into a
sentence is also accepted with the contextual lexer (the contextual lexer only drops
terminals the parser would reject anyway), so nothing we accept is rejected by a default
lark parser.

lark's basic lexer, reproduced here exactly on our DFAs (:meth:`TerminalSet.scan`):

1. Terminals are ordered by ``(-priority, -max_width, -len(pattern source), name)``.
2. ``_create_unless``: a string terminal whose text a regex terminal of the same priority
   matches entirely (Python's match of the regex on the string equals the string) is
   *embedded* in that regex terminal: it leaves the scanner's alternation when its flags
   are a subset of the regex's flags (it stays otherwise), and when the regex terminal's
   lexeme is exactly that string (first such string terminal in the order, compared with
   the string terminal's own flags), the lexeme's type becomes the string terminal:
   ``def`` lexes as DEF, ``define`` as NAME.
3. At each position the lexeme is the FIRST terminal in the order whose regex matches a
   non-empty prefix, with that regex's own match: Python's first match in backtracking
   order, which our "match"-semantics DFAs give as their longest accepted prefix (see
   :mod:`.automata`). Where that first match can be shorter than the longest match of the
   regex (lazy quantifiers, ``a|ab``, trailing lookahead) the terminal's DFA is the DFA of
   possible match results and :attr:`TerminalInfo.first_match_differs` is set: lexing
   stays exact.
4. ``%ignore``d terminals are lexed and dropped (kept, marked, by :meth:`scan`).
5. Zero-width terminals are an error, as in lark.

Terminals whose regex ends in a negative lookahead still pending at the end of the match
(python.lark's ``DEC_NUMBER``: ``0(?![1-9])``, ``STRING``: ``"(?!"")``) get
``ByteDFA.block``: the match ends in such a state only if the next byte is not blocked.

Known deviations from lark: texts with lone surrogates (not UTF-8 encodable) never lex;
``lexer_callbacks``, postlexers, ``use_bytes`` and the ``regex`` module are not modelled
(the last two are refused); the contextual lexer's per-state terminal sets are not used.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import lark
import numpy as np
from lark.lexer import PatternStr, TerminalDef

from ...errors import GrammarCompileError, LexError, ResourceLimitError
from .automata import ByteDFA, UnsupportedRegex, longest_prefix, regex_to_dfa

__all__ = [
    "GrammarCompileError", "LexError", "Lexeme", "TerminalInfo", "TerminalSet",
    "compile_terminals", "load_grammar", "lark_order",
]


class Lexeme(NamedTuple):
    type: str  # terminal name, after the "unless" retyping
    value: str
    start: int  # character offsets in the text
    end: int
    ignored: bool


@dataclass(frozen=True, eq=False)
class TerminalInfo:
    """One terminal: its DFA (match semantics), lark's definition and ordering data."""

    name: str
    dfa: ByteDFA
    priority: int
    kind: str  # "str" or "re"
    pattern: str  # the pattern source (string or regex) as lark stores it
    flags: frozenset[str]
    max_width: int  # lark's, used in the order
    ignored: bool
    regexp: str = field(repr=False, default="")  # as compiled (lark's flag wrapper included)
    g_flags: int = field(repr=False, default=0)

    @property
    def first_match_differs(self) -> bool:
        """Python's match can be shorter than the regex's longest match (computed on
        demand: it needs the regex's full-match DFA, which lexing does not)."""
        return _first_match_differs(self.regexp, self.g_flags)


@dataclass(eq=False)
class TerminalSet:
    """A grammar's terminals in lark's order, plus the basic lexer's grammar-wide rules."""

    terminals: tuple[TerminalInfo, ...]  # all terminals, lark's order
    scanner: tuple[str, ...]  # the scanner alternation: lark's order minus embedded strings
    unless: dict[str, tuple[str, ...]]  # regex terminal -> string terminals that retype it
    ignore: frozenset[str]
    _by_name: dict[str, TerminalInfo] = field(init=False, repr=False)
    _retype: dict[tuple[str, bytes], str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name = {t.name: t for t in self.terminals}
        self._retype = {}

    @functools.cached_property
    def _first(self) -> list[list[int]]:
        """Per first byte, the scanner terminals (indices) that can start with it."""
        if not self.scanner:
            return [[] for _ in range(256)]
        starts = np.stack([self._by_name[n].dfa.trans[0] for n in self.scanner], axis=1) >= 0  # (256, scanner)
        return [np.flatnonzero(row).tolist() for row in starts]

    def __getitem__(self, name: str) -> TerminalInfo:
        return self._by_name[name]

    def __iter__(self):
        return iter(self.terminals)

    def __len__(self) -> int:
        return len(self.terminals)

    def retype(self, name: str, value: bytes) -> str:
        """The lexeme's type after lark's "unless" rule."""
        strs = self.unless.get(name)
        if not strs:
            return name
        key = (name, value)
        got = self._retype.get(key)
        if got is None:
            got = next((s for s in strs if self._by_name[s].dfa.fullmatch(value)), name)
            self._retype[key] = got
        return got

    def scan(self, text: str) -> list[Lexeme]:
        """Every lexeme of `text`, ignored ones included (marked); raises :class:`LexError`."""
        data = text.encode("utf-8", "surrogatepass")
        scan = [self._by_name[n] for n in self.scanner]
        tables = [t.dfa.tables for t in scan]

        out: list[Lexeme] = []
        pos = cpos = 0
        n = len(data)
        while pos < n:
            for i in self._first[data[pos]]:
                length = longest_prefix(tables[i], data, pos)
                if length:
                    break
            else:
                raise LexError(cpos, text)
            raw = data[pos:pos + length]
            value = raw.decode("utf-8")
            t = scan[i]
            out.append(Lexeme(self.retype(t.name, raw), value, cpos, cpos + len(value), t.ignored))
            pos += length
            cpos += len(value)
        return out

    def lex(self, text: str, *, dont_ignore: bool = False) -> list[tuple[str, str]]:
        """(type, value) of each lexeme, like ``lark.Lark.lex(text, dont_ignore)`` with the
        basic lexer and no postlexer."""
        return [(x.type, x.value) for x in self.scan(text) if dont_ignore or not x.ignored]

    def labeled(self, name: str, *, retype: bool = True) -> tuple[np.ndarray, list[str | None], np.ndarray | None]:
        """The terminal's DFA refined so that each state knows the lexeme's type after the
        "unless" rule: (trans, label per state (None: not accepting), block or None)."""
        t = self._by_name[name]
        strs = list(self.unless.get(name, ())) if retype else []
        names = [name, *strs]
        trans, label, block = _unless_product(t.dfa, [self._by_name[s].dfa for s in strs])
        return trans, [None if x < 0 else names[x] for x in label.tolist()], block


def _unless_product(dfa: ByteDFA, strs: Sequence[ByteDFA]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Product of a regex terminal's DFA with its "unless" string DFAs; label 0 = the regex
    terminal, 1 + k = the k-th string terminal; minimised (by the compiled core)."""
    if not strs:  # a ByteDFA is already minimal and canonically numbered
        return dfa.trans, np.where(dfa.accept, 0, -1).astype(np.int64), dfa.block
    from ..._native import core

    n, trans, label, block = core().unless_product(
        dfa.trans, dfa.accept.view(np.uint8), None if dfa.block is None else dfa.block.view(np.uint8),
        [d.trans for d in strs], [d.accept.view(np.uint8) for d in strs])
    return trans.reshape(n, 256), label, block.view(bool).reshape(n, 256) if block.size else None


# ---------------------------------------------------------------------------------------
# loading and compiling
# ---------------------------------------------------------------------------------------


def load_grammar(source: str | Path, *, start: str | Sequence[str] | None = None,
                 import_paths: Iterable[str | Path] = (), **options) -> lark.Lark:
    """Load a grammar with lark itself (``parser="lalr", lexer="basic"``). `source` is a
    path (a :class:`Path`, or a one-line str ending in ``.lark``) or grammar text; a path's
    folder is searched for ``%import``s first, then `import_paths`, then lark's own
    grammars (``common.lark``...)."""
    paths = [str(p) for p in import_paths]
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and source.endswith(".lark")):
        path = Path(source)
        text = path.read_text(encoding="utf-8")
        paths.insert(0, str(path.resolve().parent))
    else:
        text = str(source)
    opts = dict(parser="lalr", lexer="basic", import_paths=paths)
    if start is not None:
        opts["start"] = start
    opts.update(options)
    return lark.Lark(text, **opts)


def lark_order(terminals: Iterable[TerminalDef]) -> list[TerminalDef]:
    """lark's BasicLexer order. A terminal whose regex lark cannot compile (to measure its width) raises
    :class:`GrammarCompileError` naming it."""
    terminals = list(terminals)
    width = {}
    for t in terminals:
        try:
            width[t.name] = t.pattern.max_width
        except _REGEX_ERRORS as e:
            raise GrammarCompileError(t.name, f"invalid regex {t.pattern.value!r}: {e}") from e
    return sorted(terminals, key=lambda x: (-x.priority, -width[x.name], -len(x.pattern.value), x.name))


def _regex_errors() -> tuple[type[Exception], ...]:
    try:  # lark measures widths with the `regex` module when it is installed
        import regex
    except ImportError:
        return (re.error,)
    return (re.error, regex.error)


_REGEX_ERRORS = _regex_errors()


_FLAG_BITS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "u": re.UNICODE, "x": re.VERBOSE,
              "l": re.LOCALE, "a": re.ASCII}


@functools.lru_cache(maxsize=4096)
def _terminal_dfas(regexp: str, g_flags: int) -> ByteDFA:
    return regex_to_dfa(regexp, g_flags, semantics="match")


@functools.lru_cache(maxsize=4096)
def _first_match_differs(regexp: str, g_flags: int) -> bool:
    return not _terminal_dfas(regexp, g_flags).equivalent(regex_to_dfa(regexp, g_flags, semantics="full"))


def _compile_terminal(t: TerminalDef, g_flags: int, ignored: bool) -> TerminalInfo:
    regexp = t.pattern.to_regexp()
    try:
        dfa = _terminal_dfas(regexp, g_flags)
    except UnsupportedRegex as e:
        pos = e.position
        if pos is not None and t.pattern.type == "re":  # offsets into the pattern, not lark's flag wrapper
            pos = max(0, pos - 4 * len(t.pattern.flags))
        where = f" at offset {pos}" if pos is not None else ""
        raise GrammarCompileError(t.name, f"{e.construct}{where} cannot be compiled to a DFA: {e.reason}",
                                  e.construct, pos) from e
    except re.error as e:
        raise GrammarCompileError(t.name, f"invalid regex {t.pattern.value!r}: {e}") from e
    except ResourceLimitError as e:
        raise ResourceLimitError(e.limit, e.value, e.maximum, what=f"terminal {t.name}'s DFA", how=e.how) from e
    if dfa.accept[0]:
        raise GrammarCompileError(
            t.name, f"{t.pattern.value!r} matches the empty string (lark refuses zero-width terminals)")
    return TerminalInfo(t.name, dfa, t.priority, t.pattern.type, t.pattern.value, frozenset(t.pattern.flags),
                        t.pattern.max_width, ignored, regexp, g_flags)


def compile_terminals(source: lark.Lark | str | Path, *, start: str | Sequence[str] | None = None,
                      import_paths: Iterable[str | Path] = (), **lark_options) -> TerminalSet:
    """Compile a grammar's terminals. `source` is a :class:`lark.Lark` or a
    :class:`~.grammar_load.LoadedGrammar` (its lexer configuration is used as is) or
    anything :func:`load_grammar` takes. Raises :class:`GrammarCompileError` naming the
    terminal for a construct without an exact DFA."""
    loaded = isinstance(source, lark.Lark) or hasattr(source, "lexer_conf")
    lk = source if loaded else load_grammar(source, start=start, import_paths=import_paths, **lark_options)
    conf = lk.lexer_conf
    if conf.re_module is not re:
        raise GrammarCompileError("*", "the `regex` module's semantics are not supported (use Python's re)")
    if conf.use_bytes:
        raise GrammarCompileError("*", "use_bytes is not supported")
    g_flags = int(conf.g_regex_flags or 0)
    ignore = frozenset(conf.ignore)
    ordered = lark_order(conf.terminals)
    infos = tuple(_compile_terminal(t, g_flags, t.name in ignore) for t in ordered)
    by_name = {t.name: t for t in infos}

    # lark's _create_unless, decided on our DFAs
    unless: dict[str, tuple[str, ...]] = {}
    embedded: set[str] = set()
    strs = [(t, t.pattern.value.encode("utf-8")) for t in ordered if isinstance(t.pattern, PatternStr)]
    for retok in ordered:
        if isinstance(retok.pattern, PatternStr):
            continue
        dfa = by_name[retok.name].dfa
        first = dfa.trans[0].tolist()  # most strings stop at their first byte: no full table lists
        hits = []
        for strtok, s in strs:
            if strtok.priority != retok.priority or (st := first[s[0]]) < 0:
                continue
            for b in s[1:]:
                st = int(dfa.trans[st, b])
                if st < 0:
                    break
            if st >= 0 and dfa.accept[st]:  # the regex's match on the string is all of it
                hits.append(strtok.name)
                if strtok.pattern.flags <= retok.pattern.flags:
                    embedded.add(strtok.name)
        if hits:
            unless[retok.name] = tuple(hits)
    scanner = tuple(t.name for t in infos if t.name not in embedded)
    return TerminalSet(infos, scanner, unless, ignore)

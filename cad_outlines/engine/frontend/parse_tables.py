"""LALR parse tables and lark's Indenter as data: what the front end hands to the store and the runtime.

:class:`ParseTables` holds a grammar's LALR actions and gotos (from lark's table or the native builder in
:mod:`.lalr`), :class:`TableArrays` the same as plain arrays for the flat file; :class:`IndentTracker`
plays the part of lark's Indenter postlexer (Python's INDENT/DEDENT rules) as a pure function. The
incremental parser over these tables that tests use as a reference is :mod:`..reference.parser`; decoding
runs the native one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = ["ParseTables", "ObjectGuards", "TableArrays", "IndentTracker", "IndentSpec", "Lexed", "END"]

END = "$END"


@dataclass(frozen=True)
class ObjectGuards:
    """Checks the native parser runs beside the tables, for JSON Schema objects whose required names
    come in any order (2**r LALR states otherwise). ``codes[lhs]`` for the rules of nonterminal lhs:
    k > 0 a member (the innermost open object has seen its name number k - 1), -(j + 1) close check j
    (reduced before its `close` terminal shifts: every name of one of the bit masks ``checks[j]`` seen,
    else refused). Every `open` shift
    opens an object, every `close` shift ends one. A grammar with guards accepts a sublanguage of its
    rules' language: analyses that read the rules alone (streamlining, the reference parser) do not
    apply to it."""

    open: str
    close: str
    codes: dict[str, int]
    checks: tuple[tuple[int, ...], ...] = ()


class ParseTables:
    """An LALR table (lark's, or :func:`cad_outlines.engine.frontend.lalr.parse_tables`') as plain
    dicts keyed by ints.

    ``actions[state][terminal] = (True, next_state)`` for a shift or
    ``(False, rule_index)`` for a reduce; ``rules[i] = (lhs, rhs_length)``;
    ``goto[state][lhs] = next_state``.
    """

    guards: ObjectGuards | None = None  # set by a front end whose rules need them

    def __init__(self, lark_obj, start: str | None = None):
        """The tables lark built for `lark_obj` (a ``lark.Lark`` with ``parser="lalr"``)."""
        start = start or lark_obj.options.start[0]
        # terminal names from lark itself: a namespaced import (`%import python3.x`) gives
        # terminals like `python3__NAME`, which are not all upper case
        terminal_names = {t.name for t in lark_obj.terminals} | {END}
        terminal_names |= {sym.name for rule in lark_obj.rules for sym in rule.expansion if sym.is_term}
        self._from_lark_table(lark_obj.parser.parser._parse_table, start, terminal_names)

    @classmethod
    def from_lark_table(cls, table, start: str, terminal_names: Iterable[str]) -> ParseTables:
        """The tables from lark's own ``IntParseTable`` (e.g. ``LALR_Analyzer.parse_table``);
        `terminal_names` tells its terminals from its nonterminals."""
        self = cls.__new__(cls)
        self._from_lark_table(table, start, set(terminal_names) | {END})
        return self

    @classmethod
    def from_parts(cls, start: str, start_state: int, end_state: int, rules: list[tuple[str, int]],
                   rule_rhs: list[tuple[str, ...]], actions: dict[int, dict[str, tuple[bool, int]]],
                   goto: dict[int, dict[str, int]]) -> ParseTables:
        """The tables from plain parts (the attributes of the same names)."""
        self = cls.__new__(cls)
        self.start, self.start_state, self.end_state = start, start_state, end_state
        self.rules, self.rule_rhs, self.actions, self.goto = rules, rule_rhs, actions, goto
        self.terminals: frozenset[str] = frozenset(t for row in actions.values() for t in row)
        return self

    def _from_lark_table(self, table, start: str, terminal_names: set[str]) -> None:
        from lark.parsers.lalr_analysis import Shift

        self.start = start
        self.start_state: int = table.start_states[start]
        self.end_state: int = table.end_states[start]
        rule_index: dict[object, int] = {}
        self.rules: list[tuple[str, int]] = []
        self.rule_rhs: list[tuple[str, ...]] = []
        self.actions: dict[int, dict[str, tuple[bool, int]]] = {}
        self.goto: dict[int, dict[str, int]] = {}
        for state, row in table.states.items():
            acts, gotos = {}, {}
            for symbol, (action, arg) in row.items():
                is_terminal = symbol in terminal_names
                if action is Shift:
                    if is_terminal:
                        acts[symbol] = (True, arg)
                    else:
                        gotos[symbol] = arg
                else:
                    if arg not in rule_index:
                        rule_index[arg] = len(self.rules)
                        self.rules.append((arg.origin.name, len(arg.expansion)))
                        self.rule_rhs.append(tuple(sym.name for sym in arg.expansion))
                    acts[symbol] = (False, rule_index[arg])
            self.actions[state] = acts
            self.goto[state] = gotos
        self.terminals: frozenset[str] = frozenset(t for row in self.actions.values() for t in row)

    def expected(self, state: int) -> list[str]:
        return sorted(self.actions[state])

    def arrays(self) -> TableArrays:
        """The tables as int arrays over symbol ids (what the flat arrays are built from)."""
        names = sorted(self.terminals | {lhs for lhs, _ in self.rules} | {n for row in self.goto.values() for n in row})
        sid = {n: i for i, n in enumerate(names)}
        shifts, reduces, gotos = [], [], []
        for s, row in self.actions.items():
            for t, (shift, arg) in row.items():
                (shifts if shift else reduces).append((s, sid[t], arg))
        for s, row in self.goto.items():
            gotos.extend((s, sid[n], nxt) for n, nxt in row.items())

        def rows(entries: list[tuple[int, int, int]]) -> np.ndarray:
            return np.array(entries, dtype=np.int32).reshape(-1, 3)

        return TableArrays(names, max(self.actions) + 1, rows(shifts), rows(reduces), rows(gotos),
                           np.array([sid[lhs] for lhs, _ in self.rules], dtype=np.int32))


class TableArrays(NamedTuple):
    """:class:`ParseTables` as int arrays: each action and goto a row (state, symbol id, value)."""

    names: Sequence[str]  # symbol id -> name (a terminal's or a nonterminal's)
    n_states: int
    shifts: np.ndarray  # rows (state, terminal, next state)
    reduces: np.ndarray  # rows (state, terminal, index of the rule in ``ParseTables.rules``)
    gotos: np.ndarray  # rows (state, nonterminal, next state)
    rule_lhs: np.ndarray  # per rule of ``ParseTables.rules``: its lhs (a nonterminal)


@dataclass(frozen=True)
class IndentSpec:
    """What lark's Indenter needs from a NEWLINE terminal: the indentation after its
    last line break (spaces count 1, tabs `tab_len`)."""

    indent: int


class IndentTracker:
    """lark's Indenter as a pure function on (indent levels, paren level): inside
    brackets NEWLINE is dropped; otherwise deeper indentation emits INDENT and a dedent
    must land on an enclosing level (else the text is rejected)."""

    def __init__(self, nl_type: str, open_types: Iterable[str], close_types: Iterable[str],
                 indent_type: str, dedent_type: str, tab_len: int = 8):
        self.nl_type, self.indent_type, self.dedent_type = nl_type, indent_type, dedent_type
        self.open_types, self.close_types = frozenset(open_types), frozenset(close_types)
        self.tab_len = tab_len

    @classmethod
    def from_postlex(cls, postlex) -> IndentTracker:
        return cls(postlex.NL_type, postlex.OPEN_PAREN_types, postlex.CLOSE_PAREN_types,
                   postlex.INDENT_type, postlex.DEDENT_type, postlex.tab_len)

    def indent_of(self, newline_text: str) -> int:
        tail = newline_text.rsplit("\n", 1)[1]
        return tail.count(" ") + tail.count("\t") * self.tab_len

    def expand(self, levels: tuple[int, ...], parens: int, terminal: str, indent: int | None
               ) -> tuple[list[str], tuple[int, ...], int] | None:
        """Terminals the parser sees for one lexed terminal, and the new tracker state;
        None for a dedent to a column that is not an enclosing level."""
        if terminal == self.nl_type:
            if parens > 0:
                return [], levels, parens
            if indent is None:
                raise ValueError(f"{self.nl_type} needs its indentation")
            out = [terminal]
            if indent > levels[-1]:
                return out + [self.indent_type], levels + (indent,), parens
            while indent < levels[-1]:
                levels = levels[:-1]
                out.append(self.dedent_type)
            return (out, levels, parens) if indent == levels[-1] else None
        if terminal == END:
            return [self.dedent_type] * (len(levels) - 1) + [END], (0,), parens
        if terminal in self.open_types:
            return [terminal], levels, parens + 1
        if terminal in self.close_types:
            return ([terminal], levels, parens - 1) if parens > 0 else None
        return [terminal], levels, parens


Lexed = tuple[str, int | None]  # (terminal name, indentation for a NEWLINE under an IndentTracker, else None)

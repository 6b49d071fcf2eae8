"""Incremental LALR parser over lark's own parse tables.

The parser state is a persistent, hash-consed stack: equal stacks are the same
:class:`StackNode`, so forking is free and every answer is memoised on exactly what
it depends on (the stack and the terminal fed). An optional :class:`IndentTracker`
plays the part of lark's Indenter postlexer (Python's INDENT/DEDENT rules).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = ["ParseTables", "TableArrays", "StackNode", "IndentTracker", "IndentSpec", "IncrementalParser", "END"]

END = "$END"


class ParseTables:
    """An LALR table (lark's, or :func:`cad_outlines.engine.lalr.parse_tables`') as plain
    dicts keyed by ints.

    ``actions[state][terminal] = (True, next_state)`` for a shift or
    ``(False, rule_index)`` for a reduce; ``rules[i] = (lhs, rhs_length)``;
    ``goto[state][lhs] = next_state``.
    """

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


class StackNode:
    """One immutable parser stack: `state` on top of `parent`. Interned per table."""

    __slots__ = ("state", "parent", "depth", "_feed", "__weakref__")

    def __init__(self, state: int, parent: StackNode | None):
        self.state = state
        self.parent = parent
        self.depth = 1 if parent is None else parent.depth + 1
        self._feed: dict[str, StackNode | None] = {}

    def states(self) -> list[int]:
        out, node = [], self
        while node is not None:
            out.append(node.state)
            node = node.parent
        return out[::-1]


class _Stacks:
    """Hash-consing of stack nodes and the memoised one-terminal transition."""

    def __init__(self, tables: ParseTables):
        self.tables = tables
        self._nodes: dict[tuple[int, int], StackNode] = {}
        self.root = self.push(None, tables.start_state)
        self.calls = 0  # transitions actually computed (not memoised), for the analysis report

    def push(self, parent: StackNode | None, state: int) -> StackNode:
        key = (state, id(parent))  # nodes are never freed, so ids are never reused
        node = self._nodes.get(key)
        if node is None:
            node = StackNode(state, parent)
            self._nodes[key] = node
        return node

    def feed(self, node: StackNode, terminal: str) -> StackNode | None:
        """The stack after shifting `terminal` (with all reductions before it), or None
        if the parser rejects it. For END, the accepting stack or None."""
        memo = node._feed
        if terminal in memo:
            return memo[terminal]
        self.calls += 1
        actions, goto, rules = self.tables.actions, self.tables.goto, self.tables.rules
        end_state = self.tables.end_state
        cur = node
        result: StackNode | None = None
        while True:
            act = actions[cur.state].get(terminal)
            if act is None:
                break
            is_shift, arg = act
            if is_shift:
                result = self.push(cur, arg)
                break
            lhs, size = rules[arg]
            for _ in range(size):
                cur = cur.parent
            cur = self.push(cur, goto[cur.state][lhs])
            if terminal == END and cur.state == end_state:
                result = cur
                break
        memo[terminal] = result
        return result


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


class IncrementalParser:
    """The parser's state after the terminals consumed so far.

    :meth:`accepts` answers without changing anything; :meth:`consume` advances;
    :meth:`fork` is O(1). Terminals are names (``"NAME"``) or ``(name, indent)`` pairs
    for NEWLINE terminals when the grammar uses an indenter. :data:`END` asks whether
    the text so far is a complete sentence.
    """

    __slots__ = ("_stacks", "node", "levels", "parens", "indenter")

    def __init__(self, tables: ParseTables, indenter: IndentTracker | None = None, _stacks: _Stacks | None = None):
        self._stacks = _stacks or _Stacks(tables)
        self.node: StackNode | None = self._stacks.root
        self.levels: tuple[int, ...] = (0,)
        self.parens = 0
        self.indenter = indenter

    @property
    def tables(self) -> ParseTables:
        return self._stacks.tables

    @property
    def calls(self) -> int:
        return self._stacks.calls

    def fork(self) -> IncrementalParser:
        other = IncrementalParser.__new__(IncrementalParser)
        other._stacks, other.node, other.levels = self._stacks, self.node, self.levels
        other.parens, other.indenter = self.parens, self.indenter
        return other

    def state(self) -> tuple[StackNode, tuple[int, ...], int]:
        """The parser's state as a plain hashable tuple (for :meth:`step`)."""
        return (self.node, self.levels, self.parens)

    def step(self, state: tuple[StackNode, tuple[int, ...], int], item: str | Lexed):
        """The state after one terminal from `state`, or None if it is rejected. Pure:
        neither `self` nor `state` changes."""
        node, levels, parens = state
        name, indent = (item, None) if isinstance(item, str) else item
        ind = self.indenter
        if ind is None:
            node = self._stacks.feed(node, name)
            return None if node is None else (node, levels, parens)
        expanded = ind.expand(levels, parens, name, indent)
        if expanded is None:
            return None
        names, levels, parens = expanded
        for n in names:
            node = self._stacks.feed(node, n)
            if node is None:
                return None
        return (node, levels, parens)

    def _run(self, terminals: Sequence[str | Lexed], state=None):
        state = state or (self.node, self.levels, self.parens)
        if state[0] is None:
            return None
        for item in terminals:
            state = self.step(state, item)
            if state is None:
                return None
        return state

    def accepts(self, terminals: Sequence[str | Lexed]) -> bool:
        """Whether the terminals consumed so far followed by `terminals` are a prefix of
        some sentence (ending with END: a whole sentence)."""
        return self._run(terminals) is not None

    def accepts_newline_after(self, terminals: Sequence[str | Lexed], state=None) -> bool:
        """Whether `terminals` then a NEWLINE whose indentation is not known yet (its
        lexeme is still open, so any indentation can follow) are accepted: some
        enclosing level, or a deeper one, must work."""
        result = self._run(terminals, state)
        if result is None or self.indenter is None:
            return False
        _, levels, parens = result
        if parens > 0:
            return True
        nl = self.indenter.nl_type
        return any(self.step(result, (nl, k)) is not None for k in sorted(set(levels) | {levels[-1] + 1}))

    def consume(self, terminals: Sequence[str | Lexed]) -> None:
        """Advance; raises ValueError (changing nothing) if the parser rejects them."""
        result = self._run(terminals)
        if result is None:
            raise ValueError(f"parser rejects {list(terminals)!r} here; expected one of {self.expected()}")
        self.node, self.levels, self.parens = result

    def is_accepting(self) -> bool:
        return self.accepts([END])

    def expected(self) -> list[str]:
        return self.tables.expected(self.node.state) if self.node is not None else []

    def key(self) -> tuple[int, tuple[int, ...], int]:
        """A hashable identity of the state (equal keys answer every question alike)."""
        return (id(self.node), self.levels, self.parens)

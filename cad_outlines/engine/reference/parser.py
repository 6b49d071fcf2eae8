"""The pure-Python incremental LALR parser: a TEST REFERENCE for the native one (decoding never runs it).

The parser state is a persistent, hash-consed stack: equal stacks are the same
:class:`StackNode`, so forking is free and every answer is memoised on exactly what
it depends on (the stack and the terminal fed). An optional
:class:`~cad_outlines.engine.frontend.parse_tables.IndentTracker` plays the part of lark's Indenter.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..frontend.parse_tables import END, IndentTracker, Lexed, ParseTables

__all__ = ["StackNode", "IncrementalParser"]


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

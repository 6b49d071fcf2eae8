"""Grammar analyses for mask-store streamlining (the streamlining appendix's definitions, re-derived; docs/references.md).

With L the grammar's language, L_p its prefixes and Σ its terminals:

- ``is_never_legal(X, S)``: no P has PXS in L_p, i.e. L ∩ Σ*XSΣ* = ∅. Decided exactly by the
  Bar-Hillel construction specialised to the small automaton of Σ*XSΣ*: every nonterminal
  gets the relation "derives a string leading the automaton from p to q", computed as a
  least fixpoint of boolean matrix products (:meth:`GrammarAnalysis.never_legal_many`).
- ``is_always_legal(X, S)``: every P with PX in L_p has PXS in L_p. Not computable in
  general; proved where possible by *unlimited credit exploration* of the DFT pushdown
  automaton (appendix 4): from "X just read, stack unknown", every stack symbol the
  unknown stack may hold must lead, through moves we may choose (rule choices), to reading
  S next. :meth:`GrammarAnalysis.always_legal` decides that game exactly, without a stack
  bound: a descent into a nonterminal is summarised by its FIRST_K set.
  :func:`unlimited_credit_exploration` is the appendix's bounded breadth-first search over
  the explicit :class:`DFTPushdownAutomaton` (the reference the tests compare against).
- interchangeable terminals (appendix 6.2): A and B such that replacing one occurrence of
  one by the other in any rule gives a rule of the grammar; then PXS and PXφ(S) are in
  L_p together, so their mask-store rows can share a check.
- the one-hop successor relation: b follows a in some sentence (LAST/FIRST sets over the
  reduced grammar; exactly the pairs with ``not is_never_legal(a, (b,))``).

Answers are three-valued where the problem is undecidable (:data:`ALWAYS`, :data:`NEVER`,
:data:`UNKNOWN`); nothing is guessed.

Lexer labels vs grammar terminals: under lark's Indenter the lexer's NEWLINE reaches the
parser followed by any number of INDENT/DEDENT terminals, or not at all (inside
brackets). :class:`GrammarAnalysis` works on lexer labels with exactly that freedom for
never-legal answers, and never claims an always-legal answer across a NEWLINE.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ALWAYS", "NEVER", "UNKNOWN", "START", "Grammar", "DFTPushdownAutomaton", "GrammarAnalysis",
           "unlimited_credit_exploration", "LRGame"]

ALWAYS, NEVER, UNKNOWN = "always", "never", "unknown"
START = "^"  # as a context: the start of the text (nothing before)


@dataclass
class Grammar:
    """A context-free grammar as plain data: symbols are ints, terminals first
    (``0 .. len(terminals)-1``), then nonterminals."""

    terminals: list[str]
    nonterminals: list[str]
    rules: list[tuple[int, tuple[int, ...]]]  # (lhs symbol, rhs symbols)
    start: int

    @property
    def n_terminals(self) -> int:
        return len(self.terminals)

    def is_terminal(self, sym: int) -> bool:
        return sym < len(self.terminals)

    def name(self, sym: int) -> str:
        t = len(self.terminals)
        return self.terminals[sym] if sym < t else self.nonterminals[sym - t]

    @classmethod
    def from_lark(cls, lk, start: str | None = None, extra_terminals: Iterable[str] = ()) -> Grammar:
        """The BNF rules lark compiled (EBNF expanded, templates instantiated), reduced to
        the productive rules reachable from `start`."""
        start = start or lk.options.start[0]
        terminals = sorted({s.name for r in lk.rules for s in r.expansion if s.is_term}
                           | {t.name for t in lk.terminals} | set(extra_terminals))
        nonterms = sorted({r.origin.name for r in lk.rules} | {s.name for r in lk.rules for s in r.expansion
                                                              if not s.is_term})
        ids = {n: i for i, n in enumerate(terminals)}
        ids.update({n: len(terminals) + i for i, n in enumerate(nonterms)})
        rules = [(ids[r.origin.name], tuple(ids[s.name] for s in r.expansion)) for r in lk.rules]
        return cls(terminals, nonterms, rules, ids[start]).reduced()

    def reduced(self) -> Grammar:
        """Only rules whose symbols are all productive and whose lhs is reachable."""
        t = self.n_terminals
        productive = set(range(t))
        changed = True
        while changed:
            changed = False
            for lhs, rhs in self.rules:
                if lhs not in productive and all(s in productive for s in rhs):
                    productive.add(lhs)
                    changed = True
        if self.start not in productive:
            raise ValueError(f"the start symbol {self.name(self.start)!r} derives no sentence")
        rules = [(lhs, rhs) for lhs, rhs in self.rules if lhs in productive and all(s in productive for s in rhs)]
        reach, todo = {self.start}, [self.start]
        while todo:
            a = todo.pop()
            for lhs, rhs in rules:
                if lhs == a:
                    for s in rhs:
                        if s not in reach:
                            reach.add(s)
                            todo.append(s)
        rules = [(lhs, rhs) for lhs, rhs in rules if lhs in reach]
        return Grammar(self.terminals, self.nonterminals, rules, self.start)

    def left_factored(self) -> Grammar:
        """The same language with every set of same-lhs rules sharing a prefix factored:
        ``A: a b c | a b d`` becomes ``A: a b A'; A': c | d``. The DFT pushdown automaton
        of a factored grammar commits to a rule later, so the unlimited credit game
        proves more (``f(`` is always followed by a legal NAME, whether or not the call
        has arguments)."""
        nonterms = list(self.nonterminals)
        rules: list[tuple[int, tuple[int, ...]]] = []
        t = self.n_terminals

        def new_nt(base: int) -> int:
            nonterms.append(f"{nonterms[base - t]}__f{len(nonterms)}")
            return t + len(nonterms) - 1

        def factor(lhs: int, tails: list[tuple[int, ...]]) -> None:
            groups: dict[int | None, list[tuple[int, ...]]] = {}
            for rhs in tails:
                groups.setdefault(rhs[0] if rhs else None, []).append(rhs)
            for head, members in groups.items():
                if head is None or len(members) == 1:
                    rules.append((lhs, members[0]))
                    continue
                common = 1
                while all(len(m) > common for m in members) and len({m[common] for m in members}) == 1:
                    common += 1
                rest = sorted({m[common:] for m in members})
                if len(rest) == 1:
                    rules.append((lhs, members[0]))
                    continue
                sub = new_nt(lhs)
                rules.append((lhs, members[0][:common] + (sub,)))
                factor(sub, rest)

        by_lhs: dict[int, list[tuple[int, ...]]] = {}
        for lhs, rhs in self.rules:
            by_lhs.setdefault(lhs, []).append(rhs)
        for lhs, tails in by_lhs.items():
            factor(lhs, sorted(set(tails)))
        return Grammar(self.terminals, nonterms, rules, self.start)


# ---------------------------------------------------------------------------------------
# The DFT pushdown automaton (appendix 4.1) and the bounded exploration (appendix 4.3)
# ---------------------------------------------------------------------------------------


@dataclass
class DFTPushdownAutomaton:
    """States: terminals (``a``: a was just read), ``•A`` and ``A•`` per nonterminal, and
    $END. Stack symbols: rule positions ``(rule, k)`` ("k symbols of the rule done"),
    encoded as ints, plus Z0. A transition is ``(src, read, pop, push, dst)`` with -1
    for ε in read/pop/push; pop == :attr:`Z0` only on the final ``S• -> $END``."""

    grammar: Grammar
    positions: list[tuple[int, int]]  # stack symbol id -> (rule index, k)
    transitions: list[tuple[int, int, int, int, int]]
    Z0: int = -2

    def start_of(self, sym: int) -> int:
        g = self.grammar
        return sym if g.is_terminal(sym) else g.n_terminals + 2 * (sym - g.n_terminals)

    def end_of(self, sym: int) -> int:
        g = self.grammar
        return sym if g.is_terminal(sym) else g.n_terminals + 2 * (sym - g.n_terminals) + 1

    @property
    def end_state(self) -> int:
        g = self.grammar
        return g.n_terminals + 2 * len(g.nonterminals)

    @property
    def initial_state(self) -> int:
        return self.start_of(self.grammar.start)

    @classmethod
    def build(cls, g: Grammar) -> DFTPushdownAutomaton:
        positions: list[tuple[int, int]] = []
        pos_id: dict[tuple[int, int], int] = {}
        trans = []

        def pid(r: int, k: int) -> int:
            if (r, k) not in pos_id:
                pos_id[(r, k)] = len(positions)
                positions.append((r, k))
            return pos_id[(r, k)]

        pda = cls(g, positions, trans)
        for r, (lhs, rhs) in enumerate(g.rules):
            if not rhs:
                trans.append((pda.start_of(lhs), -1, -1, -1, pda.end_of(lhs)))
                continue
            first = rhs[0]
            trans.append((pda.start_of(lhs), first if g.is_terminal(first) else -1, -1, pid(r, 1), pda.start_of(first)))
            for k in range(1, len(rhs)):
                nxt = rhs[k]
                trans.append((pda.end_of(rhs[k - 1]), nxt if g.is_terminal(nxt) else -1, pid(r, k), pid(r, k + 1),
                              pda.start_of(nxt)))
            trans.append((pda.end_of(rhs[-1]), -1, pid(r, len(rhs)), -1, pda.end_of(lhs)))
        trans.append((pda.end_of(g.start), -1, cls.Z0, -1, pda.end_state))
        return pda

    def accepts(self, word: Sequence[int], max_steps: int = 100000) -> bool:
        """Whether the automaton accepts `word` (breadth-first searches over
        configurations with a growing stack bound; for tests on small grammars)."""
        bound = 2
        while bound <= len(word) + 2 * len(self.grammar.rules) + 2:
            if self._accepts(word, bound, max_steps):
                return True
            bound *= 2
        return False

    def _accepts(self, word: Sequence[int], bound: int, max_steps: int) -> bool:
        by_src: dict[int, list] = {}
        for t in self.transitions:
            by_src.setdefault(t[0], []).append(t)
        start = (self.initial_state, (self.Z0,), 0)
        seen, todo = {start}, deque([start])
        steps = 0
        while todo and steps < max_steps:
            steps += 1
            state, stack, i = todo.popleft()
            if state == self.end_state and i == len(word) and not stack:
                return True
            for _, read, pop, push, dst in by_src.get(state, ()):
                if read >= 0 and (i >= len(word) or word[i] != read):
                    continue
                st = stack
                if pop != -1:
                    if not st or st[-1] != pop:
                        continue
                    st = st[:-1]
                if push >= 0:
                    st = st + (push,)
                if len(st) > bound:
                    continue
                node = (dst, st, i + (read >= 0))
                if node not in seen:
                    seen.add(node)
                    todo.append(node)
        return False


def unlimited_credit_exploration(pda: DFTPushdownAutomaton, x: int, seq: Sequence[int],
                                 max_stack: int = 8, max_nodes: int = 200000) -> bool | None:
    """Appendix 4.3: True if the exploration proves ``is_always_legal(x, seq)``, None
    (unknown) otherwise. Breadth-first from (x, empty known stack); popping from an empty
    known stack borrows the symbol (a "debt" edge); the known stack is bounded by
    `max_stack`. (x, ε) must be ε-coaccessible in the debt NFA: final nodes (seq read)
    are; a node with a choice (a ``•A`` state) is if one move leads to one; a node with a
    known stack top is if its only move does; a node with an empty known stack is if every
    symbol the unknown stack may hold leads to one."""
    seq = tuple(seq)
    by_src: dict[int, list] = {}
    for t in pda.transitions:
        by_src.setdefault(t[0], []).append(t)

    def moves(node):
        """(kind, successors): kind "any" (choice) or "all" (borrowed symbols)."""
        state, stack, i = node
        out = []
        borrow = not stack
        for _, read, pop, push, dst in by_src.get(state, ()):
            st = stack
            if pop == pda.Z0:
                if borrow:
                    out.append(None)  # the text may end here: a dead branch
                continue
            if pop >= 0:
                if st:
                    if st[-1] != pop:
                        continue
                    st = st[:-1]
            if read >= 0:
                if i >= len(seq) or read != seq[i]:
                    out.append(None)
                    continue
            if push >= 0:
                st = st + (push,)
            if len(st) > max_stack:
                out.append(None)
                continue
            out.append((dst, st, i + (read >= 0)))
        kind = "all" if borrow and state != pda.end_state and not _is_start_state(pda, state) else "any"
        if kind == "any":
            out = [n for n in out if n is not None]
        return kind, out

    start = (x, (), 0)
    graph: dict = {}
    todo = deque([start])
    while todo:
        node = todo.popleft()
        if node in graph:
            continue
        if node[2] == len(seq) and node != start:
            graph[node] = ("final", [])
            continue
        if len(graph) > max_nodes:
            return None
        kind, succ = moves(node)
        graph[node] = (kind, succ)
        for n in succ:
            if n is not None and n not in graph:
                todo.append(n)
    co: set = {n for n, (k, _) in graph.items() if k == "final"}
    changed = True
    while changed:
        changed = False
        for node, (kind, succ) in graph.items():
            if node in co:
                continue
            ok = (any(n in co for n in succ) if kind == "any"
                  else bool(succ) and all(n is not None and n in co for n in succ))
            if ok:
                co.add(node)
                changed = True
    return True if start in co else None


def _is_start_state(pda: DFTPushdownAutomaton, state: int) -> bool:
    g = pda.grammar
    return state >= g.n_terminals and state < pda.end_state and (state - g.n_terminals) % 2 == 0


# ---------------------------------------------------------------------------------------
# The analyses over lexer labels
# ---------------------------------------------------------------------------------------


@dataclass
class GrammarAnalysis:
    """All analyses of one grammar, over its lexer labels (terminal names).

    `newline`: the Indenter's NEWLINE terminal (may vanish inside brackets, is followed by
    any INDENT/DEDENTs in `indent_terminals`), or None without an indenter.
    """

    grammar: Grammar
    newline: str | None = None
    indent_terminals: tuple[str, ...] = ()
    brackets: tuple[str, ...] = ()  # the Indenter's open/close terminals (never merged)
    first_k: int = 2
    source: Grammar | None = None  # the grammar before left factoring (for interchangeability)

    @classmethod
    def from_lark(cls, lk, start: str | None = None, first_k: int = 2) -> GrammarAnalysis:
        """Analyses of a grammar loaded by lark (with its Indenter, if any)."""
        pl = lk.options.postlex
        nl = getattr(pl, "NL_type", None)
        extra = (pl.INDENT_type, pl.DEDENT_type) if nl else ()
        g = Grammar.from_lark(lk, start, extra_terminals=extra)
        brackets = tuple(pl.OPEN_PAREN_types) + tuple(pl.CLOSE_PAREN_types) if nl else ()
        return cls(g.left_factored(), newline=nl, indent_terminals=extra, brackets=brackets, first_k=first_k,
                   source=g)

    def __post_init__(self) -> None:
        g = self.grammar
        self.t = g.n_terminals
        self.ids = {n: i for i, n in enumerate(g.terminals)}
        self.nl = self.ids.get(self.newline) if self.newline else None
        self.dents = frozenset(self.ids[n] for n in self.indent_terminals if n in self.ids)
        self._nullable()
        self._first_last()
        self._occurrences()
        self.follow = self._bigrams()
        self._firstk = self._first_k_sets(self.first_k)
        self._always_memo: dict = {}

    # -- basic sets ------------------------------------------------------------------
    def _nullable(self) -> None:
        g = self.grammar
        self.nullable = np.zeros(self.t + len(g.nonterminals), dtype=bool)
        changed = True
        while changed:
            changed = False
            for lhs, rhs in g.rules:
                if not self.nullable[lhs] and all(self.nullable[s] for s in rhs):
                    self.nullable[lhs] = changed = True

    def _first_last(self) -> None:
        g = self.grammar
        n = self.t + len(g.nonterminals)
        first = [set() for _ in range(n)]
        last = [set() for _ in range(n)]
        for a in range(self.t):
            first[a].add(a)
            last[a].add(a)
        changed = True
        while changed:
            changed = False
            for lhs, rhs in g.rules:
                for seq, table in ((rhs, first), (rhs[::-1], last)):
                    for s in seq:
                        if not table[s] <= table[lhs]:
                            table[lhs] |= table[s]
                            changed = True
                        if not self.nullable[s]:
                            break
        self.first, self.last = first, last

    def _occurrences(self) -> None:
        """occ[sym] = [(rule, k)]: positions right after an occurrence of sym."""
        g = self.grammar
        self.occ: list[list[tuple[int, int]]] = [[] for _ in range(self.t + len(g.nonterminals))]
        for r, (_, rhs) in enumerate(g.rules):
            for k, s in enumerate(rhs, 1):
                self.occ[s].append((r, k))

    def _bigrams(self) -> np.ndarray:
        """follow[a, b]: the grammar terminal b directly follows a in some sentence."""
        g = self.grammar
        f = np.zeros((self.t, self.t), dtype=bool)
        for _, rhs in g.rules:
            for i, s in enumerate(rhs):
                lasts = list(self.last[s])
                if not lasts:
                    continue
                for j in range(i + 1, len(rhs)):
                    firsts = list(self.first[rhs[j]])
                    if firsts:
                        f[np.ix_(lasts, firsts)] = True
                    if not self.nullable[rhs[j]]:
                        break
        return f

    def _first_k_sets(self, k: int) -> list[frozenset[tuple[int, ...]]]:
        """FIRST_k: the k-prefixes of the strings each symbol derives (shorter tuples are
        whole strings)."""
        g = self.grammar
        sets: list[set[tuple[int, ...]]] = [{(a,)} if a < self.t else set() for a in range(self.t + len(g.nonterminals))]
        changed = True
        while changed:
            changed = False
            for lhs, rhs in g.rules:
                acc = {()}
                for s in rhs:
                    if all(len(w) >= k for w in acc):
                        break
                    nxt = set()
                    for w in acc:
                        if len(w) >= k:
                            nxt.add(w)
                        else:
                            for v in sets[s]:
                                nxt.add((w + v)[:k])
                    acc = nxt
                if not acc <= sets[lhs]:
                    sets[lhs] |= acc
                    changed = True
        return [frozenset(s) for s in sets]

    # -- one hop ----------------------------------------------------------------------
    def label_follows(self, a: str, b: str) -> bool:
        """One-hop successor relation over lexer labels (NEWLINE may vanish, so any pair
        with it is possible; INDENT/DEDENT after NEWLINE are skipped)."""
        ia, ib = self.ids.get(a), self.ids.get(b)
        if ia is None or ib is None:
            return False
        if self.nl is not None and self.nl in (ia, ib):
            return True
        return bool(self.follow[ia, ib])

    def _nl_follow(self, b: int) -> bool:
        """NEWLINE INDENT/DEDENT* b in some sentence."""
        if self.follow[self.nl, b]:
            return True
        seen, todo = set(), [d for d in self.dents if self.follow[self.nl, d]]
        while todo:
            d = todo.pop()
            if d in seen:
                continue
            seen.add(d)
            if self.follow[d, b]:
                return True
            todo.extend(e for e in self.dents if self.follow[d, e])
        return False

    def chain_possible(self, labels: Sequence[str], after: str | None = None) -> bool:
        """False if some adjacent pair of `labels` (after the label `after`, if given)
        can never be adjacent in a sentence: the one-hop relation along the chain, a
        NEWLINE either kept (then INDENT/DEDENTs may follow it) or vanished."""
        unknown = -2  # whatever came before
        if after == START:
            states = {-3}
        else:
            states = {unknown} if after is None else self._lexer_states({unknown}, after)
        if not states:
            return False
        for name in labels:
            states = self._lexer_states(states, name)
            if not states:
                return False
        return True

    def _lexer_states(self, states: set[int], name: str) -> set[int] | None:
        """The possible last kept grammar terminals after one more lexer label."""
        b = self.ids.get(name)
        if b is None:
            return set()
        if b == self.nl:
            return states | ({b} if any(self._pair(s, b) for s in states) else set())
        return {b} if any(self._pair(s, b) for s in states) else set()

    def _pair(self, a: int, b: int) -> bool:
        if a == -2:
            return True
        if a == -3:  # the start of the text
            return b in self.first[self.grammar.start] or (b in self.dents)
        if a == self.nl and self.nl is not None:
            return self._nl_follow(b)
        return bool(self.follow[a, b])

    # -- interchangeable terminals ----------------------------------------------------
    def interchangeable_groups(self, candidates: Iterable[str] | None = None,
                               exclude: Iterable[str] = ()) -> list[list[str]]:
        """Groups (size >= 2) of terminals each replaceable by another in every rule
        (appendix 6.2); the first of each group is its representative. The Indenter's
        NEWLINE, INDENT/DEDENT and bracket terminals are left out (the postlexer treats
        them apart)."""
        g = self.source or self.grammar
        contexts: dict[int, set] = {}
        for r, (lhs, rhs) in enumerate(g.rules):
            for i, s in enumerate(rhs):
                if s < self.t:
                    contexts.setdefault(s, set()).add((lhs, rhs[:i], rhs[i + 1:]))
        excluded = set(exclude)
        allowed = None if candidates is None else {self.ids[c] for c in candidates if c in self.ids}
        by_ctx: dict[frozenset, list[int]] = {}
        for a, ctx in contexts.items():
            if allowed is not None and a not in allowed:
                continue
            if a == self.nl or a in self.dents or g.terminals[a] in excluded:
                continue
            by_ctx.setdefault(frozenset(ctx), []).append(a)
        groups = [sorted(g.terminals[a] for a in members) for members in by_ctx.values() if len(members) > 1]
        return sorted(groups, key=lambda grp: (-len(grp), grp))

    # -- always legal -------------------------------------------------------------------
    def always_legal(self, x: str, seq: Sequence[str]) -> bool:
        """True iff the unlimited credit game proves ``is_always_legal(x, seq)`` (sound;
        False means "not proved"). `seq` is at most ``first_k`` long; NEWLINE in x or seq
        is never proved."""
        ix = self.ids.get(x)
        s = tuple(self.ids.get(n, -1) for n in seq)
        if ix is None or -1 in s or len(s) > self.first_k:
            return False
        if self.nl is not None and (ix == self.nl or self.nl in s):
            return False
        if not s:
            return True
        return self._solve(("sym", ix, s))

    def _solve(self, root) -> bool:
        memo = self._always_memo
        if root in memo:
            return memo[root]
        # collect the closure of nodes and their successors, then a least fixpoint
        deps: dict = {}
        todo = [root]
        while todo:
            node = todo.pop()
            if node in deps or node in memo:
                continue
            kind, succ = self._node(node)
            deps[node] = (kind, succ)
            todo.extend(n for n in succ if isinstance(n, tuple) and n not in deps and n not in memo)
        value = {n: False for n in deps}

        def val(n):
            if n is True or n is False:
                return n
            return memo[n] if n in memo else value[n]

        changed = True
        while changed:
            changed = False
            for node, (kind, succ) in deps.items():
                if value[node]:
                    continue
                ok = any(val(n) for n in succ) if kind == "any" else (bool(succ) and all(val(n) for n in succ))
                if ok:
                    value[node] = changed = True
        memo.update(value)
        return value[root]

    def _node(self, node):
        g = self.grammar
        if node[0] == "sym":  # symbol just completed, stack unknown: every parent position
            _, sym, s = node
            succ: list = [("next", r, k, s) for r, k in self.occ[sym]]
            if sym == g.start:
                succ.append(False)  # the text may end here
            return "all", succ
        _, r, k, s = node
        if not s:
            return "any", [True]
        lhs, rhs = g.rules[r]
        if k == len(rhs):
            return "any", [("sym", lhs, s)]
        beta = rhs[k]
        if beta < self.t:
            if beta in self.dents or beta != s[0]:
                return "any", [False]
            return "any", [("next", r, k + 1, s[1:])]
        succ = []
        m = len(s)
        for w in self._firstk[beta]:
            if len(w) >= m:
                if w[:m] == s:
                    return "any", [True]
            elif s[: len(w)] == w:
                succ.append(("next", r, k + 1, s[len(w):]))
        return "any", succ

    # -- never legal (Bar-Hillel) ----------------------------------------------------
    def _nfa(self, seq: Sequence[str], after: str | None):
        """ε-free NFA (as per-terminal transition matrices, initial and final vectors) of
        Σ* [after] seq Σ* over grammar terminals, NEWLINE optional and followed by any
        INDENT/DEDENTs."""
        anchored = after == START
        items = ([after] if after is not None and not anchored else []) + list(seq)
        # states: 0 (Σ* loop), then per item one state, plus a "dents" state after a NEWLINE
        eps: list[tuple[int, int]] = []
        edges: list[tuple[int, int, int]] = []  # (src, terminal, dst)
        n = 1
        cur = 0
        for name in items:
            a = self.ids.get(name)
            if a is None:
                return None
            if a == self.nl:
                d = n
                nxt = n + 1
                n += 2
                edges.append((cur, a, d))
                for dent in self.dents:
                    edges.append((d, dent, d))
                eps.append((d, nxt))
                eps.append((cur, nxt))  # vanished inside brackets
            else:
                nxt = n
                n += 1
                edges.append((cur, a, nxt))
            cur = nxt
        final = cur
        # ε-closure
        closure = np.eye(n, dtype=bool)
        for p, q in eps:
            closure[p, q] = True
        for _ in range(n):
            closure = closure | (closure.astype(np.uint8) @ closure.astype(np.uint8) > 0)
        # T'_a = C T_a C folds the closures in; as a boolean sum over T_a's entries (p, q)
        # of the outer products C[:, p] C[q, :] (T_a: the Σ* loops plus a few edges)
        base = np.outer(closure[:, final], closure[final, :])
        if not anchored:
            base |= np.outer(closure[:, 0], closure[0, :])
        trans = np.broadcast_to(base, (self.t, n, n)).copy()
        for p, a, q in edges:
            trans[a] |= np.outer(closure[:, p], closure[q, :])
        init = closure[0]
        fin = closure[:, final]
        return trans, init, fin

    def never_legal(self, seq: Sequence[str], after: str | None = None) -> bool:
        """Exact ``is_never_legal(after, seq)`` (``after=None``: seq occurs nowhere;
        ``after=START``: no sentence starts with seq)."""
        return self.never_legal_many([(tuple(seq), after)])[0]

    def never_legal_many(self, queries: Sequence[tuple[Sequence[str], str | None]], batch: int = 512,
                         workers: int | None = None) -> list[bool]:
        """Exact answers for many queries, batched: queries with automata of the same size
        run their fixpoints together as stacked boolean matrices. A batch's automata are
        built when it runs (not all up front: memory). With `workers` > 1 (default: 2 where
        two CPUs are available and there are over 4,096 queries) a forked process takes
        every other batch; the batches are independent."""
        out: list[bool | None] = [None] * len(queries)
        groups: dict[int, list[int]] = {}
        for qi, (seq, after) in enumerate(queries):
            n = self._nfa_size(seq, after)
            if n is None:
                out[qi] = True
                continue
            groups.setdefault(n, []).append(qi)
        chunks = [items[b0 : b0 + batch] for _, items in sorted(groups.items()) for b0 in range(0, len(items), batch)]
        if workers is None:
            workers = 2 if len(queries) > 4096 and _cpus() >= 2 else 1
        mine = range(len(chunks))
        theirs = None
        import multiprocessing

        if multiprocessing.current_process().daemon:  # a Pool worker may not fork children: work alone
            workers = 1
        if workers > 1 and len(chunks) > 1:
            import concurrent.futures

            global _FORKED
            _FORKED = (self, queries, chunks)
            pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
            theirs = pool.submit(_never_chunks, list(range(1, len(chunks), 2)))
            mine = range(0, len(chunks), 2)
        try:
            for k in mine:
                for qi, e in zip(chunks[k], self._never_chunk(queries, chunks[k])):
                    out[qi] = bool(e)
            if theirs is not None:
                for k, empty in theirs.result():
                    for qi, e in zip(chunks[k], empty):
                        out[qi] = bool(e)
        finally:
            if theirs is not None:
                pool.shutdown()
                _FORKED = None
        return out  # type: ignore[return-value]

    def _never_chunk(self, queries, chunk: list[int]) -> np.ndarray:
        return self._bar_hillel([self._nfa(*queries[qi]) for qi in chunk])

    def _nfa_size(self, seq: Sequence[str], after: str | None) -> int | None:
        """The number of states :meth:`_nfa` gives (None: a label the grammar lacks)."""
        items = ([after] if after is not None and after != START else []) + list(seq)
        n = 1
        for name in items:
            a = self.ids.get(name)
            if a is None:
                return None
            n += 2 if a == self.nl else 1
        return n

    def _bar_hillel(self, nfas) -> np.ndarray:
        g = self.grammar
        q = len(nfas)
        n = nfas[0][0].shape[1]
        term = np.stack([nfa[0] for nfa in nfas], axis=1).astype(np.float32)  # (t, q, n, n)
        ident = np.broadcast_to(np.eye(n, dtype=np.float32), (q, n, n))
        rel = {a: None for a in range(self.t, self.t + len(g.nonterminals))}
        zero = np.zeros((q, n, n), dtype=np.float32)
        by_lhs: dict[int, list[tuple[int, ...]]] = {}
        for lhs, rhs in g.rules:
            by_lhs.setdefault(lhs, []).append(rhs)
        order = self._bottom_up_order(by_lhs)

        def sym_rel(s):
            if s < self.t:
                return term[s]
            r = rel[s]
            return zero if r is None else r

        # semi-naive: a nonterminal is re-evaluated only when a symbol of its rules changed
        version = {a: 0 for a in rel}
        evaluated: dict[int, tuple] = {}
        rhs_syms = {lhs: sorted({s for rhs in rules for s in rhs if s >= self.t}) for lhs, rules in by_lhs.items()}
        changed = True
        while changed:
            changed = False
            for lhs in order:
                stamp = tuple(version[s] for s in rhs_syms[lhs])
                if evaluated.get(lhs) == stamp:
                    continue
                evaluated[lhs] = stamp
                acc = rel[lhs]
                new = np.zeros((q, n, n), dtype=np.float32) if acc is None else acc.copy()
                for rhs in by_lhs[lhs]:
                    prod = ident
                    for s in rhs:
                        m = sym_rel(s)
                        if m is zero:
                            prod = None
                            break
                        prod = np.minimum(np.matmul(prod, m), 1.0)
                        if not prod.any():
                            prod = None
                            break
                    if prod is not None:
                        np.maximum(new, prod, out=new)
                if acc is None:
                    if new.any():
                        rel[lhs] = new
                        version[lhs] += 1
                        changed = True
                elif (new > acc).any():
                    rel[lhs] = new
                    version[lhs] += 1
                    changed = True
        start = rel[g.start]
        if start is None:
            return np.ones(q, dtype=bool)
        init = np.stack([nfa[1] for nfa in nfas]).astype(np.float32)
        fin = np.stack([nfa[2] for nfa in nfas]).astype(np.float32)
        reach = np.einsum("qp,qpr,qr->q", init, start, fin)
        return reach == 0

    def _bottom_up_order(self, by_lhs) -> list[int]:
        """Nonterminals ordered so that (outside cycles) a rule's symbols come first."""
        order, seen = [], set()

        def visit(a):
            stack = [(a, iter(by_lhs.get(a, [])))]
            seen.add(a)
            while stack:
                node, it = stack[-1]
                advanced = False
                for rhs in it:
                    for s in rhs:
                        if s >= self.t and s not in seen and s in by_lhs:
                            seen.add(s)
                            stack.append((s, iter(by_lhs.get(s, []))))
                            advanced = True
                            break
                    if advanced:
                        break
                if not advanced:
                    order.append(node)
                    stack.pop()

        for a in by_lhs:
            if a not in seen:
                visit(a)
        return order


_FORKED = None  # (analysis, queries, chunks) for a forked never_legal_many worker


def _never_chunks(ks: list[int]) -> list[tuple[int, np.ndarray]]:
    ga, queries, chunks = _FORKED
    return [(k, ga._never_chunk(queries, chunks[k])) for k in ks]


def _cpus() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# ---------------------------------------------------------------------------------------
# The same game on the LALR automaton
# ---------------------------------------------------------------------------------------


class LRGame:
    """``is_always_legal(X, S)`` proved on the LALR automaton instead of the DFT pushdown
    automaton: the parser's stack after PX is unknown except that its top state was
    entered by X; S is fed from every such state, and a reduction that pops below what
    is known continues from every state that can lie there (a predecessor along the
    rule's right-hand side). The LR parser is deterministic and commits to a rule only
    when it reduces, so it proves pairs the DFT automaton cannot (``from .`` may go on
    with a name or with ``import``). Every answer is sound: the states considered
    include every stack a real prefix can produce."""

    def __init__(self, tables):
        self.tables = tables
        # the tables with plain str symbols: lark's names are Token objects, whose Python
        # __eq__ made dict look-ups the game's main cost
        self.actions = {s: {str(k): v for k, v in acts.items()} for s, acts in tables.actions.items()}
        self.goto = {s: {str(k): v for k, v in row.items()} for s, row in tables.goto.items()}
        self.rules = [(str(lhs), size) for lhs, size in tables.rules]
        self.accessing: dict[int, str] = {}
        self.pred: dict[tuple[int, str], set[int]] = {}
        for s, acts in self.actions.items():
            for sym, (is_shift, arg) in acts.items():
                if is_shift:
                    self.accessing[arg] = sym
                    self.pred.setdefault((arg, sym), set()).add(s)
            for sym, nxt in self.goto.get(s, {}).items():
                self.accessing[nxt] = sym
                self.pred.setdefault((nxt, sym), set()).add(s)
        self.rhs: list[tuple[str, ...]] = [tuple(str(x) for x in r) for r in tables.rule_rhs]
        self.entered_by: dict[str, list[int]] = {}
        for s, sym in self.accessing.items():
            self.entered_by.setdefault(sym, []).append(s)
        self._memo: dict = {}

    def always(self, x: str | None, seq: Sequence[str]) -> bool:
        """All of seq is legal after any prefix ending with x (x=None: the start of the
        text, whose stack is known exactly)."""
        seq = tuple(map(str, seq))
        if x is None:
            return self._run((self.tables.start_state,), True, seq)
        x = str(x)
        starts = self.entered_by.get(x)
        if not starts:
            return False
        return all(self._run((s,), False, seq) for s in starts)

    def _run(self, stack: tuple[int, ...], complete: bool, seq: tuple[str, ...], budget: int = 2000) -> bool:
        """Feed seq from `stack` (its bottom known to be the real bottom iff `complete`);
        True iff every possibility shifts all of seq."""
        key = (stack, complete, seq)
        got = self._memo.get(key)
        if got is not None:
            return got
        todo = [(stack, 0)]
        ok = True
        steps = 0
        while todo and ok:
            st, i = todo.pop()
            while i < len(seq):
                steps += 1
                if steps > budget:
                    ok = False
                    break
                act = self.actions[st[-1]].get(seq[i])
                if act is None:
                    ok = False
                    break
                is_shift, arg = act
                if is_shift:
                    st = st + (arg,)
                    i += 1
                    continue
                lhs, size = self.rules[arg]
                if size < len(st):
                    base = st[: len(st) - size]
                    nxt = self.goto[base[-1]].get(lhs)
                    if nxt is None:
                        ok = False
                        break
                    st = base + (nxt,)
                    continue
                if complete:
                    ok = False  # cannot pop the real bottom
                    break
                # pops every known state and size - len(st) unknown ones: continue from
                # every state that can lie below, along the rule's right-hand side
                rhs = self.rhs[arg]
                below = {st[0]}
                for sym in reversed(rhs[: size - len(st) + 1]):
                    below = {p for s in below for p in self.pred.get((s, sym), ())}
                succ = [(p, self.goto[p][lhs]) for p in below if lhs in self.goto.get(p, {})]
                if not succ:
                    ok = False
                    break
                todo.extend((s, i) for s in succ[1:])
                st = succ[0]
        self._memo[key] = ok
        return ok

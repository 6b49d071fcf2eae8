"""LALR(1) parse tables from lark's compiled rules, built by the compiled core.

The same tables lark builds (``lark/parsers/lalr_analysis.py``: its augmentation, its
lookaheads, reduce/reduce collisions resolved by a unique highest rule priority,
shift/reduce as shift), up to state numbering: states are numbered breadth-first from the
start state (0). Replaces lark's Python construction, which is most of lark's load time
for large grammars (python.lark: ~0.65 s of 0.9 s).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from .parse_tables import END, ParseTables, TableArrays
from .terminals import GrammarCompileError

__all__ = ["parse_tables", "parse_tables_of", "LalrTables"]


def parse_tables(rules: Sequence, start: str) -> LalrTables:
    """LALR(1) tables for lark's compiled `rules` (``lark.Lark(...).rules`` or
    ``Grammar.compile(...)[1]``: ``rule.origin``, ``rule.expansion`` of terminals and
    nonterminals, ``rule.options.priority``) from the nonterminal `start`.

    Raises :class:`GrammarCompileError` like lark's GrammarError: for a rule given twice,
    a nonterminal used but given no rule (or a `start` without rules), and reduce/reduce
    collisions no rule priority resolves (naming the terminal and the rules).
    """
    # origins' names are lark Tokens, made plain strings (whose comparisons are not Python code)
    rows = [((str.__str__(rule.origin.name), False), [(sym.name, sym.is_term) for sym in rule.expansion])
            for rule in rules]
    return _tables(rows, [rule.options.priority or 0 for rule in rules], start)


def parse_tables_of(rules: Sequence[tuple[str, Sequence[str]]], terminals, start: str) -> LalrTables:
    """:func:`parse_tables` for rules given as ``(origin, expansion)`` names, `terminals` the set of
    names that are terminals (every other name a nonterminal), all priorities 0: for a front end that
    writes its rules directly (JSON Schema), with no lark ``Rule`` objects."""
    rows = [((lhs, False), [(x, x in terminals) for x in rhs]) for lhs, rhs in rules]
    return _tables(rows, [0] * len(rows), start)


def _tables(rows, priorities, start: str) -> LalrTables:
    from ..._native import core

    # symbols numbered in order of first appearance (origin, then expansion, rule by rule)
    sym_id: dict[tuple[str, bool], int] = {}
    number = sym_id.setdefault
    origin_l: list[int] = []
    rhs_l: list[int] = []
    rhs_off = [0]
    for o, expansion in rows:
        origin_l.append(number(o, len(sym_id)))
        rhs_l.extend([number(x, len(sym_id)) for x in expansion])
        rhs_off.append(len(rhs_l))
    start_id = number((start, False), len(sym_id))
    origin, rhs = np.array(origin_l, dtype=np.int32), np.array(rhs_l, dtype=np.int32)
    rhs_off_a = np.array(rhs_off, dtype=np.int32)
    is_term = np.array([t for _, t in sym_id], dtype=np.int32)
    priority = np.array(priorities, dtype=np.int32)
    out = core().build_lalr(is_term, origin, rhs_off_a, rhs, priority, start_id)
    names = [n for n, _ in sym_id] + [END]  # out["end_term"] == len(names) - 1
    _raise_errors(out, names, origin, rhs_off, rhs)
    return LalrTables(start, out, names, origin, rhs_off_a, rhs)


class LalrTables(ParseTables):
    """The native core's tables: arrays over symbol ids (:meth:`arrays`, what the flat
    arrays are built from); the dicts of :class:`ParseTables` are built on first use."""

    def __init__(self, start: str, out: dict, names: list[str], origin: np.ndarray, rhs_off: np.ndarray,
                 rhs: np.ndarray):
        self.start, self.start_state, self.end_state = start, int(out["start_state"]), int(out["end_state"])
        self.shift_reduce = int(out["shift_reduce"])  # shift/reduce conflicts resolved as shift (lark's rule)
        self._names, self._rhs_off, self._rhs = names, rhs_off, rhs
        n = self._n_states = int(out["n_states"])
        red_rule = out["reduce_rule"]
        first, at = np.unique(red_rule, return_index=True)
        self._used = first[np.argsort(at)]  # grammar rules in order of first use: the tables' rules
        index = np.zeros(len(origin), dtype=np.int32)
        index[self._used] = np.arange(len(self._used), dtype=np.int32)

        def rows(off: np.ndarray, sym: np.ndarray, val: np.ndarray) -> np.ndarray:
            return np.stack([np.repeat(np.arange(n, dtype=np.int32), np.diff(off)), sym, val], axis=1)

        self._shifts = rows(out["shift_off"], out["shift_term"], out["shift_to"])
        self._reduces = rows(out["reduce_off"], out["reduce_term"], index[red_rule])
        self._gotos = rows(out["goto_off"], out["goto_sym"], out["goto_to"])
        self._rule_lhs = origin[self._used]

    def arrays(self) -> TableArrays:
        return TableArrays(self._names, self._n_states, self._shifts, self._reduces, self._gotos, self._rule_lhs)

    @functools.cached_property
    def rules(self) -> list[tuple[str, int]]:
        off, names = self._rhs_off.tolist(), self._names
        return [(names[o], off[r + 1] - off[r]) for r, o in zip(self._used.tolist(), self._rule_lhs.tolist())]

    @functools.cached_property
    def rule_rhs(self) -> list[tuple[str, ...]]:
        names, off, rhs = self._names, self._rhs_off.tolist(), self._rhs.tolist()
        return [tuple(names[s] for s in rhs[off[r]:off[r + 1]]) for r in self._used.tolist()]

    @functools.cached_property
    def terminals(self) -> frozenset[str]:
        syms = np.unique(np.concatenate([self._shifts[:, 1], self._reduces[:, 1]]))
        return frozenset(self._names[s] for s in syms.tolist())

    @functools.cached_property
    def actions(self) -> dict[int, dict[str, tuple[bool, int]]]:
        names, n = self._names, self._n_states
        shift_act = [(True, s) for s in range(n)]
        red_act = [(False, i) for i in range(len(self._used))]
        actions: dict[int, dict[str, tuple[bool, int]]] = {s: {} for s in range(n)}
        for s, t, to in self._shifts.tolist():
            actions[s][names[t]] = shift_act[to]
        for s, t, i in self._reduces.tolist():
            actions[s][names[t]] = red_act[i]
        return actions

    @functools.cached_property
    def goto(self) -> dict[int, dict[str, int]]:
        names = self._names
        goto: dict[int, dict[str, int]] = {s: {} for s in range(self._n_states)}
        for s, nt, to in self._gotos.tolist():
            goto[s][names[nt]] = to
        return goto


def _raise_errors(out: dict, names: list[str], origin: np.ndarray, rhs_off: list[int], rhs: np.ndarray) -> None:
    """lark's grammar errors, as GrammarCompileError (rules as symbol ids: `origin`, CSR `rhs`)."""
    def rule_name(r: int) -> str:  # as lark shows a rule
        return f"<{names[origin[r]]} : {' '.join(names[s] for s in rhs[rhs_off[r]:rhs_off[r + 1]].tolist())}>"

    dup = out["duplicates"].tolist()
    if dup:
        rules = list(dict.fromkeys(dup[0::2]))  # each rule given more than once, once
        raise GrammarCompileError(names[origin[rules[0]]],
                                  "Rules defined twice: " + ", ".join(rule_name(r) for r in rules), kind="rule")
    undef = out["undefined"].tolist()
    if undef:
        seen: dict[int, int] = {}
        for r, s in zip(undef[0::2], undef[1::2]):
            seen.setdefault(s, r)
        parts = [f"NonTerminal({str(names[s])!r}) ({'the start' if r < 0 else 'in ' + rule_name(r)})"
                 for s, r in seen.items()]
        first = next(iter(seen))
        raise GrammarCompileError(names[first], "Using an undefined rule: " + ", ".join(parts), kind="rule")
    c_term, c_off, c_rules = (out[k].tolist() for k in ("collision_term", "collision_off", "collision_rules"))
    if c_term:
        msgs = dict.fromkeys(  # one message per (terminal, rules), in state order
            f"Reduce/Reduce collision in {names[t]} between the following rules: "
            + "".join(f"\n\t- {rule_name(r)}" for r in c_rules[c_off[i]:c_off[i + 1]])
            for i, t in enumerate(c_term))
        raise GrammarCompileError(names[c_term[0]], "\n\n".join(msgs))

"""LALR(1) parse tables from lark's compiled rules, built by the compiled core.

The same tables lark builds (``lark/parsers/lalr_analysis.py``: its augmentation, its
lookaheads, reduce/reduce collisions resolved by a unique highest rule priority,
shift/reduce as shift), up to state numbering: states are numbered breadth-first from the
start state (0). Replaces lark's Python construction, which is most of lark's load time
for large grammars (python.lark: ~0.65 s of 0.9 s).
"""

from __future__ import annotations

from collections.abc import Sequence

from .parser import END, ParseTables
from .terminals import GrammarCompileError

__all__ = ["parse_tables"]


def parse_tables(rules: Sequence, start: str) -> ParseTables:
    """LALR(1) tables for lark's compiled `rules` (``lark.Lark(...).rules`` or
    ``Grammar.compile(...)[1]``: ``rule.origin``, ``rule.expansion`` of terminals and
    nonterminals, ``rule.options.priority``) from the nonterminal `start`.

    Raises :class:`GrammarCompileError` like lark's GrammarError: for a rule given twice,
    a nonterminal used but given no rule (or a `start` without rules), and reduce/reduce
    collisions no rule priority resolves (naming the terminal and the rules).
    """
    from .._native import core

    sym_id: dict[tuple[str, bool], int] = {}
    is_term: list[int] = []
    names: list[str] = []

    def sid(name: str, term: bool) -> int:
        key = (name, term)
        i = sym_id.get(key)
        if i is None:
            i = sym_id[key] = len(names)
            names.append(name)
            is_term.append(term)
        return i

    origin, rhs_off, rhs, priority = [], [0], [], []
    for rule in rules:
        origin.append(sid(rule.origin.name, False))
        rhs.extend(sid(sym.name, sym.is_term) for sym in rule.expansion)
        rhs_off.append(len(rhs))
        priority.append(rule.options.priority or 0)
    start_id = sid(start, False)
    out = core().build_lalr(is_term, origin, rhs_off, rhs, priority, start_id)

    names.append(END)  # out["end_term"] == len(names) - 1
    rule_rhs = [tuple(names[s] for s in rhs[rhs_off[r]:rhs_off[r + 1]]) for r in range(len(origin))]
    _raise_errors(out, names, [names[o] for o in origin], rule_rhs)

    red_off, red_rule = out["reduce_off"], out["reduce_rule"]
    rule_index: dict[int, int] = {}  # grammar rule -> index in the tables' rules, in order of first use
    for r in red_rule:
        rule_index.setdefault(r, len(rule_index))
    shift_off, goto_off = out["shift_off"], out["goto_off"]
    # per transition and reduction its dict key and value (the value tuples shared)
    shift_name = list(map(names.__getitem__, out["shift_term"]))
    shift_act = list(map([(True, s) for s in range(out["n_states"])].__getitem__, out["shift_to"]))
    goto_name, goto_to = list(map(names.__getitem__, out["goto_sym"])), out["goto_to"]
    red_name = list(map(names.__getitem__, out["reduce_term"]))
    red_act = list(map({r: (False, i) for r, i in rule_index.items()}.__getitem__, red_rule))
    actions: dict[int, dict[str, tuple[bool, int]]] = {}
    goto: dict[int, dict[str, int]] = {}
    for s in range(out["n_states"]):
        acts = dict(zip(shift_name[shift_off[s]:shift_off[s + 1]], shift_act[shift_off[s]:shift_off[s + 1]]))
        acts.update(zip(red_name[red_off[s]:red_off[s + 1]], red_act[red_off[s]:red_off[s + 1]]))
        actions[s] = acts
        goto[s] = dict(zip(goto_name[goto_off[s]:goto_off[s + 1]], goto_to[goto_off[s]:goto_off[s + 1]]))
    used = sorted(rule_index, key=rule_index.__getitem__)
    return ParseTables.from_parts(start, out["start_state"], out["end_state"],
                                  [(names[origin[r]], len(rule_rhs[r])) for r in used],
                                  [rule_rhs[r] for r in used], actions, goto)


def _raise_errors(out: dict, names: list[str], origins: list[str], rule_rhs: list[tuple[str, ...]]) -> None:
    """lark's grammar errors, as GrammarCompileError."""
    def rule_name(r: int) -> str:
        return f"<{origins[r]} : {' '.join(rule_rhs[r])}>"  # as lark shows a rule

    dup = out["duplicates"]
    if dup:
        rules = list(dict.fromkeys(dup[0::2]))  # each rule given more than once, once
        raise GrammarCompileError(origins[rules[0]], "Rules defined twice: " + ", ".join(rule_name(r) for r in rules),
                                  kind="rule")
    undef = out["undefined"]
    if undef:
        seen: dict[int, int] = {}
        for r, s in zip(undef[0::2], undef[1::2]):
            seen.setdefault(s, r)
        parts = [f"NonTerminal({str(names[s])!r}) ({'the start' if r < 0 else 'in ' + rule_name(r)})"
                 for s, r in seen.items()]
        first = next(iter(seen))
        raise GrammarCompileError(names[first], "Using an undefined rule: " + ", ".join(parts), kind="rule")
    c_term, c_off, c_rules = out["collision_term"], out["collision_off"], out["collision_rules"]
    if c_term:
        msgs = dict.fromkeys(  # one message per (terminal, rules), in state order
            f"Reduce/Reduce collision in {names[t]} between the following rules: "
            + "".join(f"\n\t- {rule_name(r)}" for r in c_rules[c_off[i]:c_off[i + 1]])
            for i, t in enumerate(c_term))
        raise GrammarCompileError(names[c_term[0]], "\n\n".join(msgs))

"""The native LALR(1) builder (engine/frontend/lalr.py) against lark's own tables: isomorphic on real
grammars, on random small ones, and lark's conflict handling and grammar errors."""

from __future__ import annotations

import random
import re
from pathlib import Path

import lark
import pytest
from lark.common import ParserConf
from lark.grammar import NonTerminal, Rule, RuleOptions, Terminal
from lark.load_grammar import load_grammar
from lark.parsers.lalr_analysis import LALR_Analyzer

from cad_outlines.engine.compile import load_lark
from cad_outlines.engine.frontend.lalr import parse_tables
from cad_outlines.engine.frontend.parse_tables import ParseTables
from cad_outlines.engine.frontend.terminals import GrammarCompileError
from tests.fixture_data import REPO, shared_data


def assert_isomorphic(ours: ParseTables, theirs: ParseTables) -> None:
    """Walk both tables from their start states in lockstep: one bijection of states under
    which every action, shift target, goto and reduced rule (origin and expansion) agrees,
    the end states correspond and every state of both is reached."""
    to_theirs = {ours.start_state: theirs.start_state}
    to_ours = {theirs.start_state: ours.start_state}
    todo = [ours.start_state]

    def pair(s: int, t: int, where: str) -> None:
        if s in to_theirs:
            assert to_theirs[s] == t, where
        else:
            assert t not in to_ours, where
            to_theirs[s], to_ours[t] = t, s
            todo.append(s)

    while todo:
        s = todo.pop()
        t = to_theirs[s]
        acts, their_acts = ours.actions[s], theirs.actions[t]
        assert acts.keys() == their_acts.keys(), f"state {s}/{t}: terminals {sorted(acts)} vs {sorted(their_acts)}"
        for term, (shift, arg) in acts.items():
            their_shift, their_arg = their_acts[term]
            assert shift == their_shift, f"state {s}/{t} on {term}: shift {shift} vs {their_shift}"
            if shift:
                pair(arg, their_arg, f"state {s}/{t} shifting {term}")
            else:
                rule = (ours.rules[arg][0], ours.rule_rhs[arg])
                their_rule = (theirs.rules[their_arg][0], theirs.rule_rhs[their_arg])
                assert rule == their_rule, f"state {s}/{t} on {term}: reduces {rule} vs {their_rule}"
                assert ours.rules[arg][1] == len(ours.rule_rhs[arg])
        gotos, their_gotos = ours.goto[s], theirs.goto[t]
        assert gotos.keys() == their_gotos.keys(), f"state {s}/{t}: gotos {sorted(gotos)} vs {sorted(their_gotos)}"
        for nt, nxt in gotos.items():
            pair(nxt, their_gotos[nt], f"state {s}/{t} goto {nt}")
    assert to_theirs.get(ours.end_state) == theirs.end_state
    assert len(to_theirs) == len(ours.actions) == len(theirs.actions)


def check_against_lark(lk: lark.Lark) -> None:
    start = lk.options.start[0]
    assert_isomorphic(parse_tables(lk.rules, start), ParseTables(lk, start))


# A representative subset of the grammars studies walk (analysis/streamlining.py::walk_grammars;
# all 21 there that lark accepts agree, run by hand): small, template-heavy, lark's own, Python 2.
SHARED = ["lark/examples/csv.lark", "lark/examples/verilog.lark", "lark/examples/template_lark.lark",
          "lark/lark.lark", "lark/examples/python2.lark", "outlines/arithmetic.lark", "syncode/tiny.lark"]


def _start_of(path: Path) -> str | None:
    from analysis.streamlining import _start_of

    return _start_of(path)


@pytest.mark.parametrize("name", ["json", "sql", "python", REPO / "grammars" / "copy_edit.lark"],
                         ids=["json", "sql", "python", "copy_edit"])
def test_shipped_grammars_match_lark(name):
    check_against_lark(load_lark(name))


def _entries(tables: ParseTables) -> tuple:
    """:meth:`ParseTables.arrays` by name: each action and goto as (state, symbol name, value)."""
    arr = tables.arrays()

    def named(rows):
        return sorted((s, arr.names[x], v) for s, x, v in rows.tolist())

    return (arr.n_states, named(arr.shifts), named(arr.reduces), named(arr.gotos),
            [arr.names[x] for x in arr.rule_lhs.tolist()])


@pytest.mark.parametrize("name", ["json", "sql", "python"])
def test_native_table_arrays_match_the_dicts(name):
    """The native tables' arrays (what the flat arrays are built from) say what their dicts
    say, and the dicts are ParseTables' own."""
    lk = load_lark(name)
    ours = parse_tables(lk.rules, lk.options.start[0])
    plain = ParseTables.from_parts(ours.start, ours.start_state, ours.end_state, ours.rules, ours.rule_rhs,
                                   ours.actions, ours.goto)
    assert _entries(ours) == _entries(plain)
    assert ours.terminals == plain.terminals
    assert all(n == len(rhs) for (_, n), rhs in zip(ours.rules, ours.rule_rhs))


@pytest.mark.shared_data
@pytest.mark.parametrize("rel", SHARED)
def test_shared_grammars_match_lark(rel):
    path = shared_data() / "grammars" / rel
    start = "single_input" if rel.endswith("python2.lark") else _start_of(path)
    check_against_lark(load_lark(path, start=start))


def _compiled_rules(text: str, start: str = "start") -> list[Rule]:
    grammar, _ = load_grammar(text, "<test>", [], False)
    _, rules, _ = grammar.compile([start], set())
    return rules


def _lark_tables(rules: list[Rule], start: str) -> ParseTables:
    analyzer = LALR_Analyzer(ParserConf(rules, {}, [start]))
    analyzer.compute_lalr()
    terminals = {s.name for r in rules for s in r.expansion if s.is_term}
    return ParseTables.from_lark_table(analyzer.parse_table, start, terminals)


COLLISION = re.compile(r"Reduce/Reduce collision in (?:Terminal\('([^']*)'\)|(\S+)) between the following rules: "
                       r"((?:\n\t- <[^>]*>)+)")


def _collisions(message: str) -> set[tuple[str, frozenset[str]]]:
    """(terminal, rules) of each collision a lark-style message names."""
    return {(m[1] or m[2], frozenset(re.findall(r"<[^>]*>", m[3]))) for m in COLLISION.finditer(message)}


def _same_outcome(rules: list[Rule], start: str) -> str:
    """Both builders agree on `rules`: isomorphic tables, or the same error (collisions:
    the same terminals and rules). Returns what happened; AssertionError if they differ."""
    try:
        theirs, their_error = _lark_tables(rules, start), None
    except lark.exceptions.GrammarError as e:
        theirs, their_error = None, e
    try:
        ours = parse_tables(rules, start)
    except GrammarCompileError as e:
        assert their_error is not None, f"only ours fails: {e}"
        if "collision" in str(their_error):
            assert _collisions(str(e)) == _collisions(str(their_error))
            return "collision"
        assert str(their_error).split(":")[0] in str(e)
        return "error"
    assert their_error is None, f"only lark fails: {their_error}"
    assert_isomorphic(ours, theirs)
    return "ok"


def test_reduce_reduce_collision_names_terminal_and_rules():
    text = """
    start: a | b
    a: NAME
    b: NAME
    NAME: /[a-z]+/
    """
    with pytest.raises(lark.exceptions.GrammarError):
        lark.Lark(text, parser="lalr")
    with pytest.raises(GrammarCompileError) as e:
        parse_tables(_compiled_rules(text), "start")
    msg = str(e.value)
    assert "Reduce/Reduce collision in $END between the following rules" in msg
    assert "<a : NAME>" in msg and "<b : NAME>" in msg
    assert e.value.terminal == "$END"
    assert _same_outcome(_compiled_rules(text), "start") == "collision"


def test_rule_priority_resolves_the_collision_like_lark():
    text = """
    start: a | b
    a.2: NAME
    b: NAME
    NAME: /[a-z]+/
    """
    lk = lark.Lark(text, parser="lalr")
    check_against_lark(lk)
    ours = parse_tables(lk.rules, "start")
    after_name = ours.actions[ours.start_state]["NAME"][1]
    is_shift, rule = ours.actions[after_name]["$END"]
    assert not is_shift and ours.rules[rule] == ("a", 1)
    # equal priorities collide again
    with pytest.raises(GrammarCompileError, match="Reduce/Reduce collision in \\$END"):
        parse_tables(_compiled_rules(text.replace("b: NAME", "b.2: NAME")), "start")


def test_dangling_else_shifts_like_lark():
    text = """
    start: stmt
    stmt: "if" COND "then" stmt | "if" COND "then" stmt "else" stmt | ATOM
    COND: "c"
    ATOM: "x"
    %ignore " "
    """
    lk = lark.Lark(text, parser="lalr")
    check_against_lark(lk)
    ours = parse_tables(lk.rules, "start")
    else_ = next(t.name for t in lk.terminals if t.pattern.value == "else")
    # the state after `if c then x`'s inner stmt: `else` shifts, END reduces
    conflicted = [s for s, row in ours.actions.items() if else_ in row and "$END" in row and row[else_][0]
                  and not row["$END"][0]]
    assert conflicted
    assert lk.parse("if c then if c then x else x")  # lark's own parser agrees on the grammar


def test_empty_rules_and_nullable_chains():
    text = """
    start: a b c "z"
    a: | "x" a
    b: a a d
    c: b "y" | d
    d: e
    e: | "w"
    opt: [a] ["q"] start?
    """
    lk = lark.Lark(text, parser="lalr", maybe_placeholders=False)
    check_against_lark(lk)
    assert _same_outcome(_compiled_rules(text), "start") in {"ok", "collision"}
    nested = """
    start: x+ | "k"
    x: y* "e"
    y: "a"? "b"?
    """
    assert _same_outcome(_compiled_rules(nested), "start") in {"ok", "collision"}


def test_grammar_errors():
    twice = [Rule(NonTerminal("start"), [Terminal("A")]), Rule(NonTerminal("start"), [Terminal("A")], alias="x")]
    with pytest.raises(GrammarCompileError, match=r"Rules defined twice: <start : A>"):
        parse_tables(twice, "start")
    undefined = [Rule(NonTerminal("start"), [NonTerminal("nowhere"), Terminal("A")])]
    with pytest.raises(GrammarCompileError, match=r"Using an undefined rule: NonTerminal\('nowhere'\)"):
        parse_tables(undefined, "start")
    with pytest.raises(GrammarCompileError, match=r"undefined rule: NonTerminal\('other'\) \(the start\)"):
        parse_tables([Rule(NonTerminal("start"), [Terminal("A")])], "other")
    for rules in (twice, undefined):
        assert _same_outcome(rules, "start") == "error"


def _random_grammar(rng: random.Random) -> list[Rule]:
    """Up to 5 nonterminals (n0 starts) with 1-3 rules each of up to 4 symbols, some empty,
    some with priorities; now and then a rule given twice or a nonterminal with no rule."""
    nts = [f"n{i}" for i in range(rng.randint(1, 5))]
    terms = [f"T{i}" for i in range(rng.randint(1, 4))]
    pool = nts + terms + (["missing"] if rng.random() < 0.05 else [])
    rules, seen = [], set()
    for nt in nts:
        for _ in range(rng.randint(1, 3)):
            rhs = [Terminal(x) if x in terms else NonTerminal(x)
                   for x in rng.choices(pool, k=rng.choice([0, 1, 1, 2, 2, 3, 4]))]
            key = (nt, tuple(x.name for x in rhs))
            if key in seen and rng.random() < 0.9:
                continue
            seen.add(key)
            rules.append(Rule(NonTerminal(nt), rhs, options=RuleOptions(priority=rng.choice([None, None, None, 1, 2]))))
    return rules


def _lark_is_order_dependent(rules: list[Rule], start: str, orders: int = 40) -> bool:
    """Whether lark's lookaheads for `rules` depend on its set iteration order: its digraph
    unions into the very set objects it was given, which after a cycle in `reads` (a
    grammar that is not LR(k)) are shared, so the result depends on the traversal order.
    Replays lark's digraph under `orders` shuffled orders."""
    analyzer = LALR_Analyzer(ParserConf(rules, {}, [start]))
    analyzer.compute_lr0_states()
    analyzer.compute_reads_relations()
    analyzer.compute_includes_lookback()
    X = analyzer.nonterminal_transitions

    def digraph(R, G, rng):  # lark's digraph and traverse, iterating X and R[x] in rng's order
        F, S, N = {}, [], dict.fromkeys(X, 0)

        def traverse(x):
            S.append(x)
            d = N[x] = len(S)
            F[x] = G[x]
            for y in rng.sample(sorted(R[x], key=X.index), len(R[x])):
                if N[y] == 0:
                    traverse(y)
                if 0 < N[y] < N[x]:
                    N[x] = N[y]
                F[x].update(F[y])
            if N[x] == d:
                while True:
                    z = S.pop()
                    N[z], F[z] = -1, F[x]
                    if z == x:
                        break

        for x in rng.sample(X, len(X)):
            if N[x] == 0:
                traverse(x)
        return F

    results = set()
    for k in range(orders):
        rng = random.Random(k)
        reads = digraph(analyzer.reads, {x: set(analyzer.directly_reads[x]) for x in X}, rng)
        follow = digraph(analyzer.includes, reads, rng)
        results.add(tuple(frozenset(follow[x]) for x in X))
    return len(results) > 1


def test_reads_cycle_shares_sets_like_lark():
    """A grammar with a cycle in `reads`: lark's digraph shares the read sets of the cycle's
    transitions (see lalr.h), which adds `$END` to `n2 -> ` and collides it with `n1 -> `;
    textbook DeRemer-Pennello lookaheads would not."""
    def rule(origin, rhs, priority=None):
        return Rule(NonTerminal(origin), [Terminal(x) if x.isupper() else NonTerminal(x) for x in rhs.split()],
                    options=RuleOptions(priority=priority))

    rules = [rule("n0", "", 2), rule("n0", "n2 n4 n3 n1"), rule("n0", "n0", 1), rule("n1", "n3 n2 T0 T1"),
             rule("n1", ""), rule("n2", ""), rule("n2", "T1 T2 n3"), rule("n3", "n0 n2"), rule("n3", "T1"),
             rule("n4", "")]
    assert not _lark_is_order_dependent(rules, "n0")
    assert _same_outcome(rules, "n0") == "collision"


def test_random_grammars_match_lark():
    """Small random grammars: the same tables or the same errors as lark, except where lark's
    own answer depends on its set iteration order (a few in a thousand)."""
    rng = random.Random(20240611)
    outcomes = {"ok": 0, "collision": 0, "error": 0, "lark order-dependent": 0}
    for _ in range(600):
        rules = _random_grammar(rng)
        try:
            outcomes[_same_outcome(rules, "n0")] += 1
        except AssertionError:
            if not _lark_is_order_dependent(rules, "n0"):
                raise
            outcomes["lark order-dependent"] += 1
    assert outcomes["ok"] > 300 and outcomes["collision"] > 50 and outcomes["error"] > 10, outcomes
    assert outcomes["lark order-dependent"] < 10, outcomes

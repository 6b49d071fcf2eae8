"""Grammar analyses (the streamlining appendix, docs/references.md) against brute force on small grammars, and the appendix's
worked examples."""

import itertools

import lark
import pytest

from cad_outlines.engine.compile import load_lark
from cad_outlines.engine.store.grammar_analysis import (
    START,
    DFTPushdownAutomaton,
    Grammar,
    GrammarAnalysis,
    LRGame,
    unlimited_credit_exploration,
)
from cad_outlines.engine.reference.parser import IncrementalParser
from cad_outlines.engine.frontend.parse_tables import ParseTables

ANBN = """
start: "a" start "b" |
"""

# Expressions with optional parts (lark expands them into alternative rules), a list,
# unary/binary minus and interchangeable operators.
EXPR = """
start: stmt*
stmt: NAME "=" expr ";" | "print" "(" [args] ")" ";"
args: expr ("," expr)*
?expr: expr "+" term | expr "-" term | term
?term: term "*" factor | term "/" factor | factor
?factor: "-" factor | atom
?atom: NAME | NUMBER | "(" expr ")" | NAME "(" [args] ")"
NAME: /[a-z]+/
NUMBER: /[0-9]+/
%ignore " "
"""


def analysis(text: str) -> tuple[GrammarAnalysis, lark.Lark]:
    lk = lark.Lark(text, parser="lalr", lexer="basic")
    return GrammarAnalysis.from_lark(lk), lk


def prefixes(lk: lark.Lark, max_len: int, states: dict | None = None) -> set[tuple[str, ...]]:
    """Every terminal sequence of length <= max_len that is a prefix of a sentence,
    by breadth-first search with the LALR parser; `states` collects the distinct parser
    states reached (by last terminal)."""
    tables = ParseTables(lk)
    terminals = sorted(tables.terminals - {"$END"})
    out = {()}
    root = IncrementalParser(tables)
    frontier = [((), root)]
    if states is not None:
        states.setdefault(None, {})[root.key()] = root
    for _ in range(max_len):
        nxt = []
        for seq, parser in frontier:
            for t in terminals:
                if parser.accepts([t]):
                    p2 = parser.fork()
                    p2.consume([t])
                    out.add(seq + (t,))
                    nxt.append((seq + (t,), p2))
                    if states is not None:
                        states.setdefault(t, {})[p2.key()] = p2
        frontier = nxt
    return out


def test_appendix_example_anbn():
    ga, lk = analysis(ANBN)
    a, b = "A", "B"
    names = {t.pattern.value: t.name for t in lk.terminals}
    a, b = names["a"], names["b"]
    assert ga.always_legal(a, (a,)) and ga.always_legal(a, (b,))  # Figure 4 (a), (b)
    assert ga.never_legal((b, a)) and not ga.always_legal(b, (a,))  # (c)
    assert not ga.always_legal(b, (b,)) and not ga.never_legal((b, b))  # (d): not provable, and false
    pda = DFTPushdownAutomaton.build(ga.source)
    ia, ib = ga.ids[a], ga.ids[b]
    assert pda.accepts([ia, ia, ib, ib]) and pda.accepts([]) and not pda.accepts([ia, ia, ib])
    assert unlimited_credit_exploration(pda, ia, (ia,)) is True
    assert unlimited_credit_exploration(pda, ia, (ib,)) is True
    assert unlimited_credit_exploration(pda, ib, (ib,)) is None


@pytest.mark.parametrize("text", [ANBN, EXPR])
def test_never_legal_and_successors_match_brute_force(text):
    ga, lk = analysis(text)
    states: dict = {}
    pre = prefixes(lk, 6, states)
    reached = [p for by_last in states.values() for p in by_last.values()]
    terminals = sorted(ParseTables(lk).terminals - {"$END"})

    def legal_somewhere(seq) -> bool:  # after some prefix of <= 6 terminals (a witness search)
        return any(p.accepts(list(seq)) for p in reached)

    for x, y in itertools.product(terminals, repeat=2):
        assert ga.label_follows(x, y) == legal_somewhere((x, y)), (x, y)
    for seq in itertools.product(terminals, repeat=3):
        assert ga.never_legal(seq) == (not legal_somewhere(seq)), seq
        assert ga.never_legal(seq, after=START) == (seq not in pre), seq
    for x in terminals:  # with a context label: the prefixes ending with it
        for seq in itertools.product(terminals, repeat=2):
            witness = any(p.accepts(list(seq)) for p in states.get(x, {}).values())
            assert ga.never_legal(seq, after=x) == (not witness), (x, seq)


@pytest.mark.parametrize("text", [ANBN, EXPR])
def test_always_legal_is_sound_and_lr_game_agrees(text):
    ga, lk = analysis(text)
    pre = prefixes(lk, 6)
    terminals = sorted(ParseTables(lk).terminals - {"$END"})
    lr = LRGame(ParseTables(lk))
    pda = DFTPushdownAutomaton.build(ga.grammar)
    proved = 0
    for x in terminals:
        ends_with_x = [p for p in pre if p and p[-1] == x and len(p) <= 4]
        for seq in itertools.chain(((y,) for y in terminals), itertools.product(terminals, repeat=2)):
            by_pda, by_lr = ga.always_legal(x, seq), lr.always(x, seq)
            for claim in (by_pda, by_lr):
                if claim:  # sound: every prefix ending with x goes on with seq
                    assert all(p + seq in pre for p in ends_with_x), (x, seq)
            if by_pda:
                assert by_lr, (x, seq)  # the LR game proves at least what the DFT game does here
            if len(seq) == 1:
                bfs = unlimited_credit_exploration(pda, ga.ids[x], [ga.ids[s] for s in seq], max_stack=12)
                assert (bfs is True) <= by_pda, (x, seq)  # the bounded search never proves more
            proved += by_pda
    assert proved > 0


def test_left_factoring_keeps_the_language_and_proves_more():
    ga, lk = analysis(EXPR)
    names = {t.pattern.value: t.name for t in lk.terminals if hasattr(t.pattern, "value")}
    lpar, name = names["("], "NAME"
    # "print(" and "f(" may close at once or take arguments: only the factored grammar
    # proves that a NAME is always legal after "("
    assert ga.always_legal(lpar, (name,))
    plain = GrammarAnalysis(ga.source)
    assert not plain.always_legal(lpar, (name,))
    pda_f, pda = DFTPushdownAutomaton.build(ga.grammar), DFTPushdownAutomaton.build(ga.source)
    ids = ga.ids
    words = [["NAME", "EQUAL", "NAME", "SEMICOLON"], ["PRINT", "LPAR", "RPAR", "SEMICOLON"], ["NAME", "NAME"]]
    for w in words:
        w = [ids[x] for x in w if x in ids]
        assert pda_f.accepts(w) == pda.accepts(w)


def test_interchangeable_groups():
    ga, _ = analysis(EXPR)
    groups = ga.interchangeable_groups()
    flat = {t for g in groups for t in g}
    assert ["NAME", "NUMBER"] not in groups  # NAME also starts calls and statements
    assert not flat & {"LPAR", "RPAR"}
    ga2, lk2 = analysis('start: x+\nx: "+" | "-" | "*" "!" | "/" "!"\n')
    names = {t.pattern.value: t.name for t in lk2.terminals}
    assert sorted(map(sorted, ga2.interchangeable_groups())) == sorted(
        [sorted([names["+"], names["-"]]), sorted([names["*"], names["/"]])])


def test_python_interchangeable_groups_are_the_blogs(small_data):
    lk = load_lark(small_data / "grammars" / "lark" / "python.lark", start="file_input")
    ga = GrammarAnalysis.from_lark(lk, "file_input")
    pl = lk.options.postlex
    groups = ga.interchangeable_groups(exclude=[pl.NL_type, *pl.OPEN_PAREN_types, *pl.CLOSE_PAREN_types])
    pattern = {t.name: t.pattern.value if t.pattern.type == "str" else t.name for t in lk.terminals}
    as_text = sorted(sorted(pattern[n] for n in g) for g in groups)
    assert len(groups) == 7 and sum(map(len, groups)) == 35
    assert sorted(["+", "-"]) in as_text and sorted(["False", "None", "True"]) in as_text
    assert sorted(["<<", ">>"]) in as_text and sorted(["%", "//"]) in as_text
    assert sorted(["<", ">", "==", ">=", "<=", "<>", "!="]) in as_text
    assert sorted(["HEX_NUMBER", "FLOAT_NUMBER", "BIN_NUMBER", "OCT_NUMBER", "DEC_NUMBER", "IMAG_NUMBER"]) in as_text


def test_grammar_reduction_drops_useless_rules():
    lk = lark.Lark('start: "a" | b\nb: b "x"\nc: "c"\n', parser="lalr", lexer="basic")
    g = Grammar.from_lark(lk)
    names = {g.name(lhs) for lhs, _ in g.rules}
    assert names == {"start"}  # b is unproductive, c unreachable


def _never_legal_in_a_pool_worker(queries):
    ga, _ = analysis(EXPR)
    return ga.never_legal_many(queries, batch=2, workers=2)  # two workers: it would fork a child


def test_never_legal_many_works_alone_in_a_daemonic_process():
    """compile_grammar inside a multiprocessing.Pool worker (a daemonic process, which may not fork
    children) raised AssertionError from streamlining's forked helper (found by the grammar fuzzer)."""
    import multiprocessing

    ga, lk = analysis(EXPR)
    names = {t.pattern.value: t.name for t in lk.terminals}
    queries = [((names["="], names[";"]), None), ((names["("], names[")"]), None), ((names["print"],), START),
               ((names[";"], names["+"]), None), ((names["*"],), START)]
    want = ga.never_legal_many(queries, batch=2, workers=1)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(_never_legal_in_a_pool_worker, (queries,)) == want

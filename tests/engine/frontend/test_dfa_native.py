"""The compiled core's DFA pieces (dfa.cpp): minimisation with canonical numbering, the
UTF-8 expansion, the "unless" product, the lexer's terminal tables, the literal fast path
and the vectorised set operations, against brute force or the plain constructions."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cad_outlines.engine.frontend import _sre_compat as sre
from cad_outlines.engine.frontend import automata
from cad_outlines.engine.frontend.automata import minimize_arrays, regex_to_dfa
from cad_outlines.engine.store.lexer import TerminalAutomaton
from cad_outlines.engine.frontend.terminals import _unless_product


def _random_dfa(rng: random.Random, n: int, alphabet: list[int]):
    trans = np.full((n, 256), -1, dtype=np.int32)
    for s in range(n):
        for b in alphabet:
            if rng.random() < 0.6:
                trans[s, b] = rng.randrange(n)
    label = np.array([rng.choice([-1, -1, 0, 1]) for _ in range(n)], dtype=np.int64)
    block = np.zeros((n, 256), dtype=bool)
    for s in rng.sample(range(n), k=max(1, n // 4)):
        block[s, rng.choice(alphabet)] = True
    return trans, label, block


def _outcome(trans, label, block, word) -> tuple:
    s = 0
    for b in word:
        s = int(trans[s, b])
        if s < 0:
            return ("dead",)
    return (int(label[s]), tuple(np.flatnonzero(block[s])) if block is not None else ())


def _live_outcome(trans, label, block, word) -> tuple:
    """As _outcome, but a state from which no label >= 0 is reachable counts as dead."""
    n = trans.shape[0]
    live = label >= 0
    while True:
        nxt = live | np.array([any(live[t] for t in trans[s] if t >= 0) for s in range(n)])
        if (nxt == live).all():
            break
        live = nxt
    s = 0
    for b in word:
        s = int(trans[s, b])
        if s < 0 or not live[s]:
            return ("dead",)
    return (int(label[s]), tuple(np.flatnonzero(block[s])) if block is not None else ()) if live[s] else ("dead",)


def _moore_classes(trans, label, block) -> int:
    """The number of classes of Moore's refinement of a trimmed DFA (the minimal DFA's state count)."""
    n = trans.shape[0]
    cls = [(int(label[s]), tuple(np.flatnonzero(block[s]))) for s in range(n)]
    while True:
        ids = {c: i for i, c in enumerate(dict.fromkeys(cls))}
        nxt = [(ids[cls[s]], tuple(ids[cls[t]] if t >= 0 else -1 for t in trans[s])) for s in range(n)]
        if len(set(nxt)) == len(ids):
            return len(ids)
        cls = nxt


@pytest.mark.parametrize("n", [1, 2, 17, 40])
def test_minimize_of_long_counting_chains(n):
    """A string of up to n characters is a chain Moore refines a step per round; the minimal DFA of
    any_string(0, n) in JSON's spelling, and of a redundant copy of it, is the same."""
    from cad_outlines.engine.frontend.json_schema import strings as S

    d = S.json_string_dfa(S.any_string(0, n))
    assert _moore_classes(d.trans, np.where(d.accept, 0, -1), np.zeros(d.trans.shape, dtype=bool)) == \
        d.trans.shape[0]
    twice = np.concatenate([d.trans, np.where(d.trans >= 0, d.trans + d.trans.shape[0], -1)])
    twice[0] = np.where(d.trans[0] >= 0, d.trans[0] + d.trans.shape[0], -1)  # the start enters the copy
    t, lab, _ = minimize_arrays(twice, np.where(np.concatenate([d.accept, d.accept]), 0, -1))
    assert np.array_equal(t, d.trans) and np.array_equal(lab >= 0, d.accept)


@pytest.mark.parametrize("seed", range(40))
def test_minimize_keeps_the_language_and_is_minimal_and_canonical(seed):
    rng = random.Random(seed)
    alphabet = [97, 98, 99]
    trans, label, block = _random_dfa(rng, rng.randint(1, 12), alphabet)
    t, lab, blk = minimize_arrays(trans, label, block)
    blk_full = blk if blk is not None else np.zeros(t.shape, dtype=bool)
    words = [[]] + [[rng.choice(alphabet) for _ in range(rng.randint(1, 6))] for _ in range(300)]
    for w in words:
        assert _live_outcome(trans, label, block, w) == _live_outcome(t, lab, blk_full, w), w
    # minimal: Moore's rounds (plain Python, dead edges to a sink) split no class of the result
    assert _moore_classes(t, lab, blk_full) == t.shape[0] or (t.shape[0] == 1 and lab[0] == -1)
    # idempotent: already minimal and canonically numbered
    t2, lab2, blk2 = minimize_arrays(t, lab, blk)
    assert np.array_equal(t, t2) and np.array_equal(lab, lab2)
    assert (blk is None) == (blk2 is None) and (blk is None or np.array_equal(blk, blk2))
    # breadth-first numbering: each state first appears as a successor in BFS order
    order, seen = [0], {0}
    for s in order:
        for x in t[s]:
            if x >= 0 and x not in seen:
                seen.add(int(x))
                order.append(int(x))
    assert order == list(range(len(order))) == list(range(t.shape[0])) or (t.shape[0] == 1 and lab[0] == -1)


def test_minimize_of_an_empty_language_is_one_dead_state():
    trans = np.full((3, 256), -1, dtype=np.int32)
    trans[0, 97] = 1
    t, lab, blk = minimize_arrays(trans, np.array([-1, -1, 0]))  # state 2 is unreachable
    assert t.shape == (1, 256) and (t == -1).all() and lab.tolist() == [-1] and blk is None


@pytest.mark.parametrize("text", ["def", "==", "é", "€uro", "\U0001F600!", "a\nb", ""])
def test_literal_fast_path_equals_the_general_construction(text):
    import re

    pattern = re.escape(text)
    parsed = sre.parse(pattern, 0)
    assert automata._literal(parsed) == text.encode()
    fast = regex_to_dfa(pattern, semantics="match")
    # the general path: a capturing group is not a plain literal sequence
    assert automata._literal(sre.parse(f"({pattern})", 0)) is None
    general = regex_to_dfa(f"({pattern})", semantics="match")
    assert np.array_equal(fast.trans, general.trans) and np.array_equal(fast.accept, general.accept)
    assert general.block is None and fast.block is None


def test_literal_fast_path_refuses_case_folding_and_surrogates():
    assert automata._literal(sre.parse("abc", 0)) == b"abc"
    assert automata._literal(sre.parse("(?i)abc", 0)) is None
    assert automata._literal(sre.parse("\ud800", 0)) is None
    assert automata._literal(sre.parse("a[bc]", 0)) is None
    assert regex_to_dfa("\ud800").fullmatch(b"") is False


@pytest.mark.parametrize("pattern", [r"[^\W\d]\w*", r"[\u0100-\U0010ffff]", r"[^a]", r"\S+", r"[\u07ff\u0800]"])
def test_utf8_expansion_matches_python_on_boundary_code_points(pattern):
    import re

    d = regex_to_dfa(pattern)
    rx = re.compile(pattern)
    points = [0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF, 0x100, 0x4E00, 0x1F600]
    for cp in points:
        ch = chr(cp)
        assert d.fullmatch(ch.encode()) == bool(rx.fullmatch(ch)), (pattern, hex(cp))


def _reference_product(dfa, strs):
    """The "unless" product built state by state in Python, then minimised."""
    n, k = dfa.n_states, len(strs)
    blk0 = dfa.block if dfa.block is not None else np.zeros((n, 256), bool)
    ids: dict[tuple, int] = {}
    todo: list[tuple] = []

    def sid(tup):
        if tup not in ids:
            ids[tup] = len(todo)
            todo.append(tup)
        return ids[tup]

    sid((0,) * (k + 1))
    rows = []
    i = 0
    while i < len(todo):
        tup = todo[i]
        i += 1
        row = []
        for b in range(256):
            x = int(dfa.trans[tup[0], b])
            nxt = [int(d.trans[s, b]) if s >= 0 else -1 for d, s in zip(strs, tup[1:])]
            row.append(-1 if x < 0 else ("p", sid((x, *nxt))) if max(nxt) >= 0 else ("r", x))
        rows.append(row)
    p = len(todo)
    trans = np.array([[-1 if c == -1 else c[1] if c[0] == "p" else p + c[1] for c in row] for row in rows]
                     + [[p + x if x >= 0 else -1 for x in r] for r in dfa.trans.tolist()], dtype=np.int32)
    label = np.array([(-1 if not dfa.accept[t[0]] else next(
        (1 + q for q, (d, s) in enumerate(zip(strs, t[1:])) if s >= 0 and d.accept[s]), 0)) for t in todo]
        + [0 if a else -1 for a in dfa.accept.tolist()], dtype=np.int64)
    block = np.concatenate([blk0[[t[0] for t in todo]], blk0])
    return minimize_arrays(trans, label, block)


@pytest.mark.parametrize("regex, strings", [
    (r"[a-z_]\w*", ["def", "define", "if", "in", "is", "x"]),
    (r"[a-z]+(?![0-9])", ["ab", "abc", "b"]),
    (r"(?i:[a-z]+)", ["select", "SELECT", "from"]),
    (r"[^\W\d]\w*", ["é", "ünïcode", "a"]),
    (r"\d+|[a-f]+", ["12", "abc", "ff0"]),
])
def test_unless_product_matches_the_plain_construction(regex, strings):
    import re

    dfa = regex_to_dfa(regex, semantics="match")
    strs = [regex_to_dfa(re.escape(w), semantics="match") for w in strings]
    strs.append(regex_to_dfa("(?i:select)", semantics="match"))
    got = _unless_product(dfa, strs)
    want = _reference_product(dfa, strs)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert (got[2] is None) == (want[2] is None) and (got[2] is None or np.array_equal(got[2], want[2]))


def _reference_tables(trans, label, block):
    """TerminalAutomaton.build's tables computed with numpy (the live fixpoint step by step)."""
    n = trans.shape[0]
    shadowed = np.flatnonzero((label >= 0) & block.any(axis=1))
    m = n + len(shadowed)
    full = np.full((m + 1, 256), m, dtype=np.int32)
    full[:n] = np.where(trans < 0, m, trans)
    full[n:m] = full[shadowed]
    lab = np.full(m + 1, -1, dtype=np.int32)
    lab[:n] = label
    blk = np.zeros((m + 1, 256), dtype=bool)
    blk[:n] = block
    shadow = np.arange(m + 1, dtype=np.int32)
    shadow[shadowed] = np.arange(n, m, dtype=np.int32)
    reach = np.zeros(m + 1, dtype=bool)
    while True:
        new = (lab >= 0)[full].any(axis=1) | reach[full].any(axis=1)
        new[m] = False
        if (new == reach).all():
            break
        reach = new
    return full, lab, reach, blk, blk.any(axis=1), shadow


@pytest.mark.parametrize("seed", range(30))
def test_terminal_tables_match_numpy(seed):
    rng = random.Random(seed)
    trans, label, block = _random_dfa(rng, rng.randint(1, 10), [97, 98, 99])
    label = label.astype(np.int32)
    if seed % 3 == 0:
        block[:] = False
    got = TerminalAutomaton.build("T", trans, label, None if seed % 3 == 0 else block)
    want = _reference_tables(trans, label, block)
    for x, y in zip((got.trans, got.label, got.live, got.block, got.blocked, got.shadow), want):
        assert x.dtype == y.dtype and np.array_equal(x, y)


def _sweep(a, b, op):
    """automata._combine's merge sweep, for any size."""
    out, i, j, ina, inb, inside = [], 0, 0, False, False, False
    while i < len(a) or j < len(b):
        p = a[i] if j >= len(b) or (i < len(a) and a[i] <= b[j]) else b[j]
        if p >= automata.MAX_CODEPOINT:
            break
        if i < len(a) and a[i] == p:
            i, ina = i + 1, not ina
        if j < len(b) and b[j] == p:
            j, inb = j + 1, not inb
        if op(ina, inb) != inside:
            out.append(p)
            inside = not inside
    if inside:
        out.append(automata.MAX_CODEPOINT)
    return tuple(out)


@pytest.mark.parametrize("seed", range(20))
def test_vectorised_set_operations_match_the_sweep(seed):
    rng = random.Random(seed)
    top = rng.choice([300, 70_000, automata.MAX_CODEPOINT + 1])

    def rset():
        pts = sorted(rng.sample(range(top), rng.randrange(0, 300)))
        return tuple(pts[: len(pts) // 2 * 2])

    for op in (lambda x, y: x and y, lambda x, y: x or y, lambda x, y: y and not x):
        a, b = rset(), rset()
        assert automata._combine_np(a, b, op) == _sweep(a, b, op)


@pytest.mark.parametrize("seed", range(10))
def test_block_rows_match_byte_by_byte_decoding(seed):
    rng = random.Random(seed)
    lo = rng.choice([0x80, 0x800, 0x10000])
    cs = automata._cset([(lo, lo + rng.choice([64, 4096, 1 << 18]))])
    if seed % 2:
        cs = automata._union(cs, automata._cset([(97, 100)]))
    try:
        row = automata._block_row(cs, ("lookahead", None))
    except automata.UnsupportedRegex:
        row = None
    want = [automata._contains(cs, b) for b in range(128)] + [False] * 128
    for b, lo_, hi_ in automata._lead_sets():
        inside = [automata._contains(cs, c) for c in range(lo_, hi_)]
        if any(inside) and not all(inside):
            want = None
            break
        want[b] = all(inside)
    assert row == want


def _pair_outcomes_by_words(ta, aa, tb, ab, alphabet, depth: int) -> int:
    """The accepting outcomes of every word up to `depth` bytes over `alphabet` run through both DFAs."""
    bits = 0
    frontier = [(0, 0)]
    seen = set(frontier)
    for _ in range(depth + 1):
        nxt = []
        for x, y in frontier:
            ax, by = x >= 0 and bool(aa[x]), y >= 0 and bool(ab[y])
            bits |= (1 if ax and not by else 0) | (2 if by and not ax else 0) | (4 if ax and by else 0)
            for c in alphabet:
                p, q = int(ta[x, c]) if x >= 0 else -1, int(tb[y, c]) if y >= 0 else -1
                if (p >= 0 or q >= 0) and (p, q) not in seen:
                    seen.add((p, q))
                    nxt.append((p, q))
        frontier = nxt
    return bits


@pytest.mark.parametrize("seed", range(30))
def test_pair_outcomes_sees_what_words_through_both_dfas_see(seed):
    """The relation of two string classes (JSON Schema lexicon) reads these bits: a accepts alone, b
    alone, both. Pairs are reached breadth first, so words of up to na * nb bytes reach them all."""
    from cad_outlines._native import core

    rng = random.Random(seed)
    alphabet = rng.sample(range(256), k=rng.randint(1, 4))
    na, nb = rng.randint(1, 6), rng.randint(1, 6)
    ta, la, _ = _random_dfa(rng, na, alphabet)
    tb, lb, _ = _random_dfa(rng, nb, alphabet)
    aa, ab = (la >= 0).astype(np.uint8), (lb >= 0).astype(np.uint8)
    bits, pairs = core().pair_outcomes(ta, aa, tb, ab, 1 << 20)
    assert bits == _pair_outcomes_by_words(ta, aa, tb, ab, alphabet, na * nb + 1)
    assert 1 <= pairs <= (na + 1) * (nb + 1)
    if pairs > 1 and bits != 7:  # a walk that had to see every pair: one fewer allowed is refused
        assert core().pair_outcomes(ta, aa, tb, ab, pairs - 1)[1] == -1


def test_pair_outcomes_refuses_a_transition_past_its_dfa():
    from cad_outlines._native import core

    t = np.full((2, 256), -1, dtype=np.int32)
    t[0, 97] = 5  # read by the walk: refused
    with pytest.raises(ValueError, match="out of range"):
        core().pair_outcomes(t, np.array([0, 1], np.uint8), t, np.array([0, 1], np.uint8), 100)


def _cycle(n: int, accept) -> automata.ByteDFA:
    trans = np.full((n, 256), -1, dtype=np.int32)
    trans[:, 97] = (np.arange(n) + 1) % n
    return automata.ByteDFA(trans, np.array([accept(s) for s in range(n)]), None)


def test_a_relation_past_the_state_limit_names_it():
    """Two string classes whose product has more pairs than allowed: the relation is refused with the
    limit's name. a^500k against a^401k (every b state accepting, so `a` never accepts alone and the walk
    cannot stop early): 200,500 pairs, past the 200,000 that a relation may walk under the default limit;
    a limit of a million lets it through."""
    from cad_outlines.engine.frontend.json_schema import lexicon
    from cad_outlines.errors import ResourceLimitError
    from cad_outlines.limits import Limits, enforcing

    a, b = _cycle(500, lambda s: s == 0), _cycle(401, lambda s: True)
    with pytest.raises(ResourceLimitError, match="max_dfa_states"):
        lexicon._relation_dfas(a, b)
    with enforcing(Limits(max_dfa_states=1_000_000)):
        assert lexicon._relation_dfas(a, b) == "sub"
    assert lexicon._relation_dfas(_cycle(6, lambda s: s % 2 == 0), _cycle(6, lambda s: s % 3 == 0)) == "ovl"

"""The compiled core's DFA pieces (dfa.cpp): minimisation with canonical numbering, the
UTF-8 expansion, and the literal fast path, against brute force."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cad_outlines.engine import _sre_compat as sre
from cad_outlines.engine import automata
from cad_outlines.engine.automata import minimize_arrays, regex_to_dfa


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

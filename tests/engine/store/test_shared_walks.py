"""Walks inside lexemes shared across grammars (``_native/src/shared_walks.h``): the rows a lazy
or eager build makes from walks another grammar kept are the rows it makes alone, configuration
by configuration and mask by mask, whether the kept walk is of the same trie subtree or of one
above it, and whatever the kept walks' budget."""

from __future__ import annotations

import numpy as np
import pytest

from cad_outlines import Vocabulary, compile_json_schema
from cad_outlines._native import core
from tests.fixture_data import SMALL

# Schemas whose strings, numbers and keys recur (the walks one keeps, the next one finds), with
# property names that make the string's body start below the first byte (a key starting "va").
SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
     "additionalProperties": False},
    {"type": "object", "properties": {"value": {"type": "string"}, "valid": {"type": "boolean"},
                                      "x": {"type": "number", "minimum": 0}},
     "required": ["value"], "additionalProperties": False},
    {"type": "object", "properties": {"vat": {"type": "string", "maxLength": 5},
                                      "kind": {"enum": ["va", "vb", "c"]},
                                      "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}}},
     "additionalProperties": False},
    {"type": "array", "items": {"type": "string", "format": "date"}},
    {"type": "object", "properties": {"v": {"type": "string"}}},  # any other key too: no string runs alone
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
                                      "mail": {"type": "string", "format": "email"},
                                      "at": {"type": "string", "format": "date-time"},
                                      "note": {"type": "string", "minLength": 2, "maxLength": 40},
                                      "xs": {"type": "array", "items": {"type": "number"}}},
     "required": ["id"], "additionalProperties": False},
    # a value string with constraint runs beside it (the enum's strings, any other key's): not alone,
    # yet one configuration at each byte
    {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
     "required": ["city"]},
    {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": -5, "maximum": 300},
                                          {"type": "object", "additionalProperties": {"type": "string"}}]}},
]


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")


def _explore(grammar, trie) -> dict[str, np.ndarray]:
    """Every reachable configuration's rows, built in a fresh native grammar over `trie`."""
    flat = grammar.flat
    return core().Grammar(flat.arrays, flat.meta, trie).explore(lambda done, rows: None)


def _sharing(trie, on: bool) -> None:
    trie.share_walks = on


def test_rows_from_shared_walks_equal_rows_built_alone(vocab):
    grammars = [compile_json_schema(s, vocab, cache=False, whitespace="flexible") for s in SCHEMAS]
    trie = grammars[0].vocab_trie()
    trie.clear_shared_walks()
    try:
        _sharing(trie, False)
        alone = [_explore(g, trie) for g in grammars]
        assert trie.shared_walk_stats["made"] == 0  # nothing shared while off
        _sharing(trie, True)
        shared = [_explore(g, trie) for g in grammars]
        found = trie.shared_walk_stats["found"]
        again = [_explore(g, trie) for g in grammars]  # now from the walks kept (those the budget left)
    finally:
        _sharing(trie, True)
    stats = trie.shared_walk_stats
    assert stats["kept"] > 0 and stats["made"] > 0 and stats["found"] > found > 0
    for a, b, c in zip(alone, shared, again):
        assert a.keys() == b.keys() == c.keys()
        for k in a:
            assert np.array_equal(a[k], b[k]) and np.array_equal(a[k], c[k]), k


TEXTS = ['{"name": "Zoë \\u0001 x", "n": -12}', '{"value": "vast", "valid": true, "x": 1.5e3}',
         '{"vat": "vb", "kind": "va", "tags": ["ab", "c"]}', '["2024-02-29", "1999-12-31"]',
         '{"v": "value", "vat": "x"}',
         '{"id": "123e4567-e89b-12d3-a456-426614174000", "mail": "a.b@c.org", "at": "2024-01-02T03:04:05Z", '
         '"note": "über \\"quoted\\"", "xs": [1, -2.5e-3]}',
         '{"city": "Chicago", "unit": "c", "cx": "c"}',
         '["x y", 299, {"k": "v\\n", "valid": ""}, -5]']


def _masks(g, vocab, text: str) -> list[np.ndarray]:
    """The masks before each token of `text` (and after it), filled by a lazy matcher over a fresh
    native grammar (its rows built on first use, on this thread and the core's pool)."""
    from cad_outlines.engine.matcher import Matcher
    from tests.helpers import encode

    flat = g.flat
    native = core().Grammar(flat.arrays, flat.meta, g.vocab_trie())
    m = Matcher(g, _native=core().Matcher(native))
    out = []
    for t in [*encode(vocab, text.encode()), None]:
        w = np.zeros(native.n_words, dtype=np.int32)
        m._m.fill(w)
        out.append(w)
        if t is not None:
            assert (w[t >> 5] >> (t & 31)) & 1, text
            m.advance(t)
    return out


def _same(xs: list[np.ndarray], ys: list[np.ndarray]) -> bool:
    return len(xs) == len(ys) and all(np.array_equal(x, y) for x, y in zip(xs, ys))


def test_masks_from_shared_walks_equal_masks_built_alone(vocab):
    """Lazy builds along teacher-forced texts: a grammar compiled after others (its string and
    number walks kept by them) gives the masks of one built with sharing off."""
    for schema, text in zip(SCHEMAS, TEXTS):
        g = compile_json_schema(schema, vocab, cache=False, whitespace="flexible")
        trie = g.vocab_trie()
        shared = _masks(g, vocab, text)
        _sharing(trie, False)
        try:
            alone = _masks(g, vocab, text)
        finally:
            _sharing(trie, True)
        assert _same(shared, alone), text


def test_walks_shared_by_concurrent_builds(vocab):
    """Grammars building rows at once on several threads (each build also on the core's pool),
    finding and keeping walks in one vocabulary's store: the masks of builds alone."""
    import threading

    grammars = [compile_json_schema(s, vocab, cache=False, whitespace="flexible") for s in SCHEMAS]
    trie = grammars[0].vocab_trie()
    _sharing(trie, False)
    try:
        alone = [_masks(g, vocab, t) for g, t in zip(grammars, TEXTS)]
    finally:
        _sharing(trie, True)
    for _ in range(2):  # from no kept walk, then from all of them
        trie.clear_shared_walks()
        jobs = [(i, k) for i in range(len(grammars)) for k in range(2)]  # each grammar on two threads
        start = threading.Barrier(len(jobs))
        got: dict = {}

        def run(i: int, k: int) -> None:
            start.wait()
            got[i, k] = _masks(grammars[i], vocab, TEXTS[i])

        threads = [threading.Thread(target=run, args=job) for job in jobs]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert all(_same(got[i, k], alone[i]) for i, k in jobs)
    assert trie.shared_walk_stats["found"] > 0


def test_walks_outlive_the_grammar_that_made_them(vocab):
    """Kept walks hold no part of the grammar that made them: once it is freed, a new grammar of
    the same schema finds them and builds the same rows."""
    import gc

    g = compile_json_schema(SCHEMAS[0], vocab, cache=False, whitespace="flexible")
    trie = g.vocab_trie()
    _sharing(trie, False)
    try:
        alone = _explore(g, trie)
    finally:
        _sharing(trie, True)
    trie.clear_shared_walks()
    _explore(g, trie)
    kept = trie.shared_walk_stats["kept"]
    del g
    gc.collect()
    g2 = compile_json_schema(SCHEMAS[0], vocab, cache=False, whitespace="flexible")
    again = _explore(g2, trie)
    assert trie.shared_walk_stats["kept"] == kept and trie.shared_walk_stats["found"] > 0
    assert alone.keys() == again.keys() and all(np.array_equal(alone[k], again[k]) for k in alone)


def test_regions_stay_within_their_budget(vocab):
    """A region met once the kept regions fill their budget is walked unshared: the same rows,
    no region kept for it."""
    schema = {"type": "array", "items": {"type": "string", "pattern": "^q[0-9]{3}(zz|y)$"}}
    g = compile_json_schema(schema, vocab, cache=False, whitespace="flexible")
    trie = g.vocab_trie()
    budget = trie.shared_region_budget
    _sharing(trie, False)
    try:
        alone = _explore(g, trie)
        _sharing(trie, True)
        before = trie.shared_walk_stats["regions"]
        trie.shared_region_budget = trie.shared_walk_stats["region_bytes"]  # full
        full = _explore(g, trie)
        assert trie.shared_walk_stats["regions"] == before
        trie.shared_region_budget = trie.shared_walk_stats["region_bytes"] + (1 << 20)  # room for it
        roomy = _explore(compile_json_schema(schema, vocab, cache=False, whitespace="flexible"), trie)
        assert trie.shared_walk_stats["regions"] > before  # the pattern's region, kept once there is room
    finally:
        trie.shared_region_budget = budget
        _sharing(trie, True)
    for rows in (full, roomy):
        assert alone.keys() == rows.keys() and all(np.array_equal(alone[k], rows[k]) for k in alone)


def test_kept_walks_stay_within_their_budget(vocab):
    """With no room to keep walks, each is made for the build that needs it; with little room, the
    kept walks are forgotten whenever the next would overflow it: the same rows either way."""
    g = compile_json_schema(SCHEMAS[1], vocab, cache=False, whitespace="flexible")
    trie = g.vocab_trie()
    trie.clear_shared_walks()
    budget = trie.shared_walk_budget
    try:
        _sharing(trie, False)
        alone = _explore(g, trie)
        _sharing(trie, True)
        trie.shared_walk_budget = 0
        none = _explore(g, trie)
        assert trie.shared_walk_stats["kept"] == 0 and trie.shared_walk_stats["made"] > 0
        trie.shared_walk_budget = 20_000
        little = _explore(g, trie)
        stats = trie.shared_walk_stats
        assert stats["flushes"] > 0 and 0 < stats["bytes"] <= 20_000
    finally:
        trie.shared_walk_budget = budget
        _sharing(trie, True)
    for rows in (none, little):
        assert alone.keys() == rows.keys() and all(np.array_equal(alone[k], rows[k]) for k in alone)

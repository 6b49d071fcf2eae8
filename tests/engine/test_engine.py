"""The grammar engine end to end: lexer index vs scalar lexer, masks, matcher moves."""

import json

import lark
import numpy as np
import pytest

from cad_outlines import grammar_path
from cad_outlines.engine.compile import compile_grammar, load_lark
from cad_outlines.engine.store.lexer import Lexer
from cad_outlines.engine.store.mask_store import MaskStore
from cad_outlines.engine.matcher import InvalidTokenError, Matcher
from cad_outlines.engine.reference.matcher import ReferenceMatcher
from cad_outlines.engine.store.lexer import lexer_spec_from_lark
from tests.helpers import JSON, ToyVocab, encode, index_equals_scalar

@pytest.fixture(scope="module")
def vocab():
    return ToyVocab.make()


@pytest.fixture(scope="module")
def json_grammar(vocab, tmp_path_factory):
    return compile_grammar(JSON, vocab, cache=tmp_path_factory.mktemp("cache"), progress=False)


@pytest.mark.parametrize("grammar", [JSON, "copy_edit"])
def test_vectorised_index_equals_scalar_lexer(vocab, grammar):
    lk = load_lark(JSON if grammar == JSON else grammar_path(grammar))
    assert len(index_equals_scalar(Lexer(lexer_spec_from_lark(lk)), vocab)) > 10


def test_teacher_forced_json_is_allowed_token_by_token(vocab, json_grammar):
    text = json.dumps({"a": [1, 2.5, -3e-4, True, None, {"k": 'v"q'}], "b": "true"}, indent=2).encode()
    m = Matcher(json_grammar)
    for tok in encode(vocab, text):
        assert m.allowed_mask()[tok], (text, vocab.token_bytes[tok])
        m.advance(tok)
    assert m.is_accepting()
    assert m.allowed_mask()[vocab.eos_token_ids[0]]


def test_mask_agrees_with_advance_and_keywords_lex_as_lark_does(vocab, json_grammar):
    m = Matcher(json_grammar)
    m.advance_many(encode(vocab, b'{"a": tr'))
    mask = m.allowed_mask()
    for tok in range(len(vocab.token_bytes) - 1):
        assert mask[tok] == (m.validate([tok]) == 1), vocab.token_bytes[tok]
    assert mask[encode(vocab, b"ue")[0]] and not mask[encode(vocab, b"tr")[0]]
    assert m.forced_bytes() == b"ue"


def test_random_walks_stay_valid_for_lark(vocab, json_grammar):
    parser = lark.Lark(JSON, parser="lalr", lexer="basic")
    rng = np.random.default_rng(0)
    eos = vocab.eos_token_ids[0]
    for _ in range(15):
        m, text = Matcher(json_grammar), b""
        for step in range(80):
            allowed = np.flatnonzero(m.allowed_mask())
            assert len(allowed), text
            if eos in allowed and (step > 40 or rng.random() < 0.1):
                parser.parse(text.decode())
                break
            tok = int(rng.choice([t for t in allowed if t != eos] or [eos]))
            m.advance(tok)
            text += vocab.token_bytes[tok]


def test_advance_many_is_atomic_and_rollback_restores(vocab, json_grammar):
    m = Matcher(json_grammar)
    good = encode(vocab, b'{"a": 1')
    m.advance_many(good)
    before = m.allowed_mask()
    with pytest.raises(InvalidTokenError, match="index 1"):
        m.advance_many(encode(vocab, b", }"))
    assert m.consumed == len(good)
    assert (m.allowed_mask() == before).all()
    m.advance_many(encode(vocab, b"}"))
    assert m.is_accepting()
    m.rollback(1)
    assert not m.is_accepting() and (m.allowed_mask() == before).all()
    child = m.fork()
    child.advance_many(encode(vocab, b"}"))
    assert child.is_accepting() and not m.is_accepting()


def test_eos_and_finish(vocab, json_grammar):
    m = Matcher(json_grammar)
    eos = vocab.eos_token_ids[0]
    with pytest.raises(InvalidTokenError):
        m.advance(eos)
    m.advance_many(encode(vocab, b"[]"))
    m.advance(eos)
    assert m.is_finished() and not m.allowed_mask().any()


def test_special_tokens_are_never_allowed(vocab, json_grammar):
    assert not Matcher(json_grammar).allowed_mask()[list(vocab.special_ids - set(vocab.eos_token_ids))].any()


def test_store_round_trips_through_the_cache(vocab, tmp_path):
    first = compile_grammar(JSON, vocab, cache=tmp_path, progress=False)
    assert not list(tmp_path.glob("store-*.npz"))  # a streamlined compile writes only what it uses
    raw = compile_grammar(JSON, vocab, cache=False, progress=False, streamline=False)
    compile_grammar(JSON, vocab, cache=tmp_path, progress=False, streamline=False)
    files = list(tmp_path.glob("store-*.npz"))
    streamlined = list(tmp_path.glob("streamlined-*.npz"))
    assert len(files) == 1 and len(streamlined) == 1
    assert MaskStore.load(files[0]).digest() == raw.store.digest()
    assert MaskStore.load(streamlined[0]).digest() == first.store.digest()
    assert first.streamlined and first.store.n_rows < raw.store.n_rows
    second = compile_grammar(JSON, vocab, cache=tmp_path, progress=False)
    m1, m2 = Matcher(first), Matcher(second)
    for tok in encode(vocab, b'{"a": [tru'):
        assert (m1.allowed_mask() == m2.allowed_mask()).all()
        m1.advance(tok)
        m2.advance(tok)



@pytest.mark.parametrize("streamline", [False, True])
def test_equal_row_lists_are_held_once(vocab, tmp_path, streamline):
    g = compile_grammar(JSON, vocab, cache=False, progress=False, streamline=streamline)
    store = g.store
    groups: dict[tuple, list[int]] = {}
    for q, rows in enumerate(store.rows):
        groups.setdefault(tuple(rows), []).append(q)
    assert store.n_stored_rows == sum(len(k) for k in groups) < store.n_rows
    shared = [qs for qs in groups.values() if len(qs) > 1]
    assert shared  # the toy grammar has configurations with equal rows
    # one list object in memory, one trie in the flat arrays, one list in the cache file
    flat = g.flat
    for qs in shared:
        assert all(store.rows[q] is store.rows[qs[0]] for q in qs)
        assert {int(flat.arrays["t_root"][q]) for q in qs} == {int(flat.arrays["t_root"][qs[0]])}
        assert {int(flat.arrays["t_uncond"][q]) for q in qs} == {int(flat.arrays["t_uncond"][qs[0]])}
    assert len(set(flat.arrays["t_root"].tolist())) == len(groups)
    assert flat.meta["n_rows"] == store.n_rows and flat.meta["n_stored_rows"] == store.n_stored_rows
    store.save(tmp_path / "s.npz")
    back = MaskStore.load(tmp_path / "s.npz")
    assert back.digest() == store.digest() and back.n_stored_rows == store.n_stored_rows
    assert all(back.rows[q] is back.rows[qs[0]] for qs in shared for q in qs)
    # a file written before lists were shared (one list per config, no cfg_list) still loads
    z = dict(np.load(tmp_path / "s.npz"))
    lists = [[(z["labels_pool"][o : o + ne].tolist(), z["labels_pool"][o + ne : o + ne + nn].tolist(), sid)
              for o, ne, nn, sid in z["rows"][z["row_ptr"][k] : z["row_ptr"][k + 1]].tolist()]
             for k in range(len(z["row_ptr"]) - 1)]
    per_config = [lists[k] for k in z.pop("cfg_list").tolist()]
    pool, flat_rows, ptr = [], [], [0]
    for rows in per_config:
        for e, n, sid in rows:
            flat_rows.append((len(pool), len(e), len(n), sid))
            pool += e + n
        ptr.append(len(flat_rows))
    z.update(rows=np.array(flat_rows, dtype=np.int32).reshape(-1, 4), row_ptr=np.array(ptr, dtype=np.int64),
             labels_pool=np.array(pool, dtype=np.int32))
    np.savez(tmp_path / "old.npz", **z)
    assert MaskStore.load(tmp_path / "old.npz").digest() == store.digest()

def test_copy_edit_program_is_accepted(vocab):
    cg = compile_grammar(grammar_path("copy_edit"), vocab, cache=False, progress=False)
    m = Matcher(cg)
    text = b'<copy lines="12-30"/>\n<gen>def f(x):\n    return x</ge</gen><copy lines="3-3"/>\n</program>'
    for tok in encode(vocab, text):
        assert m.allowed_mask()[tok], vocab.token_bytes[tok]
        m.advance(tok)
    assert m.is_accepting()
    m2 = Matcher(cg)
    m2.advance_many(encode(vocab, b"<c"))
    assert m2.forced_bytes() == b'opy lines="'


def test_grammar_fingerprint_is_stable_across_processes():
    import os
    import subprocess
    import sys

    code = ("from cad_outlines.engine.compile import load_lark, grammar_fingerprint;"
            "from cad_outlines import grammar_path; print(grammar_fingerprint(load_lark(grammar_path('copy_edit'))))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1


def rowwise_mask(m: ReferenceMatcher) -> np.ndarray:
    """Reference: check every mask-store row on its own (no trie sharing), from the
    reference matcher's live configurations."""
    g = m.grammar
    mask = np.zeros(g.vocab_size, dtype=bool)
    memo: dict = {}
    for cfg, pending, acc in m.live:
        for emitted, entered, sid in g.store.rows[cfg]:
            resolved = m._absolute(emitted, acc)
            if resolved is not None and m._passes(m.parser, pending, resolved, entered, memo):
                g.store.or_into(mask, sid)
    mask[g.never_allowed] = False
    if m.is_accepting():
        mask[list(g.eos_token_ids)] = True
    return mask


def test_trie_walk_equals_rowwise_check(vocab, json_grammar):
    rng = np.random.default_rng(3)
    for _ in range(10):
        m, ref = Matcher(json_grammar), ReferenceMatcher(json_grammar)
        for _ in range(40):
            mask = m.allowed_mask()
            assert (mask == rowwise_mask(ref)).all()
            allowed = [t for t in np.flatnonzero(mask) if t not in vocab.eos_token_ids]
            if not allowed:
                break
            tok = int(rng.choice(allowed))
            m.advance(tok)
            ref.advance(tok)


def test_python_indentation_masks(vocab, tmp_path_factory):
    """python.lark with its Indenter on the toy vocabulary: teacher-forced code with
    blocks, dedents and brackets is allowed token by token, and the trie walk equals
    the row-by-row check at every step. The shipped grammar by name: its Indenter and
    its ``file_input`` start come with it."""
    cg = compile_grammar("python", vocab, cache=tmp_path_factory.mktemp("py"), progress=False)
    assert cg.tables.start == "file_input" and cg.indenter is not None
    text = b"def f(x):\n    if x:\n        return (x,\n  1)\n    return x\n\n\nclass A:\n    pass\n"
    m, ref = Matcher(cg), ReferenceMatcher(cg)
    for tok in encode(vocab, text):
        mask = m.allowed_mask()
        assert (mask == rowwise_mask(ref)).all()
        assert mask[tok], (text, vocab.token_bytes[tok])
        m.advance(tok)
        ref.advance(tok)
    assert m.is_accepting()
    bad = Matcher(cg)
    bad.advance_many(encode(vocab, b"def f(x):\n    if x:\n        return x\n"))
    assert bad.validate(encode(vocab, b"  x\n")) < 3  # a dedent to column 2 is no enclosing level
    # a comment at the very end with no line break after it is a NEWLINE lark's Indenter cannot read
    tail = Matcher(cg)
    tail.advance_many(encode(vocab, b"x = 1  #"))
    assert not tail.is_accepting()
    tail.advance_many(encode(vocab, b"\n"))
    assert tail.is_accepting()


def test_bitmask_layout_is_llguidance_s(vocab, json_grammar):
    m = Matcher(json_grammar)
    m.advance_many(encode(vocab, b'{"a": tr'))
    mask = m.allowed_mask()
    words = np.zeros((len(mask) + 31) // 32, dtype=np.int32)
    m.fill_next_token_bitmask(words)
    bits = [(int(words[i // 32]) >> (i % 32)) & 1 for i in range(len(mask))]
    assert bits == mask.astype(int).tolist()


def test_namespaced_import_terminals_are_terminals(vocab, tmp_path):
    """`%import other.rule` prefixes the imported terminals (`other__NAME`): they must
    still be terminals to the parser (regression: they were taken for rules)."""
    (tmp_path / "other.lark").write_text('pair: NAME ":" NUMBER\nNAME: /[a-z]+/\nNUMBER: /[0-9]+/\n')
    main = tmp_path / "main.lark"
    main.write_text("start: pair (\",\" pair)*\n%import other.pair\n")
    cg = compile_grammar(main, vocab, cache=False, progress=False)
    assert any(t.startswith("other__") for t in cg.tables.terminals)
    m = Matcher(cg)
    for tok in encode(vocab, b"ab:12,c:3"):
        assert m.allowed_mask()[tok], vocab.token_bytes[tok]
        m.advance(tok)
    assert m.is_accepting()


def test_reading_a_cached_grammar_never_recompiles(tmp_path, monkeypatch):
    """A grammar loaded from its cache file holds only flat arrays: reading its Python objects raises a
    clear error instead of quietly re-running the eager compile; load_objects() builds them on request."""
    from cad_outlines.engine import compile as compile_mod
    from cad_outlines.engine.compiled_grammar import ObjectsNotLoadedError

    vocab = ToyVocab.make()
    first = compile_grammar(JSON, vocab, cache=tmp_path, progress=False)
    assert first.has_objects
    calls = []
    real = compile_mod._compile_objects
    monkeypatch.setattr(compile_mod, "_compile_objects", lambda *a, **k: calls.append(1) or real(*a, **k))
    warm = compile_grammar(JSON, vocab, cache=tmp_path, progress=False)
    assert not warm.has_objects and repr(warm).startswith("CompiledGrammar(")
    m = Matcher(warm)
    m.advance_many(encode(vocab, b'{"a": 1'))
    assert m.allowed_mask().any() and warm.label_names == first.label_names
    for name in ("store", "lexer", "tables", "indenter"):
        with pytest.raises(ObjectsNotLoadedError, match="load_objects"):
            getattr(warm, name)
    assert calls == []  # nothing above compiled
    assert warm.load_objects() is warm and warm.has_objects and calls == [1]
    assert warm.store.n_rows == first.store.n_rows

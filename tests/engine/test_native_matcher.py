"""The native matcher equals the pure-Python reference, move for move; batches equal
single calls; bad arguments raise clear errors; the flat file is never trusted blindly."""

import random

import numpy as np
import pytest

from cad_outlines import grammar_path
from cad_outlines.engine.compile import compile_grammar
from cad_outlines.engine.store.flat_grammar import FlatFileError, FlatGrammar
from cad_outlines.engine.matcher import (
    InvalidTokenError,
    Matcher,
    allocate_token_bitmask,
    fill_next_token_bitmask_batch,
    unpack_bitmask,
)
from cad_outlines.engine.reference.matcher import ReferenceMatcher
from tests.helpers import JSON, ToyVocab, encode, LOOKAHEAD, PY

@pytest.fixture(scope="module")
def vocab():
    return ToyVocab.make()


@pytest.fixture(scope="module", params=["json", "py", "copy_edit", "lookahead"])
def grammar(request, vocab):
    text = {"json": JSON, "py": PY, "copy_edit": grammar_path("copy_edit"), "lookahead": LOOKAHEAD}[request.param]
    return compile_grammar(text, vocab, cache=False, progress=False)


def walk_both(g, seed: int, steps: int = 60):
    """A random constrained walk; yields (native, reference) after every move."""
    rng = random.Random(seed)
    m, r = Matcher(g), ReferenceMatcher(g)
    eos = set(g.eos_token_ids)
    for _ in range(steps):
        yield m, r
        allowed = np.flatnonzero(r.allowed_mask())
        if not len(allowed):
            return
        tok = int(allowed[rng.randrange(len(allowed))])
        if tok in eos and len(allowed) > 1 and rng.random() < 0.9:
            tok = int(rng.choice([t for t in allowed if t not in eos]))
        m.advance(tok)
        r.advance(tok)
        if tok in eos:
            yield m, r
            return


def test_masks_and_eos_identical_on_walks(grammar):
    states = 0
    for seed in range(12):
        for m, r in walk_both(grammar, seed):
            a, b = m.allowed_mask(), r.allowed_mask()
            assert np.array_equal(a, b), np.flatnonzero(a != b)[:8]
            assert m.is_accepting() == r.is_accepting()
            assert m.is_finished() == r.is_finished()
            assert sorted((c, tuple(p), a) for c, p, a in m._m.live()) == sorted(r.live)
            states += 1
    assert states > 200


def test_validate_matches_reference_for_every_token(grammar, vocab):
    """advance/validate decide each token exactly as the mask says (no state change)."""
    for m, r in walk_both(grammar, seed=5, steps=15):
        mask = m.allowed_mask()
        for tok in range(vocab.size):
            assert (m.validate([tok]) == 1) == mask[tok] == (r.validate([tok]) == 1)


def test_python_indentation_teacher_forced(vocab):
    g = compile_grammar(PY, vocab, cache=False, progress=False)
    text = b"def f(a, b):\n    if a:\n        x = (a +\n  b)\n        return x\n    return b\n\nx = f(1, 2)\n"
    m, r = Matcher(g), ReferenceMatcher(g)
    for tok in encode(vocab, text):
        assert np.array_equal(m.allowed_mask(), r.allowed_mask())
        m.advance(tok)
        r.advance(tok)
    assert m.is_accepting() and r.is_accepting()
    assert m.validate(encode(vocab, b"  x = 1\n")) == r.validate(encode(vocab, b"  x = 1\n"))


def test_forced_bytes_equal_reference(grammar, vocab):
    for seed in range(4):
        for m, r in walk_both(grammar, seed, steps=30):
            if m.is_finished():
                break
            assert m.forced_bytes() == r.forced_bytes()


def test_batch_equals_single_calls(grammar, vocab):
    ms = []
    for seed in range(9):
        states = list(walk_both(grammar, seed, steps=1 + seed * 3))
        ms.append(states[-1][0].fork())
    batch = allocate_token_bitmask(len(ms) + 2, vocab.size)
    assert (batch == -1).all()  # all allowed until filled, as llguidance's
    rows = [i + 1 for i in range(len(ms))]  # rows 0 and last are left as they are
    fill_next_token_bitmask_batch(ms, batch, rows)
    for m, row in zip(ms, rows):
        single = np.zeros(batch.shape[1], dtype=np.int32)
        m.fill_next_token_bitmask(single)
        assert np.array_equal(batch[row], single)
        assert np.array_equal(unpack_bitmask(single, vocab.size), m.allowed_mask())
    assert (batch[0] == -1).all() and (batch[-1] == -1).all()
    fill_next_token_bitmask_batch([None, ms[0]], batch[:2])
    assert (batch[0] == -1).all()


def test_fork_and_rollback_are_independent(vocab):
    g = compile_grammar(JSON, vocab, cache=False, progress=False)
    m = Matcher(g)
    m.advance_many(encode(vocab, b'{"a": [1, '))
    before = m.allowed_mask()
    child = m.fork()
    child.advance_many(encode(vocab, b"2]}"))
    assert child.is_accepting() and not m.is_accepting()
    assert np.array_equal(m.allowed_mask(), before)
    n = child.consumed - m.consumed
    child.rollback(n)
    assert np.array_equal(child.allowed_mask(), before)
    with pytest.raises(ValueError, match="cannot roll back"):
        m.rollback(m.consumed + 1)
    with pytest.raises(ValueError, match="cannot roll back"):
        m.rollback(-1)


def test_advance_many_is_atomic(vocab):
    g = compile_grammar(JSON, vocab, cache=False, progress=False)
    m = Matcher(g)
    m.advance_many(encode(vocab, b'{"a": 1'))
    before, consumed = m.allowed_mask(), m.consumed
    bad = encode(vocab, b", }")
    with pytest.raises(InvalidTokenError, match=f"index {len(bad) - 1} of {len(bad)}"):
        m.advance_many(bad)
    assert m.consumed == consumed and np.array_equal(m.allowed_mask(), before)
    assert m.validate(bad) == len(bad) - 1 and m.consumed == consumed


@pytest.mark.parametrize("bad", [-1, 10**9, 1.0, "3", True, None])
def test_token_ids_outside_the_vocabulary_are_named(vocab, bad):
    g = compile_grammar(JSON, vocab, cache=False, progress=False)
    m = Matcher(g)
    with pytest.raises(ValueError, match="token id") as e:
        m.advance(bad)
    assert not isinstance(e.value, InvalidTokenError)
    with pytest.raises(ValueError, match="token id"):
        m.advance_many([encode(vocab, b"{")[0], bad])
    assert m.consumed == 0


def test_illegal_token_changes_nothing(vocab):
    g = compile_grammar(JSON, vocab, cache=False, progress=False)
    m = Matcher(g)
    m.advance_many(encode(vocab, b"[1"))
    before = m.allowed_mask()
    with pytest.raises(InvalidTokenError, match="not allowed here"):
        m.advance(encode(vocab, b"{")[0])
    assert np.array_equal(m.allowed_mask(), before)
    m.advance_many(encode(vocab, b"]"))
    m.advance(vocab.eos_token_ids[0])
    assert m.is_finished() and not m.allowed_mask().any()
    with pytest.raises(InvalidTokenError, match="after EOS"):
        m.advance(vocab.eos_token_ids[0])


def test_flat_file_round_trip_and_corruption(vocab, tmp_path):
    g = compile_grammar(JSON, vocab, cache=False, progress=False)
    path = tmp_path / "g.flat"
    g.flat.save(path)
    loaded = FlatGrammar.load(path)
    assert loaded.meta == g.flat.meta
    for name, arr in g.flat.arrays.items():
        assert np.array_equal(loaded[name], arr), name
    raw = bytearray(path.read_bytes())
    (tmp_path / "trunc.flat").write_bytes(raw[: len(raw) - 100])
    with pytest.raises(FlatFileError, match="truncated"):
        FlatGrammar.load(tmp_path / "trunc.flat")
    raw[-5] ^= 0xFF
    (tmp_path / "flip.flat").write_bytes(raw)
    with pytest.raises(FlatFileError, match="checksum"):
        FlatGrammar.load(tmp_path / "flip.flat")
    (tmp_path / "other.flat").write_bytes(b"NOTFLAT!" + bytes(raw[8:]))
    with pytest.raises(FlatFileError, match="not a flat grammar"):
        FlatGrammar.load(tmp_path / "other.flat")


def test_apply_token_bitmask_inplace_masks_exactly():
    import torch

    from cad_outlines.decoding.logits import apply_token_bitmask_inplace

    rng = np.random.default_rng(0)
    vocab, width = 70, 75  # logits wider than the bitmask's vocabulary: the extra ids are disallowed
    allowed = rng.random((3, vocab)) < 0.3
    bitmask = np.zeros_like(allocate_token_bitmask(3, vocab))
    for i in range(3):
        for t in np.flatnonzero(allowed[i]):
            bitmask[i, t // 32] |= np.uint32(1 << (t % 32)).view(np.int32)
    assert np.array_equal(unpack_bitmask(bitmask, vocab), allowed)
    logits = torch.randn(3, width)
    before = logits.clone()
    apply_token_bitmask_inplace(logits, bitmask)
    expect = torch.full_like(before, float("-inf"))
    keep = torch.zeros(3, width, dtype=torch.bool)
    keep[:, :vocab] = torch.from_numpy(allowed)
    expect[keep] = before[keep]
    assert torch.equal(logits, expect)
    one = torch.randn(width)
    apply_token_bitmask_inplace(one, bitmask[1])
    assert torch.equal(torch.isfinite(one), keep[1])


@pytest.mark.parametrize("damage", ["truncate", "flip", "other_version", "other_vocab"])
def test_damaged_cache_file_is_rebuilt_not_trusted(vocab, tmp_path, damage):
    first = compile_grammar(JSON, vocab, cache=tmp_path, progress=False)
    expected = Matcher(first).allowed_mask()
    (path,) = tmp_path.glob("flat-*.bin")
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    elif damage == "flip":
        raw[-3] ^= 0x55
    elif damage == "other_version":
        raw[:8] = b"CADFLAT0"
    path.write_bytes(bytes(raw))
    if damage == "other_vocab":  # a file written for another vocabulary under this key
        other = FlatGrammar.load(path)
        other.meta["vocab_hash"] = "0" * 64
        other.save(path)
    with pytest.warns(UserWarning, match="rebuilding the compiled grammar"):
        again = compile_grammar(JSON, vocab, cache=tmp_path, progress=False)
    assert np.array_equal(Matcher(again).allowed_mask(), expected)
    warm = compile_grammar(JSON, vocab, cache=tmp_path, progress=False)  # the rebuilt file is good again
    assert warm._objects is None and np.array_equal(Matcher(warm).allowed_mask(), expected)


def test_outlines_processor_masks_each_sequence_and_pads_finished_ones(vocab):
    """The processor computes the batch's masks in one call; each row follows its own
    sequence; a row that produced EOS allows only EOS afterwards."""
    import torch

    from cad_outlines.generators.outlines_processor import CFGLogitsProcessor

    g = compile_grammar(JSON, vocab, cache=False, progress=False)
    proc = CFGLogitsProcessor(g)
    eos = vocab.eos_token_ids[0]
    rows = [encode(vocab, b"[1]"), encode(vocab, b'{"a": 1}')]
    ids = torch.zeros((2, 1), dtype=torch.long)
    out = proc.process_logits(ids, torch.zeros(2, vocab.size))
    ref = [Matcher(g), Matcher(g)]
    for k in range(max(len(r) for r in rows) + 2):
        for i in range(2):
            expect = ref[i].allowed_mask() if not ref[i].is_finished() else np.eye(vocab.size, dtype=bool)[eos]
            assert np.array_equal(torch.isfinite(out[i]).numpy(), expect), (k, i)
        nxt = []
        for i, r in enumerate(rows):
            tok = r[k] if k < len(r) else eos
            if ref[i].is_finished():
                tok = eos
            else:
                ref[i].advance(tok)
            nxt.append(tok)
        ids = torch.cat([ids, torch.tensor(nxt).view(2, 1)], dim=1)
        logits = torch.zeros(2, vocab.size)
        out = proc.process_logits(ids, logits)
        assert (logits == 0).all()  # the caller's tensor is left as it is

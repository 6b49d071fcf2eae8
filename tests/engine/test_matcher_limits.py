"""Decode time is bounded in the native matcher (issue 29): every mask, advance and validate spends within
Limits.max_reductions_per_token / max_parser_stack_depth / max_matcher_bytes; exceeding one puts that matcher
into a sticky error state (every later call raises MatcherLimitError, as llguidance's matchers) and a batch
goes on without it. The looping grammar is compiled here with the compile-time loop check switched off, to
show the runtime limits stop it on their own."""

import numpy as np
import pytest

import cad_outlines.engine.compile as compile_module
from cad_outlines.engine.compile import compile_grammar
from cad_outlines.engine.matcher import (Matcher, allocate_token_bitmask, fill_next_token_bitmask_batch,
                                         unpack_bitmask)
from cad_outlines.engine.vocabulary import Vocabulary
from cad_outlines.errors import InvalidTokenError, MatcherLimitError, ResourceLimitError
from cad_outlines.limits import DEFAULT_LIMITS, Limits
from tests.fixture_data import SMALL

LOOPING = '!start: (a+)*\n!a.1: "A" |\n'
NESTED = 'start: "[" start "]" | "x"\n'
SMALL_BUDGET = Limits(max_reductions_per_token=100_000)


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")


@pytest.fixture(scope="module")
def looping(vocab):
    """The grammar of lark's test_resolve_ambiguity_with_shared_node, its loop check skipped."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compile_module, "check_parser_loops", lambda *a: None)
        return compile_grammar(LOOPING, vocab, cache=False, lazy=True, progress=False, limits=SMALL_BUDGET)


def ids(vocab, text: str) -> list[int]:
    return [vocab.token_bytes.index(bytes([c])) for c in text.encode()]


def test_a_looping_parser_stops_at_the_reduction_limit_and_stays_stopped(looping, vocab):
    m = Matcher(looping)
    assert m.error is None
    with pytest.raises(MatcherLimitError) as info:
        m.allowed_mask()
    e = info.value
    assert isinstance(e, ResourceLimitError) and e.limit == "max_reductions_per_token"
    assert (e.value, e.maximum) == (100_001, 100_000)
    assert "stopped in a mask" in str(e) and "CAD_OUTLINES_MAX_REDUCTIONS_PER_TOKEN" in str(e)
    assert str(m.error) == str(e)
    a = ids(vocab, "A")
    words = np.zeros(looping.native.n_words, dtype=np.int32)
    for call in (lambda: m.advance(a[0]), lambda: m.advance_many(a), lambda: m.validate(a), m.is_accepting,
                 m.allowed_mask, lambda: m.fill_next_token_bitmask(words), lambda: m.rollback(0),
                 lambda: m.fork().allowed_mask()):
        with pytest.raises(MatcherLimitError) as again:
            call()
        assert str(again.value) == str(e)
    # an errored mask allows only EOS, so a loop that ignores the error ends its sequence
    assert np.flatnonzero(unpack_bitmask(words, vocab.size)).tolist() == list(vocab.eos_token_ids)
    assert m.consumed == 0


def test_the_compile_s_limits_are_the_matchers_default_and_a_matcher_may_have_its_own(looping):
    assert looping.limits == SMALL_BUDGET
    with pytest.raises(MatcherLimitError) as info:
        Matcher(looping, limits=Limits(max_reductions_per_token=5_000)).is_accepting()
    assert (info.value.limit, info.value.maximum) == ("max_reductions_per_token", 5_000)
    with pytest.raises(MatcherLimitError) as info:  # with no reduction limit, the memory limit stops it
        Matcher(looping, limits=Limits(max_reductions_per_token=None, max_matcher_bytes=1 << 20)).allowed_mask()
    assert (info.value.limit, info.value.maximum) == ("max_matcher_bytes", 1 << 20)


def test_a_batch_goes_on_without_the_matcher_that_failed(looping, vocab):
    good_grammar = compile_grammar(NESTED, vocab, cache=False, progress=False)
    good, bad = Matcher(good_grammar), Matcher(looping)
    bitmask = allocate_token_bitmask(4, vocab.size)
    with pytest.raises(MatcherLimitError) as info:
        fill_next_token_bitmask_batch([good, bad, None, Matcher(good_grammar)], bitmask)
    assert info.value.indices == [1] and info.value.limit == "max_reductions_per_token"
    rows = unpack_bitmask(bitmask, vocab.size)
    assert (rows[0] == good.allowed_mask()).all() and (rows[3] == rows[0]).all()
    assert np.flatnonzero(rows[1]).tolist() == list(vocab.eos_token_ids)
    assert (bitmask[2] == -1).all()  # a None entry's row is left alone
    good.advance(ids(vocab, "[")[0])  # the good matcher goes on
    with pytest.raises(MatcherLimitError) as info:  # the stopped one is named again, by its new position
        fill_next_token_bitmask_batch([bad, good], bitmask, rows=[3, 0])
    assert info.value.indices == [0]


def test_the_stack_depth_limit_and_nothing_committed(vocab):
    g = compile_grammar(NESTED, vocab, cache=False, progress=False, limits=Limits(max_parser_stack_depth=12))
    m = Matcher(g)
    m.advance_many(ids(vocab, "[" * 10))
    assert m.consumed == 10
    m.rollback(1)
    with pytest.raises(MatcherLimitError) as info:
        m.advance_many(ids(vocab, "[[[[["))
    assert (info.value.limit, info.value.value, info.value.maximum) == ("max_parser_stack_depth", 13, 12)
    assert "stopped in an advance" in str(info.value) and m.consumed == 9  # the failed call committed nothing
    with pytest.raises(MatcherLimitError):
        m.rollback(1)


def test_the_memory_limit_counts_the_history(vocab):
    g = compile_grammar(NESTED, vocab, cache=False, progress=False, limits=Limits(max_matcher_bytes=64 << 10))
    m = Matcher(g)
    with pytest.raises(MatcherLimitError) as info:
        for t in ids(vocab, "[" * 5000):
            m.advance(t)
    assert info.value.limit == "max_matcher_bytes" and 100 < m.consumed < 5000


def test_the_defaults_leave_real_decoding_alone(vocab):
    assert (DEFAULT_LIMITS.max_reductions_per_token, DEFAULT_LIMITS.max_parser_stack_depth) == (10_000_000, 1_000_000)
    g = compile_grammar(NESTED, vocab, cache=False, progress=False)
    m = Matcher(g)
    m.advance_many(ids(vocab, "[" * 3000 + "x" + "]" * 3000))
    assert m.is_accepting() and m.error is None
    with pytest.raises(InvalidTokenError):  # a refused token is not an error state
        m.advance(ids(vocab, "]")[0])
    assert m.error is None


def test_the_limits_come_from_the_environment():
    env = {"CAD_OUTLINES_MAX_REDUCTIONS_PER_TOKEN": "1e6", "CAD_OUTLINES_MAX_PARSER_STACK_DEPTH": "none",
           "CAD_OUTLINES_MAX_MATCHER_BYTES": "1048576"}
    got = Limits.from_env(env)
    assert (got.max_reductions_per_token, got.max_parser_stack_depth, got.max_matcher_bytes) == (10**6, None, 1 << 20)

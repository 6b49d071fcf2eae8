"""Token ids from callers (issue 12, item 7): `Matcher.advance(-1)`, `advance(10**9)` and a
float raised `InvalidTokenError: token -1 (b'') is not allowed here` or a bare TypeError."""

import re

import numpy as np
import pytest

from cad_outlines import InvalidTokenError, Matcher, compile_grammar
from cad_outlines.engine.token_ids import check_token_id
from tests.helpers import JSON, ToyVocab, encode


@pytest.mark.parametrize("token", [0, 5, 99, np.int64(7), np.uint16(3), np.int32(99)])
def test_integer_ids_in_range_pass(token):
    got = check_token_id(token, 100)
    assert got == int(token) and type(got) is int


@pytest.mark.parametrize("token", [-1, 100, 10**9, 3.0, True, np.float32(2), "5", None])
def test_bad_ids_raise_value_error_naming_id_and_size(token):
    """Messages name the id (and its type when it is not an integer) and the vocabulary's
    range; the exact wording is the helper's (the native matcher raises the same)."""
    with pytest.raises(ValueError) as info:
        check_token_id(token, 100)
    msg = str(info.value)
    assert not isinstance(info.value, InvalidTokenError)
    if isinstance(token, int) and not isinstance(token, bool):
        assert f"token id {token} " in msg and "99" in msg
    else:
        assert repr(token) in msg and type(token).__name__ in msg


@pytest.fixture(scope="module")
def matcher(tmp_path_factory):
    vocab = ToyVocab.make()
    return Matcher(compile_grammar(JSON, vocab, cache=tmp_path_factory.mktemp("c"), progress=False)), vocab


@pytest.mark.parametrize("token", [-1, 10**9, 1.5, True])
def test_matcher_moves_reject_bad_ids_and_change_nothing(matcher, token):
    m, vocab = matcher
    m = m.fork()
    m.advance_many(encode(vocab, b'{"a": '))
    before = m.consumed
    with pytest.raises(ValueError, match=re.escape(repr(token))):
        m.advance(token)
    with pytest.raises(ValueError, match=re.escape(repr(token))):
        m.advance_many([encode(vocab, b"1")[0], token])
    with pytest.raises(ValueError, match=re.escape(repr(token))):
        m.validate([token])
    assert m.consumed == before
    m.advance(np.int64(encode(vocab, b"1")[0]))  # numpy ints are fine
    with pytest.raises(InvalidTokenError):  # a real id the grammar rejects is still InvalidTokenError
        m.advance(encode(vocab, b":")[0])

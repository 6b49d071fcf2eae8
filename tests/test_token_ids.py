"""Token ids from callers (issue 12, item 7): `Matcher.advance(-1)`, `advance(10**9)` and a
float raised `InvalidTokenError: token -1 (b'') is not allowed here` or a bare TypeError."""

import numpy as np
import pytest

from cad_outlines import InvalidTokenError, Matcher, compile_grammar
from cad_outlines.engine.token_ids import check_token_id
from test_engine import JSON, ToyVocab, encode


@pytest.mark.parametrize("token", [0, 5, 99, np.int64(7), np.uint16(3), np.int32(99)])
def test_integer_ids_in_range_pass(token):
    got = check_token_id(token, 100)
    assert got == int(token) and type(got) is int


@pytest.mark.parametrize("token,words", [
    (-1, "token id -1 is out of range: the vocabulary has 100 ids (0-99)"),
    (100, "token id 100 is out of range"),
    (10**9, "token id 1000000000 is out of range: the vocabulary has 100 ids"),
    (3.0, "token id 3.0 is a float, not an integer (vocabulary size 100)"),
    (True, "token id True is a bool, not an integer"),
    (np.float32(2), "is a float32, not an integer"),
    ("5", "token id '5' is a str, not an integer"),
    (None, "token id None is a NoneType"),
])
def test_bad_ids_raise_value_error_naming_id_and_size(token, words):
    with pytest.raises(ValueError) as info:
        check_token_id(token, 100)
    assert words in str(info.value)
    assert not isinstance(info.value, InvalidTokenError)


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
    with pytest.raises(ValueError, match=f"token id {token!r}"):
        m.advance(token)
    with pytest.raises(ValueError, match=f"token id {token!r}"):
        m.advance_many([encode(vocab, b"1")[0], token])
    with pytest.raises(ValueError, match=f"token id {token!r}"):
        m.validate([token])
    assert m.consumed == before
    m.advance(np.int64(encode(vocab, b"1")[0]))  # numpy ints are fine
    with pytest.raises(InvalidTokenError):  # a real id the grammar rejects is still InvalidTokenError
        m.advance(encode(vocab, b":")[0])

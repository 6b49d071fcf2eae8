"""Token ids from callers: one check, shared by every matcher implementation.

A token id must be an integer in ``[0, vocab_size)``. Anything else (a negative id, an id
past the model's vocabulary, a float, a bool, a string) is a caller's mistake, not a
grammar decision, so it raises :class:`~cad_outlines.errors.TokenError` (a ValueError) naming the id and the vocabulary size
instead of being reported as "not allowed here".
"""

from __future__ import annotations

import operator

from ..errors import TokenError

__all__ = ["check_token_id", "check_token_ids"]


def check_token_id(token: object, vocab_size: int) -> int:
    """`token` as a Python int if it is an integer id in ``[0, vocab_size)``; else raise
    :class:`ValueError` naming it and the vocabulary size. ints and numpy integers pass;
    bools, floats (even ``3.0``) and other types do not."""
    try:
        if isinstance(token, bool):
            raise TypeError("bool")
        value = operator.index(token)
    except TypeError:
        raise TokenError(f"token id {token!r} is a {type(token).__name__}, not an integer "
                         f"(vocabulary size {vocab_size})") from None
    if not 0 <= value < vocab_size:
        raise TokenError(f"token id {value} is out of range: the vocabulary has {vocab_size} ids (0-{vocab_size - 1})")
    return value


def check_token_ids(tokens, vocab_size: int):
    """`tokens` as a contiguous int32 numpy array, each checked like :func:`check_token_id`
    (a whole numpy integer array is checked at once)."""
    import numpy as np

    if isinstance(tokens, np.ndarray) and tokens.dtype.kind in "iu" and tokens.ndim == 1:
        bad = np.flatnonzero((tokens < 0) | (tokens >= vocab_size))
        if len(bad):
            check_token_id(int(tokens[bad[0]]), vocab_size)
        return np.ascontiguousarray(tokens, dtype=np.int32)
    return np.array([check_token_id(t, vocab_size) for t in tokens], dtype=np.int32)

"""Token ids from callers: one check, shared by every matcher implementation.

A token id must be an integer in ``[0, vocab_size)``. Anything else (a negative id, an id
past the model's vocabulary, a float, a bool, a string) is a caller's mistake, not a
grammar decision, so it raises :class:`ValueError` naming the id and the vocabulary size
instead of being reported as "not allowed here".
"""

from __future__ import annotations

import operator

__all__ = ["check_token_id"]


def check_token_id(token: object, vocab_size: int) -> int:
    """`token` as a Python int if it is an integer id in ``[0, vocab_size)``; else raise
    :class:`ValueError` naming it and the vocabulary size. ints and numpy integers pass;
    bools, floats (even ``3.0``) and other types do not."""
    try:
        if isinstance(token, bool):
            raise TypeError("bool")
        value = operator.index(token)
    except TypeError:
        raise ValueError(f"token id {token!r} is a {type(token).__name__}, not an integer "
                         f"(vocabulary size {vocab_size})") from None
    if not 0 <= value < vocab_size:
        raise ValueError(f"token id {value} is out of range: the vocabulary has {vocab_size} ids (0-{vocab_size - 1})")
    return value

"""Token-id arguments checked once, with errors that name the id and the vocabulary."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["check_token_id", "check_token_ids"]


def check_token_id(token, vocab_size: int) -> int:
    """`token` as an int; ValueError naming it if it is not an integer id in
    ``[0, vocab_size)`` (bools and floats are refused, numpy integers accepted)."""
    if isinstance(token, (bool, np.bool_)) or not isinstance(token, (int, np.integer)):
        raise ValueError(f"token id must be an integer, got {token!r} ({type(token).__name__})")
    t = int(token)
    if not 0 <= t < vocab_size:
        raise ValueError(f"token id {t} is outside the vocabulary (0..{vocab_size - 1})")
    return t


def check_token_ids(tokens: Sequence[int], vocab_size: int) -> np.ndarray:
    """`tokens` as a contiguous int32 array, each checked like :func:`check_token_id`."""
    if isinstance(tokens, np.ndarray) and tokens.dtype.kind in "iu" and tokens.ndim == 1:
        arr = tokens.astype(np.int32, copy=False)
        bad = np.flatnonzero((tokens < 0) | (tokens >= vocab_size))
        if len(bad):
            check_token_id(int(tokens[bad[0]]), vocab_size)
        return np.ascontiguousarray(arr)
    return np.array([check_token_id(t, vocab_size) for t in tokens], dtype=np.int32)

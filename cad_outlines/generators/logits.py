"""Masking logits with a matcher (torch), never in place on the caller's tensor."""

from __future__ import annotations

import numpy as np

__all__ = ["mask_logits"]


def mask_logits(logits, allowed: np.ndarray):
    """A new tensor equal to `logits` where `allowed` is True and -inf elsewhere.

    `logits` is a torch tensor whose last dimension may be longer or shorter than
    `allowed` (models pad their vocabulary): ids beyond `allowed` are disallowed.
    """
    import torch

    n = logits.shape[-1]
    keep = np.zeros(n, dtype=bool)
    k = min(n, len(allowed))
    keep[:k] = allowed[:k]
    if not keep.any():
        raise ValueError("no token is allowed here: the grammar admits no continuation")
    keep_t = torch.from_numpy(keep).to(logits.device)
    return logits.masked_fill(~keep_t, float("-inf"))

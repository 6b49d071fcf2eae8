"""Masking logits (torch): from a bool mask (a new tensor) or from a packed int32
bitmask (in place, a whole batch at once)."""

from __future__ import annotations

import numpy as np

__all__ = ["mask_logits", "apply_token_bitmask_inplace"]


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


_SHIFTS: dict = {}


def apply_token_bitmask_inplace(logits, bitmask: np.ndarray, rows=None) -> None:
    """Set ``logits[i, t] = -inf`` wherever bit t of ``bitmask[i]`` is 0 (llguidance's
    packed int32 layout), in place, on the logits' device. `logits` is (batch, vocab)
    or (vocab,); vocabulary ids past the bitmask's bits are disallowed. `rows`, if
    given, selects the logits rows to mask (bitmask row k masks logits row rows[k])."""
    import torch

    two_d = logits.dim() == 2
    target = logits if two_d else logits.unsqueeze(0)
    bits = torch.from_numpy(np.ascontiguousarray(bitmask).reshape(-1, bitmask.shape[-1])).to(target.device,
                                                                                          non_blocking=True)
    shifts = _SHIFTS.get(target.device)
    if shifts is None:
        shifts = _SHIFTS[target.device] = torch.arange(32, dtype=torch.int32, device=target.device)
    allowed = ((bits.unsqueeze(-1) >> shifts) & 1).bool().reshape(bits.shape[0], -1)
    vocab = target.shape[-1]
    if allowed.shape[1] < vocab:
        pad = torch.zeros(allowed.shape[0], vocab - allowed.shape[1], dtype=torch.bool, device=target.device)
        allowed = torch.cat([allowed, pad], dim=1)
    allowed = allowed[:, :vocab]
    if rows is None:
        target.masked_fill_(~allowed, float("-inf"))
    else:
        idx = torch.as_tensor(list(rows), dtype=torch.long, device=target.device)
        target[idx] = target[idx].masked_fill(~allowed, float("-inf"))

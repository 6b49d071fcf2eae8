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
    packed int32 layout), in place. `logits` is (batch, vocab) or (vocab,); vocabulary
    ids past the bitmask's bits are disallowed. `rows`, if given, selects the logits
    rows to mask (bitmask row k masks logits row rows[k]). A row with every bit set (-1 words:
    what :func:`~cad_outlines.engine.matcher.allocate_token_bitmask` starts with, a row no
    matcher filled) leaves its logits row alone, columns past the bitmask's bits included,
    as llguidance's and xgrammar's do. On the CPU the bits are
    unpacked by numpy; on an accelerator the packed words are copied over (32x less
    than a bool mask) and unpacked there."""
    import torch

    target = logits if logits.dim() == 2 else logits.unsqueeze(0)
    words = np.ascontiguousarray(bitmask).reshape(-1, bitmask.shape[-1])
    vocab = target.shape[-1]
    # a row with every bit set (a fresh row no matcher filled: a None entry) leaves its logits alone, the
    # columns past its bits included (logits wider than the vocabulary: GPT-2's 50,257 ids in 50,304 columns)
    free = (words == -1).all(axis=1)
    if free.all():
        return
    if target.device.type == "cpu":
        bits = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")
        banned = np.ones((words.shape[0], vocab), dtype=bool)
        k = min(vocab, bits.shape[1])
        banned[:, :k] = bits[:, :k] == 0
        banned[free] = False
        banned_t = torch.from_numpy(banned)
    else:
        w = torch.from_numpy(words).to(target.device, non_blocking=True)
        shifts = _SHIFTS.get(target.device)
        if shifts is None:
            shifts = _SHIFTS[target.device] = torch.arange(32, dtype=torch.int32, device=target.device)
        allowed = ((w.unsqueeze(-1) >> shifts) & 1).bool().reshape(w.shape[0], -1)
        if allowed.shape[1] < vocab:
            pad = torch.from_numpy(free).to(target.device).unsqueeze(1).expand(-1, vocab - allowed.shape[1])
            allowed = torch.cat([allowed, pad], dim=1)
        banned_t = ~allowed[:, :vocab]
    if rows is None:
        target.masked_fill_(banned_t, float("-inf"))
    else:
        idx = torch.as_tensor(list(rows), dtype=torch.long, device=target.device)
        target[idx] = target[idx].masked_fill(banned_t, float("-inf"))

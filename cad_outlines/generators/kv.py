"""Forward passes over a transformers causal LM with a KV cache (transformers 5.x).

Positions come from the cache, so appending N tokens is one call whatever N is; that
one call is how a copy op or a run of forced tokens enters the context.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["new_cache", "cache_len", "crop_cache", "append"]


def new_cache(model):
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # older transformers
        return DynamicCache()


def cache_len(cache) -> int:
    return int(cache.get_seq_length())


def crop_cache(cache, length: int) -> None:
    """Cut `cache` back to its first `length` positions, and check it (``crop(-k)``
    removes k positions: transformers 5.x rejects positive arguments)."""
    extra = cache_len(cache) - length
    if extra < 0:
        raise ValueError(f"cache holds {cache_len(cache)} positions, cannot crop to {length}")
    if extra:
        cache.crop(-extra)
    if cache_len(cache) != length:
        raise RuntimeError(f"cache crop left {cache_len(cache)} positions, expected {length}")


def append(model, cache, ids: Sequence[int], *, all_logits: bool = False):
    """ONE forward appending `ids` to `cache`. Returns the logits of the last position
    ([vocab], float32), or of every appended position ([len(ids), vocab]) with
    `all_logits` (speculative verification needs them)."""
    import torch

    device = next(model.parameters()).device
    x = torch.tensor([list(ids)], dtype=torch.long, device=device)
    kwargs = {} if all_logits else {"logits_to_keep": 1}
    with torch.inference_mode():
        logits = model(input_ids=x, past_key_values=cache, use_cache=True, **kwargs).logits
    return logits[0].float() if all_logits else logits[0, -1].float()

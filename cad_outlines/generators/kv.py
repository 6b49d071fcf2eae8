"""Forward passes over a transformers causal LM with a KV cache (transformers 5.x).

Positions come from the cache, so appending N tokens is one call whatever N is; that
one call is how a copy op or a run of forced tokens enters the context.

The cache is a transformers :class:`~transformers.DynamicCache` (the Cache API), passed
under the keyword the model's ``forward`` names: ``cache`` in transformers >= 5.2x
(``past_key_values`` there is deprecated and warns), ``past_key_values`` before.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

__all__ = ["new_cache", "cache_len", "crop_cache", "append", "cache_keyword"]

_KEYWORD: dict[type, str] = {}


def new_cache(model):
    """An empty :class:`~transformers.DynamicCache` for `model`."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # older transformers
        return DynamicCache()


def cache_keyword(model) -> str:
    """The keyword `model`'s forward takes its KV cache under: ``"cache"`` where the model
    has it (newer transformers), else ``"past_key_values"``; a forward naming neither (a
    wrapper taking ``**kwargs``) gets the installed transformers' keyword. Read once per
    model class."""
    cls = type(model)
    word = _KEYWORD.get(cls)
    if word is None:
        params = _params(model.forward)
        if "cache" in params or "past_key_values" in params:
            word = "cache" if "cache" in params else "past_key_values"
        else:  # a wrapper passing **kwargs on: the installed transformers' convention
            from transformers import LlamaForCausalLM

            word = "cache" if "cache" in _params(LlamaForCausalLM.forward) else "past_key_values"
        _KEYWORD[cls] = word
    return word


def _params(fn) -> dict:
    try:
        return dict(inspect.signature(fn).parameters)  # follows the deprecation wrapper's __wrapped__
    except (TypeError, ValueError):
        return {}


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


def forward(model, cache, x, **kwargs):
    """``model(input_ids=x, <cache keyword>=cache, use_cache=True, **kwargs)`` under inference mode."""
    import torch

    kwargs[cache_keyword(model)] = cache
    with torch.inference_mode():
        return model(input_ids=x, use_cache=True, **kwargs)


def append(model, cache, ids: Sequence[int], *, all_logits: bool = False):
    """ONE forward appending `ids` to `cache`. Returns the logits of the last position
    ([vocab], float32), or of every appended position ([len(ids), vocab]) with
    `all_logits` (speculative verification needs them)."""
    import torch

    device = model.device if hasattr(model, "device") else next(model.parameters()).device
    x = torch.tensor([list(ids)], dtype=torch.long, device=device)
    kwargs = {} if all_logits else {"logits_to_keep": 1}
    logits = forward(model, cache, x, **kwargs).logits
    return logits[0].float() if all_logits else logits[0, -1].float()

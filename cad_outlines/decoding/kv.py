"""Forward passes over a transformers causal LM with a KV cache (transformers 5.x).

Positions come from the cache, so appending N tokens is one call whatever N is; that
one call is how a copy op or a run of forced tokens enters the context.

The cache is a transformers :class:`~transformers.DynamicCache` (the Cache API), passed
under the keyword the model's ``forward`` names: ``cache`` in transformers >= 5.2x
(``past_key_values`` there is deprecated and warns), ``past_key_values`` before. Its
full-attention layers are :class:`GrowingLayer`: keys and values live in a buffer with
spare room (doubled when full), so appending k tokens writes k positions instead of
copying the whole cache (``DynamicLayer`` concatenates: O(context) bytes per forward, a
real cost per decode step on a file of thousands of tokens), and a crop only moves the
length back.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from . import attention

__all__ = ["new_cache", "clone_cache", "cache_len", "crop_cache", "append", "cache_keyword"]

_KEYWORD: dict[type, str] = {}


def _growing_layer_class():
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys/values are views of a buffer with room to grow."""

        def lazy_initialization(self, key_states, value_states) -> None:
            super().lazy_initialization(key_states, value_states)
            self._k = self._v = None
            self._n = 0

        def update(self, key_states, value_states, *args, **kwargs):
            import torch

            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n, q = self._n, key_states.shape[-2]
            if self._k is None or n + q > self._k.shape[-2]:
                cap = max(2 * (self._k.shape[-2] if self._k is not None else 0), n + q, 256)
                k = key_states.new_empty(key_states.shape[:-2] + (cap, key_states.shape[-1]))
                v = value_states.new_empty(value_states.shape[:-2] + (cap, value_states.shape[-1]))
                if n:
                    k[..., :n, :].copy_(self._k[..., :n, :])
                    v[..., :n, :].copy_(self._v[..., :n, :])
                self._k, self._v = k, v
            with torch.no_grad():
                self._k[..., n : n + q, :].copy_(key_states)
                self._v[..., n : n + q, :].copy_(value_states)
            self._set(n + q)
            return self.keys, self.values

        def _set(self, n: int) -> None:
            self._n = n
            self.keys, self.values = self._k[..., :n, :], self._v[..., :n, :]

        def get_seq_length(self) -> int:
            return self._n if self.is_initialized else 0

        def reset(self) -> None:
            super().reset()
            self._k = self._v = None
            self._n = 0

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove > 0:
                raise ValueError(f"crop takes a negative count of positions to remove, not {tokens_to_remove}")
            if tokens_to_remove and self.is_initialized:
                self._set(max(self._n + tokens_to_remove, 0))

        def clone_from(self, other) -> None:
            """Become an independent copy of `other` (a :class:`GrowingLayer`): its positions in a buffer
            of their own, with the same room to grow."""
            self.__dict__.update({k: v for k, v in other.__dict__.items() if k not in ("keys", "values", "_k", "_v")})
            if not other.is_initialized:
                return
            n = other._n
            self._k = other._k.new_empty(other._k.shape)
            self._v = other._v.new_empty(other._v.shape)
            self._k[..., :n, :].copy_(other._k[..., :n, :])
            self._v[..., :n, :].copy_(other._v[..., :n, :])
            self._set(n)

        def batch_repeat_interleave(self, repeats: int) -> None:
            raise NotImplementedError("GrowingLayer holds one sequence")

        def batch_select_indices(self, indices) -> None:
            raise NotImplementedError("GrowingLayer holds one sequence")

    return GrowingLayer


_GROWING: list = []


def new_cache(model):
    """An empty :class:`~transformers.DynamicCache` for `model`, its full-attention layers
    :class:`GrowingLayer` (see the module docstring)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    if not _GROWING:
        _GROWING.append(_growing_layer_class())
    growing = _GROWING[0]
    try:
        cache = DynamicCache(config=model.config)
    except TypeError:  # older transformers
        return DynamicCache()
    layers = getattr(cache, "layers", None)
    if layers and all(type(layer) is DynamicLayer for layer in layers):
        cache.layers = [growing() for _ in layers]
    return cache


def clone_cache(model, cache):
    """An independent copy of `cache` (from :func:`new_cache`): appending to or cropping
    one leaves the other as it was. This is how a prompt's KV is reused across runs
    (prefix caching) instead of prefilled again."""
    import copy

    layers = getattr(cache, "layers", None)
    if layers and all(hasattr(x, "clone_from") for x in layers):
        out = new_cache(model)
        for mine, theirs in zip(out.layers, layers):
            mine.clone_from(theirs)
        return out
    return copy.deepcopy(cache)  # other layer kinds (sliding windows, older transformers)


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
    """``model(input_ids=x, <cache keyword>=cache, use_cache=True, **kwargs)`` under inference mode;
    a small forward on CUDA runs without cuDNN attention (:func:`~.attention.attention_backends`)."""
    import torch

    kwargs[cache_keyword(model)] = cache
    with torch.inference_mode(), attention.attention_backends(x.shape[-1], x.device):
        return model(input_ids=x, use_cache=True, **kwargs)


def append(model, cache, ids: Sequence[int], *, all_logits: bool = False, chunk: int | None = None):
    """Append `ids` to `cache` in ONE forward (or, with `chunk`, one forward per `chunk`
    tokens: a long copy over a long context then never builds an attention matrix of
    len(ids) x context at once). Returns the logits of the last position ([vocab],
    float32), or of every appended position ([len(ids), vocab]) with `all_logits`
    (speculative verification needs them)."""
    import torch

    ids = list(ids)
    if not ids:
        raise ValueError("append needs at least one token")
    device = model.device if hasattr(model, "device") else next(model.parameters()).device
    step = len(ids) if not chunk or chunk >= len(ids) else chunk
    rows = []
    for start in range(0, len(ids), max(step, 1)):
        x = torch.tensor([ids[start : start + step]], dtype=torch.long, device=device)
        last = start + step >= len(ids)
        kwargs = {} if all_logits else {"logits_to_keep": 1}
        logits = forward(model, cache, x, **kwargs).logits
        if all_logits:
            rows.append(logits[0].float())
        elif last:
            return logits[0, -1].float()
    return rows[0] if len(rows) == 1 else torch.cat(rows)

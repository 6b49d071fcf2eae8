"""Grouped-query attention for forwards of several tokens over a long KV cache.

transformers' ``sdpa`` attention (5.x) handles a model with fewer KV heads than query
heads (GQA: Qwen2.5, Llama-3) without copying only for ONE new token; for two or more
with a mask (a copy, a forced run, a speculative verify: every forward over a cache) it
repeats the cache's keys and values to one per query head first, a copy of the whole
context per layer and forward. On Qwen2.5-0.5B at 12,000 positions (CPU, fp32) that makes
a forward of 2 tokens cost 4.5x one of 1 token (1.10 s against 0.25 s), and of 11 tokens
5.6x. :func:`gqa_sdpa_forward` passes the grouped keys and values to
``scaled_dot_product_attention(..., enable_gqa=True)`` instead: the same attention, with
no copy. Everything else (one token, no grouping, position biases, soft-capping,
dropout) goes to transformers' own function unchanged.

:func:`use_gqa_attention` switches a model to it (:class:`CopyEditor` does so for the
models it drives); the outputs equal ``sdpa``'s up to float rounding.

:func:`attention_backends` keeps small forwards on CUDA (decode steps, forced runs,
speculative verifies) off PyTorch's cuDNN attention: cuDNN builds an execution plan per
attention shape, and with a growing KV cache every step has a new key length, so every
step paid a plan (H200, torch 2.11, Qwen2.5-1.5B: 46 ms a decode step with it, 14 ms
without; verifies of up to 11 tokens 58 ms against 30 ms; ``docs/results/gpu``). Larger
forwards (copies) keep PyTorch's choice: there cuDNN was the faster (60 ms against 78 ms
per copy forward, plan included).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["GQA_SDPA", "SMALL_FORWARD_TOKENS", "attention_backends", "gqa_sdpa_forward", "use_gqa_attention"]

GQA_SDPA = "cad_gqa_sdpa"
SMALL_FORWARD_TOKENS = 16  # forwards of at most this many new tokens avoid cuDNN attention on CUDA
_REGISTERED: list[bool] = []


def attention_backends(n_tokens: int, device: torch.device | str) -> AbstractContextManager:
    """The context to run a forward of `n_tokens` new tokens on `device` under: on CUDA and at
    most :data:`SMALL_FORWARD_TOKENS` tokens, ``sdpa`` limited to flash, memory-efficient and
    math attention (no cuDNN, whose plan per key length costs a decode step 3x); otherwise, and
    where torch lacks ``sdpa_kernel``, a no-op."""
    if getattr(device, "type", str(device).split(":")[0]) != "cuda" or n_tokens > SMALL_FORWARD_TOKENS:
        return nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch < 2.3
        return nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def gqa_sdpa_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                     is_causal=None, **kwargs):
    """transformers' attention-function signature: `query` [batch, heads, q, dim], `key`/`value`
    [batch, kv_heads, kv, dim]; returns ([batch, q, heads, dim], None)."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    q_len, kv_len = query.shape[2], key.shape[2]
    if (groups == 1 or q_len == 1 or dropout or kwargs.get("position_bias") is not None
            or kwargs.get("softcap") is not None):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    causal = False
    if attention_mask is None:
        if q_len == kv_len:
            causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        else:  # new tokens after a cached prefix: each sees the prefix and the new tokens up to itself
            rows = torch.arange(q_len, device=query.device)[:, None] + (kv_len - q_len)
            attention_mask = (rows >= torch.arange(kv_len, device=query.device)[None, :])[None, None]
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                           is_causal=bool(causal), scale=scaling, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def _register() -> None:
    if _REGISTERED:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(GQA_SDPA, gqa_sdpa_forward)
    AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)
    _REGISTERED.append(True)


def use_gqa_attention(model) -> bool:
    """Switch `model` from ``sdpa`` to :func:`gqa_sdpa_forward` when it groups its KV heads;
    True when it did (or already had). Other implementations (eager, flash attention,
    kernels) and models without grouping are left as they are."""
    config = getattr(model, "config", None)
    impl = getattr(config, "_attn_implementation", None)
    if impl == GQA_SDPA:
        return True
    heads = getattr(config, "num_attention_heads", None)
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    if impl != "sdpa" or not heads or heads == kv_heads or not hasattr(model, "set_attn_implementation"):
        return False
    try:
        _register()
        model.set_attn_implementation(GQA_SDPA)
    except Exception:  # an older transformers without the attention interface: sdpa as it was
        return False
    return getattr(model.config, "_attn_implementation", None) == GQA_SDPA

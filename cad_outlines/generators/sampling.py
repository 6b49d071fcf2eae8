"""Choosing a token from a step's logits under the grammar mask: greedy, or temperature and
top-p sampling, and the speculative-sampling rule that decides a drafted token."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Sampling", "distribution", "sample_token", "verify_rule", "verify_token"]


@dataclass(frozen=True)
class Sampling:
    """Greedy when `temperature` is 0; else temperature and nucleus (top-p) sampling,
    seeded."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        """Out-of-range values raise :class:`~cad_outlines.errors.ParameterError` (a ValueError) here,
        not a torch error at the first sampled token."""
        import math
        from numbers import Integral, Real

        from ..errors import ParameterError

        t, p, seed = self.temperature, self.top_p, self.seed
        if isinstance(t, bool) or not isinstance(t, Real) or not math.isfinite(t) or t < 0:
            raise ParameterError(f"Sampling temperature must be a finite number >= 0 (0: greedy), not {t!r}")
        if isinstance(p, bool) or not isinstance(p, Real) or not 0 < p <= 1:
            raise ParameterError(f"Sampling top_p must be a number in (0, 1] (the probability mass kept), not {p!r}")
        if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
            raise ParameterError(f"Sampling seed must be an int >= 0, not {seed!r}")


def distribution(logits, mask: np.ndarray, sampling: Sampling):
    """The distribution tokens are drawn from: masked, temperature, top-p, normalized."""
    import torch

    keep = torch.from_numpy(mask[: logits.shape[-1]]).to(logits.device)
    scores = logits[: keep.shape[0]].masked_fill(~keep, float("-inf"))
    probs = torch.softmax(scores / sampling.temperature, dim=-1)
    if sampling.top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        cut = torch.cumsum(sorted_p, 0) - sorted_p >= sampling.top_p
        sorted_p[cut] = 0
        probs = torch.zeros_like(probs).scatter(0, order, sorted_p)
    return probs / probs.sum()


def sample_token(logits, mask: np.ndarray, sampling: Sampling, generator) -> int:
    """The next token: the masked argmax when greedy, else drawn from :func:`distribution`."""
    import torch

    if sampling.temperature <= 0:
        keep = torch.from_numpy(mask[: logits.shape[-1]]).to(logits.device)
        return int(torch.argmax(logits[: keep.shape[0]].masked_fill(~keep, float("-inf"))))
    return int(torch.multinomial(distribution(logits, mask, sampling), 1, generator=generator))


def verify_rule(probs, draft: int):
    """Speculative sampling with a deterministic draft token: (probability of keeping
    `draft`, distribution to draw from when it is rejected). Keeping with p(d) and else
    drawing from p without d gives exactly p."""
    accept = float(probs[draft]) if draft < probs.shape[-1] else 0.0
    residual = probs.clone()
    if draft < residual.shape[-1]:
        residual[draft] = 0
    total = float(residual.sum())
    return accept, (residual / total if total > 0 else residual)


def verify_token(logits, mask: np.ndarray, sampling: Sampling, generator, draft: int) -> int:
    """The token at a drafted position: `draft` or what replaces it (see
    :mod:`cad_outlines.generators.copy_decode`); greedy is the masked argmax whatever the draft."""
    import torch

    if sampling.temperature <= 0:
        return sample_token(logits, mask, sampling, generator)
    accept, residual = verify_rule(distribution(logits, mask, sampling), draft)
    if accept > 0 and float(torch.rand(1, generator=generator)) < accept:
        return draft
    return int(torch.multinomial(residual, 1, generator=generator))

"""Choosing tokens from logits: temperature, top-k, top-p, and the raw logprob of the choice.

``choose_tokens`` samples row ``i`` by inverse transform from one uniform number ``u[i]`` (from the
row's own random stream, ``policies.base.stream_uniform``): the chosen id is the first whose
cumulative probability exceeds ``u[i]``. A row's choice therefore depends on its logits and its
uniform only, not on the other rows of the batch, which is what lets the key/value-cache engine and
the re-prefill path of ``TransformersPolicy`` (different batches, same sequences) sample the same ids.

The logprob returned is the model's raw one: ``log_softmax`` of the logits at temperature 1, before
any filtering (what a trainer recomputes, and vLLM's default ``raw_logprobs``).
"""

from __future__ import annotations

from typing import Any

from gem_adapters.policies.base import SamplingParams


def filter_scores(scores: Any, params: SamplingParams) -> Any:
    """``scores`` (batch, vocab) with everything outside top-k and the top-p nucleus set to -inf."""
    import torch

    if 0 < params.top_k < scores.shape[-1]:
        kth = torch.topk(scores, params.top_k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_scores, sorted_index = torch.sort(scores, dim=-1, descending=True)
        probs = torch.softmax(sorted_scores, dim=-1)
        # Drop a token when the tokens ranked above it already hold top_p of the mass (the first always stays).
        drop = probs.cumsum(dim=-1) - probs > params.top_p
        sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
        scores = torch.full_like(scores, float("-inf")).scatter(1, sorted_index, sorted_scores)
    return scores


def choose_tokens(logits: Any, params: SamplingParams, uniforms: Any, work: Any = None) -> tuple[Any, Any]:
    """``(ids, logprobs)`` for ``logits`` (batch, vocab, float32): greedy at temperature 0, else drawn
    by inverse transform from ``uniforms`` (batch,) in [0, 1).

    ``work``: an optional float32 buffer of at least ``logits``' shape, reused from call to call: the
    plain case (temperature 1, no filter) then allocates nothing of the vocabulary's size (fresh
    (batch, vocab) buffers every decoding step cost more than the sampling itself on a CPU)."""
    import torch

    n, vocab = logits.shape
    if params.temperature == 0:  # the first maximal id, found with the maximum in one pass
        peak, ids = logits.max(dim=-1, keepdim=True)
        ids = ids.squeeze(1)
    else:
        peak = logits.amax(dim=-1, keepdim=True)
    exps = torch.sub(logits, peak, out=work[:n, :vocab]) if work is not None else logits - peak
    exps.exp_()
    total = exps.sum(dim=-1, keepdim=True)
    lse = peak + total.log()  # log-sum-exp of the raw logits: logprob = logit - lse
    if params.temperature != 0:
        if params.temperature == 1.0 and params.top_k == 0 and params.top_p >= 1.0:
            cdf = exps.cumsum_(dim=-1)  # unnormalised: the inverse transform scales u by the total
        else:
            cdf = torch.softmax(filter_scores(logits / params.temperature, params), dim=-1).cumsum_(dim=-1)
        total = cdf[:, -1:]
        # Strictly below the total, so the first id whose cdf exceeds it has positive probability.
        target = torch.minimum(
            uniforms.to(cdf)[:, None] * total, torch.nextafter(total, torch.zeros_like(total))
        )
        ids = torch.searchsorted(cdf, target, right=True).squeeze(1).clamp_(max=vocab - 1)
    return ids, (logits.gather(1, ids[:, None]) - lse).squeeze(1)

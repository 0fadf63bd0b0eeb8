"""An Oat actor's vLLM engine as a ``Policy``: token ids in, token ids and logprobs out.

Oat's actors generate with ``actor.generate(prompts, vllm.SamplingParams)``; given lists of token ids
it calls ``llm.generate(prompt_token_ids=...)`` and returns vLLM ``RequestOutput``s. ``OatVLLMPolicy``
wraps that method so the shared rollout driver can play GEM episodes with it: one batched call per
turn of all active episodes, prompts as the renderer's ids (never re-tokenised), one completion each.

``vllm_sampling_kwargs`` maps ``SamplingParams`` onto ``vllm.SamplingParams`` arguments (asking for the
sampled token's logprob), and ``generation_from_vllm`` reads one ``CompletionOutput``: its
``token_ids`` (vLLM keeps the stop token there), the logprob of each sampled id from ``logprobs``
(one ``{token_id: Logprob}`` per position), and ``finish_reason`` ("stop" stays "stop"; "length" and
anything else, e.g. "abort", is a cut-off turn). vLLM is imported only when ``generate`` runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gem_adapters.policies.base import Generation, Policy, SamplingParams


def vllm_sampling_kwargs(params: SamplingParams) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one turn of ``params``."""
    return {
        "n": 1,
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,  # vLLM: -1 switches top-k off
        "stop_token_ids": list(params.stop_token_ids or ()),
        "seed": params.seed,
        "logprobs": 1,  # the top-1 and, always, the sampled token's logprob (as Oat's own actors)
    }


def generation_from_vllm(completion: Any) -> Generation:
    """A ``Generation`` from one vLLM ``CompletionOutput`` sampled with ``logprobs`` set."""
    ids = [int(t) for t in completion.token_ids]
    if completion.logprobs is None:
        raise ValueError("vLLM returned no logprobs: sample with SamplingParams(logprobs=...) set")
    if len(completion.logprobs) != len(ids):
        raise ValueError(f"vLLM returned {len(completion.logprobs)} logprob entries for {len(ids)} tokens")
    logprobs = [float(position[token].logprob) for position, token in zip(completion.logprobs, ids)]
    reason = "stop" if completion.finish_reason == "stop" else "length"
    return Generation(ids, logprobs, reason)


class OatVLLMPolicy(Policy):
    """``generate_fn(prompt_token_id_lists, vllm.SamplingParams) -> RequestOutputs`` as a policy;
    pass an Oat actor's bound ``generate``."""

    def __init__(self, generate_fn: Callable[[list[list[int]], Any], Sequence[Any]]):
        self.generate_fn = generate_fn

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        if not prompts:
            return []
        import vllm

        outputs = self.generate_fn(
            [list(p) for p in prompts], vllm.SamplingParams(**vllm_sampling_kwargs(params))
        )
        if len(outputs) != len(prompts):
            raise ValueError(f"vLLM answered {len(outputs)} of {len(prompts)} prompts")
        return [generation_from_vllm(output.outputs[0]) for output in outputs]

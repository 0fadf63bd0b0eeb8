"""PolicyServer: verl's server-manager interface served by a gem policy (e.g. a transformers model on CPU).

An agent loop talks to its LLM only through ``await server_manager.generate(request_id, *,
prompt_ids, sampling_params, **kwargs) -> TokenOutput`` (``verl.workers.rollout.llm_server``). In
training that is verl's client of its vLLM/SGLang replicas; ``PolicyServer`` answers the same call
from any ``gem_adapters.policies.Policy``, which runs verl agent loops without Ray or a GPU (debugging,
tests, small CPU experiments).

Sampling follows verl's dict: ``max_tokens`` (or ``max_new_tokens``; default ``max_tokens`` given
here), ``temperature``, ``top_p``, ``top_k`` (``-1`` or ``0``: off), ``stop_token_ids`` and
``logprobs`` (return the logprob of each generated id). Other keys (``repetition_penalty``, and the
multimodal and priority arguments) are ignored. Concurrent requests with equal sampling parameters
are generated as one batch (``Policy.agenerate``), as a serving engine would.
"""

from __future__ import annotations

from typing import Any

from gem_adapters.policies.base import Policy, SamplingParams


class PolicyServer:
    """``global_steps`` is the weight version reported with every answer, as verl's servers do."""

    def __init__(self, policy: Policy, *, max_tokens: int = 256, global_steps: int = 0):
        self.policy = policy
        self.max_tokens = max_tokens
        self.global_steps = global_steps

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ):
        from verl.workers.rollout.replica import TokenOutput

        params = sampling_params_from_verl(sampling_params, self.max_tokens)
        (generation,) = await self.policy.agenerate([list(prompt_ids)], params)
        return TokenOutput(
            token_ids=list(generation.token_ids),
            log_probs=list(generation.logprobs or []) if sampling_params.get("logprobs") else None,
            stop_reason="completed",
            extra_fields={
                "global_steps": self.global_steps,
                "min_global_steps": self.global_steps,
                "max_global_steps": self.global_steps,
            },
        )


def sampling_params_from_verl(sampling_params: dict[str, Any], default_max_tokens: int) -> SamplingParams:
    """verl's sampling dict as ``gem_adapters.policies.SamplingParams``."""
    max_tokens = sampling_params.get("max_tokens", sampling_params.get("max_new_tokens"))
    stops = sampling_params.get("stop_token_ids")
    return SamplingParams(
        max_new_tokens=int(default_max_tokens if max_tokens is None else max_tokens),
        temperature=float(sampling_params.get("temperature", 1.0)),
        top_p=float(sampling_params.get("top_p", 1.0)),
        top_k=max(0, int(sampling_params.get("top_k", 0) or 0)),
        stop_token_ids=None if stops is None else tuple(stops),
    )

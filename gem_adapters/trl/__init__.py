"""TRL glue: GEM episodes inside TRL's ``GRPOTrainer``.

``GEMGRPOConfig`` (a ``GRPOConfig`` with the episode and advantage settings), ``GEMGRPOTrainer``
(per-turn advantages from ``gem_adapters.algorithms.advantages`` on each turn's tokens: ``trainer``),
``task_rows`` / ``tasks_dataset`` / ``mixed_tasks_dataset`` / ``prompt_task`` (``rows``: what the trainer's dataset holds, each
``gem_adapters.episodes.tasks.Task`` whole as JSON), ``make_rollout_func`` (``rollout``: the ``rollout_func``
that plays the episodes) and
``VLLMPolicy`` (TRL's vLLM backend as a ``Policy``), ``EpisodeBatchCallback`` (a script's own row
per training step), and ``GEMSFTTrainer`` / ``sft_warm_up`` (a
supervised warm-up on episodes a scripted player plays). Both trainers compute each distinct prefix of a micro-batch
once in the learner (``gem_adapters.algorithms.prefix_tree``).

Vision-language models train the same way: pass the model's processor as ``processing_class`` and
``tasks_dataset`` of an image env (e.g. ``math:GeometryFigures-v0-easy``), whose rows then carry the
first observation's images for TRL's forward pass (see ``gem_adapters.trl.rollout``).
"""

from gem_adapters.trl.config import GEMGRPOConfig, GEMPPOConfig, parse_command_line
from gem_adapters.trl.critic import GEMPPOTrainer, TurnCritic
from gem_adapters.trl.rollout import EpisodeSample, episode_to_sample, make_rollout_func
from gem_adapters.trl.rows import (
    mixed_tasks_dataset,
    parse_task_prompt,
    prompt_task,
    task_prompt,
    task_rows,
    tasks_dataset,
)
from gem_adapters.trl.sft import GEMSFTTrainer, sft_warm_up
from gem_adapters.trl.trainer import EpisodeBatchCallback, GEMGRPOTrainer, episode_return
from gem_adapters.trl.vllm_policy import VLLMPolicy

__all__ = [
    "EpisodeBatchCallback",
    "EpisodeSample",
    "GEMGRPOConfig",
    "GEMGRPOTrainer",
    "GEMPPOConfig",
    "GEMPPOTrainer",
    "GEMSFTTrainer",
    "TurnCritic",
    "VLLMPolicy",
    "episode_return",
    "episode_to_sample",
    "make_rollout_func",
    "mixed_tasks_dataset",
    "parse_command_line",
    "parse_task_prompt",
    "prompt_task",
    "sft_warm_up",
    "task_prompt",
    "task_rows",
    "tasks_dataset",
]

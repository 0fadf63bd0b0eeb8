"""Held-out evaluation during training: the same fixed-seed episodes played with the weights being trained.

A training script evaluates its model before, during and after training on games it never trains on:
``play_held_out`` plays ``num_episodes`` episodes of one env with seeds ``first_seed, first_seed + 1,
...`` (keep them disjoint from the training tasks' seeds), so every evaluation of every run sees the same
games. ``gem eval`` (the rest of this package) evaluates a model from the command line instead.
"""

from __future__ import annotations

from typing import Any

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode
from gem_adapters.policies.base import SamplingParams
from gem_adapters.runtime.rollout import rollout
from gem_adapters.runtime.rollout_limits import RolloutLimits


def play_held_out(
    model: Any,
    processing_class: Any,
    renderer: ChatRenderer,
    env_id: str,
    num_episodes: int,
    *,
    first_seed: int,
    limits: RolloutLimits,
    sampling: SamplingParams,
    seed: int = 0,
    cache: str = "auto",
    bf16: bool = False,
    env_kwargs: dict[str, Any] | None = None,
) -> list[Episode]:
    """``num_episodes`` episodes of ``env_id`` (made with ``env_kwargs``; seeds from ``first_seed``) played
    by ``model``, batched, sampling from a generator seeded with ``seed``: a ``VisionLanguagePolicy`` when
    ``processing_class`` is a multimodal processor, else a ``TransformersPolicy`` (``cache``: its
    key/value cache mode; ``bf16``: generation under bf16 autocast, as a bf16 trainer's rollouts), whose
    caches are freed afterwards."""
    if hasattr(processing_class, "image_processor"):
        from gem_adapters.policies.multimodal import VisionLanguagePolicy

        policy: Any = VisionLanguagePolicy(model, processing_class, seed=seed)
    else:
        from gem_adapters.policies.transformers_policy import TransformersPolicy

        policy = TransformersPolicy(model, processing_class, seed=seed, cache=cache, bf16=bf16)
    episodes = rollout(
        [env_id] * num_episodes,
        policy,
        renderer,
        seeds=first_seed,
        limits=limits,
        sampling=sampling,
        env_kwargs=env_kwargs,
    )
    if hasattr(policy, "clear_cache"):
        policy.clear_cache()
    return episodes

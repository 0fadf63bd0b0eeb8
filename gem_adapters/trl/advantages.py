"""TRL's advantage hook: the configured shared estimator's per-turn advantages on each episode's tokens.

TRL computes one advantage per sample inside ``GRPOTrainer._generate_and_score_completions`` and
has no plug-in point for another estimator; ``GEMGRPOTrainer`` overrides that method and replaces
TRL's advantages by ``token_advantages`` below: a (B, T) tensor, which TRL's loss accepts as is.
TRL's transport is the episodes themselves (``rollout_func`` returns them with the samples), so
decoding is reading each episode's turn rewards, group id, state keys and turn spans.

``turn_advantages`` runs ``args.advantage_estimator`` from ``gem_adapters.advantages`` over the whole
generation batch: with several processes the turns of every process are gathered first (a GRPO
group may span processes) and each process keeps its own episodes. ``token_advantages`` puts the
per-turn numbers on the completion tokens with ``gem_adapters.advantages.turn_values_on_tokens``,
the placement every adapter uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from accelerate.utils import gather_object

from gem_adapters.advantages import compute_advantages, turn_values_on_tokens
from gem_adapters.episode import Episode
from gem_adapters.trl.rollout import episode_to_sample


def turn_advantages(episodes: Sequence[Episode], args: Any, accelerator: Any) -> list[np.ndarray]:
    """One advantage per turn of each of this process's ``episodes`` (``args``: a ``GEMGRPOConfig``),
    the estimator seeing the episodes of every process."""
    rewards = [[t.reward for t in e.turns] for e in episodes]
    groups = [e.group_id for e in episodes]
    state_keys = [[getattr(t, "state_key", None) for t in e.turns] for e in episodes]  # GiGPO's anchors
    if accelerator.num_processes > 1:
        rewards, groups = gather_object(rewards), gather_object(groups)
        state_keys = gather_object(state_keys)
    per_turn = compute_advantages(
        args.advantage_estimator,
        rewards,
        gamma=args.gamma,
        group_ids=groups,
        state_keys=state_keys,
        eps=args.advantage_eps,
    )
    first = accelerator.process_index * len(episodes)
    return per_turn[first : first + len(episodes)]


def token_advantages(per_turn: Sequence[Any], episodes: Sequence[Episode], width: int) -> torch.Tensor:
    """(len(episodes), width) float32: each turn's value of ``per_turn`` on that turn's completion
    tokens (``episode_to_sample(episode).turn_spans``), 0 elsewhere."""
    spans = [episode_to_sample(episode).turn_spans for episode in episodes]
    return torch.from_numpy(turn_values_on_tokens(per_turn, width, turn_spans=spans)).float()

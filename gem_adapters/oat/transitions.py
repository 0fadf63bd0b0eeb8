"""GEM episodes as Oat transitions: one ``oat.types.Transition`` per turn.

Oat's multi-turn PPO (``oat.algorithms.ppo_multiturn``) learns from turns: each ``Transition`` becomes
one sample ``prompt_ids + response_ids`` whose loss covers the response ids only. Turn ``k`` of an
episode gives::

  prompt_ids             every id before action k (system prompt, observations, earlier actions and
                         template ids): the exact context the model generated from
  response_ids           action k's ids exactly as generated (the end-of-turn token included when
                         the model stopped on it)
  response_logprobs      the sampler's logprob of each response id (Oat's PPO ratio and its
                         truncated importance sampling read them)
  rewards                turn k's reward
  done                   True on the episode's last turn
  response_is_truncated  the action was cut off by the token budget (``finish_reason == "length"``)
  action_is_formatted    the env reported no format error (``info["format_error"]``)
  obs, action            the observation answered and the action text sent to the env
  prompt, response       the same as text (prompt decoded only when a tokenizer is given)

``info`` holds numbers only, under the same keys on every transition (``INFO_KEYS``): Oat's collector
averages ``t.info`` over all transitions with ``tree.map_structure(np.mean, ...)``, which needs
identical structures of numbers. The env's own info dicts stay on the GEM ``Episode``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gem_adapters.episodes.episode import Episode

if TYPE_CHECKING:
    from oat.types import Transition

INFO_KEYS = (
    "actor/turn_index",
    "actor/turn_reward",
    "actor/response_is_truncated",
    "actor/action_is_formatted",
    "actor/episode_return",
    "actor/episode_success",
)


def episode_to_transitions(
    episode: Episode, *, tokenizer: Any = None, mask_truncated: bool = False
) -> list[Transition]:
    """One ``Transition`` per turn of a finished ``episode``.

    ``mask_truncated`` gives responses cut off by the token budget ``loss_mask=False`` (Oat's
    ``ignore_no_eos``). Raises ``ValueError`` when a turn has no logprobs: Oat needs the sampler's.
    """
    from oat.types import Transition  # oat.types imports torch

    samples = episode.to_turn_samples()
    last = len(samples) - 1
    transitions = []
    for sample, turn in zip(samples, episode.turns):
        if sample.logprobs is None or len(sample.logprobs) != len(sample.response_ids):
            raise ValueError(
                f"turn {sample.turn_index} of {episode.env_id} (seed {episode.seed}) has no logprob per "
                "generated id; Oat's learner needs the sampler's logprobs"
            )
        truncated = sample.finish_reason == "length"
        formatted = not turn.info.get("format_error", False)
        info = dict.fromkeys(INFO_KEYS, 0.0)
        info.update(
            {
                "actor/turn_index": float(sample.turn_index),
                "actor/turn_reward": float(sample.reward),
                "actor/response_is_truncated": float(truncated),
                "actor/action_is_formatted": float(formatted),
                "actor/episode_return": episode.total_reward,
                "actor/episode_success": float(episode.success),
            }
        )
        transitions.append(
            Transition(
                obs=turn.observation,
                action=turn.action,
                rewards=float(sample.reward),
                done=sample.turn_index == last,
                prompt="" if tokenizer is None else tokenizer.decode(sample.prompt_ids),
                prompt_ids=sample.prompt_ids,
                response=turn.action,
                response_ids=sample.response_ids,
                response_logprobs=[float(x) for x in sample.logprobs],
                response_is_truncated=truncated,
                action_is_formatted=formatted,
                loss_mask=not (mask_truncated and truncated),
                info=info,
            )
        )
    return transitions


def episodes_to_transitions(episodes: Sequence[Episode], **kwargs: Any) -> list[list[Transition]]:
    """``episode_to_transitions`` of each episode that has at least one turn (Oat reads
    ``episode[-1]``, so an episode that ended before its first action is left out)."""
    return [episode_to_transitions(e, **kwargs) for e in episodes if e.turns]

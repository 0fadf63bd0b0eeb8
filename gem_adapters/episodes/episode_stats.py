"""The summary numbers of a batch of episodes, one naming for every trainer and report.

``episode_stats(episodes)`` returns (an empty batch gives 0.0 everywhere):

  ``episodes``                    how many episodes
  ``return``                      mean over episodes of the undiscounted return (sum of turn rewards)
  ``success_rate``                share of episodes whose last turn reported ``info["success"]``
  ``turns``                       mean number of turns (actions) per episode
  ``format_error_rate``           share of turns whose info has a true ``format_error`` (the action
                                  could not be parsed)
  ``invalid_move_rate``           share of turns whose info has a true ``invalid_move`` (parsed, but
                                  not a legal move)
  ``generated_tokens``            generated ids over all episodes (divide by the rollout's seconds
                                  for a throughput)
  ``generated_tokens_per_episode``  mean generated ids per episode
  ``stopped_by_max_turns``        how many episodes the driver stopped at ``max_turns``
  ``stopped_by_context``          how many it stopped because not one more token fitted the
                                  context or response budget (``stopped_by == "max_context_tokens"``)
  ``template_rewrites_history``   how many episodes the chat template renders differently from the
                                  tokens as generated (``Episode.template_rewrites_history``)
  ``length_cut_rate``             share of turns cut off by the token budget instead of ending on a
                                  stop token (``Turn.finish_reason == "length"``)
  ``rewarded_turn_rate``          share of turns with a non-zero reward
  ``groups_with_signal``          share of the groups of episodes that played the same task
                                  (``Episode.group_id``, the estimators' groups; groups of two or more;
                                  an unseeded episode without ``info["group"]`` belongs to none)
                                  whose returns differ: the groups that give a group-relative
                                  estimator (GRPO, RLOO) anything to learn from; 0.0 where no task
                                  was played twice

Rates over turns weigh every turn equally, so long episodes count more than short ones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from gem_adapters.episodes.episode import Episode


def episode_stats(episodes: Sequence[Episode]) -> dict[str, float]:
    """The summary of ``episodes`` (see the module docstring for each key)."""
    turns = [t for e in episodes for t in e.turns]
    n, m = max(len(episodes), 1), max(len(turns), 1)
    tokens = sum(e.num_generated_tokens for e in episodes)
    return {
        "episodes": float(len(episodes)),
        "return": sum(e.total_reward for e in episodes) / n,
        "success_rate": sum(e.success for e in episodes) / n,
        "turns": len(turns) / n,
        "format_error_rate": sum(bool(t.info.get("format_error")) for t in turns) / m,
        "invalid_move_rate": sum(bool(t.info.get("invalid_move")) for t in turns) / m,
        "generated_tokens": float(tokens),
        "generated_tokens_per_episode": tokens / n,
        "stopped_by_max_turns": float(sum(e.info.get("stopped_by") == "max_turns" for e in episodes)),
        "stopped_by_context": float(sum(e.info.get("stopped_by") == "max_context_tokens" for e in episodes)),
        "template_rewrites_history": float(sum(e.template_rewrites_history for e in episodes)),
        "length_cut_rate": sum(t.finish_reason == "length" for t in turns) / m,
        "rewarded_turn_rate": sum(t.reward != 0 for t in turns) / m,
        "groups_with_signal": _groups_with_signal(episodes),
    }


def _groups_with_signal(episodes: Sequence[Episode]) -> float:
    returns: dict[Any, list[float]] = defaultdict(list)
    for e in episodes:
        if e.seed is not None or "group" in e.info:  # an unseeded episode has no task to share
            returns[e.group_id].append(e.total_reward)
    groups = [r for r in returns.values() if len(r) > 1]
    return sum(max(r) != min(r) for r in groups) / len(groups) if groups else 0.0

"""gem_adapters: from gem_core envs to RL trainers.

The shared core, written once and used by every framework adapter:

  ``gem_adapters.runtime.rollout``          drives N envs with a policy (sync and asyncio) within
                                   ``RolloutLimits``, returns episodes
  ``gem_adapters.policies``         policy backends: a transformers model, an OpenAI-compatible server
  ``gem_adapters.episodes.episode``          token-exact episodes: turns, loss masks, the prompt/response split
  ``gem_adapters.episodes.chat_renderer``    incremental chat-template rendering; ``shared_renderer`` per process
  ``gem_adapters.episodes.episode_builder``  an episode recorded as it is played
  ``gem_adapters.episodes.jsonl``            record and replay
  ``gem_adapters.episodes.episode_stats``    the summary numbers of a batch of episodes
  ``gem_adapters.algorithms.advantages``       per-turn returns and estimators (ReBN, GRPO, RLOO, GAE, ...) by name
  ``gem_adapters.episodes.tasks``            the task of one episode (env id + seed, ...) every adapter plays
  ``gem_adapters.runtime.models``           the offline SmolLM2 and tiny test models

Framework glue lives in one sub-package per trainer (``trl``, ``verl``, ...); importing this package
imports none of them, nor torch.
"""

from gem_adapters.algorithms.advantages import compute_advantages, compute_advantages_flat, discounted_returns
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode, Turn, rescore
from gem_adapters.episodes.episode_stats import episode_stats
from gem_adapters.episodes.jsonl import read_jsonl, write_jsonl
from gem_adapters.policies.base import Generation, Policy, SamplingParams
from gem_adapters.runtime.rollout import RolloutLimits, aplay_episode, arollout, rollout

__all__ = [
    "ChatRenderer",
    "Episode",
    "Generation",
    "Policy",
    "RolloutLimits",
    "SamplingParams",
    "Turn",
    "aplay_episode",
    "arollout",
    "compute_advantages",
    "compute_advantages_flat",
    "discounted_returns",
    "episode_stats",
    "read_jsonl",
    "rescore",
    "rollout",
    "write_jsonl",
]

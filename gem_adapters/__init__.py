"""gem_adapters: from gem_core envs to RL trainers.

The shared core, written once and used by every framework adapter, in three folders:

  ``episodes/``    the data model: token-exact episodes (``episode``), incremental chat-template
                   rendering (``chat_renderer``), an episode recorded as it is played
                   (``episode_builder``), record and replay (``jsonl``), the task of one episode
                   (``tasks``), the summary numbers of a batch (``episode_stats``)
  ``algorithms/``  per-turn estimators by name and their placement on tokens (``advantages``), the
                   learner's shared-prefix forward (``prefix_tree``), scripted warm-up games (``warmup``)
  ``runtime/``     the rollout driver within ``RolloutLimits`` (``rollout``, ``rollout_limits``), pinned
                   framework patches (``patching``), the offline and tiny models (``models``), weights
                   into vLLM (``vllm_weights``), the run log, timing, the allocator setting and the
                   examples' light first pass over their command line (``command_line``)

beside ``policies/`` (generation backends: a transformers model, vision-language models, an
OpenAI-compatible server) and ``evaluation/`` (``gem eval`` and held-out evaluation during training).

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

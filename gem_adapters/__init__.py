"""gem_adapters: from gem_core envs to RL trainers.

The shared core, written once and used by every framework adapter:

  ``gem_adapters.rollout``     drives N envs with a policy (sync and asyncio), returns episodes
  ``gem_adapters.policies``    policy backends: a transformers model, an OpenAI-compatible server (vLLM)
  ``gem_adapters.trajectory``  token-exact episodes (incremental chat rendering, loss masks, JSONL)
  ``gem_adapters.advantages``  per-turn returns and estimators (ReBN, GRPO, RLOO, GAE, ...) by name
  ``gem_adapters.tasks``       the task of one episode (env id + seed) and the rows of a prompt dataset
  ``gem_adapters.models``      the offline SmolLM2 and tiny test models

Framework glue lives in one sub-package per trainer (``trl``, ``verl``, ...); importing this package
imports none of them, nor torch.
"""

from gem_adapters.advantages import compute_advantages, compute_advantages_flat, discounted_returns
from gem_adapters.policies.base import Generation, Policy, SamplingParams
from gem_adapters.rollout import aplay_episode, arollout, rollout
from gem_adapters.trajectory import ChatRenderer, Episode, Turn, read_jsonl, rescore, write_jsonl

__all__ = [
    "ChatRenderer",
    "Episode",
    "Generation",
    "Policy",
    "SamplingParams",
    "Turn",
    "aplay_episode",
    "arollout",
    "compute_advantages",
    "compute_advantages_flat",
    "discounted_returns",
    "read_jsonl",
    "rescore",
    "rollout",
    "write_jsonl",
]

"""``--train.agent_func_path`` of ``openrlhf_train_ppo_ray.py``: OpenRLHF loads this file by path in its vLLM
engine actor. ``AgentExecutor`` is gem's ``GemAgentExecutor`` that also appends every episode it plays to
``$GEM_EPISODE_DIR/episodes-<pid>.jsonl`` (OpenRLHF's step metrics have the score but not the success or
invalid-move rate); importing ``benchmarks.learning.common`` registers the experiments' env ids there."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import benchmarks.learning.common  # noqa: F401  (the experiments' env ids, in the engine actor)
from gem_adapters.episodes.jsonl import write_jsonl
from gem_adapters.openrlhf.rollout import GemAgentExecutor

EPISODE_DIR = "GEM_EPISODE_DIR"


class AgentExecutor(GemAgentExecutor):
    def __init__(self) -> None:
        super().__init__(return_episode=True)

    async def execute(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        output = await super().execute(*args, **kwargs)
        episode = output.pop("episode")  # recorded here, not shipped to the trainer
        folder = os.environ.get(EPISODE_DIR)
        if folder:
            write_jsonl(Path(folder) / f"episodes-{os.getpid()}.jsonl", [episode], append=True)
        return output

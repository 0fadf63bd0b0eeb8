"""EpisodeStatistics: adds ``info["episode"]`` (return, turns, seconds, success) on an episode's last step."""

from __future__ import annotations

import time
from typing import Any

from gem_core.core import Env, StepResult, Wrapper


class EpisodeStatistics(Wrapper):
    def __init__(self, env: Env):
        super().__init__(env)
        self.episode_return = 0.0
        self.episode_turns = 0
        self.format_errors = 0
        self.start_time = time.perf_counter()

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.episode_return, self.episode_turns, self.format_errors = 0.0, 0, 0
        self.start_time = time.perf_counter()
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.episode_return += float(reward)
        self.episode_turns += 1
        self.format_errors += bool(info.get("format_error"))
        if terminated or truncated:
            info = {
                **info,
                "episode": {
                    "return": self.episode_return,
                    "turns": self.episode_turns,
                    "format_errors": self.format_errors,
                    "seconds": time.perf_counter() - self.start_time,
                    "success": bool(info.get("success", False)),
                },
            }
        return obs, reward, terminated, truncated, info

"""The reference gem's ``gem.wrappers.episode_tracking_wrapper``: ``EpisodeTrackingWrapper``.

Every step's info has ``step_counter`` (turns so far) and ``cumulative_rewards`` (their sum); reset's
info also has them (0) and the previous episode's, ``prev_ep_step_counter`` and
``prev_ep_cumulative_rewards``, as the reference puts them. The counting is ``EpisodeStatistics``'
(whose ``info["episode"]`` summary comes on the last step as well).
"""

from __future__ import annotations

from typing import Any

from gem_core.core import StepResult
from gem_core.wrappers.episode import EpisodeStatistics


class EpisodeTrackingWrapper(EpisodeStatistics):
    @property
    def step_counter(self) -> int:
        return self.episode_turns

    @property
    def cumulative_rewards(self) -> float:
        return self.episode_return

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        previous = {
            "prev_ep_step_counter": self.step_counter,
            "prev_ep_cumulative_rewards": self.cumulative_rewards,
        }
        obs, info = super().reset(seed=seed, **kwargs)
        return obs, {**info, "step_counter": 0, "cumulative_rewards": 0.0, **previous}

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = super().step(action)
        counters = {"step_counter": self.step_counter, "cumulative_rewards": self.cumulative_rewards}
        return obs, reward, terminated, truncated, {**info, **counters}

"""The reference gem's ``gem.tools.tool_env_wrapper``: gem_core's ``ToolEnvWrapper`` with the reference's info
keys on top of its own.

Every step's info has ``tool_use_counter`` and ``tool_success_counter`` (the episode's calls and
successful calls) and, as the reference sets it, ``use_tool=True`` (reset's: ``False``, with
``prev_ep_tool_use_counter`` and ``prev_ep_tool_success_counter``); a tool step names the tool's
``tool_type`` (its ``name`` for gem_core's own tools). Rewards, limits and observations are gem_core's
``ToolEnvWrapper``'s (``gem_core.wrappers.tools``).
"""

from __future__ import annotations

from typing import Any

from gem_core.core import StepResult
from gem_core.wrappers.tools import ToolEnvWrapper as GemToolEnvWrapper


class ToolEnvWrapper(GemToolEnvWrapper):
    @property
    def tool_use_counter(self) -> int:
        return self.tool_uses

    @property
    def tool_success_counter(self) -> int:
        return self.tool_successes

    def _reference_counts(self) -> dict[str, int]:
        return {"tool_use_counter": self.tool_use_counter, "tool_success_counter": self.tool_success_counter}

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        previous = {
            "prev_ep_tool_use_counter": self.tool_use_counter,
            "prev_ep_tool_success_counter": self.tool_success_counter,
        }
        obs, info = super().reset(seed=seed, **kwargs)
        return obs, {**info, **self._reference_counts(), **previous}

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = super().step(action)
        info = {**info, **self._reference_counts(), "use_tool": True}
        if "tool" in info:
            tool = next((t for t in self.tools if t.name == info["tool"]), None)
            info["tool_type"] = getattr(tool, "tool_type", info["tool"])
        return obs, reward, terminated, truncated, info

"""Budgets: a cap on turns (``TimeLimit``) and on observation length (``ContextBudget``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gem_core.core import Env, StepResult, Wrapper
from gem_core.observation import MultimodalObservation, text_only_error


class TimeLimit(Wrapper):
    """Truncates the episode after ``max_turns`` steps (``info["time_limit"] = True``)."""

    def __init__(self, env: Env, max_turns: int):
        super().__init__(env)
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.max_turns = max_turns
        self.turns = 0

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.turns = 0
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        if self.turns >= self.max_turns and not terminated and not truncated:
            truncated, info = True, {**info, "time_limit": True}
        return obs, reward, terminated, truncated, info


class ContextBudget(Wrapper):
    """Caps each observation at ``max_tokens`` (counted with ``tokenizer``) or ``max_chars``.

    An over-long observation keeps its head and tail with a visible marker in between saying how much
    was cut, so the agent knows it did not see everything. ``info["truncated_obs"]`` counts what was cut.
    """

    _static_attributes = ("tokenizer",)

    def __init__(
        self,
        env: Env,
        max_chars: int | None = None,
        max_tokens: int | None = None,
        tokenizer: Any = None,
        head_fraction: float = 0.5,
    ):
        super().__init__(env)
        if (max_chars is None) == (max_tokens is None):
            raise ValueError("give exactly one of max_chars or max_tokens")
        if max_tokens is not None and tokenizer is None:
            raise ValueError("max_tokens needs a tokenizer")
        self.max_chars, self.max_tokens, self.tokenizer = max_chars, max_tokens, tokenizer
        self.head_fraction = head_fraction

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, **kwargs)
        return self._fit(obs, info)

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs, info = self._fit(obs, info)
        return obs, reward, terminated, truncated, info

    def _fit(self, obs: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if isinstance(obs, MultimodalObservation):
            raise text_only_error("ContextBudget")
        if not isinstance(obs, str):
            raise TypeError(f"ContextBudget caps text observations, got {type(obs).__name__}")
        if self.max_chars is not None:
            units, limit, unit_name = list(obs), self.max_chars, "characters"
            join: Callable[[list], str] = "".join
        else:
            units = self.tokenizer.encode(obs, add_special_tokens=False)
            limit, unit_name = self.max_tokens, "tokens"
            join = self.tokenizer.decode
        if len(units) <= limit:
            return obs, info
        cut = len(units) - limit
        marker = f"\n[... {cut} {unit_name} truncated ...]\n"
        head = int(limit * self.head_fraction)
        tail = limit - head
        text = join(units[:head]) + marker + (join(units[-tail:]) if tail else "")
        return text, {**info, "truncated_obs": {"unit": unit_name, "removed": cut}}

"""RandomDifficulty: an env that draws a game's settings (e.g. easy or hard) anew for every episode."""

from __future__ import annotations

import importlib
from typing import Any

from gem_core.core import Env, StepResult


class RandomDifficulty(Env):
    """Wraps a game class; at each reset picks one of ``variants`` (constructor kwargs) with ``self.rng``.
    ``game_kwargs`` (e.g. ``reward_type``) go to the game whatever the variant.

    ``info["difficulty"]`` names the variant drawn. The game in play is ``self.game``.
    """

    def __init__(self, game: str, variants: dict[str, dict[str, Any]], **game_kwargs: Any):
        if not variants:
            raise ValueError("variants must name at least one setting")
        module, _, cls = game.partition(":")
        self.game_cls = getattr(importlib.import_module(module), cls)
        self.variants = variants
        self.game_kwargs = game_kwargs
        self.game: Env | None = None

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        name = self.rng.choice(sorted(self.variants))
        self.game = self.game_cls(**{**self.variants[name], **self.game_kwargs})
        obs, info = self.game.reset(seed=self.rng.getrandbits(63), **kwargs)
        return obs, {**info, "difficulty": name}

    def step(self, action: str) -> StepResult:
        return self.game.step(action)

    def sample_random_action(self) -> str:
        if self.game is None:
            raise RuntimeError("call reset() before sample_random_action()")
        return self.game.sample_random_action()

    def sample_legal_action(self) -> str | None:
        if self.game is None:
            raise RuntimeError("call reset() before sample_legal_action()")
        return self.game.sample_legal_action()

    def solve_action(self) -> str | None:
        if self.game is None:
            raise RuntimeError("call reset() before solve_action()")
        return self.game.solve_action()

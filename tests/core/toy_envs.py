"""Small envs with controllable behaviour for testing the core machinery (not registered)."""

from __future__ import annotations

import time

from gem_core.core import Env


class CountdownEnv(Env):
    """Guess a hidden digit; ``length`` turns. Optionally sleeps, raises or hangs on chosen steps."""

    def __init__(
        self, length: int = 3, sleep: float = 0.0, raise_on_step: int | None = None, hang_on_step=None
    ):
        self.length, self.sleep = length, sleep
        self.raise_on_step, self.hang_on_step = raise_on_step, hang_on_step
        self.t = 0
        self.secret = 0

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        self.t = 0
        self.secret = self.rng.randint(0, 9)
        return f"guess a digit; noise={self.rng.random():.6f}", {"secret_hint": self.secret % 2}

    def step(self, action):
        self.t += 1
        if self.sleep:
            time.sleep(self.sleep)
        if self.raise_on_step == self.t:
            raise ValueError("boom")
        if self.hang_on_step == self.t:
            time.sleep(3600)
        hit = action.strip() == str(self.secret)
        done = hit or self.t >= self.length
        obs = f"t={self.t} hit={hit} noise={self.rng.random():.6f}"
        return obs, float(hit), hit, (not hit and done), {"t": self.t}

    def sample_random_action(self):
        return str(self.action_rng.randint(0, 9))

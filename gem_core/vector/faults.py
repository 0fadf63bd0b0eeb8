"""InjectFaults: a wrapper that makes an env fail on purpose, to test how a vector env (and the training
loop above it) copes with envs that raise, hang or kill their process.

    make_vec("game:GuessTheNumber-v0", 16, backend="processes", step_timeout=2,
             wrappers=[functools.partial(InjectFaults, raise_prob=0.01, hang_prob=0.01, hang_seconds=60)])

Each ``step`` draws one number from the wrapper's own generator (never from the env's, so the episodes
are those of the unwrapped env): with ``raise_prob`` the step raises ``InjectedFault``, with
``hang_prob`` it sleeps ``hang_seconds`` first (then steps normally), with ``crash_prob`` it ends its
process at once (``os._exit``, as a segfault or the OOM killer would: no exception, no cleanup).
``seed`` seeds that generator (default: OS entropy); the generator is part of ``get_state``.
"""

from __future__ import annotations

import os
import random
import time

from gem_core.core import Env, StepResult, Wrapper

# The exit code of a process that an injected crash ended.
CRASH_EXIT_CODE = 70


class InjectedFault(RuntimeError):
    """Raised by a step of an env wrapped in ``InjectFaults``."""


class InjectFaults(Wrapper):
    def __init__(
        self,
        env: Env,
        raise_prob: float = 0.0,
        hang_prob: float = 0.0,
        hang_seconds: float = 3600.0,
        crash_prob: float = 0.0,
        seed: int | None = None,
    ):
        super().__init__(env)
        if min(raise_prob, hang_prob, crash_prob) < 0 or raise_prob + hang_prob + crash_prob > 1:
            raise ValueError("fault probabilities must be >= 0 and sum to at most 1")
        self.raise_prob, self.hang_prob, self.crash_prob = raise_prob, hang_prob, crash_prob
        self.hang_seconds = hang_seconds
        self.fault_rng = random.Random(seed)
        self.faults: dict[str, int] = {"raise": 0, "hang": 0}  # injected so far by this instance

    def step(self, action: str) -> StepResult:
        u = self.fault_rng.random()
        if u < self.crash_prob:
            os._exit(CRASH_EXIT_CODE)
        u -= self.crash_prob
        if u < self.raise_prob:
            self.faults["raise"] += 1
            raise InjectedFault("injected fault")
        u -= self.raise_prob
        if u < self.hang_prob:
            self.faults["hang"] += 1
            time.sleep(self.hang_seconds)
        return self.env.step(action)

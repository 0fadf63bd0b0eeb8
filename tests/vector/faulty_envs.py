"""Envs that misbehave on purpose; module-level so that worker processes and Ray actors can import them."""

from __future__ import annotations

import os
import threading

from tests.core.toy_envs import CountdownEnv


class FaultyEnv(CountdownEnv):
    """CountdownEnv that records its process id and can kill its process or return an unpicklable info."""

    def __init__(
        self,
        exit_on_step: int | None = None,
        unpicklable_on_step: int | None = None,
        exit_on_sample: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.exit_on_step, self.unpicklable_on_step = exit_on_step, unpicklable_on_step
        self.exit_on_sample = exit_on_sample
        self.pid = os.getpid()

    def step(self, action):
        if self.exit_on_step == self.t + 1:
            os._exit(3)  # as a segfault or the OOM killer would: no exception, no cleanup
        obs, reward, terminated, truncated, info = super().step(action)
        if self.unpicklable_on_step == self.t:
            info = {**info, "lock": threading.Lock()}
        return obs, reward, terminated, truncated, info

    def sample_random_action(self):
        if self.exit_on_sample:
            os._exit(3)
        return super().sample_random_action()

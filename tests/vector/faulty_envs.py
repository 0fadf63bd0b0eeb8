"""Envs that misbehave on purpose; module-level so that worker processes and Ray actors can import them.

(Random faults at given rates, for benchmarks and soak tests: ``gem_core.vector.faults.InjectFaults``.)
"""

from __future__ import annotations

import os
import threading
import time

from tests.core.toy_envs import CountdownEnv


class FaultyEnv(CountdownEnv):
    """CountdownEnv that knows its process id and can kill its process (at once, or ``exit_delay``
    seconds into the step), hang in ``sample_random_action``, return an unpicklable info, or hold a lock
    (so that its state cannot be snapshot)."""

    def __init__(
        self,
        exit_on_step: int | None = None,
        unpicklable_on_step: int | None = None,
        exit_on_sample: bool = False,
        exit_delay: float = 0.0,
        hang_on_sample: bool = False,
        stateless: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.exit_on_step, self.unpicklable_on_step = exit_on_step, unpicklable_on_step
        self.exit_on_sample, self.exit_delay, self.hang_on_sample = exit_on_sample, exit_delay, hang_on_sample
        if stateless:
            self.lock = threading.Lock()  # get_state deep-copies the attributes: a lock does not copy

    @property
    def pid(self):  # the process it runs in now (a property: snapshots do not carry it)
        return os.getpid()

    def step(self, action):
        if self.exit_on_step == self.t + 1:
            time.sleep(self.exit_delay)
            os._exit(3)  # as a segfault or the OOM killer would: no exception, no cleanup
        obs, reward, terminated, truncated, info = super().step(action)
        if self.unpicklable_on_step == self.t:
            info = {**info, "lock": threading.Lock()}
        return obs, reward, terminated, truncated, info

    def sample_random_action(self):
        if self.exit_on_sample:
            os._exit(3)
        if self.hang_on_sample:
            time.sleep(3600)
        return super().sample_random_action()

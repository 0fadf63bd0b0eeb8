"""AsyncVectorEnv (threads) vs SyncVectorEnv for envs whose step waits on I/O (a tool, a server).

    python benchmarks/vector_speedup.py [--num-envs 32] [--wait-ms 20] [--steps 10]

Both backends step the same envs with the same seeds in the same run; prints the speed-up ratio.
"""

from __future__ import annotations

import argparse
import time

from gem_core.core import Env
from gem_core.vector import AsyncVectorEnv, SyncVectorEnv


class WaitingEnv(Env):
    """Each step blocks for ``wait`` seconds, as an env calling a remote tool would."""

    def __init__(self, wait: float):
        self.wait = wait

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        return "ready", {}

    def step(self, action):
        time.sleep(self.wait)
        return "ok", 0.0, False, False, {}

    def sample_random_action(self):
        return "x"


def time_backend(backend, num_envs: int, wait: float, steps: int) -> float:
    vec = backend([lambda: WaitingEnv(wait) for _ in range(num_envs)])
    vec.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        vec.step(["x"] * num_envs)
    elapsed = time.perf_counter() - start
    vec.close()
    return elapsed / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--wait-ms", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    wait = args.wait_ms / 1000
    sync = time_backend(SyncVectorEnv, args.num_envs, wait, args.steps)
    threads = time_backend(AsyncVectorEnv, args.num_envs, wait, args.steps)
    print(f"{args.num_envs} envs, each step waits {args.wait_ms:.0f} ms, {args.steps} batch steps")
    print(f"{'backend':<16}{'s / batch step':>16}")
    print(f"{'SyncVectorEnv':<16}{sync:>16.4f}")
    print(f"{'AsyncVectorEnv':<16}{threads:>16.4f}")
    print(f"speed-up (sync / async): {sync / threads:.1f}x   (ideal: {args.num_envs}x)")


if __name__ == "__main__":
    main()

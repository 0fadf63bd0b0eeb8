"""Vector env backends on CPU-bound and I/O-bound steps: sync vs threads vs processes vs Ray, in one run.

    python benchmarks/vector_backends.py [--num-envs 32] [--step-ms 20] [--steps 10] [--no-ray]

CPU-bound: each step does a fixed amount of pure-Python work, calibrated here to take ``--step-ms``
on one core (a fixed amount, not a time, so a busy machine shows up as slower steps, not as fake
parallelism). I/O-bound: each step sleeps ``--step-ms``. Every backend steps the same envs with the
same seeds, taking turns step by step; the table gives the median seconds per batch step, the speed-up
over sync and the time relative to threads. Processes and Ray use one worker per CPU (their defaults).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

from gem_core.core import Env
from gem_core.vector import BACKENDS


def spin(n: int) -> int:
    x = 0
    for i in range(n):
        x += i * i
    return x


class BusyEnv(Env):
    """Each step does ``work`` loop iterations of pure Python (holds the GIL throughout)."""

    def __init__(self, work: int):
        self.work = work

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        return "ready", {}

    def step(self, action):
        spin(self.work)
        return "ok", 0.0, False, False, {}

    def sample_random_action(self):
        return "x"


class WaitingEnv(BusyEnv):
    """Each step blocks for ``wait`` seconds, as an env calling a remote tool would."""

    def __init__(self, wait: float):
        self.wait = wait

    def step(self, action):
        time.sleep(self.wait)
        return "ok", 0.0, False, False, {}


def calibrate(seconds: float) -> int:
    """Loop iterations of ``spin`` that take ``seconds`` here (best of a few tries)."""
    n = 100_000
    best = min(_timed(spin, n) for _ in range(5))
    return max(1, int(n * seconds / best))


def _timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def time_backends(names: list[str], env_fn, num_envs: int, steps: int) -> dict[str, float]:
    """Median seconds per batch step of each backend. The backends take turns step by step, so that
    the load of a shared machine falls on all of them alike."""
    vecs = {name: BACKENDS[name]([env_fn] * num_envs) for name in names}
    times: dict[str, list[float]] = {name: [] for name in names}
    try:
        for vec in vecs.values():
            vec.reset(seed=0)
            vec.step(["x"] * num_envs)  # warm-up: first-call costs paid
        for _ in range(steps):
            for name, vec in vecs.items():
                start = time.perf_counter()
                vec.step(["x"] * num_envs)
                times[name].append(time.perf_counter() - start)
    finally:
        for vec in vecs.values():
            vec.close()
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()

    names = ["sync", "threads", "processes"]
    if not args.no_ray:
        try:
            import ray
        except ImportError:
            print("Ray is not installed (pip install 'gem-core[ray]'): skipping the Ray backend")
        else:
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
            names.append("ray")

    work = calibrate(args.step_ms / 1000)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.num_envs} envs, {args.steps} batch steps each, {os.cpu_count()} CPUs, load average {load}")
    cases = [
        ("CPU-bound", functools.partial(BusyEnv, work)),
        ("I/O-bound", functools.partial(WaitingEnv, args.step_ms / 1000)),
    ]
    for title, env_fn in cases:
        times = time_backends(names, env_fn, args.num_envs, args.steps)
        per_step = times["sync"] / args.num_envs * 1000
        print(f"\n{title}: {args.step_ms:.0f} ms per step asked, {per_step:.1f} ms per step measured by sync")
        print(f"{'backend':<12}{'s / batch step':>16}{'vs sync':>10}{'time / threads':>16}")
        for name, t in times.items():
            print(f"{name:<12}{t:>16.4f}{times['sync'] / t:>9.2f}x{t / times['threads']:>16.2f}")
    if "ray" in names:
        ray.shutdown()


if __name__ == "__main__":
    main()

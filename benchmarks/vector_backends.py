"""Vector env backends on CPU-bound and I/O-bound steps: sync vs threads vs processes vs Ray, in one run.

    python benchmarks/vector_backends.py [--num-envs 32] [--step-ms 20] [--steps 10] [--no-ray]

CPU-bound: each step does a fixed amount of pure-Python work, calibrated here to take ``--step-ms``
of CPU time (a fixed amount, not a time, so a busy machine shows up as slower steps, not as fake
parallelism). I/O-bound: each step sleeps ``--step-ms``. Every backend steps the same envs with the
same seeds, taking turns step by step; the table gives the median seconds per batch step, the speed-up
over sync, the time relative to threads, and the CPU cores the envs kept busy (their steps' CPU time
over wall time: at most 1 in one process; on a shared machine, the share of the CPUs the backend got).
Processes and Ray use one worker per CPU (their defaults).

Two baselines explain the remote backends' design, each measured in the same run: CPU-bound
"processes @5ms" runs the process backend at Python's default GIL switch interval instead of the
workers' ``WORKER_SWITCH_INTERVAL``; I/O-bound "ray calls" is the Ray backend sending its batches as
Ray method calls (``transport="ray"``) instead of over its own connections.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable

from gem_core.core import Env
from gem_core.vector import BACKENDS, VectorEnv


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
        start = time.thread_time()
        spin(self.work)
        return "ok", 0.0, False, False, {"cpu_s": time.thread_time() - start}

    def sample_random_action(self):
        return "x"


class WaitingEnv(BusyEnv):
    """Each step blocks for ``wait`` seconds, as an env calling a remote tool would."""

    def __init__(self, wait: float):
        self.wait = wait

    def step(self, action):
        time.sleep(self.wait)
        return "ok", 0.0, False, False, {}


def at_switch_interval(seconds: float, env_fn: Callable[[], Env]) -> Env:
    """``env_fn()``, having set this process's GIL switch interval (a worker's ``EnvHost`` sets its own
    first, then builds its envs: this undoes it)."""
    sys.setswitchinterval(seconds)
    return env_fn()


def calibrate(seconds: float) -> int:
    """Loop iterations of ``spin`` that take ``seconds`` of CPU time here (CPU time, not wall time: on
    a shared machine the wall time of the same work grows with the load)."""
    n = 200_000
    start = time.thread_time()
    for _ in range(5):
        spin(n)
    return max(1, int(n * seconds / ((time.thread_time() - start) / 5)))


def time_backends(
    makers: dict[str, Callable[[], VectorEnv]], num_envs: int, steps: int
) -> dict[str, tuple[float, float]]:
    """Median seconds per batch step of each vector env, and the CPU cores its envs kept busy (CPU time
    of the steps / wall time). The vector envs take turns step by step, so that the load of a shared
    machine falls on all of them alike."""
    vecs = {name: make() for name, make in makers.items()}
    times: dict[str, list[float]] = {name: [] for name in vecs}
    cores: dict[str, list[float]] = {name: [] for name in vecs}
    try:
        for vec in vecs.values():
            vec.reset(seed=0)
            vec.step(["x"] * num_envs)  # warm-up: first-call costs paid
        for _ in range(steps):
            for name, vec in vecs.items():
                start = time.perf_counter()
                *_, infos = vec.step(["x"] * num_envs)
                elapsed = time.perf_counter() - start
                times[name].append(elapsed)
                cores[name].append(sum(info.get("cpu_s", 0.0) for info in infos) / elapsed)
    finally:
        for vec in vecs.values():
            vec.close()
    return {name: (statistics.median(times[name]), statistics.median(cores[name])) for name in vecs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()

    names = ["sync", "threads", "processes"]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if not args.no_ray:
        try:
            import ray
        except ImportError:
            print("Ray is not installed (pip install 'gem-core[ray]'): skipping the Ray backend")
        else:
            # address="local": a Ray of its own, even where a cluster already runs on this machine
            ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
            names.append("ray")

    work = calibrate(args.step_ms / 1000)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.num_envs} envs, {args.steps} batch steps each, {cpus} CPUs, load average {load}")
    cases = [
        ("CPU-bound", functools.partial(BusyEnv, work)),
        ("I/O-bound", functools.partial(WaitingEnv, args.step_ms / 1000)),
    ]
    for title, env_fn in cases:
        makers = {name: functools.partial(BACKENDS[name], [env_fn] * args.num_envs) for name in names}
        if title == "CPU-bound":
            at_default = functools.partial(at_switch_interval, 0.005, env_fn)
            makers["processes @5ms"] = functools.partial(BACKENDS["processes"], [at_default] * args.num_envs)
        elif "ray" in names:
            makers["ray calls"] = functools.partial(  # no CPU reserved: the "ray" row's actors hold them all
                BACKENDS["ray"], [env_fn] * args.num_envs, transport="ray", actor_options={"num_cpus": 0}
            )
        results = time_backends(makers, args.num_envs, args.steps)
        sync, threads = results["sync"][0], results["threads"][0]
        print(
            f"\n{title}: {args.step_ms:.0f} ms per step, {sync / args.num_envs * 1000:.1f} ms of wall time per step in sync"
        )
        print(f"{'backend':<15}{'s / batch step':>16}{'vs sync':>10}{'time / threads':>16}{'cores busy':>12}")
        for name, (t, busy) in results.items():
            print(f"{name:<15}{t:>16.4f}{sync / t:>9.2f}x{t / threads:>16.2f}{busy:>12.2f}")
    if "ray" in names:
        ray.shutdown()
    print(f"\nload average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

"""What serving an env over OpenEnv costs: per-step latency of a remote session vs the same env in
process (p50/p99), and throughput with 32 sessions, all measured in one run.

    python benchmarks/openenv_overhead.py [--env game:GuessTheNumber-v1-easy] [--steps 2000] [--batch-steps 100]

Starts ``gem serve ENV`` on a free localhost port (a subprocess, as in production), then measures:

* latency: ``--steps`` single steps, one at a time, of (a) the env in process, (b) one session through
  openenv-core's own client (``GenericEnvClient(...).sync()``), (c) one session through our
  ``gem_core.make("openenv:URL")``; a finished episode is reset (not timed) with the next seed;
* throughput: ``--batch-steps`` batch steps of a 32-env vector env (threads backend, next-step
  autoreset) over (a) 32 envs in process and (b) 32 sessions on the server; steps per second count
  env steps (32 per batch step).

Remote numbers include the loopback round trip, JSON, the server's session thread and, for (c),
decoding into gem_core types. The server and the client share the machine's CPUs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

import gem_core

ACTIONS = ["\\boxed{5}", "\\boxed{3}", "\\boxed{8}", "\\boxed{2}", "\\boxed{9}", "\\boxed{1}"]


def start_server(env_id: str, max_sessions: int) -> tuple[subprocess.Popen, str]:
    cmd = [
        sys.executable,
        "-m",
        "gem_core.cli",
        "serve",
        env_id,
        "--port",
        "0",
        "--max-sessions",
        str(max_sessions),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("gem serve:") and " on http" in line:
            return proc, line.split(" on ", 1)[1].split()[0]
    raise RuntimeError(f"gem serve exited with status {proc.wait()}")


def step_latencies(reset: Callable[[int], None], step: Callable[[str], bool], steps: int) -> list[float]:
    """Seconds per step; ``step`` returns whether the episode ended (then the next seed is reset, untimed)."""
    times, seed, turn = [], 0, 0
    reset(seed)
    for _ in range(steps):
        started = time.perf_counter()
        done = step(ACTIONS[turn % len(ACTIONS)])
        times.append(time.perf_counter() - started)
        turn += 1
        if done:
            seed, turn = seed + 1, 0
            reset(seed)
    return times


def in_process(env_id: str, steps: int) -> list[float]:
    env = gem_core.make(env_id)

    def step(action: str) -> bool:
        _, _, terminated, truncated, _ = env.step(action)
        return terminated or truncated

    return step_latencies(lambda s: env.reset(seed=s), step, steps)


def openenv_client(url: str, steps: int) -> list[float]:
    from openenv.core.generic_client import GenericEnvClient

    client = GenericEnvClient(base_url=url).sync()
    client.connect()
    try:
        return step_latencies(
            lambda s: client.reset(seed=s), lambda a: client.step({"action": a}).done, steps
        )
    finally:
        client.close()


def gem_client(url: str, steps: int) -> list[float]:
    env = gem_core.make(f"openenv:{url}")
    try:

        def step(action: str) -> bool:
            _, _, terminated, truncated, _ = env.step(action)
            return terminated or truncated

        return step_latencies(lambda s: env.reset(seed=s), step, steps)
    finally:
        env.close()


def vector_throughput(env_id: str, num_envs: int, batch_steps: int) -> float:
    """Env steps per second of a threads vector env (next-step autoreset) over ``env_id``."""
    vec = gem_core.make_vec(env_id, num_envs, backend="threads")
    try:
        vec.reset(seed=0)
        for turn in range(3):  # warm up (sessions open on the first reset, threads start)
            vec.step([ACTIONS[turn]] * num_envs)
        started = time.perf_counter()
        for turn in range(batch_steps):
            vec.step([ACTIONS[turn % len(ACTIONS)]] * num_envs)
        return num_envs * batch_steps / (time.perf_counter() - started)
    finally:
        vec.close()


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="game:GuessTheNumber-v1-easy")
    parser.add_argument("--steps", type=int, default=2000, help="single steps per latency row")
    parser.add_argument("--batch-steps", type=int, default=100, help="batch steps per throughput row")
    parser.add_argument("--num-envs", type=int, default=32)
    args = parser.parse_args()

    proc, url = start_server(args.env, max_sessions=args.num_envs + 8)
    try:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{args.env}; gem serve at {url}; {os.cpu_count()} CPUs, load average {load}")
        print("(other jobs were running on the machine during this run; compare rows with each other only)\n")
        # Warm up every path once (imports, first connection), then measure.
        in_process(args.env, 50)
        gem_client(url, 50)
        openenv_client(url, 50)
        rows = [
            ("in process", in_process(args.env, args.steps)),
            ("openenv-core client, 1 session", openenv_client(url, args.steps)),
            ("openenv: Env client, 1 session", gem_client(url, args.steps)),
        ]
        base = statistics.median(rows[0][1])
        print(f"per-step latency, {args.steps} steps each (ms)")
        print(f"{'path':34s}{'p50':>9s}{'p99':>9s}{'mean':>9s}{'p50 overhead':>15s}")
        for name, times in rows:
            p50, p99, mean = (percentile(times, 50), percentile(times, 99), statistics.fmean(times))
            print(f"{name:34s}{p50 * 1e3:9.3f}{p99 * 1e3:9.3f}{mean * 1e3:9.3f}{(p50 - base) * 1e3:15.3f}")

        local = vector_throughput(args.env, args.num_envs, args.batch_steps)
        remote = vector_throughput(f"openenv:{url}", args.num_envs, args.batch_steps)
        single = 1 / statistics.fmean(rows[2][1])
        print(
            f"\nthroughput, {args.num_envs}-env threads vector env, {args.batch_steps} batch steps (env steps / s)"
        )
        print(f"{'in process, 32 envs':34s}{local:12.0f}")
        print(
            f"{'gem serve, 32 sessions':34s}{remote:12.0f}   ({remote / single:.1f}x one session's {single:.0f})"
        )
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"\nload average at the end: {load}")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()

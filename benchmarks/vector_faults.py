"""Vector envs under faults: how many episodes each backend loses, and how long a batch step can take.

    python benchmarks/vector_faults.py [--env game:GuessTheNumber-v1] [--num-envs 16] [--steps 300]
        [--step-timeout 2] [--raise-prob 0.01] [--hang-prob 0.01] [--hang-seconds 60] [--crash-prob 0]
        [--step-seconds 0] [--num-workers 2] [--backends sync,threads,processes,ray] [--out FILE]

Every env is wrapped in ``InjectFaults`` (``gem_core.vector.faults``): each step raises with
``--raise-prob``, hangs ``--hang-seconds`` with ``--hang-prob`` and ends its process (``os._exit``, as a
segfault or the OOM killer would) with ``--crash-prob``, drawn from OS entropy (an env rebuilt after a
fault must not replay the faults of its predecessor). Crashes are injected on the process and Ray
backends only (on sync and threads the process that dies is the benchmark's). ``--step-seconds`` makes
every step sleep that long first, so that a worker's envs are in the middle of their steps when one of
them crashes it. The actions are each env's own random actions; autoreset is ``next_step``.

An episode *failed* when its last step reported ``info["error"]``. It failed *on its own* when the error
was its own env's fault (it raised, overran the step timeout, or crashed its worker); the rest are
*collateral*: episodes that a fault of another env took with it (before issue 24 the process and Ray
backends rebuilt a hung env's worker with every env in it; before issue 43 every env with a step in
flight in a worker that crashed lost its episode). A crash shows as errors saying that the worker
died. The errors of one batch step and one worker are one crash, or as many as say the call killed
the worker again when run alone (which only the crashing envs' errors say, since issue 43); each
crash is one env's own failure and the other errors are collateral. (Before issue 43 no error said
so: two crashes of one worker in one step count as one there, one collateral too many.) The goal: no collateral, i.e. each backend's failed rate equals the rate of
episodes that met a fault of their own env, which is ``1 - (1 - p)^L`` for a per-step fault rate
``p`` and an episode of ``L`` steps (the "expected" column: that formula averaged over 2,000
fault-free episodes of the env played with its random actions).

The sync backend cannot abandon a hung step: it runs with hangs of ``--sync-hang-seconds`` (by default
just over the step timeout, so that they count as overruns) instead of ``--hang-seconds``.

Columns: episodes ended, failed (%), own (%), collateral (%), expected (%), crashes and the healthy
episodes they took with them ("lost to"), the slowest batch step and the median one in seconds, and
how many batch steps took longer than the step timeout + 1.5 s. A batch step in which a worker crashed
runs the calls that were in flight again (``gem_core.vector.worker_pool``), so it may take longer.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import statistics
import sys
import time

import gem_core
from gem_core.core import Wrapper
from gem_core.vector import BACKENDS, VectorEnv
from gem_core.vector.faults import InjectFaults

SLACK = 1.5  # seconds a batch step may take beyond the step timeout


REMOTE = ("processes", "ray")
CRASHED = ("died", "closed its pipe", "closed its connection")  # how the backends say a worker crashed


class SlowSteps(Wrapper):
    """Each step sleeps ``seconds`` first (a step that waits, as one calling a tool or a server does)."""

    def __init__(self, env, seconds: float):
        super().__init__(env)
        self.seconds = seconds

    def step(self, action):
        time.sleep(self.seconds)
        return self.env.step(action)


def faulty_env(env_id: str, step_seconds: float = 0.0, **faults) -> InjectFaults:
    env = gem_core.make(env_id)
    return InjectFaults(SlowSteps(env, step_seconds) if step_seconds else env, **faults)


def build(args: argparse.Namespace, backend: str) -> VectorEnv:
    hang = args.sync_hang_seconds if backend == "sync" else args.hang_seconds
    faults = {"raise_prob": args.raise_prob, "hang_prob": args.hang_prob, "hang_seconds": hang}
    if backend in REMOTE:
        faults["crash_prob"] = args.crash_prob
    faults["step_seconds"] = args.step_seconds
    fns = [functools.partial(faulty_env, args.env, **faults) for _ in range(args.num_envs)]
    kwargs = {"step_timeout": args.step_timeout}
    if backend in ("processes", "ray"):
        kwargs["num_workers"] = args.num_workers
    if backend == "ray":
        import ray

        if not ray.is_initialized():
            # Crashed actors' logs (the injected os._exit) stay in Ray's log files.
            ray.init(address="local", num_cpus=args.num_workers, include_dashboard=False, log_to_driver=False)
    return BACKENDS[backend](fns, **kwargs)


def worker_of(args: argparse.Namespace, backend: str, i: int) -> int:
    """The worker hosting env ``i``: the remote backends give worker ``w`` the envs
    ``w * n // W`` to ``(w + 1) * n // W - 1`` (``gem_core.vector.worker_pool``)."""
    if backend not in REMOTE:
        return 0
    return next(w for w in range(args.num_workers) if i < (w + 1) * args.num_envs // args.num_workers)


def run(args: argparse.Namespace, backend: str) -> dict:
    vec = build(args, backend)
    try:
        vec.reset(seed=0)
        lengths = [0] * args.num_envs  # steps of each env's current episode
        ended = failed = own = crashed = 0
        crashes: collections.Counter = collections.Counter()  # (batch step, worker) -> crashes there
        times = []
        for step in range(args.steps):
            actions = vec.sample_random_actions()
            start = time.perf_counter()
            _, _, term, trunc, infos = vec.step(actions)
            times.append(time.perf_counter() - start)
            for i, info in enumerate(infos):
                if info.get("autoreset"):
                    lengths[i] = 0
                    continue
                lengths[i] += 1
                if term[i] or trunc[i]:
                    ended += 1
                    error = info.get("error")
                    if error is None:
                        continue
                    failed += 1
                    if "lost its episode" not in error and any(w in error for w in CRASHED):
                        crashed += 1
                        where = (step, worker_of(args, backend, i))
                        crashes[where] += "run alone" in error  # 0 if none says: one crash
                    else:
                        own += "lost its episode" not in error
    finally:
        vec.close()
    crash_count = sum(max(n, 1) for n in crashes.values())
    own += crash_count
    return {
        "ended": ended,
        "failed": failed / max(ended, 1),
        "own": own / max(ended, 1),
        "collateral": (failed - own) / max(ended, 1),
        "crashes": crash_count,
        "crash_collateral": crashed - crash_count,
        "max_s": max(times),
        "median_s": statistics.median(times),
        "over": sum(t > args.step_timeout + SLACK for t in times),
    }


def expected_failed_rate(args: argparse.Namespace, episodes: int = 2000) -> float:
    """``1 - (1 - p)^L`` averaged over fault-free episodes of the env (random actions, seeds 0, 1, ...)."""
    p = args.raise_prob + args.hang_prob + args.crash_prob
    env, rates = gem_core.make(args.env), []
    for seed in range(episodes):
        env.reset(seed=seed)
        length, done = 0, False
        while not done:
            length += 1
            _, _, term, trunc, _ = env.step(env.sample_random_action())
            done = term or trunc
        rates.append(1 - (1 - p) ** length)
    return statistics.mean(rates)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="game:GuessTheNumber-v1")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--step-timeout", type=float, default=2.0)
    parser.add_argument("--raise-prob", type=float, default=0.01)
    parser.add_argument("--hang-prob", type=float, default=0.01)
    parser.add_argument("--hang-seconds", type=float, default=60.0)
    parser.add_argument("--crash-prob", type=float, default=0.0, help="processes and ray backends only")
    parser.add_argument("--step-seconds", type=float, default=0.0, help="every step sleeps this long first")
    parser.add_argument("--sync-hang-seconds", type=float, default=None, help="default: step timeout + 0.2")
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--backends", default="sync,threads,processes,ray")
    parser.add_argument("--out", default=None, help="also append the table to this file")
    args = parser.parse_args()
    if args.sync_hang_seconds is None:
        args.sync_hang_seconds = args.step_timeout + 0.2

    command = "python benchmarks/vector_faults.py " + " ".join(sys.argv[1:])
    lines = [
        f"$ {command}",
        f"{args.num_envs} x {args.env}, {args.steps} batch steps, step_timeout={args.step_timeout}s; per step: "
        f"raise {args.raise_prob:.0%}, hang {args.hang_seconds:g}s {args.hang_prob:.0%} "
        f"(sync: {args.sync_hang_seconds:g}s), crash {args.crash_prob:.0%} (processes/ray only), "
        f"steps sleep {args.step_seconds:g}s; processes/ray: {args.num_workers} workers "
        f"({args.num_envs // args.num_workers} envs each); {os.cpu_count()} CPUs",
        f"{'backend':<10} {'episodes':>8} {'failed':>7} {'own':>7} {'collat.':>7} {'expected':>8} "
        f"{'crashes':>7} {'lost to':>7} {'max step s':>10} {'median s':>8} "
        f"{f'> {args.step_timeout + SLACK:g}s':>7}",
    ]
    print("\n".join(lines), flush=True)
    expected = expected_failed_rate(args)
    for backend in args.backends.split(","):
        r = run(args, backend)
        line = (
            f"{backend:<10} {r['ended']:>8} {r['failed']:>7.1%} {r['own']:>7.1%} {r['collateral']:>7.1%} "
            f"{expected:>8.1%} {r['crashes']:>7} {r['crash_collateral']:>7} {r['max_s']:>10.2f} "
            f"{r['median_s']:>8.3f} {r['over']:>7}"
        )
        print(line, flush=True)
        lines.append(line)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines.append(f"load average at the end: {load}")
    print(lines[-1])
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()

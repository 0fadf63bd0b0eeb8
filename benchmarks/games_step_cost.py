"""Game step cost: gem_core's games against the reference GEM (gem-llm 0.1.0), measured in the same run.

Three games registered in both, at easy: GuessTheNumber, Sudoku and TowerofHanoi. Both implementations
get the same pre-drawn random actions (well-formed ``\\boxed{}`` moves, legal or not: the reference's
Sudoku has no ``sample_random_action``), and an episode that ends is reset at once. Reported per game:
microseconds per ``step`` and per ``reset`` (the fastest of ``--repeats`` runs, as timeit does, since
the machine may be shared; the two implementations alternate run by run), and the ratio
reference / ours (above 1: ours is faster).

    python benchmarks/games_step_cost.py [--steps 2000] [--repeats 10]

Needs ``gem-llm==0.1.0`` (module ``gem``). The reference seeds the process-global ``random`` on reset;
this script draws its actions from its own generator, so both sides see the same actions.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from collections.abc import Callable
from importlib.metadata import version

import gem

import gem_core


def guess(rng: random.Random) -> str:
    return f"\\boxed{{{rng.randint(1, 10)}}}"


def sudoku(rng: random.Random) -> str:
    return f"\\boxed{{{rng.randint(1, 4)} {rng.randint(1, 4)} {rng.randint(1, 4)}}}"


def hanoi(rng: random.Random) -> str:
    src, dst = rng.sample("ABC", 2)
    return f"\\boxed{{{src} {dst}}}"


GAMES: list[tuple[str, Callable[[random.Random], str]]] = [
    ("game:GuessTheNumber-v1-easy", guess),
    ("game:Sudoku-v1-easy", sudoku),
    ("game:TowerofHanoi-v1-easy", hanoi),
]


def run(make: Callable[[str], object], env_id: str, actions: list[str]) -> tuple[float, float]:
    """Seconds per step and per reset over ``actions``, resetting whenever an episode ends."""
    env = make(env_id)
    step_time = reset_time = 0.0
    resets = 1
    start = time.perf_counter()
    env.reset(seed=0)
    reset_time += time.perf_counter() - start
    for action in actions:
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        step_time += time.perf_counter() - start
        if terminated or truncated:
            start = time.perf_counter()
            env.reset(seed=resets)
            reset_time += time.perf_counter() - start
            resets += 1
    return step_time / len(actions), reset_time / resets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="random steps per run (default 2000)")
    parser.add_argument("--repeats", type=int, default=10, help="runs per implementation; the fastest counts")
    args = parser.parse_args()

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average {load}; "
        f"gem-llm {version('gem-llm')}; {args.steps} steps per run, best of {args.repeats} runs"
    )
    header = f"{'game':30s} {'ours us/step':>13s} {'ref us/step':>12s} {'ref/ours':>9s}"
    header += f" {'ours us/reset':>14s} {'ref us/reset':>13s} {'ref/ours':>9s}"
    print(header)
    for env_id, draw in GAMES:
        rng = random.Random(0)
        actions = [draw(rng) for _ in range(args.steps)]
        ours, ref = [], []
        for i in range(args.repeats):
            for make, times in [(gem_core.make, ours), (gem.make, ref)][:: 1 if i % 2 else -1]:
                times.append(run(make, env_id, actions))
        ours_step, ours_reset = min(s for s, _ in ours), min(r for _, r in ours)
        ref_step, ref_reset = min(s for s, _ in ref), min(r for _, r in ref)
        print(
            f"{env_id:30s} {ours_step * 1e6:13.1f} {ref_step * 1e6:12.1f} {ref_step / ours_step:8.2f}x"
            f" {ours_reset * 1e6:14.1f} {ref_reset * 1e6:13.1f} {ref_reset / ours_reset:8.2f}x"
        )


if __name__ == "__main__":
    main()

"""Chance: the success of the env's random player on a line's held-out tasks, the floor a trained policy
must clear before its line counts as learning the env.

The random player is the evaluation toolkit's ``random`` agent (``Env.sample_random_action``, legal moves
where the env knows them); it plays each of the held-out tasks (``train_run.EVAL_FIRST_SEED`` on)
``CHANCE_SAMPLES`` times, within the row's ``max_turns``. A rise from a before below chance to an after
at chance is no learning: RuleTaker's SmolLM2 line went from 0.21 to exactly 8 of its 24 tasks, balanced
over three labels, on every seed (one label for every task does that), and TicTacToe's small-policy
lines rose from 0.16 to 0.21 against a random opponent whom random legal moves beat 2 times in 3.

``report`` measures each line's chance once and keeps it in ``<table's results>/chance.csv``.
"""

from __future__ import annotations

import csv
import math
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.bootstrap import bootstrap

CHANCE_SAMPLES = 16  # random plays of each held-out task
CHANCE_COLUMNS = ["env_id", "max_turns", "tasks", "samples", "success", "lo", "hi", "seconds"]


def random_player_success(env_id: str, first_seed: int, tasks: int, max_turns: int | None) -> list[float]:
    """Each task's success rate over ``CHANCE_SAMPLES`` plays by the random player (the evaluation
    toolkit's episodes: task seeds from ``first_seed``, ``CHANCE_SAMPLES`` samples each)."""
    import benchmarks.learning.common  # noqa: F401 (registers the small policies' envs)
    from benchmarks.baselines.players import register_tool_envs
    from gem_adapters.evaluation.agents import random_agent
    from gem_adapters.evaluation.config import EvalConfig
    from gem_adapters.evaluation.episodes import run_episodes

    register_tool_envs()
    config = EvalConfig([env_id], episodes=tasks, k=CHANCE_SAMPLES, seed=first_seed, max_turns=max_turns)
    played = run_episodes(random_agent(), config, [env_id], progress=False)  # by task, then sample
    return [
        statistics.fmean(e.success for e in played[i : i + CHANCE_SAMPLES])
        for i in range(0, len(played), CHANCE_SAMPLES)
    ]


def measure(env_id: str, first_seed: int, tasks: int, max_turns: int | None) -> dict[str, Any]:
    """One ``chance.csv`` line: the random player's success, with a 95% interval over the tasks (NaN for
    an env without a random player: ``sample_random_action`` not implemented)."""
    from gem_adapters.evaluation.errors import EvalError

    started = time.perf_counter()
    try:
        per_task = random_player_success(env_id, first_seed, tasks, max_turns)
    except EvalError:  # "cannot sample random actions"
        per_task = [math.nan]
    lo, hi = bootstrap(per_task) if len(per_task) > 1 else (per_task[0], per_task[0])
    return {
        "env_id": env_id,
        "max_turns": "" if max_turns is None else max_turns,
        "tasks": tasks,
        "samples": CHANCE_SAMPLES,
        "success": statistics.fmean(per_task),
        "lo": lo,
        "hi": hi,
        "seconds": time.perf_counter() - started,
    }


def _key(env_id: str, max_turns: Any, tasks: Any) -> tuple[str, str, str]:
    return env_id, "" if max_turns in (None, "") else str(max_turns), str(tasks)


class ChanceTable:
    """``chance.csv`` of a results folder: ``get`` reads a line's chance, measuring it once if missing."""

    def __init__(self, path: Path):
        self.path = path
        self.lines: dict[tuple[str, str, str], dict[str, Any]] = {}
        if path.exists():
            with path.open() as f:
                for line in csv.DictReader(f):
                    self.lines[_key(line["env_id"], line["max_turns"], line["tasks"])] = line

    def get(self, env_id: str, first_seed: int, tasks: int, max_turns: int | None) -> dict[str, float]:
        key = _key(env_id, max_turns, tasks)
        if key not in self.lines:
            self.lines[key] = measure(env_id, first_seed, tasks, max_turns)
            self._write()
        line = self.lines[key]
        return {"chance": float(line["success"]), "chance_hi": float(line["hi"])}

    def _write(self) -> None:
        with self.path.open("w", newline="") as f:
            writer = csv.DictWriter(f, CHANCE_COLUMNS)
            writer.writeheader()
            for key in sorted(self.lines):
                line = self.lines[key]
                writer.writerow({k: f"{v:.4f}" if isinstance(v, float) else v for k, v in line.items()})

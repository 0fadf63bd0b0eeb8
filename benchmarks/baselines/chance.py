"""Chance: the floor a trained policy must clear on a line's held-out tasks before its line counts as
learning the env: the better of the env's random player and, for an env whose tasks each hold a gold
answer, the best constant answer (one answer given to every task).

The random player is the evaluation toolkit's ``random`` agent (``Env.sample_random_action``, legal moves
where the env knows them); it plays each of the held-out tasks (``train_run.EVAL_FIRST_SEED`` on)
``CHANCE_SAMPLES`` times, within the row's ``max_turns``. A rise from a before below chance to an after
at chance is no learning: RuleTaker's SmolLM2 line went from 0.21 to exactly 8 of its 24 tasks, balanced
over three labels, on every seed (one label for every task does that), and TicTacToe's small-policy
lines rose from 0.16 to 0.21 against a random opponent whom random legal moves beat 2 times in 3.
A random answer is a low floor where the answers are skewed: letter_counting's random player scores
0.003, while answering "1" to every text scores 0.33 (8 of its 24 held-out texts hold the letter once),
where a SmolLM2 line ended on every seed (a re-run of one of them answered "1" to 21 of the 24 texts).

``report`` measures each line's chance once and keeps it in ``<table's results>/chance.csv``.
"""

from __future__ import annotations

import csv
import math
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.bootstrap import bootstrap

CHANCE_SAMPLES = 16  # random plays of each held-out task
DECIMALS = 4  # chance.csv's floats
# below half a unit of the last decimal, a line and chance read back from chance.csv are equal (a constant
# answer right on 8/24 reads back as 0.3333, below a line at exactly 8/24)
ROUNDING = 0.5 * 10**-DECIMALS
CHANCE_COLUMNS = ["env_id", "max_turns", "tasks", "samples", "success", "lo", "hi", "constant", "seconds"]


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


def constant_answer_success(env_id: str, first_seed: int, tasks: int) -> float:
    """The best constant answer's success on the held-out tasks: the largest share of them that one answer
    is right for (gold answers compared stripped and lower-cased), NaN for an env whose tasks hold no gold
    answer (``example[answer_key]``: games, code, terminal, web)."""
    import benchmarks.learning.common  # noqa: F401 (registers the small policies' envs)
    import gem_core
    from benchmarks.baselines.players import register_tool_envs
    from gem_core.envs.dataset import answers_of

    register_tool_envs()
    env = gem_core.make(env_id)
    right: list[set[str]] = []
    try:
        for task in range(tasks):
            env.reset(seed=first_seed + task)
            inner = env.unwrapped
            example, key = getattr(inner, "example", None), getattr(inner, "answer_key", "answer")
            if not isinstance(example, dict) or key not in example:
                return math.nan
            right.append({a.strip().lower() for a in answers_of(example[key])})
    finally:
        env.close()
    return max(Counter(a for answers in right for a in answers).values()) / tasks


def measure(env_id: str, first_seed: int, tasks: int, max_turns: int | None) -> dict[str, Any]:
    """One ``chance.csv`` line: the random player's success, with a 95% interval over the tasks (NaN for
    an env without a random player: ``sample_random_action`` not implemented), and the best constant
    answer's."""
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
        "constant": constant_answer_success(env_id, first_seed, tasks),
        "seconds": time.perf_counter() - started,
    }


def _key(env_id: str, max_turns: Any, tasks: Any) -> tuple[str, str, str]:
    return env_id, "" if max_turns in (None, "") else str(max_turns), str(tasks)


class ChanceTable:
    """``chance.csv`` of a results folder: ``get`` reads a line's chance, measuring it once if missing (and
    a line written before the constant answer was measured, its constant answer)."""

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
        if line.get("constant") is None:
            line["constant"] = constant_answer_success(env_id, first_seed, tasks)
            self._write()
        constant = float(line["constant"])
        floor = {"chance": float(line["success"]), "chance_hi": float(line["hi"])}
        return {
            k: max((x for x in (v, constant) if not math.isnan(x)), default=math.nan)
            for k, v in floor.items()
        }

    def _write(self) -> None:
        with self.path.open("w", newline="") as f:
            writer = csv.DictWriter(f, CHANCE_COLUMNS)
            writer.writeheader()
            for key in sorted(self.lines):
                line = self.lines[key]
                writer.writerow(
                    {k: f"{v:.{DECIMALS}f}" if isinstance(v, float) else v for k, v in line.items()}
                )

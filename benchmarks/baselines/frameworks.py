"""The cross-framework runs as lines of the plateau table (issue 58: "the table alone shows every
framework's result").

The same ReBN run through TRL, verl ``main_ppo``, OpenRLHF ``train_ppo_ray`` and ROLL's agentic pipeline
lives in ``benchmarks/learning`` (``experiments.py``: ``frameworks`` = its README's section 15 and
item 5's ROLL arm with the conversation as prompt, ``frameworks_fifteen`` = section 15b,
``frameworks_tictactoe``). Those trainers have no held-out evaluation of their own: each run is its
per-step CSV of training batches. Here each finished run becomes a summary ``results.table_line`` reads:
``before`` and ``after`` are the training success and return averaged over the run's first and last
``experiments.window(steps)`` steps (10 of 60 or 40, 4 of 16: the windows of those sections' tables), and
``measured_on`` says so, since the table's other lines compare held-out episodes. The curve is the run's
own CSV (``_stem``), read in place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

EXPERIMENTS = ("frameworks", "frameworks_fifteen", "frameworks_tictactoe")
# experiments.trainer_name -> the framework's name in the table (``rows.FRAMEWORK`` is TRL's)
FRAMEWORKS = {
    "train": "trl",
    "verl_main_ppo": "verl",
    "openrlhf_train_ppo_ray": "openrlhf",
    "roll_agentic": "roll",
}
# the seeds each experiment runs (TicTacToe's seeds 1-2 were dropped for FifteenPuzzle's: section 15b)
SEEDS = {"frameworks": (0, 1, 2), "frameworks_fifteen": (0, 1, 2), "frameworks_tictactoe": (0,)}


def arm_change(arm: dict[str, Any]) -> str:
    """What an arm changes on its framework's run: ROLL's conversation-as-prompt arm (item 5)."""
    return "history prompt" if arm["flags"].get("prompt") == "history" else ""


def run_summary(experiment: str, arm: dict[str, Any], seed: int, path: Path) -> dict[str, Any]:
    """One finished run's summary in the table's format (the module's docstring)."""
    from benchmarks.learning import experiments
    from benchmarks.learning.common import TASKS

    rows = experiments.read(path)
    steps = len(rows)
    width = experiments.window(steps)

    def window(part: slice) -> dict[str, float]:
        return {key: experiments.window_mean(rows, key, part) for key in ("success_rate", "return")}

    return {
        "env_id": TASKS[arm["task"]].env_id,
        "framework": FRAMEWORKS[experiments.trainer_name(arm)],
        "estimator": arm["estimator"],
        "policy": "small",
        "seed": seed,
        "steps": steps,
        "episodes_per_step": int(
            arm["flags"].get("episodes_per_step", experiments.DEFAULTS["episodes_per_step"])
        ),
        "wall_s": rows[-1]["wall_s"],
        "before": window(slice(0, width)),
        "after": window(slice(steps - width, steps)),
        "measured_on": f"training batches, steps 1-{width} -> {steps - width + 1}-{steps}",
        "row": {"change": arm_change(arm), "seeds": SEEDS[experiment]},
        "_row": experiment,
        "_stem": path.with_name(path.stem),
    }


def framework_summaries() -> list[dict[str, Any]]:
    """Every finished run of ``EXPERIMENTS``' framework arms (a run still going or not started: none).
    Imported here: ``benchmarks.learning`` registers its envs on import, which nothing that merely
    imports the runner should get."""
    from benchmarks.learning import experiments

    summaries = []
    for experiment in EXPERIMENTS:
        for arm in experiments.EXPERIMENTS[experiment]:
            for seed in SEEDS[experiment]:
                path = experiments.run_path(arm, seed)
                if experiments.finished(path, experiments.run_steps(arm, None)):
                    summaries.append(run_summary(experiment, arm, seed, path))
    return summaries

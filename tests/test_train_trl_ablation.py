"""benchmarks/train_trl_default.py: which runs count as finished, and the summary's numbers."""

from __future__ import annotations

import csv
import importlib.util
import statistics
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "train_trl_default.py"
spec = importlib.util.spec_from_file_location("train_trl_default", SCRIPT)
ablation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablation)

COLUMNS = ["split", "phase", "step", "success_rate", "hint_consistency", "turns", "entropy"]


def write_run(directory: Path, start: float, warmup: float | None, end: float | None, entropy: list[float]):
    directory.mkdir(parents=True)
    rows = [
        {
            "split": "eval",
            "phase": "start",
            "step": 0,
            "success_rate": start,
            "hint_consistency": 0.5,
            "turns": 4,
        }
    ]
    if warmup is not None:
        rows.append(
            {"split": "eval", "phase": "warmup", "step": 0, "success_rate": warmup, "hint_consistency": 0.9}
        )
    for step, value in enumerate(entropy, 1):
        rows.append({"split": "train", "phase": "rl", "step": step, "entropy": value})
    if end is not None:
        rows.append(
            {
                "split": "eval",
                "phase": "end",
                "step": len(entropy),
                "success_rate": end,
                "hint_consistency": 1.0,
                "turns": 3,
            }
        )
    with (directory / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    (directory / "time.txt").write_text("600\n")


def test_summary_means_intervals_and_unfinished_runs(tmp_path):
    for seed, (start, warmup, end) in enumerate([(0.2, 0.8, 0.9), (0.3, 0.9, 1.0), (0.1, 0.7, 0.95)]):
        write_run(ablation.run_dir(tmp_path, "default", seed), start, warmup, end, [0.5, 0.1, 0.2])
    write_run(ablation.run_dir(tmp_path, "no warm-up (RL only)", 0), 0.2, None, 0.25, [1.0, 0.01])
    write_run(ablation.run_dir(tmp_path, "lr 5e-5", 0), 0.2, 0.8, None, [0.5])  # stopped before its end

    assert ablation.finished(ablation.run_dir(tmp_path, "default", 0))
    assert not ablation.finished(ablation.run_dir(tmp_path, "lr 5e-5", 0))
    table = {row["arm"]: row for row in ablation.summarize(tmp_path, list(ablation.ARMS))}
    assert set(table) == {"default", "no warm-up (RL only)"}

    default = table["default"]
    assert default["seeds"] == 3 and default["per seed (end)"] == "0.90 1.00 0.95"
    mean, interval = default["success at the end"].split(" ", 1)
    assert float(mean) == pytest.approx(statistics.fmean([0.9, 1.0, 0.95]), abs=0.005)
    low, high = (float(x) for x in interval.strip("[]").split(", "))
    assert 0.9 <= low <= float(mean) <= high <= 1.0
    assert default["entropy first / last / min"].split(" ; ")[0] == "0.500/0.200/0.100"
    assert default["minutes"] == "10.0 10.0 10.0"

    rl_only = table["no warm-up (RL only)"]
    assert (
        rl_only["success after warm-up"] == "-" and rl_only["success at the end"] == "0.25"
    )  # one seed: no interval


def test_bootstrap_interval_of_identical_seeds_is_a_point():
    bootstrap = importlib.import_module("benchmarks.bootstrap")
    assert bootstrap.bootstrap([0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert bootstrap.mean_with_interval([0.5, 0.5, 0.5], digits=2) == "0.50 [0.50, 0.50]"
    assert (
        bootstrap.mean_with_interval([float("nan"), 0.25]) == "0.250"
    )  # NaN dropped; too few for an interval

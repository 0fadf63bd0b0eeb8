"""The ablation behind ``examples/train_trl.py``'s defaults: each arm is the README command with one change.

    .venv/bin/python -m benchmarks.train_trl_default --runs-dir runs/ablation            # every arm, seed 0
    .venv/bin/python -m benchmarks.train_trl_default --runs-dir runs/ablation --arms default --seeds 0 1 2
    .venv/bin/python -m benchmarks.train_trl_default --runs-dir runs/ablation --summarize-only

Runs are played one after the other (run it alone on the machine: each takes 1.5-3 minutes on 2 cores);
a run whose ``metrics.csv`` already has its final evaluation is not played again. The summary reads each
run's ``metrics.csv`` (and ``time.txt``, the run's wall time) and prints one row per arm: eval success on
the 32 held-out games before training, after the warm-up and at the end (mean over seeds, with a 95%
bootstrap interval over seeds when there are 3 or more), the share of guesses consistent with the hints,
mean turns, the per-token entropy of the training batches (first, last and lowest step) and the wall time.
It also writes ``ablation.csv`` beside the runs.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from benchmarks.bootstrap import mean_with_interval

ROOT = Path(__file__).resolve().parents[1]

ARMS: dict[str, list[str]] = {
    "default": [],
    "warm-up 16 games": ["--warmup-episodes", "16"],
    "no warm-up (RL only)": ["--warmup-episodes", "0"],
    "lr 5e-5": ["--learning-rate", "5e-5"],
    "gamma 1.0": ["--gamma", "1.0"],  # the default since stop 93
    "gamma 0.9": ["--gamma", "0.9"],  # the default before
    "KL 0.04 to the warmed-up model": ["--beta", "0.04"],
    "fp32 (--bf16 false)": ["--bf16", "false"],  # the default is bf16 where the CPU computes it natively
}


def run_prefix(arm: str) -> str:
    """The arm's run folders are ``<prefix><seed>``."""
    return f"{arm.replace(' ', '_').replace('(', '').replace(')', '')}-seed"


def run_dir(runs: Path, arm: str, seed: int) -> Path:
    return runs / f"{run_prefix(arm)}{seed}"


def finished(directory: Path) -> bool:
    metrics = directory / "metrics.csv"
    return metrics.exists() and any(r["phase"] == "end" for r in csv.DictReader(metrics.open()))


def play(runs: Path, arm: str, seed: int) -> None:
    directory = run_dir(runs, arm, seed)
    if finished(directory):
        return
    command = [sys.executable, str(ROOT / "examples" / "train_trl.py"), "--seed", str(seed)]
    command += [*ARMS[arm], "--output-dir", str(directory)]
    print(" ".join(command[1:]), flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT)
    (directory / "time.txt").write_text(f"{time.perf_counter() - started:.0f}\n")


def summary(values: list[float]) -> str:
    return mean_with_interval(values, digits=2)


def summarize(runs: Path, arms: list[str]) -> list[dict]:
    table = []
    for arm in arms:
        directories = sorted(d for d in runs.glob(f"{run_prefix(arm)}*") if finished(d))
        if not directories:
            continue
        per_run = []
        for directory in directories:
            rows = list(csv.DictReader((directory / "metrics.csv").open()))
            evals = {r["phase"]: r for r in rows if r["split"] == "eval"}
            entropy = [
                float(r["entropy"]) for r in rows if r["split"] == "train" and r["entropy"] not in ("", "nan")
            ]
            wall = directory / "time.txt"
            per_run.append((evals, entropy, float(wall.read_text()) / 60 if wall.exists() else float("nan")))

        column = partial(_column, per_run)
        row = {
            "arm": arm,
            "seeds": len(per_run),
            "success before": summary(column("start", "success_rate")),
            "success after warm-up": summary(column("warmup", "success_rate")),
            "success at the end": summary(column("end", "success_rate")),
            "per seed (end)": " ".join(f"{v:.2f}" for v in column("end", "success_rate")),
            "hint-consistent before -> end": f"{summary(column('start', 'hint_consistency'))} -> "
            f"{summary(column('end', 'hint_consistency'))}",
            "turns (end)": summary(column("end", "turns")),
            "entropy first / last / min": " ; ".join(
                f"{h[0]:.3f}/{h[-1]:.3f}/{min(h):.3f}" for _, h, _ in per_run if h
            ),
            "minutes": " ".join(f"{m:.1f}" for _, _, m in per_run),
        }
        table.append(row)
    return table


def _column(per_run: list, phase: str, key: str) -> list[float]:
    """``key`` of each run's evaluation at ``phase`` ("start", "warmup", "end")."""
    return [float(evals[phase][key]) for evals, _, _ in per_run if phase in evals]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "train_trl_ablation")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS), metavar="ARM")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--summarize-only", action="store_true")
    args = parser.parse_args()
    if not args.summarize_only:
        for arm in args.arms:
            for seed in args.seeds:
                play(args.runs_dir, arm, seed)
    table = summarize(args.runs_dir, args.arms)
    if not table:
        raise SystemExit(f"no finished run under {args.runs_dir}")
    columns = list(table[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in table:
        print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    with (args.runs_dir / "ablation.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(table)


if __name__ == "__main__":
    main()

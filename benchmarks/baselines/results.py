"""The result files of the baselines and what is computed from them.

Layout under ``benchmarks/results/baselines_trained/`` (``RESULTS``)::

    runs/<row>/<framework>-<estimator>-seed<k>.csv    one run's curve, one line per RL step
    runs/<row>/<framework>-<estimator>-seed<k>.json   its summary: before / after, timings, settings
    runs/<row>/<framework>-<estimator>-seed<k>.log    its console output
    curves/<row>--<framework>-<estimator>.csv         the row's curve: mean, min, max over seeds per step
    table.csv                                         one line per env x framework x estimator (x policy)
    grid.png                                          every row's success curve, mean and min-max over seeds

Another framework's runner adds its rows by writing the same ``.csv``/``.json`` pair (``framework`` set
to its name; the JSON needs ``env_id``, ``framework``, ``estimator``, ``policy``, ``seed``, ``steps``,
``before``/``after`` with ``success_rate`` and ``return``, and ``wall_s``): ``report`` reads every
summary under ``runs/`` whatever wrote it.

Intervals: the 95% percentile bootstrap of the mean over seeds (``benchmarks.bootstrap``, as every
benchmark of the project), from two seeds on.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.bootstrap import bootstrap

RESULTS = Path(__file__).resolve().parents[1] / "results" / "baselines_trained"
TABLE_COLUMNS = [
    "env_id", "framework", "estimator", "policy", "seeds", "steps", "success_before", "success_after",
    "after_lo", "after_hi", "return_before", "return_after", "wall_s",
]  # fmt: skip
CURVE_KEYS = ("success_rate", "return")


def run_stem(results: Path, row_name: str, framework: str, estimator: str, seed: int) -> Path:
    """The run's files without their suffix (``.csv``, ``.json``, ``.log``)."""
    return results / "runs" / row_name / f"{framework}-{estimator}-seed{seed}"


def curve_path(results: Path, row_name: str, framework: str, estimator: str) -> Path:
    return results / "curves" / f"{row_name}--{framework}-{estimator}.csv"


def interval(values: Sequence[float]) -> tuple[float, float]:
    """95% bootstrap interval of the mean over ``values`` (NaN values left out); NaNs below two values."""
    values = [v for v in values if not math.isnan(v)]
    if len(values) < 2:
        return math.nan, math.nan
    return bootstrap(values)


def mean(values: Iterable[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return statistics.fmean(values) if values else math.nan


def read_summaries(results: Path = RESULTS) -> list[dict[str, Any]]:
    """Every finished run's summary under ``results/runs`` (smoke runs are elsewhere)."""
    summaries = []
    for path in sorted((results / "runs").glob("*/*.json")):
        summary = json.loads(path.read_text())
        summary["_row"], summary["_stem"] = path.parent.name, path.with_suffix("")
        summaries.append(summary)
    return summaries


def group_key(summary: dict[str, Any]) -> tuple[str, str, str, str, str]:
    return summary["_row"], summary["env_id"], summary["framework"], summary["estimator"], summary["policy"]


def grouped(summaries: Iterable[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
    """Summaries by (row folder, env id, framework, estimator, policy), seeds in order."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for summary in summaries:
        groups.setdefault(group_key(summary), []).append(summary)
    return {key: sorted(runs, key=lambda s: s["seed"]) for key, runs in groups.items()}


def table_line(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One ``table.csv`` line from the runs (seeds) of one env x framework x estimator x policy."""
    first = runs[0]
    after = [r["after"]["success_rate"] for r in runs]
    low, high = interval(after)
    steps = sorted({r["steps"] for r in runs})
    return {
        "env_id": first["env_id"],
        "framework": first["framework"],
        "estimator": first["estimator"],
        "policy": first["policy"],
        "seeds": len(runs),
        "steps": steps[0] if len(steps) == 1 else "/".join(map(str, steps)),
        "success_before": mean(r["before"]["success_rate"] for r in runs),
        "success_after": mean(after),
        "after_lo": low,
        "after_hi": high,
        "return_before": mean(r["before"]["return"] for r in runs),
        "return_after": mean(r["after"]["return"] for r in runs),
        "wall_s": sum(r["wall_s"] for r in runs),
    }


def change(runs: Sequence[dict[str, Any]], key: str = "success_rate") -> dict[str, float]:
    """After minus before, paired by seed: mean, 95% interval, and a verdict word."""
    differences = [r["after"][key] - r["before"][key] for r in runs]
    low, high = interval(differences)
    if math.isnan(low):
        verdict = "one seed"
    elif low > 0:
        verdict = "rose"
    elif high < 0:
        verdict = "fell"
    else:
        verdict = "no clear change"
    return {"mean": mean(differences), "lo": low, "hi": high, "verdict": verdict}


def _fmt(value: Any) -> Any:
    return (
        ""
        if isinstance(value, float) and math.isnan(value)
        else round(value, 4)
        if isinstance(value, float)
        else value
    )


def write_table(lines: Sequence[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, TABLE_COLUMNS)
        writer.writeheader()
        writer.writerows({k: _fmt(line[k]) for k in TABLE_COLUMNS} for line in lines)


def read_curve(path: Path) -> list[dict[str, float]]:
    with open(path) as f:
        return [
            {k: float(v) if v not in ("", "nan") else math.nan for k, v in r.items()}
            for r in csv.DictReader(f)
        ]


def seed_curves(run_paths: Sequence[Path]) -> list[list[dict[str, float]]]:
    return [read_curve(p.with_suffix(".csv")) for p in run_paths if p.with_suffix(".csv").exists()]


def combine_curves(curves: Sequence[list[dict[str, float]]]) -> list[dict[str, float]]:
    """Per step (up to the shortest run): mean, min and max over seeds of each of ``CURVE_KEYS``."""
    if not curves:
        return []
    length = min(len(c) for c in curves)
    combined = []
    for i in range(length):
        line = {"step": curves[0][i]["step"]}
        for key in CURVE_KEYS:
            values = [c[i][key] for c in curves]
            line |= {f"{key}_mean": mean(values), f"{key}_min": min(values), f"{key}_max": max(values)}
        combined.append(line)
    return combined


def write_curve(curve: Sequence[dict[str, float]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = ["step", *(f"{k}_{s}" for k in CURVE_KEYS for s in ("mean", "min", "max"))]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows({k: _fmt(line[k]) for k in columns} for line in curve)


def plot_grid(
    panels: Sequence[tuple[str, dict[str, list[dict[str, float]]]]], path: Path, key: str = "success_rate"
) -> None:
    """One panel per env and policy (``(title, {line label: combined curve})``), the mean of ``key`` over
    seeds with the min-max band, as the GEM paper's Figure 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 4
    rows = max(1, math.ceil(len(panels) / columns))
    fig, axes = plt.subplots(
        rows, columns, figsize=(4.2 * columns, 3.0 * rows), squeeze=False, layout="constrained"
    )
    for ax, (title, lines) in zip(axes.flat, panels):
        for label, curve in lines.items():
            steps = [c["step"] for c in curve]
            ax.plot(steps, [c[f"{key}_mean"] for c in curve], label=label)
            ax.fill_between(
                steps, [c[f"{key}_min"] for c in curve], [c[f"{key}_max"] for c in curve], alpha=0.25
            )
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("RL step", fontsize=7)
        ax.set_ylim(-0.05, 1.05)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="lower right")
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(
        f"{key.replace('_', ' ')} per RL step (training batches): mean over seeds, min-max shaded",
        fontsize=10,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)

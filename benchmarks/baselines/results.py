"""The result files of the baselines and what is computed from them.

Layout under ``benchmarks/results/baselines_trained/`` (``RESULTS``)::

    runs/<row>/<framework>-<estimator>-seed<k>.csv    one run's curve, one line per RL step
    runs/<row>/<framework>-<estimator>-seed<k>.json   its summary: before / after, timings, settings
    runs/<row>/<framework>-<estimator>-seed<k>.log    its console output
    curves/<row>--<framework>-<estimator>.csv         the row's curve: mean, min, max over seeds per step
    runs/<row>/<framework>-<estimator>-seed<k>--<part>.csv   a mixture run: its env <part>'s share of each step
    table.csv                                         one line per env x framework x estimator (x policy,
                                                      x the change a row tries: ``Row.change``)
    grid.png                                          every row's success curve, mean and min-max over seeds

Another framework's runner adds its rows by writing the same ``.csv``/``.json`` pair (``framework`` set
to its name; the JSON needs ``env_id``, ``framework``, ``estimator``, ``policy``, ``seed``, ``steps``,
``before``/``after`` with ``success_rate`` and ``return``, and ``wall_s``): ``report`` reads every
summary under ``runs/`` whatever wrote it. A summary whose ``before``/``after`` are not held-out
evaluations says what they are in ``measured_on`` (the table's column of that name; the cross-framework
runs of ``benchmarks/learning``, ``frameworks.py``, compare windows of training batches).

A mixture run (one policy on several envs, ``rows.mixture``) counts as one run of each of its envs:
``read_summaries`` turns its summary into one per env (that env's ``before``/``after`` from ``per_env``,
its curve ``part_stem``, ``wall_s`` split evenly over the envs, ``mixture`` set to the mixture's row
name), so ``table.csv`` has one line per env of the mixture, its ``mixture`` column naming the mixture
(empty on a single-env line).

Intervals: the 95% percentile bootstrap of the mean over seeds (``benchmarks.bootstrap``, as every
benchmark of the project), from two seeds on.

Plateau step (``plateau``), on the line's training-batch success per RL step, mean over seeds (``y``,
``n`` steps, ``n >= 6``): smooth ``y`` by a centred moving mean of ``2h + 1`` steps, ``h = max(1,
round(n / 12))`` (2 at 24 steps, 5 at 60), the window shrunk at the ends; the *final value* ``F`` is the
mean of ``y`` over the last ``2h + 1`` steps; the *tolerance* is the largest of 0.02, a tenth of the
smoothed curve's range, and ``3 * sqrt(2)`` times the smoothed curve's noise (one step's noise ``sigma``,
the standard deviation of ``y`` about the smoothed curve corrected by ``sqrt((2h + 1) / 2h)``, over
``sqrt(2h + 1)``), so a flat noisy curve is flat. The plateau step is
the first step from which the smoothed curve stays within the tolerance of ``F`` to the end. The curve is
*still rising* (or *still falling*) at the budget when a least-squares line through ``y`` over the last
``max(2h + 1, ceil(n / 4))`` steps rises (falls) across them by more than the tolerance and more than
twice that fitted change's standard error (from the same noise estimate); then that phrase stands in
place of a step. Fewer than 6 steps: no plateau step ("").

Verdict, measured (``verdict``): "learns" when the paired after - before success interval lies above 0,
the after interval lies above chance (``chance_hi``: the top of the random player's interval, or the best
constant answer's success where that is higher, see ``benchmarks.baselines.chance``; lines measured
without it are not held to it) and the curve reached its
plateau within the first half of the budget; "learns slowly" when both intervals lie so and the curve
plateaued in the second half, is still rising, or is still falling (held-out success rose while the
training curve is going down at the budget: not settled either); "does not learn" otherwise (no clear
change, fell, or at chance); "one seed" below two seeds; "k of n seeds so far" while a row's seeds are
still running (no verdict until every seed has run). Each row's verdict set before the run is
``Row.verdict`` (``rows.py``); the README's table shows both.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.baselines.chance import ROUNDING
from benchmarks.baselines.rows import VERDICTS
from benchmarks.bootstrap import bootstrap

RESULTS = Path(__file__).resolve().parents[1] / "results" / "baselines_trained"
# A table whose rows share names with another table's keeps its runs in a folder of its own
# (``plateau``: the same env x policy rows at other budgets; a finished ``envs`` run is not one of its runs).
TABLE_FOLDERS = {"plateau": "plateau", "mixture": "mixture", "mixture-check": "mixture-check"}


def results_dir(table: str) -> Path:
    """The default results folder of ``table``."""
    return RESULTS / TABLE_FOLDERS[table] if table in TABLE_FOLDERS else RESULTS


TABLE_COLUMNS = [
    "env_id", "framework", "estimator", "policy", "seeds", "steps", "success_before", "success_after",
    "after_lo", "after_hi", "return_before", "return_after", "wall_s", "plateau_step", "verdict", "mixture",
    "change", "chance", "chance_hi", "measured_on",
]  # fmt: skip
PLATEAU_MIN_STEPS = 6
HELD_OUT = "held-out episodes"  # ``measured_on`` of a line whose before / after are held-out evaluations
PLATEAU_MIN_TOLERANCE = 0.02
CURVE_KEYS = ("success_rate", "return")


def run_stem(results: Path, row_name: str, framework: str, estimator: str, seed: int) -> Path:
    """The run's files without their suffix (``.csv``, ``.json``, ``.log``)."""
    return results / "runs" / row_name / f"{framework}-{estimator}-seed{seed}"


def part_stem(stem: Path, part_name: str) -> Path:
    """A mixture run's files of one env (the part row ``part_name``): its curve ``<stem>--<part>.csv``."""
    return stem.with_name(f"{stem.name}--{part_name}")


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
        summaries += per_env_summaries(summary)
    return summaries


def per_env_summaries(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """A run's summary as the table reads it: as it is, or for a mixture run one per env (the module's
    docstring)."""
    per_env = summary.get("per_env")
    if not per_env:
        return [summary]
    return [
        {
            **{k: v for k, v in summary.items() if k != "per_env"},
            "env_id": env_id,
            "before": env["before"],
            "after": env["after"],
            "wall_s": summary["wall_s"] / len(per_env),
            "mixture": summary["_row"],
            "_stem": part_stem(Path(summary["_stem"]), env["row"]),
        }
        for env_id, env in per_env.items()
    ]


def run_change(summary: dict[str, Any]) -> str:
    """What the run's row changes on its base row ("" for a base row, or a run recorded before rows were)."""
    row = summary.get("row")
    return row.get("change", "") if isinstance(row, dict) else ""


def group_key(summary: dict[str, Any]) -> tuple[str, str, str, str, str, str]:
    """A line's key. The change matters where runs of one folder try different things: the arms of one
    cross-framework experiment (``frameworks.py``); a plateau row's change has a folder of its own."""
    return (
        summary["_row"],
        summary["env_id"],
        summary["framework"],
        summary["estimator"],
        summary["policy"],
        run_change(summary),
    )


def grouped(summaries: Iterable[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
    """Summaries by (row folder, env id, framework, estimator, policy, change), seeds in order."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for summary in summaries:
        groups.setdefault(group_key(summary), []).append(summary)
    return {key: sorted(runs, key=lambda s: s["seed"]) for key, runs in groups.items()}


def _smooth(values: Sequence[float], half: int) -> list[float]:
    n = len(values)
    return [statistics.fmean(values[max(0, i - half) : min(n, i + half + 1)]) for i in range(n)]


def _slope(values: Sequence[float]) -> float:
    """Least-squares slope of ``values`` against 0, 1, 2, ..."""
    n = len(values)
    x_mean, y_mean = (n - 1) / 2, statistics.fmean(values)
    num = sum((i - x_mean) * (v - y_mean) for i, v in enumerate(values))
    return num / sum((i - x_mean) ** 2 for i in range(n))


def plateau(values: Sequence[float], steps: Sequence[float] | None = None) -> dict[str, Any]:
    """The plateau of a success curve (mean over seeds per step), as the module's docstring defines it:
    ``{"step": step number | "still rising" | "still falling" | "", "index": 0-based index or None,
    "final": F, "tolerance": tol, "trend": the fitted change over the last steps}``."""
    values = [v for v in values if not math.isnan(v)]
    steps = list(steps) if steps is not None else list(range(1, len(values) + 1))
    n = len(values)
    if n < PLATEAU_MIN_STEPS:
        return {"step": "", "index": None, "final": math.nan, "tolerance": math.nan, "trend": math.nan}
    half = max(1, round(n / 12))
    window = 2 * half + 1
    smooth = _smooth(values, half)
    final = statistics.fmean(values[-window:])
    # one step's noise: the spread of y about the smoothed curve (which holds 1/window of each point)
    sigma = statistics.pstdev([v - s for v, s in zip(values, smooth)]) * math.sqrt(window / (window - 1))
    tolerance = max(
        PLATEAU_MIN_TOLERANCE, 0.1 * (max(smooth) - min(smooth)), 3 * math.sqrt(2) * sigma / math.sqrt(window)
    )
    index = n - 1
    while index > 0 and abs(smooth[index - 1] - final) <= tolerance:
        index -= 1
    tail = values[-max(window, math.ceil(n / 4)) :]
    trend = _slope(tail) * (len(tail) - 1)
    # the fitted change's standard error over the tail: a trend must also exceed twice it
    spread = math.sqrt(sum((i - (len(tail) - 1) / 2) ** 2 for i in range(len(tail))))
    threshold = max(tolerance, 2 * sigma * (len(tail) - 1) / spread)
    step: Any = int(steps[index]) if float(steps[index]).is_integer() else steps[index]
    if trend > threshold:
        step = "still rising"
    elif trend < -threshold:
        step = "still falling"
    return {"step": step, "index": index, "final": final, "tolerance": tolerance, "trend": trend}


def verdict(change_verdict: str, plateau_found: dict[str, Any], steps: int, above_chance: bool = True) -> str:
    """The measured verdict of a line from its paired change, whether its after interval lies above
    chance, and its plateau (the module's docstring)."""
    if change_verdict == "one seed":
        return "one seed"
    if change_verdict != "rose" or not above_chance:
        return "does not learn"
    index = plateau_found["index"]
    if plateau_found["step"] in ("still rising", "still falling") or (
        index is not None and index + 1 > steps / 2
    ):
        return "learns slowly"
    return "learns"


def line_curve(runs: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """The runs' combined curve (mean, min, max over seeds per step), from their ``.csv`` files."""
    stems = [Path(r["_stem"]) for r in runs if "_stem" in r]
    return combine_curves(seed_curves(stems))


def table_line(runs: Sequence[dict[str, Any]], chance: dict[str, float] | None = None) -> dict[str, Any]:
    """One ``table.csv`` line from the runs (seeds) of one env x framework x estimator x policy;
    ``chance``: the chance floor's ``{"chance", "chance_hi"}`` on its held-out tasks, if measured."""
    first = runs[0]
    chance = chance or {"chance": math.nan, "chance_hi": math.nan}
    curve = line_curve(runs)
    found = plateau([c["success_rate_mean"] for c in curve], [c["step"] for c in curve])
    after = [r["after"]["success_rate"] for r in runs]
    low, high = interval(after)
    above_chance = not low <= chance["chance_hi"] + ROUNDING  # NaN on either side: not held to chance
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
        "plateau_step": found["step"],
        "verdict": verdict(change(runs)["verdict"], found, len(curve), above_chance)
        if len(runs) >= len(first.get("row", {}).get("seeds", ()))
        else f"{len(runs)} of {len(first['row']['seeds'])} seeds so far",
        "mixture": first.get("mixture", ""),
        "change": run_change(first),
        **chance,
        "measured_on": first.get("measured_on", HELD_OUT),
    }


LEARNS = ("learns", "learns slowly")


def env_outcomes(lines: Sequence[dict[str, Any]], env_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Per env of ``env_ids``, from its finished single-env lines measured on held-out episodes
    (``table_line``s with every seed run; other lines are left out): ``lines`` (how many), ``rises`` (one
    line's after-RL interval lies above its before success: issue 58's measure), ``learns`` (one line's
    verdict is learns or learns slowly: its rise also clears chance) and ``best``, its line that learns,
    else rises, with the interval's low end furthest above its before (None without a line)."""
    outcomes = []
    for env_id in env_ids:
        finished = [
            line
            for line in lines
            if line["env_id"] == env_id
            and not line["mixture"]
            and line["measured_on"] == HELD_OUT
            and line["verdict"] in VERDICTS
        ]
        outcomes.append(
            {
                "env_id": env_id,
                "lines": len(finished),
                "rises": any(line["after_lo"] > line["success_before"] for line in finished),
                "learns": any(line["verdict"] in LEARNS for line in finished),
                "best": max(finished, key=_outcome, default=None),
            }
        )
    return outcomes


def _outcome(line: dict[str, Any]) -> tuple[bool, bool, float]:
    margin = line["after_lo"] - line["success_before"]
    return line["verdict"] in LEARNS, margin > 0, margin


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


def curve_file(stem: Path) -> Path:
    """A run's curve ``<stem>.csv`` (not ``with_suffix``: a stem may hold dots, "...-g0.9-seed0")."""
    return stem.with_name(f"{stem.name}.csv")


def seed_curves(run_paths: Sequence[Path]) -> list[list[dict[str, float]]]:
    paths = [curve_file(p) for p in run_paths]
    return [read_curve(p) for p in paths if p.exists()]


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

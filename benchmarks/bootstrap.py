"""The 95% interval the benchmarks give beside a mean over seeds."""

from __future__ import annotations

import random
import statistics


def bootstrap(values: list[float], rounds: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the mean, resampling the seeds."""
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]


def mean_with_interval(values: list[float], digits: int = 3) -> str:
    """``"mean [low, high]"`` over the non-NaN values; the interval only from 3 values on; ``"-"`` if none."""
    values = [v for v in values if v == v]
    if not values:
        return "-"
    text = f"{statistics.fmean(values):.{digits}f}"
    if len(values) >= 3:
        low, high = bootstrap(values)
        text += f" [{low:.{digits}f}, {high:.{digits}f}]"
    return text

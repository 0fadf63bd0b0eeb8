"""The 95% interval the benchmarks give beside a mean over seeds."""

from __future__ import annotations

import random
import statistics


def bootstrap(values: list[float], rounds: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the mean, resampling the seeds."""
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]

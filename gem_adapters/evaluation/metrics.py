"""The metrics of the episodes, per env and as a mean over envs (see ``gem_adapters.evaluation``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gem_adapters.episodes.episode import Episode
from gem_adapters.episodes.episode_stats import episode_stats


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of P(at least one of k samples succeeds) from c successes in n samples."""
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def token_counts(episode: Episode) -> tuple[int, int]:
    """(prompt tokens, completion tokens): each turn's full context, summed over turns; generated ids."""
    sequence = episode.to_sequence(include_closing=False)
    return sum(start for start, _ in sequence.turn_spans), episode.num_generated_tokens


def env_metrics(episodes: Sequence[Episode], k: int, uses_tokens: bool) -> dict[str, Any]:
    """The metrics of one env's episodes (see the module docstring); the per-episode summary is
    ``episode_stats``'s, under this report's names."""
    by_seed: dict[Any, list[Episode]] = {}
    for episode in episodes:
        by_seed.setdefault(episode.seed, []).append(episode)
    stats = episode_stats(episodes)
    metrics: dict[str, Any] = {
        "episodes": len(episodes),
        "seeds": len(by_seed),
        "success_rate": stats["success_rate"],
        f"pass@{k}": _mean(pass_at_k(len(g), sum(e.success for e in g), k) for g in by_seed.values()),
        f"avg@{k}": _mean(_mean(float(e.success) for e in g) for g in by_seed.values()),
        "mean_return": stats["return"],
        "std_return": _std([e.total_reward for e in episodes]),
        "mean_turns": stats["turns"],
        "format_error_rate": stats["format_error_rate"],
        "invalid_move_rate": stats["invalid_move_rate"],
        "stopped_by_limit": sum("stopped_by" in e.info for e in episodes),  # any limit, empty generations too
        "prompt_tokens": None,
        "completion_tokens": None,
    }
    if uses_tokens:
        metrics["prompt_tokens"] = _mean(token_counts(e)[0] for e in episodes)
        metrics["completion_tokens"] = stats["generated_tokens_per_episode"]
    return metrics


def compute_metrics(episodes: Sequence[Episode], k: int, uses_tokens: bool) -> dict[str, Any]:
    """``{"envs": {env_id: metrics}, "overall": the unweighted mean of each metric over envs}``."""
    by_env: dict[str, list[Episode]] = {}
    for episode in episodes:
        by_env.setdefault(str(episode.env_id), []).append(episode)
    envs = {env_id: env_metrics(group, k, uses_tokens) for env_id, group in by_env.items()}
    overall: dict[str, Any] = {}
    for key in next(iter(envs.values()), {}):
        values = [m[key] for m in envs.values()]
        if key in ("episodes", "seeds", "stopped_by_limit"):
            overall[key] = sum(values)
        else:
            overall[key] = None if any(v is None for v in values) else _mean(values)
    return {"envs": envs, "overall": overall}


def _mean(values: Any) -> float:
    values = list(values)
    return float(sum(values) / len(values)) if values else 0.0


def _std(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))

"""Why a row does (not) learn, measured on the batches RL starts from: the row's warmed-up policy plays
one training step's worth of episodes (``episodes_per_step``: groups of ``num_generations`` on the same
task, at temperature 1, as the trainer samples them), and ``diagnose`` reports what the estimator gets
to see: success, return, the share of turns with any reward, the share of groups whose returns differ
(no difference: GRPO's advantages are all 0), turns cut by the token budget, invalid moves, format errors,
context stops, plus an env's own check where one is written (``ENV_CHECKS``).

    python -m benchmarks.baselines diagnose plateau game_GuessTheNumber-v1-easy--small [--seed 0]

writes ``<table's results>/diagnoses/<row>-seed<seed>.json``. The runs' curves (``train_run.CURVE_COLUMNS``)
carry the same statistics for every step of RL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.baselines.rows import Row
from gem_adapters.episodes.episode import Episode

DIAGNOSIS_FIRST_SEED = 50_000  # task seeds of the diagnosis, apart from training's and evaluation's


def guesses_against_hints(episodes: Sequence[Episode]) -> float:
    """GuessTheNumber: the share of its in-range new guesses outside the range that the earlier hints still
    allow (the env's ``info["consistent_with_hints"]``). The scripted legal player of the warm-up makes
    none."""
    judged = [
        t.info["consistent_with_hints"]
        for e in episodes
        for t in e.turns
        if "consistent_with_hints" in t.info
    ]
    return sum(not consistent for consistent in judged) / len(judged) if judged else 0.0


_SUM_QUESTION = re.compile(r"Calculate (-?\d+) \+ (-?\d+)\.")
_SUM_ANSWER = re.compile(r"<answer>\s*(-?\d{1,4})\s*</answer>")


def sum_answer_error(episodes: Sequence[Episode]) -> float:
    """rg:sum-learn: the mean distance of the answers given (in the tags) from a + b. A policy that adds
    has 0; one answering uniformly from -18 to 18, 10.9 (terms from -9 to 9)."""
    errors = []
    for turn in (t for e in episodes for t in e.turns):
        question, answer = _SUM_QUESTION.search(str(turn.observation)), _SUM_ANSWER.search(turn.action)
        if question and answer:
            errors.append(abs(int(answer[1]) - int(question[1]) - int(question[2])))
    return sum(errors) / len(errors) if errors else float("nan")


# env id prefix -> (statistic name, function of the batch's episodes)
ENV_CHECKS: dict[str, tuple[str, Callable[[Sequence[Episode]], float]]] = {
    "game:GuessTheNumber": ("guesses_against_hints", guesses_against_hints),
    "rg:sum-learn": ("answer_error", sum_answer_error),
}


def play_training_batch(row: Row, seed: int) -> list[Episode]:
    """One step's episodes of ``row`` played by its warmed-up policy: ``episodes_per_step // num_generations``
    tasks, each ``num_generations`` times, sampled at temperature 1."""
    from benchmarks.baselines.train_run import load_policy, register_tool_envs
    from gem_adapters.policies.base import SamplingParams
    from gem_adapters.policies.transformers_policy import TransformersPolicy
    from gem_adapters.runtime import precision
    from gem_adapters.runtime.rollout import rollout
    from gem_adapters.runtime.rollout_limits import RolloutLimits

    if row.parts or row.policy == "tiny-llava":
        raise SystemExit(f"{row.name}: diagnose plays single-env text rows only")
    register_tool_envs()
    model, tokenizer, renderer, _ = load_policy(row, seed, smoke=False)
    tasks = row.episodes_per_step // row.num_generations
    seeds = [DIAGNOSIS_FIRST_SEED + t for t in range(tasks) for _ in range(row.num_generations)]
    # as the row's trainer generates: SmolLM2 in bf16 where the CPU computes it natively (train_run.train)
    bf16 = row.policy == "smollm2" and precision.native_bf16()
    policy = TransformersPolicy(model, tokenizer, seed=seed, bf16=bf16)
    return rollout(
        [row.env_id] * len(seeds),
        policy,
        renderer,
        seeds=seeds,
        limits=RolloutLimits(row.max_turns, row.max_turn_tokens, row.max_context_tokens),
        sampling=SamplingParams(max_new_tokens=row.max_turn_tokens, temperature=1.0),
    )


def diagnosis(row: Row, episodes: Sequence[Episode]) -> dict[str, Any]:
    from gem_adapters.episodes.episode_stats import episode_stats

    stats = episode_stats(episodes)
    for prefix, (name, check) in ENV_CHECKS.items():
        if row.env_id.startswith(prefix):
            stats[name] = check(episodes)
    return stats


def diagnose(row: Row, seed: int, results_dir: Path) -> Path:
    episodes = play_training_batch(row, seed)
    out = results_dir / "diagnoses" / f"{row.name}-seed{seed}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    example = [
        {"observation": str(t.observation)[-200:], "action": t.action, "reward": t.reward}
        for t in episodes[0].turns
    ]
    record = {
        "row": row.name,
        "seed": seed,
        "policy": f"{row.policy}, warmed up ({row.small_task or row.warmup_player})",
        "episodes": len(episodes),
        "tasks": row.episodes_per_step // row.num_generations,
        "first_task_seed": DIAGNOSIS_FIRST_SEED,
        "stats": diagnosis(row, episodes),
        "first_episode": example,
    }
    out.write_text(json.dumps(record, indent=1) + "\n")
    return out


DIAGNOSIS_COLUMNS = {  # README column -> stats key
    "success": "success_rate",
    "return": "return",
    "groups with a signal": "groups_with_signal",
    "turns rewarded": "rewarded_turn_rate",
    "invalid moves": "invalid_move_rate",
    "format errors": "format_error_rate",
    "turns cut by the token budget": "length_cut_rate",
}


def diagnoses_markdown(results_dir: Path) -> str:
    """The README's table of every diagnosis under ``results_dir/diagnoses`` (one line per row and seed)."""
    records = [json.loads(p.read_text()) for p in sorted((results_dir / "diagnoses").glob("*.json"))]
    lines = [
        "| row | policy (seed) | episodes (tasks) | "
        + " | ".join(DIAGNOSIS_COLUMNS)
        + " | the env's own check |",
        "|---|---|---|" + "---|" * len(DIAGNOSIS_COLUMNS) + "---|",
    ]
    for record in records:
        stats = record["stats"]
        own = {k: v for k, v in stats.items() if k in {name for name, _ in ENV_CHECKS.values()}}
        cells = " | ".join(f"{stats[key]:.2f}" for key in DIAGNOSIS_COLUMNS.values())
        checks = ", ".join(f"{k} {v:.2f}" for k, v in own.items()) or "–"
        lines.append(
            f"| {record['row']} | {record['policy']} ({record['seed']}) | {record['episodes']} ({record['tasks']}) | "
            f"{cells} | {checks} |"
        )
    return "\n".join(lines)

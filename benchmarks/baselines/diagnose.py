"""Why a row does (not) learn, measured on the batches RL starts from: the row's warmed-up policy plays
one training step's worth of episodes (``episodes_per_step``: groups of ``num_generations`` on the same
task, at temperature 1, as the trainer samples them), and ``diagnose`` reports what the estimator gets
to see: success, return, the share of turns with any reward, the share of groups whose returns differ
(no difference: GRPO's advantages are all 0), turns cut by the token budget, invalid moves, format errors,
context stops, plus an env's own check where one is written (``ENV_CHECKS``).

    python -m benchmarks.baselines diagnose plateau game_GuessTheNumber-v1-easy--small [--seed 0]

writes ``<table's results>/diagnoses/<row>-seed<seed>.json``. The runs' curves (``train_run.CURVE_COLUMNS``)
carry the same statistics for every step of RL. What a game rejected the trained policy's moves for
(``rejected_moves``), from the runs' held-out episodes, before and after RL:

    python -m benchmarks.baselines rejected plateau game_Sudoku-v1-easy--smollm2

and how a web shop's held-out episodes end (``purchases``): purchases with and without an option chosen,
their scores and turns, and the score discounted to the episode's first turn:

    python -m benchmarks.baselines purchases plateau web_Shop-v0--smollm2--warmup-64
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

from benchmarks.baselines.players import letter_question
from benchmarks.baselines.rows import Row
from gem_adapters.episodes.episode import Episode

DIAGNOSIS_FIRST_SEED = 50_000  # task seeds of the diagnosis, apart from training's and evaluation's
_QUOTED = re.compile(r"(['\"])[^'\"\n]*\1")  # a quoted word or move
_NUMBER = re.compile(r"\d+")
FORMAT_ERROR = "format error: no move in the reply"


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
_TAGGED_NUMBER = re.compile(r"<answer>\s*(-?\d{1,4})\s*</answer>")


def _sum_of(question: str) -> int | None:
    """rg:sum-learn's right answer, a + b, read from its question."""
    match = _SUM_QUESTION.search(question)
    return int(match[1]) + int(match[2]) if match else None


def _letter_count_of(question: str) -> int | None:
    """rg:letter_counting's right answer, the letter's count in the text, read from its question (as the
    env grades: case-insensitive)."""
    parsed = letter_question(question)
    return parsed[1].lower().count(parsed[0]) if parsed else None


def _numbers_answered(episodes: Sequence[Episode]) -> list[tuple[str, int]]:
    """Each turn's question and the number it answered in the tags (turns with no such number left out)."""
    answered = ((str(t.observation), _TAGGED_NUMBER.search(t.action)) for e in episodes for t in e.turns)
    return [(question, int(answer[1])) for question, answer in answered if answer]


def answer_error(right: Callable[[str], int | None]) -> Callable[[Sequence[Episode]], float]:
    """The mean distance of the numbers answered (in the tags) from ``right(question)``; nan when none is
    judged."""

    def error(episodes: Sequence[Episode]) -> float:
        errors = [abs(a - r) for q, a in _numbers_answered(episodes) if (r := right(q)) is not None]
        return sum(errors) / len(errors) if errors else float("nan")

    return error


# rg:sum-learn: a policy that adds has 0; one answering uniformly from -18 to 18, 10.9 (terms -9 to 9).
sum_answer_error = answer_error(_sum_of)
# rg:letter_counting: counts run 1-12 (held out: 8 of 24 texts hold the letter once); "2" always: 1.5.
letter_count_error = answer_error(_letter_count_of)


def same_answer_share(episodes: Sequence[Episode]) -> float:
    """The share of the numbers answered that are the most frequent one: 1.0 for a policy that answers
    the same whatever the question; nan when none is answered."""
    answers = Counter(a for _, a in _numbers_answered(episodes))
    return max(answers.values()) / answers.total() if answers else float("nan")


# env id prefix -> {statistic name: function of the batch's episodes}
ENV_CHECKS: dict[str, dict[str, Callable[[Sequence[Episode]], float]]] = {
    "game:GuessTheNumber": {"guesses_against_hints": guesses_against_hints},
    "rg:sum-learn": {"answer_error": sum_answer_error},
    "rg:letter_counting": {"answer_error": letter_count_error, "same_answer": same_answer_share},
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
        env_kwargs=dict(row.env_kwargs),
    )


def diagnosis(row: Row, episodes: Sequence[Episode]) -> dict[str, Any]:
    from gem_adapters.episodes.episode_stats import episode_stats

    stats = episode_stats(episodes)
    for prefix, checks in ENV_CHECKS.items():
        if row.env_id.startswith(prefix):
            stats.update({name: check(episodes) for name, check in checks.items()})
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
        own = {k: v for k, v in stats.items() if any(k in checks for checks in ENV_CHECKS.values())}
        cells = " | ".join(f"{stats[key]:.2f}" for key in DIAGNOSIS_COLUMNS.values())
        checks = ", ".join(f"{k} {v:.2f}" for k, v in own.items()) or "–"
        lines.append(
            f"| {record['row']} | {record['policy']} ({record['seed']}) | {record['episodes']} ({record['tasks']}) | "
            f"{cells} | {checks} |"
        )
    return "\n".join(lines)


def _replayed(
    heldout_files: Sequence[Path], before_move: Callable[[Any, str], Any] = lambda env, action: None
) -> Iterator[tuple[dict[str, Any], list[tuple[Any, str, dict[str, Any]]], bool]]:
    """Each held-out episode of runs (``<run>.heldout.jsonl``: seed and actions) replayed in its env:
    ``(line, moves, replayed)``, a move ``(before_move(env, action) ahead of it, observation, info)``, and
    ``replayed``: its return is the recorded one (an env whose observations depend on more than its seed
    and the actions, an LLM-played user or a tool's clock, does not replay)."""
    import gem_core

    for path in heldout_files:
        for line in map(json.loads, path.read_text().splitlines()):
            moves, total = [], 0.0
            with gem_core.make(line["env_id"]) as env:
                env.reset(seed=line["seed"])
                for action in line["actions"]:
                    seen = before_move(env.unwrapped, action)
                    observation, reward, terminated, truncated, info = env.step(action)
                    total += reward
                    moves.append((seen, str(observation), info))
                    if terminated or truncated:
                        break
            yield line, moves, abs(total - line["return"]) < 1e-6


def rejected_moves(heldout_files: Sequence[Path]) -> dict[str, Any]:
    """Counts, per phase (before / after RL), the replayed held-out moves and the reasons the env gave for
    those it rejected (``info["invalid_move"]``): its observation's first line without "Invalid move.",
    quoted text and numbers masked ("Row #, column # already holds #."), or ``FORMAT_ERROR``
    (``info["format_error"]``: no move read at all). ``replayed`` of ``episodes``: see ``_replayed``."""
    counts: dict[str, Any] = {}
    for line, moves, replayed in _replayed(heldout_files):
        phase = counts.setdefault(
            line["phase"], {"moves": 0, "episodes": 0, "replayed": 0, "rejected": Counter()}
        )
        for _, observation, info in moves:
            phase["moves"] += 1
            if info.get("invalid_move"):
                first = observation.splitlines()[0].removeprefix("Invalid move.").strip()
                phase["rejected"][_NUMBER.sub("#", _QUOTED.sub("'…'", first))] += 1
            elif info.get("format_error"):
                phase["rejected"][FORMAT_ERROR] += 1
        phase["episodes"] += 1
        phase["replayed"] += replayed
    return counts


def rejected_markdown(counts: dict[str, Any]) -> str:
    """``rejected_moves`` as a table: one line per reason, its share of the moves before and after RL."""
    phases = [p for p in ("before", "after") if p in counts]
    reasons = Counter()
    for p in phases:
        reasons.update(counts[p]["rejected"])
    lines = [
        "| the env's reason | "
        + " | ".join(f"{p} RL: share of {counts[p]['moves']} moves" for p in phases)
        + " |",
        "|---|" + "---|" * len(phases),
    ]
    for reason, _ in reasons.most_common():
        shares = [f"{counts[p]['rejected'][reason] / max(counts[p]['moves'], 1):.2f}" for p in phases]
        lines.append(f"| {reason} | " + " | ".join(shares) + " |")
    replayed = ", ".join(f"{p}: {counts[p]['replayed']} of {counts[p]['episodes']}" for p in phases)
    return "\n".join(lines) + f"\n\nEpisodes whose replay gave the recorded return: {replayed}."


def _option_click(env: Any, action: str) -> bool:
    """Whether ``action`` chooses an option of the item page ``env`` (a ``web:Shop`` env) shows."""
    from gem_core.envs.web.catalog import products_by_asin
    from gem_core.envs.web.shop import parse_action

    parsed = parse_action(action)
    return (
        env.page == "item"
        and parsed is not None
        and parsed[0] == "click"
        and parsed[1] in products_by_asin()[env.asin].option_values
    )


def purchases(heldout_files: Sequence[Path], gamma: float) -> dict[str, Any]:
    """How a web shop's held-out episodes (``web:Shop-*``) end, per phase (before / after RL), replayed:
    episodes, wins, option clicks (an option of the item page chosen) and the purchases (``buy now``) with
    and without one, each with its count, wins, mean score, turns and the score discounted to the
    episode's first turn (score x gamma^(turns - 1): what the discounted return gives the turns that chose
    the search and the listing)."""
    counts: dict[str, Any] = {}
    for line, moves, replayed in _replayed(heldout_files, _option_click):
        phase = counts.setdefault(line["phase"], {"episodes": 0, "replayed": 0, "won": 0, "option_clicks": 0})
        clicks = sum(seen for seen, _, _ in moves)
        phase["episodes"] += 1
        phase["replayed"] += replayed
        phase["option_clicks"] += clicks
        final = moves[-1][2] if moves else {}
        phase["won"] += bool(final.get("success"))
        if "score" in final:  # bought
            group = phase.setdefault("with options" if clicks else "without options", [])
            group.append((final["score"], len(moves), bool(final.get("success"))))
    for phase in counts.values():
        for name in ("with options", "without options"):
            bought = phase.pop(name, [])
            phase[name] = {
                "purchases": len(bought),
                "won": sum(won for _, _, won in bought),
                "score": mean(score for score, _, _ in bought) if bought else None,
                "turns": mean(turns for _, turns, _ in bought) if bought else None,
                "first_turn_return": (
                    mean(score * gamma ** (turns - 1) for score, turns, _ in bought) if bought else None
                ),
            }
    return counts


def purchases_markdown(counts: dict[str, Any], gamma: float) -> str:
    """``purchases`` as a table: one line per phase and kind of purchase."""
    lines = [
        f"| phase | episodes (won) | option clicks | purchases | won | score | turns | score x {gamma}^(turns-1) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for phase in (p for p in ("before", "after") if p in counts):
        c = counts[phase]
        for name in ("with options", "without options"):
            g = c[name]
            numbers = [
                f"{g[k]:.2f}" if g[k] is not None else "–" for k in ("score", "turns", "first_turn_return")
            ]
            lines.append(
                f"| {phase} RL | {c['episodes']} ({c['won']}) | {c['option_clicks']} | {g['purchases']} {name} | "
                f"{g['won']} | " + " | ".join(numbers) + " |"
            )
    replayed = ", ".join(f"{p}: {c['replayed']} of {c['episodes']}" for p, c in counts.items())
    return "\n".join(lines) + f"\n\nEpisodes whose replay gave the recorded return: {replayed}."

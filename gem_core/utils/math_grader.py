"""The reference gem's ``gem.utils.math_grader`` entry points, graded as gem_core's math envs grade: math-verify
in a worker process under a deadline (``gem_core.envs.math.grade_answer``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gem_core.envs.math import grade_answer
from gem_core.parsing import extract_boxed


def extract_answer(passage: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``passage``."""
    return extract_boxed(passage)


def grade(model_answer: str, gt_answer: str, fast: bool = True) -> bool:
    """Whether ``model_answer`` is equivalent to ``gt_answer`` (itself possibly a ``\\boxed{}`` solution)."""
    if "\\boxed" in gt_answer:
        gt_answer = extract_answer(gt_answer) or gt_answer
    return grade_answer(model_answer, [gt_answer])[0]


def boxed_reward_fn(
    model_response: str,
    gt_answer: str | float | Sequence[str],
    fast: bool = False,
    correct_reward: float = 1.0,
    incorrect_reward: float = 0.0,
) -> tuple[dict[str, Any], float]:
    """``({"formatted": ...}, reward)`` for the last ``\\boxed{}`` answer of ``model_response``."""
    model_answer = extract_answer(model_response)
    if model_answer is None:
        return {"formatted": False}, incorrect_reward
    golds = [str(gt_answer)] if isinstance(gt_answer, (str, int, float)) else [str(g) for g in gt_answer]
    correct = any(grade(model_answer, gold, fast) for gold in golds)
    return {"formatted": True}, correct_reward if correct else incorrect_reward

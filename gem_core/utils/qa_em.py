"""The reference gem's ``gem.utils.qa_em``: SQuAD answer normalisation and exact match (``gem_core.envs.qa``)."""

from __future__ import annotations

from collections.abc import Sequence

from gem_core.envs.qa import exact_match, normalize_answer

__all__ = ["em_check", "normalize_answer"]


def em_check(prediction: str, golden_answers: str | Sequence[str]) -> bool:
    """Whether ``prediction`` equals one of ``golden_answers`` after normalisation."""
    if isinstance(golden_answers, str):
        golden_answers = [golden_answers]
    return exact_match(prediction, list(golden_answers))

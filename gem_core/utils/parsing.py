"""The reference gem's ``gem.utils.parsing``, on gem_core's linear-time parsers (``gem_core.parsing``)."""

from __future__ import annotations

from gem_core.parsing import extract_boxed, extract_last_code_block, extract_tag


def extract_last_boxed_answer(solution: str) -> str | None:
    """The content of the last ``\\boxed{...}``; None if there is none."""
    return extract_boxed(solution)


def extract_code_from_model(model_response: str) -> str | None:
    """The last fenced code block, stripped; None if there is none."""
    code = extract_last_code_block(model_response)
    return None if code is None else code.strip()


def extract_last_tagged_answer(model_response: str) -> str | None:
    """The content of the last ``<answer>...</answer>``, stripped; None if there is none."""
    return extract_tag(model_response, "answer")

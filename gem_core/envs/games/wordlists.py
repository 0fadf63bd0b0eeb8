"""The word lists and crossword clues that ship in ``gem_core/data/words`` (see its README).

Each list is read once per process and shared by every env (envs never store them as attributes, so
``get_state()`` stays cheap).
"""

from __future__ import annotations

from functools import cache
from importlib import resources


def _read(name: str) -> str:
    return resources.files("gem_core").joinpath("data", "words", name).read_text(encoding="utf-8")


@cache
def words(kind: str, length: int) -> tuple[str, ...]:
    """The sorted ``kind`` ("answers" or "allowed") words of ``length`` letters, e.g. ``words("answers", 5)``."""
    return tuple(sorted({w.strip() for w in _read(f"{kind}_{length}.txt").split() if w.strip()}))


@cache
def word_set(kind: str, length: int) -> frozenset[str]:
    return frozenset(words(kind, length))


@cache
def clues() -> dict[str, str]:
    """Crossword answers mapped to their clues."""
    pairs = (line.split("\t", 1) for line in _read("clues.tsv").splitlines() if "\t" in line)
    return {word.strip(): clue.strip() for word, clue in pairs}

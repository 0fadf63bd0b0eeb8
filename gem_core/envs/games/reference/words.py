"""The word lists of the reference GEM games (``gem_core/data/words/reference``, see its README)."""

from __future__ import annotations

import gzip
import json
from functools import cache
from importlib import resources
from typing import Any


def _data(name: str) -> bytes:
    return resources.files("gem_core").joinpath("data", "words", "reference", name).read_bytes()


@cache
def nltk_words(fileid: str) -> tuple[str, ...]:
    """NLTK's ``words.words(fileid)`` for ``"en-basic"`` or ``"en"``: one entry per non-blank line, in order."""
    raw = _data(f"{fileid}.gz" if fileid == "en" else fileid)
    text = (gzip.decompress(raw) if fileid == "en" else raw).decode("utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip())


@cache
def nltk_words_of_length(fileid: str, length: int) -> tuple[str, ...]:
    """The lowercase alphabetic words of ``length`` letters, in list order (how Wordle and Hangman filter)."""
    return tuple(w for w in nltk_words(fileid) if len(w) == length and w.isalpha() and w.islower())


@cache
def crossword_words(hardcore: bool) -> tuple[dict[str, Any], ...]:
    """The Crosswords records (``word``, ``hardcore``, ``clues``) of one level, in file order."""
    records = (
        json.loads(line) for line in _data("words_clues.jsonl").decode("utf-8").splitlines() if line.strip()
    )
    return tuple(r for r in records if r["hardcore"] == hardcore)

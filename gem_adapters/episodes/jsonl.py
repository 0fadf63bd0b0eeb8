"""Record and replay: episodes as JSONL, one per line (texts, ids, logprobs, rewards, info, env id,
seed; image observations as base64 PNG). ``gem_adapters.episodes.episode.rescore`` replaces the rewards of
episodes read back."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from gem_adapters.episodes.episode import Episode


def write_jsonl(path: str | Path, episodes: Iterable[Episode], append: bool = False) -> int:
    """Write one episode per line; returns how many. Info values JSON cannot hold are stored as strings."""
    count = 0
    with open(path, "a" if append else "w", encoding="utf-8") as f:
        for episode in episodes:
            f.write(json.dumps(episode.to_dict(), default=_jsonable, ensure_ascii=False) + "\n")
            count += 1
    return count


def iter_jsonl(path: str | Path) -> Iterator[Episode]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield Episode.from_dict(json.loads(line))


def read_jsonl(path: str | Path) -> list[Episode]:
    return list(iter_jsonl(path))


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)

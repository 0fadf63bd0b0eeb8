"""The ``-v1`` ids of a game: each game module calls ``register_game`` once, with its settings.

``register_game("Wordle", WordleEnv, {"easy": {...}, "hard": {...}})`` registers ``game:Wordle-v1``
(the hard settings), ``game:Wordle-v1-<variant>`` for each variant, and ``game:Wordle-v1-random``,
which draws easy or hard per episode (``RandomDifficulty``). ``aliases`` are other spellings of the
name, registered with the same ids (the reference GEM spells Tower of Hanoi ``TowerofHanoi``).
"""

from __future__ import annotations

from typing import Any

from gem_core.core import Env
from gem_core.registry import register

# other spelling -> the game's name
ALIASES: dict[str, str] = {}


def register_game(
    name: str,
    cls: type[Env],
    variants: dict[str, dict[str, Any]],
    *,
    aliases: tuple[str, ...] = (),
) -> None:
    """Register the ids of the game ``name`` played by ``cls``; ``variants`` maps each variant
    (``easy`` and ``hard`` at least) to its constructor kwargs."""
    missing = {"easy", "hard"} - set(variants)
    if missing:
        raise ValueError(f"{name} needs the variants easy and hard; missing {sorted(missing)}")
    entry_point = f"{cls.__module__}:{cls.__qualname__}"
    for alias in aliases:
        ALIASES[alias] = name
    for spelling in (name, *aliases):
        register(
            f"game:{spelling}-v1",
            entry_point,
            description=f"{name} (gem_core design, hard)",
            **variants["hard"],
        )
        for variant, kwargs in variants.items():
            register(
                f"game:{spelling}-v1-{variant}",
                entry_point,
                description=f"{name}, {variant} (gem_core design)",
                **kwargs,
            )
        register(
            f"game:{spelling}-v1-random",
            "gem_core.envs.games.difficulty:RandomDifficulty",
            description=f"{name}, easy or hard drawn per episode (gem_core design)",
            game=entry_point,
            variants={v: variants[v] for v in ("easy", "hard")},
        )

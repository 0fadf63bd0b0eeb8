"""The reference GEM's game ids and their settings, as ``gem-llm`` 0.1.0 registers them.

``REFERENCE_GAMES`` maps each id to ``(module, class, constructor kwargs)``; ``register_reference_games``
registers them all, and ``game:<Name>-v0`` (not an id of the reference) as the hard one. Settings passed as ``None`` make the game draw them at each reset (the ``-random``
ids). Two registrations differ in form, not in effect: the reference registers Sokoban's ``-random``
with ``room_size=None``, a keyword its env ignores (so the room size is drawn with the box count), and
here that keyword is left out.
"""

from __future__ import annotations

from typing import Any

from gem_core.registry import register

_VARIANTS: dict[str, tuple[str, str, dict[str, dict[str, Any]]]] = {
    "GuessTheNumber": (
        "guess_the_number",
        "GuessTheNumberEnv",
        {
            "easy": {"min_number": 1, "max_number": 10, "max_turns": 4},
            "hard": {"min_number": 1, "max_number": 50, "max_turns": 7},
            "random": {"min_number": None, "max_number": None, "max_turns": None},
        },
    ),
    "Mastermind": (
        "mastermind",
        "MastermindEnv",
        {
            "easy": {"code_length": 2, "num_numbers": 6, "max_turns": 10, "duplicate_numbers": False},
            "hard": {"code_length": 4, "num_numbers": 8, "max_turns": 30, "duplicate_numbers": False},
            "random": {
                "code_length": None,
                "num_numbers": None,
                "max_turns": None,
                "duplicate_numbers": False,
            },
        },
    ),
    "Minesweeper": (
        "minesweeper",
        "MinesweeperEnv",
        {
            "easy": {"rows": 5, "cols": 5, "num_mines": 5, "max_turns": 25},
            "hard": {"rows": 8, "cols": 8, "num_mines": 12, "max_turns": 64},
            "random": {"rows": None, "cols": None, "num_mines": None, "max_turns": None},
        },
    ),
    "Wordle": (
        "wordle",
        "WordleEnv",
        {
            "easy": {"word_length": 3, "only_real_words": True, "max_turns": 15},
            "hard": {"word_length": 5, "only_real_words": True, "max_turns": 25},
            "random": {"word_length": None, "only_real_words": True, "max_turns": None},
        },
    ),
    "FifteenPuzzle": (
        "fifteen_puzzle",
        "FifteenPuzzleEnv",
        {
            "easy": {"num_rows": 2, "max_turns": 10},
            "hard": {"num_rows": 4, "max_turns": 50},
            "random": {"num_rows": None, "max_turns": None},
        },
    ),
    "Hangman": (
        "hangman",
        "HangmanEnv",
        {
            "easy": {"word_length": 3, "hardcore": False, "max_turns": 10},
            "hard": {"word_length": 7, "hardcore": False, "max_turns": 20},
            "random": {"word_length": None, "hardcore": False, "max_turns": None},
        },
    ),
    "Sudoku": (
        "sudoku",
        "SudokuEnv",
        {
            "easy": {"clues": 10, "max_turns": 15, "scale": 4},
            "hard": {"clues": 50, "max_turns": 50, "scale": 9},
            "random": {"clues": None, "max_turns": None, "scale": None},
        },
    ),
    "TowerofHanoi": (
        "tower_of_hanoi",
        "TowerofHanoiEnv",
        {
            "easy": {"num_disks": 3, "max_turns": 10},
            "hard": {"num_disks": 5, "max_turns": 35},
            "random": {"num_disks": None, "max_turns": None},
        },
    ),
    "Game2048": (
        "game2048",
        "Game2048Env",
        {
            "easy": {"target_tile": 64, "max_turns": 50},
            "hard": {"target_tile": 512, "max_turns": 50},
            "extreme-hard": {"target_tile": 2048, "max_turns": 100},
            "random": {"target_tile": None, "max_turns": None},
        },
    ),
    "Sokoban": (
        "sokoban",
        "SokobanEnv",
        {
            "easy": {"dim_room": (6, 6), "num_boxes": 2, "max_turns": 20},
            "hard": {"dim_room": (8, 8), "num_boxes": 4, "max_turns": 50},
            "random": {"num_boxes": None, "max_turns": None},
        },
    ),
    "Crosswords": (
        "crosswords",
        "CrosswordsEnv",
        {
            "easy": {"hardcore": False, "max_turns": 30, "num_words": 3},
            "hard": {"hardcore": True, "max_turns": 40, "num_words": 3},
            "random": {"hardcore": None, "max_turns": None, "num_words": None},
        },
    ),
    "WordSearch": (
        "word_search",
        "WordSearchEnv",
        {
            "easy": {"num_words": 5, "max_turns": 20, "hardcore": False},
            "hard": {"num_words": 5, "max_turns": 20, "hardcore": True},
            "random": {"num_words": None, "max_turns": None, "hardcore": None},
        },
    ),
}

REFERENCE_GAMES: dict[str, tuple[str, str, dict[str, Any]]] = {
    f"game:{name}-v0-{variant}": (f"gem_core.envs.games.reference.{module}", cls, kwargs)
    for name, (module, cls, variants) in _VARIANTS.items()
    for variant, kwargs in variants.items()
}


# The reference spells it "TowerofHanoi"; gem_core's spelling names the same games.
SPELLINGS = {"TowerofHanoi": "TowerOfHanoi"}


def register_reference_games() -> None:
    """Register every id of ``REFERENCE_GAMES``, ``game:<Name>-v0`` for the hard one, and each under
    gem_core's spelling too."""
    for env_id, (module, cls, kwargs) in REFERENCE_GAMES.items():
        name, variant = env_id[len("game:") :].split("-v0-")
        for spelling in (name, SPELLINGS.get(name)):
            if spelling is None:
                continue
            description = f"{name}, {variant}, as the reference GEM plays it"
            for alias in [f"game:{spelling}-v0-{variant}"] + (
                [f"game:{spelling}-v0"] if variant == "hard" else []
            ):
                register(alias, f"{module}:{cls}", description=description, **kwargs)

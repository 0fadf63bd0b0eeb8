"""The 12 multi-turn language games, in two versions.

* ``game:<Name>-v0-easy|-hard|-random`` (and ``game:Game2048-v0-extreme-hard``) are the reference GEM's
  ids (``gem-llm`` 0.1.0) and make the reference's games, rule for rule
  (``gem_core.envs.games.reference``): its texts, 0-based coordinates, rewards, word lists, and a
  format error that ends the episode. ``game:<Name>-v0`` is the hard one. Use them to reproduce GEM's
  baselines or to move GEM code and agents over unchanged.
* ``game:<Name>-v1[-easy|-hard|-random]`` are this package's design of the same games, with the same
  settings: rewards shaped the same way in every game (a penalty for format errors and illegal moves,
  which do not end the episode; progress rewards; partial credit when the turns run out), strict word
  checks, 1-based coordinates, turn counts in every observation and scripted solvers. ``-v1`` alone is
  the hard one; ``-v1-random`` draws easy or hard per episode. Each game's module docstring has its
  reward table.

Both spellings of Tower of Hanoi are registered in both versions (the reference spells it
``TowerofHanoi``).
"""

from __future__ import annotations

from gem_core.envs.games.reference.ids import register_reference_games
from gem_core.registry import register

# name -> (module, class, {variant: constructor kwargs})
GAMES: dict[str, tuple[str, str, dict[str, dict]]] = {
    "GuessTheNumber": (
        "guess_the_number",
        "GuessTheNumberEnv",
        {
            "easy": {"min_number": 1, "max_number": 10, "max_turns": 4},
            "hard": {"min_number": 1, "max_number": 50, "max_turns": 7},
        },
    ),
    "Mastermind": (
        "mastermind",
        "MastermindEnv",
        {
            "easy": {"code_length": 2, "num_symbols": 6, "max_turns": 10},
            "hard": {"code_length": 4, "num_symbols": 8, "max_turns": 30},
        },
    ),
    "Minesweeper": (
        "minesweeper",
        "MinesweeperEnv",
        {
            "easy": {"rows": 5, "cols": 5, "num_mines": 5, "max_turns": 25},
            "hard": {"rows": 8, "cols": 8, "num_mines": 12, "max_turns": 64},
        },
    ),
    "Wordle": (
        "wordle",
        "WordleEnv",
        {"easy": {"word_length": 3, "max_turns": 15}, "hard": {"word_length": 5, "max_turns": 25}},
    ),
    "Hangman": (
        "hangman",
        "HangmanEnv",
        {"easy": {"word_length": 3, "max_turns": 10}, "hard": {"word_length": 7, "max_turns": 20}},
    ),
    "Sudoku": (
        "sudoku",
        "SudokuEnv",
        {
            "easy": {"size": 4, "clues": 10, "max_turns": 15},
            "hard": {"size": 9, "clues": 50, "max_turns": 50},
        },
    ),
    "TowerOfHanoi": (
        "tower_of_hanoi",
        "TowerOfHanoiEnv",
        {"easy": {"num_disks": 3, "max_turns": 10}, "hard": {"num_disks": 5, "max_turns": 35}},
    ),
    "Game2048": (
        "game2048",
        "Game2048Env",
        {
            "easy": {"target_tile": 64, "max_turns": 50},
            "hard": {"target_tile": 512, "max_turns": 50},
            "extreme-hard": {"target_tile": 2048, "max_turns": 100},
        },
    ),
    "FifteenPuzzle": (
        "fifteen_puzzle",
        "FifteenPuzzleEnv",
        {"easy": {"size": 2, "max_turns": 10}, "hard": {"size": 4, "max_turns": 50}},
    ),
    "Sokoban": (
        "sokoban",
        "SokobanEnv",
        {
            "easy": {"rows": 6, "cols": 6, "num_boxes": 2, "max_turns": 20},
            "hard": {"rows": 8, "cols": 8, "num_boxes": 4, "max_turns": 50},
        },
    ),
    "Crosswords": (
        "crosswords",
        "CrosswordsEnv",
        {
            "easy": {"num_words": 3, "hardcore": False, "max_turns": 30},
            "hard": {"num_words": 3, "hardcore": True, "max_turns": 40},
        },
    ),
    "WordSearch": (
        "word_search",
        "WordSearchEnv",
        {
            "easy": {"num_words": 5, "hardcore": False, "max_turns": 20},
            "hard": {"num_words": 5, "hardcore": True, "max_turns": 20},
        },
    ),
}

# The reference GEM spells it "TowerofHanoi"; both spellings name the same game.
ALIASES = {"TowerofHanoi": "TowerOfHanoi"}


def _register_games() -> None:
    for name, (module, cls, variants) in GAMES.items():
        entry_point = f"gem_core.envs.games.{module}:{cls}"
        for alias in [name, *(a for a, target in ALIASES.items() if target == name)]:
            register(
                f"game:{alias}-v1",
                entry_point,
                description=f"{name} (gem_core design, hard)",
                **variants["hard"],
            )
            for variant, kwargs in variants.items():
                register(
                    f"game:{alias}-v1-{variant}",
                    entry_point,
                    description=f"{name}, {variant} (gem_core design)",
                    **kwargs,
                )
            register(
                f"game:{alias}-v1-random",
                "gem_core.envs.games.difficulty:RandomDifficulty",
                description=f"{name}, easy or hard drawn per episode (gem_core design)",
                game=entry_point,
                variants={v: variants[v] for v in ("easy", "hard")},
            )


_register_games()
register_reference_games()

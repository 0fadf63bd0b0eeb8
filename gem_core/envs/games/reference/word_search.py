"""Word Search as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0; adapted there from TextArena) plays it.

``num_words`` words, drawn from NLTK's ``en-basic`` list (``en``, the 235,886-word Unix list, when
``hardcore``; both shipped in ``gem_core/data/words/reference``), are laid across or down on a grid
(``layout.py``) and the other cells filled with random letters. Find a word by its end cells:
``\\boxed{start_row start_col end_row end_col}``, counted from 0, in either order.

| event                                         | reward | episode |
|-----------------------------------------------|--------|---------|
| the ends of a hidden word                     | 1 / (words placed) | goes on; ends (terminated) when all are found |
| a straight line that is not a word            | 0.0    | goes on |
| off the grid, repeated, diagonal              | 0.0    | goes on |
| unreadable move                               | -0.1   | ends (terminated) |
| turns run out                                 | the step's reward | ends (terminated and truncated) |

``-random``: ``hardcore`` drawn, 5 words, 20 turns.

Reference behaviour kept as is (bugs): a found word given again with its ends swapped is not a repeat
and pays again (the count of words found does not rise); the rules' example (``\\boxed{1 1 1 5}``)
reads as 1-based; the reference's ``sample_random_action`` writes ``\\boxed{[r c r c]}``, which does not
parse (ours returns a readable move). Deviation: coordinates of more digits than ``int()`` accepts
crash the reference; here they are a format error.
"""

from __future__ import annotations

import re
import string
from typing import Any

from gem_core.envs.games.reference.base import (
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    ReferenceGame,
    last_match,
    rows_key,
)
from gem_core.envs.games.reference.layout import EMPTY, cells, lay_out
from gem_core.envs.games.reference.words import nltk_words

_MOVE = re.compile(r"\\boxed\{(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\}")


class WordSearchEnv(ReferenceGame):
    def __init__(self, hardcore: bool | None = False, max_turns: int | None = 20, num_words: int | None = 5):
        self.hardcore, self.max_turns, self.num_words = hardcore, max_turns, num_words
        self._is_random = hardcore is None or max_turns is None or num_words is None

    def _draw_settings(self) -> None:
        if self._is_random:
            self.hardcore = self.rng.choice([False, True])
            self.num_words, self.max_turns = 5, 20

    def _new_game(self) -> None:
        word_list = nltk_words("en" if self.hardcore else "en-basic")
        words = sorted(
            (w.upper() for w in self.rng.sample(word_list, min(self.num_words, len(word_list)))),
            key=len,
            reverse=True,
        )
        directions = {word: self.rng.choice(["across", "down"]) for word in words}
        self.game_board, self.placed_words = lay_out(words, directions, self.rng, check_crossings=False)
        for row in self.game_board:
            for c, cell in enumerate(row):
                if cell == EMPTY:
                    row[c] = self.rng.choice(string.ascii_uppercase)
        self.highlighted_positions: set[tuple[int, int]] = set()
        self.correct_words: set[str] = set()
        self.attempts: list[tuple[int, int, int, int]] = []

    def _instructions(self) -> str:
        return (
            f"You are participating in a Word Search challenge ({'Hardcore' if self.hardcore else 'Basic'}).\n"
            "The objective is to find and highlight hidden words on the grid below.\n"
            "The rows and columns are numbered for your reference.\n\n"
            "Words you have already found are marked in square brackets [ ].\n"
            "Each row and column is numbered for clarity.\n\n"
            "To locate a word, specify the row and column of its start and end letters.\n"
            "Note that words are either across (horizontal) or down (vertical).\n"
            "Use the format \\boxed{start_row start_col end_row end_col} for submission.\n"
            "For instance: \\boxed{1 1 1 5} to find a word from row 1, col 1 to row 1, col 5.\n\n"
            "Guidelines:\n"
            f"- you have a maximum of {self.max_turns} turns to find all the words.\n"
            "- Each guess must be unique; you cannot repeat the same guess.\n"
            "- The history of your attempts will be recorded below.\n"
            "- Make your guesses carefully and strategically!"
        )

    def get_task_suffix(self) -> str:
        lines = ["   " + " ".join(f"C{i:02}" for i in range(len(self.game_board)))]
        for i, row in enumerate(self.game_board):
            lines.append(
                f"R{i:02} "
                + "".join(
                    f"[{v}] " if (i, j) in self.highlighted_positions else f" {v}  "
                    for j, v in enumerate(row)
                )
            )
        return (
            "Current Board:\n" + "\n".join(lines) + "\n"
            f"Words Found: {len(self.correct_words)}/{len(self.placed_words)}\nEnter your guess."
        )

    def _parse(self, action: str) -> tuple[int, int, int, int] | None:
        match = last_match(_MOVE, action)
        try:
            return tuple(int(x) for x in match.groups())  # type: ignore[return-value,union-attr]
        except (AttributeError, ValueError):
            return None

    def _format_error_text(self) -> str:
        return (
            f"At turn {self.turn_count}, you did not provide a valid guess in "
            "\\boxed{start_row start_col end_row end_col} format."
        )

    def _play(self, move: tuple[int, int, int, int]) -> tuple[str, float, bool]:
        r1, c1, r2, c2 = move
        at, span = f"At turn {self.turn_count},", f"({r1}, {c1}) to ({r2}, {c2})"
        size = len(self.game_board)
        word = self._word_at(r1, c1, r2, c2)
        if not all(0 <= x < size for x in move):
            observation, reward = (
                f"{at} your tried coordinates {span} are out of bounds.",
                INVALID_ACTION_REWARD,
            )
        elif move in self.attempts:
            observation, reward = (
                f"{at} you have already tried the coordinates {span}.",
                INVALID_ACTION_REWARD,
            )
        elif r1 != r2 and c1 != c2:
            observation = (
                f"{at} you tried {span}, which is not valid because words must be either across (horizontal) "
                "or down (vertical)."
            )
            reward = INVALID_ACTION_REWARD
        elif word is not None:
            self.correct_words.add(word)
            self.highlighted_positions.update(cells(word, self.placed_words[word]))
            observation = f"{at} correct! You found the word '{word}' at coordinates {span}."
            reward = 1 / len(self.placed_words)
        else:
            observation = f"{at} incorrect attempt. No word found at coordinates {span}."
            reward = INTERNAL_STEP_REWARD
        self.attempts.append(move)
        if len(self.correct_words) == len(self.placed_words):
            return "Congratulations! You completed the Word Search puzzle!", reward, True
        return observation, reward, False

    def _word_at(self, r1: int, c1: int, r2: int, c2: int) -> str | None:
        """The first placed word whose end cells are these two, in either order."""
        for word, spot in self.placed_words.items():
            if {(r1, c1), (r2, c2)} == {(spot[0], spot[1]), cells(word, spot)[-1]}:
                return word
        return None

    def state_key(self) -> tuple:
        """The grid, the words to find, the words found and the set of coordinates tried."""
        return (
            rows_key(self.game_board),
            tuple(sorted(self.placed_words)),
            tuple(sorted(self.correct_words)),
            tuple(sorted(set(self.attempts))),
        )

    def _example(self, rng: Any) -> str:
        size = len(self.game_board)
        return "\\boxed{" + " ".join(str(rng.randint(0, size - 1)) for _ in range(4)) + "}"

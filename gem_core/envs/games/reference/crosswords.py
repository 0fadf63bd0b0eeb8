"""Crosswords as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0; adapted there from TextArena) plays it.

``num_words`` words with clues (from the reference's ``words_clues.jsonl``, shipped in
``gem_core/data/words/reference``; ``hardcore`` picks the harder half of it) are laid on a grid
(``layout.py``). Fill it ONE LETTER PER CELL: ``\\boxed{row column letter}``, rows and columns counted
from 0.

| event                                        | reward | episode |
|----------------------------------------------|--------|---------|
| a right letter in an empty cell              | 1 / (letter cells) | goes on |
| the last letter cell filled                  | that   | ends (terminated) |
| a wrong letter                               | 0.0    | goes on |
| off the grid, a black cell, a filled cell    | 0.0    | goes on |
| unreadable move                              | -0.1   | ends (terminated) |
| turns run out                                | the step's reward | ends (terminated and truncated) |

``-random``: ``hardcore`` drawn, 3 words, 20 turns.

Reference behaviour kept as is (bugs): the clues are numbered by word, not by grid position, and a
word that could not be placed keeps its number (the list then skips it); the reference's
``sample_random_action`` writes ``\\boxed{[r c L]}``, which does not parse (ours returns a readable move).
Deviation: a row or column of more digits than ``int()`` accepts crashes the reference; here it is a
format error.
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.envs.games.reference.base import (
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    ReferenceGame,
    last_match,
    rows_key,
)
from gem_core.envs.games.reference.layout import EMPTY, lay_out
from gem_core.envs.games.reference.words import crossword_words

_MOVE = re.compile(r"\\boxed\{(\d+)\s+(\d+)\s+([a-zA-Z])\}")


class CrosswordsEnv(ReferenceGame):
    def __init__(self, hardcore: bool | None = False, max_turns: int | None = 100, num_words: int | None = 5):
        self.hardcore, self.max_turns, self.num_words = hardcore, max_turns, num_words
        self._is_random = hardcore is None or max_turns is None or num_words is None

    def _draw_settings(self) -> None:
        if self._is_random:
            self.hardcore = self.rng.choice([False, True])
            self.num_words, self.max_turns = 3, 20

    def _new_game(self) -> None:
        records = crossword_words(bool(self.hardcore))
        sampled = sorted(
            self.rng.sample(records, min(self.num_words, len(records))),
            key=lambda r: len(r["word"]),
            reverse=True,
        )
        words = [r["word"] for r in sampled]
        directions = {r["word"]: self.rng.choice(["across", "down"]) for r in sampled}
        self.clues = {r["word"]: next(iter(r["clues"].values())) for r in sampled}
        self.solution, self.placed_words = lay_out(words, directions, self.rng, check_crossings=True)
        self.board = [[cell if cell == EMPTY else "_" for cell in row] for row in self.solution]
        self.total_letter_cells = sum(cell != EMPTY for row in self.board for cell in row)

    def _instructions(self) -> str:
        return (
            "You are playing Crosswords.\n"
            "Here is the current state of the Crosswords grid. Each row and column are numbered.\n"
            "The cells that need to be populated with letters are represented by '_', and those that do not "
            "need words are represented by '.'.\n\n"
            "You can only provide one response per turn. Hence, plan your approach and risk appetite.\n"
            "Only guesses in the format of \\boxed{row column letter} will be fetched from your response, e.g. "
            "\\boxed{0 0 d}, \\boxed{1 2 G}.\n"
            f"you have to finish the game in a maximum of {self.max_turns} turns.\n"
            "As you play, the history of your choices will be appended below. Use the information to complete "
            "the game."
        )

    def get_task_suffix(self) -> str:
        lines = ["   " + " ".join(f"C{i:02}" for i in range(len(self.board)))]
        lines += [f"R{i:02} " + "".join(f" {cell}  " for cell in row) for i, row in enumerate(self.board)]
        clues = [
            f"{i + 1}. {clue} ({self.placed_words[word][2]}): {len(word)} letters"
            for i, (word, clue) in enumerate(self.clues.items())
            if word in self.placed_words
        ]
        return (
            "Current Board:\n" + "\n".join(lines) + "\n"
            "Here are the clues for the words you need to find:\n" + "\n".join(clues) + "\nEnter your guess."
        )

    def _parse(self, action: str) -> tuple[int, int, str] | None:
        match = last_match(_MOVE, action)
        try:
            return int(match.group(1)), int(match.group(2)), match.group(3).upper()  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            return None

    def _format_error_text(self) -> str:
        return f"At turn {self.turn_count}, you did not provide a valid guess in \\boxed{{row column letter}} format."

    def _play(self, move: tuple[int, int, str]) -> tuple[str, float, bool]:
        row, col, letter = move
        tried = f"At turn {self.turn_count}, you tried to place {letter} at ({row}, {col})"
        if not (0 <= row < len(self.board) and 0 <= col < len(self.board[0])):
            observation, reward = f"{tried}, which is out of bounds.", INVALID_ACTION_REWARD
        elif self.board[row][col] == EMPTY:
            observation, reward = (
                f"{tried}, which is a black dot and cannot be filled.",
                INVALID_ACTION_REWARD,
            )
        elif self.board[row][col] != "_":
            observation, reward = f"{tried}, but the cell is already filled.", INVALID_ACTION_REWARD
        elif self.solution[row][col].upper() != letter:
            observation, reward = f"{tried}, but it is incorrect.", INTERNAL_STEP_REWARD
        else:
            self.board[row][col] = letter
            observation = f"At turn {self.turn_count}, you placed {letter} at ({row}, {col}) correctly."
            reward = 1 / self.total_letter_cells
        if all("_" not in row for row in self.board):
            return "Congratulations! You completed the Crosswords puzzle!", reward, True
        return observation, reward, False

    def state_key(self) -> tuple:
        """The solution and the board as filled so far."""
        return (rows_key(self.solution), rows_key(self.board))

    def _example(self, rng: Any) -> str:
        empty = [(r, c) for r, row in enumerate(self.board) for c, cell in enumerate(row) if cell == "_"] or [
            (0, 0)
        ]
        row, col = rng.choice(empty)
        return f"\\boxed{{{row} {col} {rng.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ')}}}"

"""The (n²-1)-puzzle as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0) plays it.

Slide the tiles of a ``num_rows`` x ``num_rows`` board into order 1, 2, ... with the gap (``__``) in
the bottom-right corner. Move: ``\\boxed{up}``, ``down``, ``left`` or ``right`` (lowercase), naming the
way a tile next to the gap slides into it (``up``: the tile below the gap moves up).

| event                                   | reward | episode |
|-----------------------------------------|--------|---------|
| the board is solved                     | 1.0    | ends (terminated) |
| another legal move                      | 0.0    | goes on |
| a move with no tile to slide            | 0.0    | goes on |
| unreadable move                         | -0.1   | ends (terminated) |
| turns run out                           | the step's reward + (cells in place, gap included) / n² | ends (terminated and truncated) |

``-random``: (num_rows, max_turns) drawn from (2, 10), (3, 20), (4, 50).

Reference behaviour kept as is (bugs): the start is a uniform shuffle, so half of all starts cannot
be solved; a start may already be solved (it then needs a move away and back); ``\\boxed{Up}`` is a
format error. (The reference's ``sample_random_action`` returns a bare direction without ``\\boxed{}``;
ours returns a readable move.)
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.envs.games.reference.base import (
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    MAX_TURNS_TEXT,
    SUCCESS_REWARD,
    ReferenceGame,
    last_match,
    rows_key,
)

_MOVE = re.compile(r"\\boxed{(up|down|left|right)}")
# Where the tile that slides into the gap sits, relative to the gap.
_FROM = {"up": (1, 0), "down": (-1, 0), "left": (0, 1), "right": (0, -1)}


class FifteenPuzzleEnv(ReferenceGame):
    def __init__(self, max_turns: int | None = 20, num_rows: int | None = 2):
        self.max_turns, self.num_rows = max_turns, num_rows
        self._is_random = num_rows is None or max_turns is None

    @property
    def greatest_num(self) -> int:
        return self.num_rows**2 - 1

    def _draw_settings(self) -> None:
        if self._is_random:
            self.num_rows, self.max_turns = self.rng.choice([(2, 10), (3, 20), (4, 50)])

    def _new_game(self) -> None:
        tiles: list[int | None] = [*range(1, self.greatest_num + 1), None]
        self.rng.shuffle(tiles)
        n = self.num_rows
        self.board = [tiles[i : i + n] for i in range(0, n * n, n)]

    def _instructions(self) -> str:
        return (
            f"You are playing the {self.greatest_num}-Puzzle game.\n"
            f"You have to arrange the numbered tiles in ascending order from 1 to {self.greatest_num}, with the "
            "empty space located in the bottom-right corner.\n"
            "To make a move, you can slide a tile into the empty space (represented by a double underscore, "
            "e.g. __) by using one of the following commands:\n"
            "- 'up': Move the tile below the empty space up.\n"
            "- 'down': Move the tile above the empty space down.\n"
            "- 'left': Move the tile to the right of the empty space left.\n"
            "- 'right': Move the tile to the left of the empty space right.\n"
            "To submit your move, type the direction (e.g., 'up', 'down', 'left', or 'right') in \\boxed{...}.\n"
            "The current board layout is shown below\n"
            "Use logic and planning to solve the puzzle.\n"
        )

    def get_task_suffix(self) -> str:
        board = "".join(" ".join("__" if x is None else f"{x:2}" for x in row) + "\n" for row in self.board)
        return f"Here is the current board layout: \n{board}\nEnter your move."

    def _parse(self, action: str) -> str | None:
        match = last_match(_MOVE, action)
        return None if match is None else match.group(1)

    def _format_error_text(self) -> str:
        return f"At turn {self.turn_count}, you did not provide a valid guess"

    def _play(self, move: str) -> tuple[str, float, bool]:
        n = self.num_rows
        r, c = next((r, c) for r in range(n) for c in range(n) if self.board[r][c] is None)
        tr, tc = r + _FROM[move][0], c + _FROM[move][1]
        if not (0 <= tr < n and 0 <= tc < n):
            return (
                f"At turn {self.turn_count}, you chose a move {move} that is outside the bounds of the board.",
                INVALID_ACTION_REWARD,
                False,
            )
        self.board[r][c], self.board[tr][tc] = self.board[tr][tc], None
        if self._tiles() == self._goal():
            return "Congratulations! You have solved the puzzle!", SUCCESS_REWARD, True
        return f"At turn {self.turn_count}, you made a valid move: {move}.\n", INTERNAL_STEP_REWARD, False

    def _out_of_turns(self, move: Any, reward: float) -> tuple[str, float]:
        for placed, wanted in zip(self._tiles(), self._goal()):
            if placed == wanted:
                reward += 1 / (self.greatest_num + 1)  # summed one cell at a time, as the reference does
        return MAX_TURNS_TEXT, reward

    def _tiles(self) -> list[int | None]:
        return [tile for row in self.board for tile in row]

    def _goal(self) -> list[int | None]:
        return [*range(1, self.greatest_num + 1), None]

    def state_key(self) -> tuple:
        """The board."""
        return rows_key(self.board)

    def _example(self, rng: Any) -> str:
        return f"\\boxed{{{rng.choice(list(_FROM))}}}"

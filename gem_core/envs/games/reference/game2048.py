"""2048 as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0) plays it.

Slide the tiles of a 4x4 board to reach ``target_tile``. Move: ``\\boxed{up}``, ``down``, ``left`` or
``right`` (any case). After each move that changes the board a 2 (90%) or a 4 (10%) appears on a
random empty cell.

| event                                         | reward | episode |
|-----------------------------------------------|--------|---------|
| a move that raises the largest tile (capped at the target) from ``a`` to ``b`` | ``(log2 b - log2 a) / (log2 target - log2 start)``, ``start`` the largest starting tile | goes on |
| the target is reached                         | that progress reward | ends (terminated) |
| no move can change the board any more         | that step's reward | ends (terminated) |
| another move that changes the board           | 0.0    | goes on |
| a move that changes nothing                   | 0.0    | goes on |
| unreadable move                               | -0.1   | ends (terminated) |
| turns run out                                 | the step's reward | ends (terminated and truncated) |

The progress rewards of an episode that reaches the target add up to 1.

``-random``: (target_tile, max_turns) drawn from (16, 20), (32, 30), (64, 50).
"""

from __future__ import annotations

import math
import re
from typing import Any

from gem_core.envs.games.game2048 import SIZE, Board, slide
from gem_core.envs.games.reference.base import INVALID_ACTION_REWARD, ReferenceGame, last_match

_MOVE = re.compile(r"\\boxed\{(up|down|left|right)\}", re.IGNORECASE)
DIRECTIONS = ("up", "down", "left", "right")


class Game2048Env(ReferenceGame):
    def __init__(self, target_tile: int | None = 2048, max_turns: int | None = 1000, board_size: int = SIZE):
        if board_size != SIZE:
            raise ValueError(f"only board_size={SIZE} is supported")
        self.target_tile, self.max_turns, self.board_size = target_tile, max_turns, board_size
        self._is_random = target_tile is None or max_turns is None

    def _draw_settings(self) -> None:
        if self._is_random:
            self.target_tile, self.max_turns = self.rng.choice([(16, 20), (32, 30), (64, 50)])

    def _new_game(self) -> None:
        self.board: Board = (0,) * (SIZE * SIZE)
        self._add_random_tile()
        self._add_random_tile()
        self.max_tile_achieved = self.init_max_tile_achieved = max(self.board)

    def _add_random_tile(self) -> None:
        empty = [i for i, v in enumerate(self.board) if v == 0]
        if empty:
            cell = self.rng.choice(empty)
            value = 2 if self.rng.random() < 0.9 else 4
            self.board = self.board[:cell] + (value,) + self.board[cell + 1 :]

    def _instructions(self) -> str:
        return (
            "You are playing 2048.\n"
            f"Your goal is to reach the {self.target_tile} tile by sliding and merging tiles.\n"
            f"You have {self.max_turns} turns maximum.\n\n"
            "Rules:\n"
            "- When two tiles with the same number touch, they merge into one tile with double the value.\n"
            "- After each move, a new tile (2 or 4) appears in a random empty spot.\n"
            "- You can move tiles in four directions: 'up', 'down', 'left', 'right'.\n\n"
            "To submit your move, type the direction in \\boxed{...}.\n"
            f"For example: {self._example(self.rng)}\n\n"
        )

    def get_task_suffix(self) -> str:
        rows = (self.board[i : i + SIZE] for i in range(0, SIZE * SIZE, SIZE))
        board = "\n".join(" ".join("   ." if v == 0 else f"{v:4d}" for v in row) for row in rows)
        return f"Current board:\n{board}\nEnter your move."

    def _parse(self, action: str) -> str | None:
        match = last_match(_MOVE, action)
        return None if match is None else match.group(1).lower()

    def _format_error_text(self) -> str:
        return f"At turn {self.turn_count}, you did not provide a valid move. Please use \\boxed{{direction}} format."

    def _play(self, move: str) -> tuple[str, float, bool]:
        moved = slide(self.board, move)
        if moved == self.board:
            return (
                f"At turn {self.turn_count}, you chose move '{move}' which doesn't change the board state. "
                "Try a different direction.",
                INVALID_ACTION_REWARD,
                False,
            )
        self.board = moved
        reward = self._progress_reward()
        self._add_random_tile()
        if self.max_tile_achieved >= self.target_tile:
            return (
                f"Congratulations! You reached the {self.target_tile} tile in {self.turn_count} turns!",
                reward,
                True,
            )
        if all(slide(self.board, d) == self.board for d in DIRECTIONS):
            return "Game over! No more moves possible.", reward, True
        return f"At turn {self.turn_count}, you moved {move}", reward, False

    def _progress_reward(self) -> float:
        current = min(max(self.board), self.target_tile)
        if current <= self.max_tile_achieved:
            return 0.0
        reward = (math.log2(current) - math.log2(self.max_tile_achieved)) / (
            math.log2(self.target_tile) - math.log2(self.init_max_tile_achieved)
        )
        self.max_tile_achieved = current
        return reward

    def _out_of_turns(self, move: Any, reward: float) -> tuple[str, float]:
        return f"You have reached the maximum number of turns ({self.max_turns}).", reward

    def state_key(self) -> tuple:
        """The board, the target and the opening's highest tile (the rewards' scale); the next tile is
        drawn at random: the key names the position, not the draw."""
        return (self.board, self.target_tile, self.init_max_tile_achieved)

    def _example(self, rng: Any) -> str:
        return f"\\boxed{{{rng.choice(DIRECTIONS)}}}"

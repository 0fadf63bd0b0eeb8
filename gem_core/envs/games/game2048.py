"""Game2048: slide numbered tiles on a 4x4 grid; equal tiles that collide merge into their sum.

Each move (``up``, ``down``, ``left``, ``right``, or just ``u``/``d``/``l``/``r``) slides every tile as
far as it goes; two equal tiles that meet merge once per move. After every move that changes the board
a new tile appears on a random empty cell (2 with probability 0.9, else 4). The game is won when a tile
reaches ``target_tile``; it is lost when no move changes the board.

Progress ``p = (log2(max tile) - 1) / (log2(target) - 1)`` (0 for a board of 2s, 1 at the target).

| event                                                | reward                         |
|------------------------------------------------------|--------------------------------|
| move that makes a new largest tile                   | +0.5 * (increase of p), i.e. +0.5 / (log2(target) - 1) per doubling |
| other move that changes the board                    |  0.0                           |
| move that reaches the target tile (episode ends)     | its progress reward + 1.0      |
| move that changes nothing, unknown direction         | -0.1                           |
| no ``\\boxed{}`` in the reply                        | -0.1                           |
| no move left (game lost, episode ends)               | its progress reward + 0.5 * p  |
| turns run out                                        | +0.5 * p (partial credit)      |

Won without mistakes from a largest start tile ``s``, the return is exactly
``1.0 + 0.5 * (1 - p(s))``. The tiles sum to at most 8 + 4 per move, so a target above
``8 + 4 * max_turns`` cannot be reached: the registered hard (512 in 50 turns) and extreme-hard (2048 in
100 turns) settings can only earn partial credit, as in the reference GEM. ``solve_action`` is a
depth-2 expectimax player; its measured win rate at easy (64 in 50 turns) is in tests/games/test_game2048.py.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game

SIZE = 4
PROGRESS_REWARD = 0.5
PARTIAL_CREDIT = 0.5
SUCCESS_REWARD = 1.0
FOUR_PROBABILITY = 0.1
DIRECTIONS = ("up", "down", "left", "right")
_ALIASES = {d[0]: d for d in DIRECTIONS}

Board = tuple[int, ...]  # SIZE * SIZE tile values, row by row, 0 = empty


class Game2048Env(GameEnv):
    def __init__(self, target_tile: int = 512, max_turns: int = 50, reward_type: str = "dense"):
        super().__init__(max_turns, reward_type)
        if target_tile < 4 or target_tile & (target_tile - 1):
            raise ValueError("target_tile must be a power of two, at least 4")
        self.target_tile = target_tile
        self.board: Board = (0,) * (SIZE * SIZE)

    def _new_game(self) -> str:
        self.board = (0,) * (SIZE * SIZE)
        self._spawn()
        self._spawn()
        return (
            f"You are playing 2048 on a {SIZE}x{SIZE} grid. Each turn, slide all tiles up, down, left or right: "
            "every tile moves as far as it can, and two equal tiles that collide merge into one tile of their "
            "sum (each tile merges at most once per move). After each move a new tile (2, or sometimes 4) "
            f"appears on a random empty cell. Reach a {self.target_tile} tile to win. A move that changes "
            "nothing is not allowed.\n"
            "Reply with a direction inside \\boxed{}, e.g. \\boxed{left}.\n"
            f"{self.render()}"
        )

    def _spawn(self) -> None:
        empty = [i for i, v in enumerate(self.board) if v == 0]
        cell = self.rng.choice(empty)
        value = 4 if self.rng.random() < FOUR_PROBABILITY else 2
        self.board = self.board[:cell] + (value,) + self.board[cell + 1 :]

    def render(self) -> str:
        width = max(4, len(str(max(self.board))))
        rows = [
            " ".join((str(v) if v else ".").rjust(width) for v in self.board[r * SIZE : (r + 1) * SIZE])
            for r in range(SIZE)
        ]
        return "Board:\n" + "\n".join(rows)

    def progress(self) -> float:
        return min(1.0, (math.log2(max(self.board)) - 1) / (math.log2(self.target_tile) - 1))

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        word = move.strip().lower()
        direction = _ALIASES.get(word, word)
        if direction not in DIRECTIONS:
            return self._invalid(f"'{move[:40]}' is not a direction: use up, down, left or right.")
        moved = slide(self.board, direction)
        if moved == self.board:
            return self._invalid(f"Sliding {direction} changes nothing.")
        before = self.progress()
        self.board = moved
        if max(self.board) >= self.target_tile:
            text = f"You slid {direction} and made a {max(self.board)} tile: you win!\n{self.render()}"
            return text, PROGRESS_REWARD * (1.0 - before) + SUCCESS_REWARD, True, {"success": True}
        self._spawn()
        reward = PROGRESS_REWARD * (self.progress() - before)
        if not any(slide(self.board, d) != self.board for d in DIRECTIONS):
            reward += PARTIAL_CREDIT * self.progress()
            return f"You slid {direction}. No move is left: game over.\n{self.render()}", reward, True, {}
        return f"You slid {direction}.\n{self.render()}", reward, False, {}

    def _invalid(self, why: str) -> tuple[str, float, bool, dict[str, Any]]:
        return f"Invalid move. {why}\n{self.render()}", INVALID_MOVE_PENALTY, False, {"invalid_move": True}

    def _final_reward(self) -> float:
        return PARTIAL_CREDIT * self.progress()

    def state_key(self) -> tuple:
        """The board (the next tile is drawn at random: the key names the position, not the draw)."""
        return self.board

    def _random_move(self) -> str:
        return self.action_rng.choice(DIRECTIONS)

    def _legal_moves(self) -> list[str]:
        """The directions that change the board."""
        return [d for d in DIRECTIONS if slide(self.board, d) != self.board]

    def solve_action(self) -> str:
        """The move with the best expected position after the random tile and one more move."""
        best, best_value = DIRECTIONS[0], -math.inf
        for direction in DIRECTIONS:
            moved = slide(self.board, direction)
            if moved == self.board:
                continue
            value = math.inf if max(moved) >= self.target_tile else _expected(moved)
            if value > best_value:
                best, best_value = direction, value
        return f"\\boxed{{{best}}}"


@cache
def _slide_line(line: tuple[int, ...]) -> tuple[int, ...]:
    """Slide one line towards its start, merging equal neighbours once."""
    tiles = [v for v in line if v]
    out: list[int] = []
    i = 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(2 * tiles[i])
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return tuple(out) + (0,) * (len(line) - len(out))


@cache
def _slide_line_back(line: tuple[int, ...]) -> tuple[int, ...]:
    """Slide one line towards its end."""
    return _slide_line(line[::-1])[::-1]


_TRANSPOSE = tuple(r * SIZE + c for c in range(SIZE) for r in range(SIZE))


def slide(board: Board, direction: str) -> Board:
    """The board after sliding every tile in ``direction`` (no new tile)."""
    if direction in ("up", "down"):
        columns = tuple(map(board.__getitem__, _TRANSPOSE))
        moved = slide(columns, "left" if direction == "up" else "right")
        return tuple(map(moved.__getitem__, _TRANSPOSE))
    line = _slide_line if direction == "left" else _slide_line_back
    return sum((line(board[i : i + SIZE]) for i in range(0, SIZE * SIZE, SIZE)), ())


# ---- the scripted player: depth-2 expectimax over (move, random tile, move) -----------------------
def _score(board: Board) -> float:
    """The sum of squared tiles: grows with every merge, most with merges of large tiles."""
    return sum(v * v for v in board)


def _best_after_spawn(board: Board) -> float:
    scores = [_score(moved) for d in DIRECTIONS if (moved := slide(board, d)) != board]
    return max(scores) if scores else -1e9


def _expected(board: Board) -> float:
    empty = [i for i, v in enumerate(board) if v == 0]
    if not empty:
        return _best_after_spawn(board)
    total = 0.0
    for i in empty:
        for value, p in ((2, 1 - FOUR_PROBABILITY), (4, FOUR_PROBABILITY)):
            total += p * _best_after_spawn(board[:i] + (value,) + board[i + 1 :])
    return total / len(empty)


register_game(
    "Game2048",
    Game2048Env,
    {
        "easy": {"target_tile": 64, "max_turns": 50},
        "hard": {"target_tile": 512, "max_turns": 50},
        "extreme-hard": {"target_tile": 2048, "max_turns": 100},
    },
)

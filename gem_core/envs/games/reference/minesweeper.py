"""Minesweeper as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0) plays it.

Reveal every safe cell of a ``rows`` x ``cols`` grid hiding ``num_mines`` mines. Moves name a cell by
row and column counted from 0: ``\\boxed{reveal 3 2}``, ``\\boxed{flag 3 2}`` (toggles a flag). The
mines are laid at the first reveal, outside the 3x3 square around it; revealing a 0 opens its
neighbours. The game is won when every safe cell is revealed AND every mine is flagged, checked after
a reveal.

| event                                          | reward | episode |
|------------------------------------------------|--------|---------|
| a reveal that opens ``k`` cells                | ``k / (rows*cols - num_mines)`` | goes on; ends (terminated) when won |
| a mine                                         | 0.0    | ends (terminated) |
| flag / unflag                                  | 0.0    | goes on |
| off the grid, revealing an open or flagged cell, flagging an open cell, another verb | 0.0 | goes on |
| unreadable move                                | -0.1   | ends (terminated) |
| turns run out                                  | the step's reward | ends (terminated and truncated) |

``-random``: an ``n`` x ``n`` grid, ``n`` in 5..8, ``n²//5`` mines, ``n²`` turns.

Reference behaviour kept as is (bugs): winning needs every mine flagged, and the check only runs
after a reveal, so flagging the last mine after the last safe cell never wins (no later reveal is
accepted); revealing a flagged mine loses; a reveal of an open cell says "already been revealed".
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from gem_core.envs.games.minesweeper import _neighbours
from gem_core.envs.games.reference.base import (
    FAIL_REWARD,
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    ReferenceGame,
    last_match,
    rows_key,
)

_MOVE = re.compile(r"\\boxed{([a-zA-Z]+)\s(\d+)\s(\d+)}")
MINE = -1


class MinesweeperEnv(ReferenceGame):
    def __init__(
        self,
        rows: int | None = 8,
        cols: int | None = 8,
        num_mines: int | None = 10,
        max_turns: int | None = 20,
    ):
        self.rows, self.cols, self.num_mines, self.max_turns = rows, cols, num_mines, max_turns
        self._is_random = rows is None or cols is None or num_mines is None or max_turns is None

    def _draw_settings(self) -> None:
        if self._is_random:
            n = self.rng.randint(5, 8)
            self.rows = self.cols = n
            self.num_mines, self.max_turns = n * n // 5, n * n

    def _new_game(self) -> None:
        self.grid = [[0] * self.cols for _ in range(self.rows)]
        self.revealed = [[False] * self.cols for _ in range(self.rows)]
        self.flags = [[False] * self.cols for _ in range(self.rows)]
        self.first_reveal = True

    def _instructions(self) -> str:
        reveal = (self.rng.randint(0, self.rows - 1), self.rng.randint(0, self.cols - 1))
        flag = (self.rng.randint(0, self.rows - 1), self.rng.randint(0, self.cols - 1))
        return (
            "You are playing the Minesweeper game.\n"
            "The objective of the game is to reveal all cells that do not contain mines.\n"
            "To make a move, you can either reveal a cell or place a flag on a suspected mine location using "
            "one of the following commands:\n"
            "- 'reveal': Reveal the contents of a specific cell.\n"
            "- 'flag': Place or remove a flag on a specific cell to mark it as a potential mine.\n"
            "To submit your move, type the command followed by the row and column in \\boxed{}.\n"
            "For example:\n"
            f"- \\boxed{{reveal {reveal[0]} {reveal[1]}}} to reveal the cell in Row {reveal[0]}, Column {reveal[1]}.\n"
            f"- \\boxed{{flag {flag[0]} {flag[1]}}} to place or remove a flag on the cell in Row {flag[0]}, "
            f"Column {flag[1]}.\n"
            "The current board layout is shown below. Cells that are unrevealed are represented by a dot "
            "('.'), revealed numbers show the count of adjacent mines, and flagged cells are marked with an 'F'.\n"
            "Use logic and deduction to avoid revealing cells with mines!\n"
            "Be mindful not to choose revealed or flagged cells.\n"
        )

    def get_task_suffix(self) -> str:
        lines = ["   " + " ".join(str(c).rjust(2) for c in range(self.cols))]
        for r in range(self.rows):
            cells = []
            for c in range(self.cols):
                if self.revealed[r][c]:
                    cells.append(" * " if self.grid[r][c] == MINE else f" {self.grid[r][c]} ")
                else:
                    cells.append(" F " if self.flags[r][c] else " . ")
            lines.append(f"{r:2} " + "".join(cells))
        return "Here is the current board layout:\n" + "\n".join(lines) + "\n\nEnter your guess."

    def _parse(self, action: str) -> tuple[str, int, int] | None:
        match = last_match(_MOVE, action)
        try:
            return match.group(1).lower(), int(match.group(2)), int(match.group(3))  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            return None

    def _play(self, move: tuple[str, int, int]) -> tuple[str, float, bool]:
        verb, row, col = move
        at = f"At turn {self.turn_count}, you"
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            return (
                f"{at} chose cell ({row}, {col}), which is outside the bounds of the grid.",
                INVALID_ACTION_REWARD,
                False,
            )
        if verb == "reveal":
            if self.first_reveal:
                self._lay_mines(row, col)
                self.first_reveal = False
            if self.grid[row][col] == MINE:
                return f"Game over! You hit a mine at ({row}, {col})", FAIL_REWARD, True
            if self.revealed[row][col] or self.flags[row][col]:
                return (
                    f"{at} chose to reveal cell ({row}, {col}), which has already been revealed.",
                    INVALID_ACTION_REWARD,
                    False,
                )
            reward = self._open(row, col) / (self.rows * self.cols - self.num_mines)
            if self._is_solved():
                return "Congratulations! You have successfully cleared the Minesweeper board.", reward, True
            return f"{at} successfully revealed cell ({row}, {col}).", reward, False
        if verb == "flag":
            if self.revealed[row][col]:
                return (
                    f"{at} chose to flag cell ({row}, {col}), which has already been revealed.",
                    INVALID_ACTION_REWARD,
                    False,
                )
            self.flags[row][col] = not self.flags[row][col]
            done = "added" if self.flags[row][col] else "removed"
            return f"{at} {done} a flag on cell ({row}, {col}).", INTERNAL_STEP_REWARD, False
        return (
            f"{at} chose an invalid action '{verb}'. Valid actions are 'reveal' or 'flag'.",
            INVALID_ACTION_REWARD,
            False,
        )

    def _lay_mines(self, safe_row: int, safe_col: int) -> None:
        mines: set[tuple[int, int]] = set()
        while len(mines) < self.num_mines:
            r, c = self.rng.randint(0, self.rows - 1), self.rng.randint(0, self.cols - 1)
            if (r, c) not in mines and (abs(r - safe_row) > 1 or abs(c - safe_col) > 1):
                mines.add((r, c))
                self.grid[r][c] = MINE
        for r in range(self.rows):
            for c in range(self.cols):
                if self.grid[r][c] != MINE:
                    self.grid[r][c] = sum(
                        self.grid[nr][nc] == MINE for nr, nc in _neighbours(r, c, self.rows, self.cols)
                    )

    def _open(self, row: int, col: int) -> int:
        """Reveal a safe cell, flooding through 0s (flagged cells stay closed); return how many opened."""
        self.revealed[row][col] = True
        opened, queue = 1, deque([(row, col)])
        while queue:
            r, c = queue.popleft()
            if self.grid[r][c] == 0:
                for nr, nc in _neighbours(r, c, self.rows, self.cols):
                    if not self.revealed[nr][nc] and not self.flags[nr][nc]:
                        self.revealed[nr][nc] = True
                        opened += 1
                        queue.append((nr, nc))
        return opened

    def _is_solved(self) -> bool:
        return all(
            self.flags[r][c] if self.grid[r][c] == MINE else self.revealed[r][c]
            for r in range(self.rows)
            for c in range(self.cols)
        )

    def state_key(self) -> tuple:
        """The grid (mines and counts, all 0 before the first reveal lays the mines), the revealed
        cells and the flags."""
        return (rows_key(self.grid), rows_key(self.revealed), rows_key(self.flags), self.first_reveal)

    def _example(self, rng: Any) -> str:
        verb = rng.choice(["reveal"] * 9 + ["flag"])
        return f"\\boxed{{{verb} {rng.randint(0, self.rows - 1)} {rng.randint(0, self.cols - 1)}}}"

"""Sudoku as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0) plays it.

Fill a ``scale`` x ``scale`` grid (4 or 9). Move: ``\\boxed{row column number}``, rows and columns
counted from 1, separated by single whitespace characters. A move is correct when it matches the
solution the puzzle was made from.

| event                                           | reward | episode |
|-------------------------------------------------|--------|---------|
| a correct number                                | 1 / (empty cells at the start) | goes on; ends (terminated) when the grid is full |
| out of range, a filled cell, a wrong number     | 0.0    | goes on |
| unreadable move                                 | -0.1   | ends (terminated) |
| turns run out                                   | the step's reward | ends (terminated and truncated) |

The puzzle: a full grid filled by randomised backtracking, then, of the cells in a random order,
the first ``scale² - clues`` are emptied one by one unless that would allow a second solution.
``-random``: (scale, clues, max_turns) drawn from (4, 10, 15), (9, 50, 50).

Reference behaviour kept as is (bugs): ``clues`` is the number of cells it TRIES to empty, not the
number of clues left; a number that fits the rules but differs from the hidden solution is
"violates Sudoku rules" (puzzles are unique, so this only matters for out-of-order deductions).
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.envs.games.reference.base import INVALID_ACTION_REWARD, ReferenceGame, last_match, rows_key
from gem_core.envs.games.sudoku import count_solutions

_MOVE = re.compile(r"\\boxed{(\d+)\s(\d+)\s(\d+)}")
Grid = list[list[int]]


class SudokuEnv(ReferenceGame):
    def __init__(self, clues: int | None = 30, max_turns: int | None = 100, scale: int | None = 9):
        self.clues, self.max_turns, self.scale = clues, max_turns, scale
        self._is_random = scale is None or clues is None or max_turns is None

    @property
    def box(self) -> int:
        return int(self.scale**0.5)

    def _draw_settings(self) -> None:
        if self._is_random:
            self.scale, self.clues, self.max_turns = self.rng.choice([(4, 10, 15), (9, 50, 50)])

    def _new_game(self) -> None:
        self.full_grid = [[0] * self.scale for _ in range(self.scale)]
        self._fill(self.full_grid)
        self.board = self._remove_cells(self.full_grid)
        self.init_num_empty = sum(row.count(0) for row in self.board)

    def _fill(self, grid: Grid) -> bool:
        """Randomised backtracking over the first empty cell, shuffling the digits at every visit."""
        empty = next(((r, c) for r in range(self.scale) for c in range(self.scale) if grid[r][c] == 0), None)
        if empty is None:
            return True
        r, c = empty
        digits = list(range(1, self.scale + 1))
        self.rng.shuffle(digits)
        for digit in digits:
            if self._fits(grid, r, c, digit):
                grid[r][c] = digit
                if self._fill(grid):
                    return True
                grid[r][c] = 0
        return False

    def _fits(self, grid: Grid, r: int, c: int, digit: int) -> bool:
        b = self.box
        r0, c0 = r - r % b, c - c % b
        return (
            digit not in grid[r]
            and all(grid[i][c] != digit for i in range(self.scale))
            and all(grid[i][j] != digit for i in range(r0, r0 + b) for j in range(c0, c0 + b))
        )

    def _remove_cells(self, full: Grid) -> Grid:
        puzzle = [row[:] for row in full]
        cells = [(r, c) for r in range(self.scale) for c in range(self.scale)]
        self.rng.shuffle(cells)
        while len(cells) > self.scale**2 - self.clues:
            r, c = cells.pop()
            puzzle[r][c] = 0
            if count_solutions(puzzle, self.box, limit=2) != 1:
                puzzle[r][c] = full[r][c]
        return puzzle

    def _instructions(self) -> str:
        n = self.scale
        return (
            f"You are playing {'A simple version of' if n == 4 else ''} Sudoku.\n"
            f"Each row is numbered from 1 to {n}, and each column is also numbered from 1 to {n}.\n"
            f"Empty cells are represented by '.', and pre-filled cells contain digits from 1 to {n}.\n\n"
            f"Your objective is to fill the empty cells in the {n}x{n} grid with digits from 1 to {n} such that:\n"
            f"1. Each row contains all digits from 1 to {n} without repetition.\n"
            f"2. Each column contains all digits from 1 to {n} without repetition.\n"
            f"3. Each of the nine {n}x{n} subgrids contains all digits from 1 to {n} without repetition.\n\n"
            "Rules and Instructions:\n"
            "1. **Do not overwrite** the initial numbers provided in the grid.\n"
            "2. **Only fill** empty cells represented by '.'.\n"
            "3. You may respond in any manner you prefer, but ensure that your response includes the format "
            "of '\\boxed{row column number}', e.g. \\boxed{1 1 5}.\n"
            "4. **Ensure** that your move does not violate Sudoku rules. Invalid moves, including overwriting "
            "pre-filled cells and placing two numbers in one row/col/sub-grid will result in penalties.\n"
            "The history of your moves will be appended as you play more rounds. Use the history of your move "
            "to improve your decision making by avoiding the moves you have tried. Good luck!\n\n"
        )

    def get_task_suffix(self) -> str:
        n, b = self.scale, self.box
        lines = ["   " + " ".join(f"C{j + 1}" + ("  " if (j + 1) % b == 0 else "") for j in range(n))]
        for i, row in enumerate(self.board):
            text = f"R{i + 1} "
            for j, digit in enumerate(row):
                text += f" {digit or '.'} " + ("| " if (j + 1) % b == 0 and j < n - 1 else "")
            lines.append(text.strip())
            if (i + 1) % b == 0 and i < n - 1:
                lines.append("   " + "- " * 2 * (n - 1))
        return "Here is the current board layout:\n" + "\n".join(lines) + "\nEnter your move."

    def _parse(self, action: str) -> tuple[int, int, int] | None:
        match = last_match(_MOVE, action)
        try:
            return int(match.group(1)), int(match.group(2)), int(match.group(3))  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            return None

    def _format_error_text(self) -> str:
        return "You did not provide a valid guess."

    def _play(self, move: tuple[int, int, int]) -> tuple[str, float, bool]:
        row, col, digit = move
        tried = f"At turn {self.turn_count}, you tried to place {digit} at R{row} C{col}"
        if not (1 <= row <= self.scale and 1 <= col <= self.scale and 1 <= digit <= self.scale):
            return f"{tried}, which is out of bounds.", INVALID_ACTION_REWARD, False
        if self.board[row - 1][col - 1] != 0:
            return (
                f"{tried}, which is already filled. You cannot overwrite pre-filled cells.",
                INVALID_ACTION_REWARD,
                False,
            )
        if self.full_grid[row - 1][col - 1] != digit:
            return f"{tried}, which violates Sudoku rules.", INVALID_ACTION_REWARD, False
        self.board[row - 1][col - 1] = digit
        reward = 1 / self.init_num_empty
        if self.board == self.full_grid:
            return "Congratulations! You have completed the Sudoku puzzle!", reward, True
        return (
            f"At turn {self.turn_count}, you placed {digit} at R{row} C{col}, which is correct.",
            reward,
            False,
        )

    def state_key(self) -> tuple:
        """The board as filled so far and the solution."""
        return (rows_key(self.board), rows_key(self.full_grid))

    def _example(self, rng: Any) -> str:
        r, c = rng.choice(
            [(r, c) for r in range(self.scale) for c in range(self.scale) if self.board[r][c] == 0]
            or [(0, 0)]
        )
        return f"\\boxed{{{r + 1} {c + 1} {rng.randint(1, self.scale)}}}"

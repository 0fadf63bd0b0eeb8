"""Sudoku: fill the empty cells so that every row, column and box holds each digit once.

The grid is ``size x size`` (4 with 2x2 boxes, or 9 with 3x3 boxes). A new puzzle is a random
full grid (a shuffled base pattern: digits, rows within bands, bands, columns within stacks, stacks,
transpose) with cells removed down to ``clues`` givens, keeping the solution unique. If no unique
puzzle with that few clues turns up in a few tries (possible only far below the registered
settings) the puzzle keeps the fewest clues found, still unique.

A move is ``row col value`` with 1-based coordinates, e.g. ``\\boxed{2 3 4}`` (also ``2,3,4``,
``r2 c3 4``, ``R2C3=4``). With ``E`` cells empty at the start and ``p`` the fraction of them filled:

| event                                                        | reward            |
|--------------------------------------------------------------|-------------------|
| correct digit in an empty cell                               | +0.5 / E          |
| the digit that completes the grid (episode ends)             | +0.5 / E + 1.0    |
| digit already in the cell's row, column or box (rule broken) | -0.1              |
| digit that breaks no rule but is not the (unique) solution's | -0.1              |
| cell already filled (given or placed), off the board, unreadable | -0.1          |
| no ``\\boxed{}`` in the reply                                | -0.1              |
| turns run out                                                | +0.5 * p (partial credit) |

A solved game with no mistakes returns exactly 1.5 (0.5 for the cells, 1.0 for the win). Rejected moves leave
the board unchanged. Easy (4x4, 10 clues) leaves 6 cells for 15 turns; hard (9x9, 50 clues) 31 for 50.
"""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any

from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game

PROGRESS_REWARD = 0.5
PARTIAL_CREDIT = 0.5
SUCCESS_REWARD = 1.0
GENERATION_ATTEMPTS = 8

Grid = list[list[int]]  # 0 = empty

_SEPARATORS = re.compile(r"row|column|col|value|val|[rcv]|[\s,;:=()\[\]]")


class SudokuEnv(GameEnv):
    """``list_empty_cells``: every board shown is followed by the row and column of each empty cell
    (what a player otherwise reads off the drawing). ``list_missing_digits``: followed by the digits each
    row still lacks (the row's rule applied; the column's and box's are left to the player)."""

    def __init__(
        self,
        size: int = 9,
        clues: int = 50,
        max_turns: int = 50,
        reward_type: str = "dense",
        list_empty_cells: bool = False,
        list_missing_digits: bool = False,
    ):
        super().__init__(max_turns, reward_type)
        self.list_empty_cells = list_empty_cells
        self.list_missing_digits = list_missing_digits
        box = math.isqrt(size)
        if size < 4 or box * box != size:
            raise ValueError("size must be a square number of at least 4 (4 or 9)")
        if not 0 <= clues <= size * size:
            raise ValueError(f"clues must be between 0 and {size * size}")
        self.size, self.box, self.clues = size, box, clues
        self.board: Grid = []
        self.solution: Grid = []
        self.num_empty = 0  # cells empty at the start

    # ---- a new puzzle --------------------------------------------------------------------------
    def _new_game(self) -> str:
        best: Grid | None = None
        for _ in range(GENERATION_ATTEMPTS):
            full = self._random_full_grid()
            puzzle = self._remove_cells(full)
            if best is None or _count_filled(puzzle) < _count_filled(best):
                best, self.solution = puzzle, full
            if _count_filled(best) <= self.clues:
                break
        self.board = [row[:] for row in best]
        self.num_empty = self.size * self.size - _count_filled(self.board)
        n, b = self.size, self.box
        return (
            f"You are playing Sudoku on a {n}x{n} grid with {b}x{b} boxes. Fill every empty cell (shown as '.') "
            f"with a digit from 1 to {n} so that each row, each column and each {b}x{b} box contains every digit "
            "exactly once. The puzzle has one solution. Each turn, fill one cell: reply with its row, its column "
            f"(both counted from 1) and the digit inside \\boxed{{}}, e.g. \\boxed{{1 2 {n}}} puts {n} in row 1, "
            "column 2. Given and filled cells cannot be changed.\n"
            f"{self.render()}"
        )

    def _random_full_grid(self) -> Grid:
        n, b, rng = self.size, self.box, self.rng

        def shuffled_lines() -> list[int]:
            bands = rng.sample(range(b), b)
            return [band * b + line for band in bands for line in rng.sample(range(b), b)]

        rows, cols, digits = shuffled_lines(), shuffled_lines(), rng.sample(range(1, n + 1), n)
        # The base pattern is a valid grid; permuting digits, lines within a band and bands keeps it valid.
        grid = [[digits[(b * (r % b) + r // b + c) % n] for c in cols] for r in rows]
        return [list(col) for col in zip(*grid)] if rng.random() < 0.5 else grid

    def _remove_cells(self, full: Grid) -> Grid:
        puzzle = [row[:] for row in full]
        n = self.size
        cells = [(r, c) for r in range(n) for c in range(n)]
        self.rng.shuffle(cells)
        empty = 0
        for r, c in cells:
            if empty >= n * n - self.clues:
                break
            puzzle[r][c] = 0
            if count_solutions(puzzle, self.box, limit=2) == 1:
                empty += 1
            else:
                puzzle[r][c] = full[r][c]
        return puzzle

    # ---- playing -------------------------------------------------------------------------------
    def render(self) -> str:
        lines = [_board_template(self.size, self.box).format(*(v or "." for row in self.board for v in row))]
        n = self.size
        if self.list_empty_cells:
            empty = ", ".join(f"{r + 1} {c + 1}" for r in range(n) for c in range(n) if not self.board[r][c])
            lines.append(f"Empty cells (row column): {empty or 'none'}.")
        if self.list_missing_digits:
            missing = [
                f"row {r + 1}: {' '.join(str(d) for d in range(1, n + 1) if d not in row)}"
                for r, row in enumerate(self.board)
                if 0 in row
            ]
            lines.append(f"Digits each row lacks: {'; '.join(missing) or 'none'}.")
        return "\n".join(lines)

    def progress(self) -> float:
        if self.num_empty == 0:
            return 1.0
        remaining = sum(v == 0 for row in self.board for v in row)
        return (self.num_empty - remaining) / self.num_empty

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        parsed = parse_move(move)
        if parsed is None:
            return self._invalid(f"'{move[:40]}' is not a move: give row, column and digit, e.g. 1 2 3.")
        row, col, digit = parsed
        n = self.size
        if not (1 <= row <= n and 1 <= col <= n):
            return self._invalid(f"Row {row}, column {col} is off the board (rows and columns go 1 to {n}).")
        if not 1 <= digit <= n:
            return self._invalid(f"{digit} is not a digit of this puzzle (use 1 to {n}).")
        r, c = row - 1, col - 1
        if self.board[r][c]:
            return self._invalid(f"Row {row}, column {col} already holds {self.board[r][c]}.")
        conflict = self._conflict(r, c, digit)
        if conflict:
            return self._invalid(f"{digit} at row {row}, column {col} breaks the rules: {conflict}.")
        if self.solution[r][c] != digit:
            return self._invalid(
                f"{digit} at row {row}, column {col} breaks no rule yet, but it is not part of the solution."
            )
        self.board[r][c] = digit
        reward = PROGRESS_REWARD / self.num_empty
        if all(all(line) for line in self.board):
            text = f"Correct, and the grid is complete: you solved the Sudoku!\n{self.render()}"
            return text, reward + SUCCESS_REWARD, True, {"success": True}
        return f"Correct: {digit} at row {row}, column {col}.\n{self.render()}", reward, False, {}

    def _conflict(self, r: int, c: int, digit: int) -> str:
        if digit in self.board[r]:
            return f"row {r + 1} already has a {digit}"
        if any(self.board[i][c] == digit for i in range(self.size)):
            return f"column {c + 1} already has a {digit}"
        b = self.box
        r0, c0 = r - r % b, c - c % b
        if any(self.board[i][j] == digit for i in range(r0, r0 + b) for j in range(c0, c0 + b)):
            return f"the {b}x{b} box with rows {r0 + 1}-{r0 + b} and columns {c0 + 1}-{c0 + b} already has a {digit}"
        return ""

    def _invalid(self, why: str) -> tuple[str, float, bool, dict[str, Any]]:
        return f"Invalid move. {why}\n{self.render()}", INVALID_MOVE_PENALTY, False, {"invalid_move": True}

    def _final_reward(self) -> float:
        return PARTIAL_CREDIT * self.progress()

    def state_key(self) -> tuple:
        """The grid as filled so far and its solution."""
        return (tuple(map(tuple, self.board)), tuple(map(tuple, self.solution)))

    def _random_move(self) -> str:
        n = self.size
        return " ".join(str(self.action_rng.randint(1, n)) for _ in range(3))

    def _legal_moves(self) -> list[str]:
        """A digit in an empty cell that no row, column or box of the board rules out (the game also
        refuses one that is not the solution's, which a player cannot see)."""
        n, b, board = self.size, self.box, self.board

        def allowed(r: int, c: int, d: int) -> bool:
            box = (
                board[i][j] for i in range(r - r % b, r - r % b + b) for j in range(c - c % b, c - c % b + b)
            )
            return d not in board[r] and all(board[i][c] != d for i in range(n)) and d not in box

        empty = [(r, c) for r in range(n) for c in range(n) if not board[r][c]]
        return [f"{r + 1} {c + 1} {d}" for r, c in empty for d in range(1, n + 1) if allowed(r, c, d)]

    def solve_action(self) -> str:
        """Solve the board as shown (backtracking over candidate sets) and fill its first empty cell."""
        solution = solve(self.board, self.box)
        empties = [(r, c) for r in range(self.size) for c in range(self.size) if not self.board[r][c]]
        if solution is None or not empties:
            return "\\boxed{1 1 1}"
        r, c = empties[0]
        return f"\\boxed{{{r + 1} {c + 1} {solution[r][c]}}}"


@cache
def _board_template(n: int, b: int) -> str:
    """The board drawing with a ``{}`` per cell, row by row: row and column numbers, lines between boxes."""
    width = len(str(n))
    header_groups = [" ".join(str(c + 1).rjust(width) for c in range(s, s + b)) for s in range(0, n, b)]
    rule = "---+" + "+".join("-" * (len(g) + 2) for g in header_groups)
    lines = ["     " + " | ".join(header_groups), rule]
    cells = " | ".join([" ".join([f"{{:>{width}}}"] * b)] * (n // b))
    for r in range(n):
        lines.append(f"{r + 1:>2} | {cells}")
        if (r + 1) % b == 0 and r + 1 < n:
            lines.append(rule)
    return "Board (rows down, columns across):\n" + "\n".join(lines)


def parse_move(move: str) -> tuple[int, int, int] | None:
    """``(row, col, digit)`` from text such as ``2 3 4``, ``2,3,4``, ``r2 c3 4`` or ``R2C3=4``; None if unreadable."""
    text = move.lower()
    numbers = re.findall(r"[0-9]{1,3}", text)  # ASCII digits only ("\d" would read "５" as 5)
    leftover = _SEPARATORS.sub("", re.sub(r"[0-9]{1,3}", " ", text))
    if len(numbers) != 3 or leftover:
        return None
    row, col, digit = map(int, numbers)
    return row, col, digit


def _count_filled(grid: Grid) -> int:
    return sum(v != 0 for row in grid for v in row)


def count_solutions(grid: Grid, box: int, limit: int = 2) -> int:
    """How many ways ``grid`` can be completed, counting up to ``limit`` (backtracking, fewest candidates first)."""
    return len(_solutions(grid, box, limit))


def solve(grid: Grid, box: int) -> Grid | None:
    """One completion of ``grid``, or None if it has none."""
    found = _solutions(grid, box, 1)
    return found[0] if found else None


def _solutions(grid: Grid, box: int, limit: int) -> list[Grid]:
    n = len(grid)
    full = (1 << (n + 1)) - 2  # bits 1..n
    rows, cols, boxes = [0] * n, [0] * n, [0] * n
    empties = []
    for r in range(n):
        for c in range(n):
            v = grid[r][c]
            if v:
                bit = 1 << v
                k = (r // box) * box + c // box
                if rows[r] & bit or cols[c] & bit or boxes[k] & bit:
                    return []
                rows[r] |= bit
                cols[c] |= bit
                boxes[k] |= bit
            else:
                empties.append((r, c, (r // box) * box + c // box))
    work = [row[:] for row in grid]
    found: list[Grid] = []

    def search(remaining: list[tuple[int, int, int]]) -> None:
        if not remaining:
            found.append([row[:] for row in work])
            return
        best_i, best_free, best_count = -1, 0, n + 1
        for i, (r, c, k) in enumerate(remaining):
            free = full & ~(rows[r] | cols[c] | boxes[k])
            count = free.bit_count()
            if count < best_count:
                best_i, best_free, best_count = i, free, count
                if count <= 1:
                    break
        if best_count == 0:
            return
        r, c, k = remaining[best_i]
        rest = remaining[:best_i] + remaining[best_i + 1 :]
        free = best_free
        while free and len(found) < limit:
            bit = free & -free
            free ^= bit
            rows[r] |= bit
            cols[c] |= bit
            boxes[k] |= bit
            work[r][c] = bit.bit_length() - 1
            search(rest)
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[k] ^= bit
        work[r][c] = 0

    search(empties)
    return found


register_game(
    "Sudoku",
    SudokuEnv,
    {
        "easy": {"size": 4, "clues": 10, "max_turns": 15},
        "hard": {"size": 9, "clues": 50, "max_turns": 50},
    },
)

"""FifteenPuzzle: slide numbered tiles into the blank until they read 1, 2, ... in order, blank last.

The board is ``size x size`` (2: the 3-puzzle, 4: the 15-puzzle). A move either names the direction
a tile slides into the blank (``up`` moves the tile below the blank up; also ``u``/``d``/``l``/``r``) or
names the tile itself (``\\boxed{7}`` slides tile 7, which must be next to the blank).

A new game scrambles the solved board with ``L`` random legal moves, never undoing the previous one,
with ``L`` drawn from ``[ceil(max_turns / 2), max_turns]`` (a scramble that happens to end solved is
drawn again). Playing the scramble backwards solves it, so the optimal solution is at most
``L <= max_turns`` moves: every game is winnable within the turn budget.

Progress ``p`` is the fraction of the ``size**2 - 1`` tiles on their home cell.

| event                                               | reward                        |
|-----------------------------------------------------|-------------------------------|
| move that puts a tile on its home cell              | +0.5 / (size**2 - 1)          |
| move that takes a tile off its home cell            | -0.5 / (size**2 - 1)          |
| move that solves the puzzle (episode ends)          | +0.5 / (size**2 - 1) + 1.0    |
| direction with no tile to slide, tile not next to the blank, no such tile, unreadable | -0.1 |
| no ``\\boxed{}`` in the reply                       | -0.1                          |
| turns run out                                       | +0.5 * p (partial credit)     |

The progress rewards telescope, so a game solved without mistakes returns exactly
``1.0 + 0.5 * (1 - p0)``, ``p0`` being the starting progress.
``solve_action`` plans with weighted A* (Manhattan distance + linear conflicts), lowering the
weight down to exact A* until the plan fits the turns left; exact A* always fits, since the optimal
solution is at most ``L`` moves.
"""

from __future__ import annotations

import bisect
import heapq
import math
from functools import cache, lru_cache
from typing import Any

from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game

PROGRESS_REWARD = 0.5
PARTIAL_CREDIT = 0.5
SUCCESS_REWARD = 1.0
# direction a tile slides -> (row, col) offset from the blank to that tile
DIRECTIONS = {"up": (1, 0), "down": (-1, 0), "left": (0, 1), "right": (0, -1)}
OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}
_ALIASES = {d[0]: d for d in DIRECTIONS}

Board = tuple[int, ...]  # size * size tiles, row by row, 0 = blank


class FifteenPuzzleEnv(GameEnv):
    def __init__(self, size: int = 4, max_turns: int = 50, reward_type: str = "dense"):
        super().__init__(max_turns, reward_type)
        if size < 2:
            raise ValueError("size must be at least 2")
        self.size = size
        self.solved: Board = (*range(1, size * size), 0)
        self.board: Board = self.solved

    def _new_game(self) -> str:
        self.board = self.solved
        while self.board == self.solved:
            previous = None
            for _ in range(self.rng.randint(math.ceil(self.max_turns / 2), self.max_turns)):
                options = [d for d in legal_moves(self.board, self.size) if d != OPPOSITE.get(previous)]
                previous = self.rng.choice(options)
                self.board = apply_move(self.board, self.size, previous)
        n = self.size
        return (
            f"You are playing the {n * n - 1}-puzzle on a {n}x{n} board. Slide the tiles until they read 1 to "
            f"{n * n - 1} in order, row by row, with the blank (__) in the bottom-right corner. Each turn, slide "
            "one tile next to the blank into it. Name the direction the tile moves (up, down, left, right: 'up' "
            "moves the tile below the blank up) or the number of the tile.\n"
            "Reply with your move inside \\boxed{}, e.g. \\boxed{up} or \\boxed{"
            f"{self.board[neighbours(self.board, n)[0]]}}}.\n"
            f"{self.render()}"
        )

    def render(self) -> str:
        n = self.size
        width = max(2, len(str(n * n - 1)))
        rows = [
            " ".join(str(v).rjust(width) if v else "_" * width for v in self.board[r * n : (r + 1) * n])
            for r in range(n)
        ]
        return "Board:\n" + "\n".join(rows)

    def progress(self) -> float:
        in_place = sum(v == goal for v, goal in zip(self.board, self.solved) if goal)
        return in_place / (self.size * self.size - 1)

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        word = move.strip().lower()
        direction = _ALIASES.get(word, word)
        n = self.size
        if direction in DIRECTIONS:
            if direction not in legal_moves(self.board, n):
                return self._invalid(f"No tile can slide {direction}: the blank is at the edge of the board.")
        elif word.isascii() and word.isdecimal() and len(word) <= 3:
            tile = int(word)
            if not 1 <= tile < n * n:
                return self._invalid(f"There is no tile {tile} (tiles are 1 to {n * n - 1}).")
            direction = next((d for d in legal_moves(self.board, n) if _tile(self.board, n, d) == tile), None)
            if direction is None:
                return self._invalid(f"Tile {tile} is not next to the blank.")
        else:
            return self._invalid(
                f"'{move[:40]}' is not a move: name a direction or a tile next to the blank."
            )
        tile = _tile(self.board, n, direction)
        before = self.progress()
        self.board = apply_move(self.board, n, direction)
        reward = PROGRESS_REWARD * (self.progress() - before)
        if self.board == self.solved:
            text = f"You slid {tile} {direction} and solved the puzzle!\n{self.render()}"
            return text, reward + SUCCESS_REWARD, True, {"success": True}
        return f"You slid {tile} {direction}.\n{self.render()}", reward, False, {}

    def _invalid(self, why: str) -> tuple[str, float, bool, dict[str, Any]]:
        return f"Invalid move. {why}\n{self.render()}", INVALID_MOVE_PENALTY, False, {"invalid_move": True}

    def _final_reward(self) -> float:
        return PARTIAL_CREDIT * self.progress()

    def state_key(self) -> tuple:
        """The board."""
        return self.board

    def _random_move(self) -> str:
        return self.action_rng.choice(sorted(DIRECTIONS))

    def _legal_moves(self) -> list[str]:
        return legal_moves(self.board, self.size)

    def solve_action(self) -> str:
        """The next move of a plan that fits the turns left (plans are cached per position)."""
        key = (self.board, self.size)
        plan = _PLANS.get(key)
        if plan is None or len(plan) > self.max_turns - self.turn:
            if len(_PLANS) > 10_000:
                _PLANS.clear()
            plan, board = solve(self.board, self.size, self.max_turns - self.turn), self.board
            for i, d in enumerate(plan):
                _PLANS[(board, self.size)] = plan[i:]
                board = apply_move(board, self.size, d)
        return f"\\boxed{{{plan[0] if plan else 'up'}}}"


def legal_moves(board: Board, size: int) -> list[str]:
    """Directions in which some tile can slide into the blank."""
    r, c = divmod(board.index(0), size)
    return [d for d, (dr, dc) in DIRECTIONS.items() if 0 <= r + dr < size and 0 <= c + dc < size]


def neighbours(board: Board, size: int) -> list[int]:
    """Indices of the cells next to the blank."""
    blank = board.index(0)
    return [blank + dr * size + dc for dr, dc in (DIRECTIONS[d] for d in legal_moves(board, size))]


def _tile(board: Board, size: int, direction: str) -> int:
    dr, dc = DIRECTIONS[direction]
    return board[board.index(0) + dr * size + dc]


def apply_move(board: Board, size: int, direction: str) -> Board:
    """The board after sliding the tile next to the blank in ``direction`` (which must be legal)."""
    blank = board.index(0)
    dr, dc = DIRECTIONS[direction]
    other = blank + dr * size + dc
    cells = list(board)
    cells[blank], cells[other] = cells[other], 0
    return tuple(cells)


# ---- the scripted player: weighted A* with Manhattan distance plus linear conflicts --------------
SEARCH_WEIGHTS = (2.0, 1.5, 1.0)  # tried in order until the plan fits the turns left; 1.0 is exact A*


@cache
def _distances(size: int) -> tuple[tuple[int, ...], ...]:
    """``_distances(size)[tile][cell]``: Manhattan distance from ``cell`` to the tile's home."""
    table = [(0,) * (size * size)]
    for v in range(1, size * size):
        gr, gc = divmod(v - 1, size)
        table.append(
            tuple(abs(r - gr) + abs(c - gc) for r, c in (divmod(i, size) for i in range(size * size)))
        )
    return tuple(table)


@lru_cache(maxsize=1 << 16)
def _line_conflicts(tiles: tuple[int, ...], size: int, line: int, is_row: bool) -> int:
    """Two tiles in their home row (column) in reversed order: one must step aside, 2 extra moves each."""
    own = [v for v in tiles if v and ((v - 1) // size if is_row else (v - 1) % size) == line]
    tails: list[int] = []  # tails[k]: the smallest last tile of an increasing run of length k + 1
    for v in own:
        k = bisect.bisect_left(tails, v)
        tails[k : k + 1] = [v]
    return 2 * (len(own) - len(tails))


def heuristic(board: Board, size: int) -> int:
    """A lower bound on the moves left: Manhattan distance plus linear conflicts."""
    distances = _distances(size)
    total = sum(distances[v][i] for i, v in enumerate(board))
    for line in range(size):
        total += _line_conflicts(board[line * size : (line + 1) * size], size, line, True)
        total += _line_conflicts(board[line::size], size, line, False)
    return total


def _astar(board: Board, size: int, weight: float) -> list[str]:
    goal = (*range(1, size * size), 0)
    frontier = [(weight * heuristic(board, size), 0, board)]
    came_from: dict[Board, tuple[Board, str] | None] = {board: None}
    cost = {board: 0}
    while frontier:
        _, g, state = heapq.heappop(frontier)
        if g > cost[state]:
            continue
        if state == goal:
            path = []
            while (step := came_from[state]) is not None:
                state, direction = step
                path.append(direction)
            return path[::-1]
        for d in legal_moves(state, size):
            child = apply_move(state, size, d)
            if g + 1 < cost.get(child, math.inf):
                cost[child], came_from[child] = g + 1, (state, d)
                heapq.heappush(frontier, (g + 1 + weight * heuristic(child, size), g + 1, child))
    return []  # unreachable for a scrambled board: every scramble is solvable


def solve(board: Board, size: int, max_moves: int) -> list[str]:
    """A plan of at most ``max_moves`` moves if weighted A* finds one, else a shortest plan (exact A*)."""
    for weight in SEARCH_WEIGHTS:
        plan = _astar(board, size, weight)
        if len(plan) <= max_moves:
            break
    return plan


_PLANS: dict[tuple[Board, int], list[str]] = {}  # position -> the rest of a plan through it


register_game(
    "FifteenPuzzle",
    FifteenPuzzleEnv,
    {
        "easy": {"size": 2, "max_turns": 10},
        "hard": {"size": 4, "max_turns": 50},
    },
)

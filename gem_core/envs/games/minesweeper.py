"""Minesweeper: reveal every safe cell of a grid without stepping on a mine.

The grid has ``rows`` × ``cols`` cells and ``num_mines`` hidden mines. Moves name a cell by row and
column, counted from 1: ``\\boxed{reveal 2 3}`` opens it, ``\\boxed{flag 2 3}`` / ``\\boxed{unflag 2 3}``
marks or unmarks a suspected mine (flags are only notes to yourself; they are not needed to win).
An opened cell shows how many of its 8 neighbours are mines; opening a 0 opens its neighbours too.
The mines are placed at the first reveal, away from that cell and (when the grid has room) its
neighbours, so the first reveal always opens an area. Opening a mine ends the game.
Progress is the fraction of safe cells opened.

| event                                                  | reward                                 |
|--------------------------------------------------------|----------------------------------------|
| a reveal that opens safe cells                         | +0.5 × (cells opened) / (safe cells)   |
| the last safe cell opened (episode ends, success)      | +1.0, plus the cells opened            |
| opening a mine (episode ends, failure)                 |  0.0                                   |
| flag / unflag                                          |  0.0                                   |
| cell off the grid / not "reveal/flag/unflag R C"       | -0.1                                   |
| revealing an open or flagged cell, re-flagging a flag  | -0.1                                   |
| no ``\\boxed{}`` in the reply                          | -0.1                                   |
| turns run out                                          |  0.0 (the cell rewards paid, 0.5 × fraction opened, are the partial credit) |

The cell rewards add up to 0.5 × the fraction opened, so a win without penalties returns exactly 1.5.

``solve_action`` computes, from the visible board only, the exact probability that each hidden
cell is a mine (all mine layouts consistent with the numbers and the mine count, equally likely) and
opens a certainly-safe cell, or else the least likely mine. Measured over seeds 0-3999 (easy) and
0-999 (hard) it wins 81% of games at both levels; the others end on a forced guess that hits a mine.
"""

from __future__ import annotations

import re
from math import comb
from typing import Any

from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game

PROGRESS_REWARD = 0.5  # paid in total, as the opened fraction of safe cells climbs from 0 to 1
WIN_REWARD = 1.0

HIDDEN, FLAG, MINE = "#", "F", "*"
_MOVE = re.compile(r"[a-z0-9\s,;:()\[\]]*")
_FILLER = {"row", "col", "column", "cell", "at", "r", "c"}  # "reveal row 2, col 3" reads as "reveal 2 3"


def _neighbours(r: int, c: int, rows: int, cols: int) -> list[tuple[int, int]]:
    return [
        (r + dr, c + dc)
        for dr in (-1, 0, 1)
        for dc in (-1, 0, 1)
        if (dr or dc) and 0 <= r + dr < rows and 0 <= c + dc < cols
    ]


class MinesweeperEnv(GameEnv):
    def __init__(
        self,
        rows: int = 8,
        cols: int = 8,
        num_mines: int = 12,
        max_turns: int = 64,
        reward_type: str = "dense",
    ):
        super().__init__(max_turns, reward_type)
        if rows < 2 or cols < 2 or not 1 <= num_mines < rows * cols:
            raise ValueError("need a grid of at least 2x2 and 1 <= num_mines < rows * cols")
        self.rows, self.cols, self.num_mines = rows, cols, num_mines
        self.mines: set[tuple[int, int]] = set()  # empty until the first reveal
        self.opened: set[tuple[int, int]] = set()
        self.flags: set[tuple[int, int]] = set()

    @property
    def num_safe(self) -> int:
        return self.rows * self.cols - self.num_mines

    def _new_game(self) -> str:
        self.mines, self.opened, self.flags = set(), set(), set()
        return (
            f"You are playing Minesweeper on a {self.rows}x{self.cols} grid hiding {self.num_mines} mines. "
            "Open every cell that is not a mine. An opened cell shows how many of its 8 neighbours are mines; "
            "opening a 0 also opens its neighbours. Opening a mine loses the game; your first reveal is "
            "always safe. Rows and columns are numbered from 1. Moves: \\boxed{reveal R C} opens the cell in "
            "row R, column C; \\boxed{flag R C} and \\boxed{unflag R C} mark and unmark a suspected mine. "
            f"# is a hidden cell, F a flag.\n{self.board_text()}"
        )

    # ---- what the player sees ------------------------------------------------------------------
    def _count(self, r: int, c: int) -> int:
        return sum(n in self.mines for n in _neighbours(r, c, self.rows, self.cols))

    def board(self, show_mines: bool = False) -> list[list[str]]:
        """The grid as the player sees it: digits for opened cells, ``#`` hidden, ``F`` flagged."""
        grid = []
        for r in range(self.rows):
            row = []
            for c in range(self.cols):
                if (r, c) in self.opened:
                    row.append(str(self._count(r, c)))
                elif show_mines and (r, c) in self.mines:
                    row.append(MINE)
                else:
                    row.append(FLAG if (r, c) in self.flags else HIDDEN)
            grid.append(row)
        return grid

    def board_text(self, show_mines: bool = False) -> str:
        width = len(str(max(self.rows, self.cols)))
        header = " " * (width + 1) + " ".join(f"{c + 1:>{width}}" for c in range(self.cols))
        lines = [
            f"{r + 1:>{width}} " + " ".join(f"{cell:>{width}}" for cell in row)
            for r, row in enumerate(self.board(show_mines))
        ]
        return "\n".join([header, *lines])

    # ---- moves ---------------------------------------------------------------------------------
    def _parse(self, move: str) -> tuple[str, int, int] | str:
        text = move.lower()
        if not _MOVE.fullmatch(text):
            return f"'{move[:40]}' is not a move like 'reveal 2 3' or 'flag 2 3'."
        words = [w for w in re.findall(r"[a-z]+", text) if w not in _FILLER]
        numbers = re.findall(r"[0-9]+", text)
        verb = words[0] if len(words) == 1 else ("reveal" if not words else "")
        verb = {"open": "reveal", "click": "reveal"}.get(verb, verb)
        if verb not in ("reveal", "flag", "unflag") or len(numbers) != 2:
            return f"'{move[:40]}' is not a move like 'reveal 2 3' or 'flag 2 3'."
        r, c = int(numbers[0][:6]) - 1, int(numbers[1][:6]) - 1
        if not (0 <= r < self.rows and 0 <= c < self.cols):
            return f"Cell ({r + 1}, {c + 1}) is off the grid: rows 1-{self.rows}, columns 1-{self.cols}."
        return verb, r, c

    def _place_mines(self, first: tuple[int, int]) -> None:
        cells = [(r, c) for r in range(self.rows) for c in range(self.cols)]
        keep_clear = {first, *_neighbours(*first, self.rows, self.cols)}
        if len(cells) - len(keep_clear) < self.num_mines:
            keep_clear = {first}
        self.mines = set(self.rng.sample([x for x in cells if x not in keep_clear], self.num_mines))

    def _open(self, start: tuple[int, int]) -> int:
        """Open ``start`` and, flood-fill style, the neighbours of every 0 opened; the count opened."""
        stack, opened = [start], 0
        while stack:
            cell = stack.pop()
            if cell in self.opened or cell in self.flags:
                continue
            self.opened.add(cell)
            opened += 1
            if self._count(*cell) == 0:
                stack.extend(_neighbours(*cell, self.rows, self.cols))
        return opened

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        parsed = self._parse(move)
        if isinstance(parsed, str):
            return parsed, INVALID_MOVE_PENALTY, False, {"invalid_move": True}
        verb, r, c = parsed
        cell, name = (r, c), f"({r + 1}, {c + 1})"
        problem = None
        if cell in self.opened:
            problem = f"Cell {name} is already open."
        elif verb == "reveal" and cell in self.flags:
            problem = f"Cell {name} is flagged; unflag it first."
        elif verb == "flag" and cell in self.flags:
            problem = f"Cell {name} is already flagged."
        elif verb == "unflag" and cell not in self.flags:
            problem = f"Cell {name} has no flag."
        if problem is not None:
            return f"{problem}\n{self.board_text()}", INVALID_MOVE_PENALTY, False, {"invalid_move": True}
        if verb != "reveal":
            (self.flags.add if verb == "flag" else self.flags.discard)(cell)
            return (
                f"{'Flagged' if verb == 'flag' else 'Unflagged'} {name}.\n{self.board_text()}",
                0.0,
                False,
                {},
            )
        if not self.mines:
            self._place_mines(cell)
        if cell in self.mines:
            return f"BOOM! {name} was a mine. Game over.\n{self.board_text(show_mines=True)}", 0.0, True, {}
        opened = self._open(cell)
        reward = PROGRESS_REWARD * opened / self.num_safe
        if len(self.opened) == self.num_safe:
            return (
                f"You cleared the minefield!\n{self.board_text()}",
                reward + WIN_REWARD,
                True,
                {"success": True},
            )
        return f"Opened {opened} cell{'s' if opened > 1 else ''}.\n{self.board_text()}", reward, False, {}

    def state_key(self) -> tuple:
        """The mines (none before the first reveal places them), the opened cells and the flags."""
        return (tuple(sorted(self.mines)), tuple(sorted(self.opened)), tuple(sorted(self.flags)))

    def _random_move(self) -> str:
        hidden = [(r, c) for r in range(self.rows) for c in range(self.cols) if (r, c) not in self.opened]
        r, c = self.action_rng.choice(hidden)
        if (r, c) in self.flags:
            verb = "unflag"
        else:
            verb = "reveal" if self.action_rng.random() < 0.9 else "flag"
        return f"{verb} {r + 1} {c + 1}"

    def _legal_moves(self) -> list[str]:
        """Revealing a hidden cell that is not flagged (flags are the player's notes, not moves of the game)."""
        return [
            f"reveal {r + 1} {c + 1}"
            for r in range(self.rows)
            for c in range(self.cols)
            if (r, c) not in self.opened and (r, c) not in self.flags
        ]

    def solve_action(self) -> str:
        """Open a cell that is certainly safe, or else the one least likely to be a mine (ties: row-major)."""
        board = self.board()
        if not any(ch.isdigit() for row in board for ch in row):
            return f"\\boxed{{reveal {self.rows // 2 + 1} {self.cols // 2 + 1}}}"
        probs = mine_probabilities(board, self.num_mines)
        candidates = [cell for cell in probs if board[cell[0]][cell[1]] == HIDDEN]
        r, c = min(candidates, key=lambda cell: (round(probs[cell], 9), cell))
        return f"\\boxed{{reveal {r + 1} {c + 1}}}"


# ---- the scripted player -----------------------------------------------------------------------
def mine_probabilities(board: list[list[str]], num_mines: int) -> dict[tuple[int, int], float]:
    """The exact chance that each hidden (or flagged) cell is a mine, given the opened numbers and the
    total mine count, with every consistent layout equally likely."""
    rows, cols = len(board), len(board[0])
    hidden = [(r, c) for r in range(rows) for c in range(cols) if not board[r][c].isdigit()]
    constraints = []  # (hidden neighbours, mines among them)
    for r in range(rows):
        for c in range(cols):
            if board[r][c].isdigit():
                cells = [n for n in _neighbours(r, c, rows, cols) if not board[n[0]][n[1]].isdigit()]
                if cells:
                    constraints.append((cells, int(board[r][c])))
    frontier = sorted({cell for cells, _ in constraints for cell in cells})
    interior = [cell for cell in hidden if cell not in set(frontier)]

    # Split the frontier into groups of cells linked by constraints; enumerate each group alone.
    parent = {cell: cell for cell in frontier}

    def find(x: tuple[int, int]) -> tuple[int, int]:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for cells, _ in constraints:
        for cell in cells[1:]:
            parent[find(cell)] = find(cells[0])
    groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for cell in frontier:
        groups.setdefault(find(cell), []).append(cell)
    # Per group: {mines used: (layouts, per-cell mine counts)}
    tables = [
        _enumerate(cells, [k for k in constraints if find(k[0][0]) == root]) for root, cells in groups.items()
    ]

    # Combine the groups and the interior cells, weighting by C(interior, mines left).
    def convolve(parts: list[dict[int, int]]) -> dict[int, int]:
        total = {0: 1}
        for part in parts:
            nxt: dict[int, int] = {}
            for a, wa in total.items():
                for b, wb in part.items():
                    nxt[a + b] = nxt.get(a + b, 0) + wa * wb
            total = nxt
        return total

    counts = [{k: v[0] for k, v in t.items()} for t in tables]
    everything = convolve(counts)
    n_in = len(interior)
    z = sum(w * comb(n_in, num_mines - k) for k, w in everything.items() if 0 <= num_mines - k <= n_in)
    probs: dict[tuple[int, int], float] = {}
    for i, (table, cells) in enumerate(zip(tables, groups.values())):
        others = convolve(counts[:i] + counts[i + 1 :])
        for k, (_, per_cell) in table.items():
            weight = sum(
                w * comb(n_in, num_mines - k - j) for j, w in others.items() if 0 <= num_mines - k - j <= n_in
            )
            for cell, m in zip(cells, per_cell):
                probs[cell] = probs.get(cell, 0.0) + m * weight / z
    if n_in:
        expected = sum(
            w * comb(n_in, num_mines - k) * (num_mines - k)
            for k, w in everything.items()
            if 0 <= num_mines - k <= n_in
        )
        for cell in interior:
            probs[cell] = expected / z / n_in
    return probs


def _enumerate(cells: list[tuple[int, int]], constraints: list) -> dict[int, tuple[int, list[int]]]:
    """Every mine layout of ``cells`` that meets ``constraints``, tallied by number of mines."""
    index = {cell: i for i, cell in enumerate(cells)}
    cons = [([index[c] for c in cs], need) for cs, need in constraints]
    watching: list[list[int]] = [[] for _ in cells]
    for j, (cs, _) in enumerate(cons):
        for i in cs:
            watching[i].append(j)
    assigned, placed, unknown = [0] * len(cells), [0] * len(cons), [len(cs) for cs, _ in cons]
    table: dict[int, tuple[int, list[int]]] = {}

    def search(i: int, mines: int) -> None:
        if i == len(cells):
            layouts, per_cell = table.get(mines, (0, [0] * len(cells)))
            table[mines] = (layouts + 1, [p + a for p, a in zip(per_cell, assigned)])
            return
        for value in (0, 1):
            ok = True
            for j in watching[i]:
                placed[j] += value
                unknown[j] -= 1
                need = cons[j][1]
                ok = ok and placed[j] <= need <= placed[j] + unknown[j]
            if ok:
                assigned[i] = value
                search(i + 1, mines + value)
                assigned[i] = 0
            for j in watching[i]:
                placed[j] -= value
                unknown[j] += 1

    search(0, 0)
    return table


register_game(
    "Minesweeper",
    MinesweeperEnv,
    {
        "easy": {"rows": 5, "cols": 5, "num_mines": 5, "max_turns": 25},
        "hard": {"rows": 8, "cols": 8, "num_mines": 12, "max_turns": 64},
    },
)

"""WordSearch: find the listed words hidden in a grid of letters.

``num_words`` common English words (5 or 7 letters, ``gem_core/data/words/answers_{5,7}.txt``) are
hidden in a square grid filled up with random letters; each listed word occurs exactly once. A move
marks one word by its first and last cells, row then column, counted from 1:
``\\boxed{2 1 2 5}`` marks row 2, columns 1 to 5 (marking it from its last letter back to its first
counts too); ``(2,1)-(2,5)`` and ``(2, 5) -> (2, 1)`` are read the same. Anything else in a move (words,
signs such as ``-2``, digits that are not ASCII) makes it unreadable. Found words are shown in lowercase.

Difficulty: the easy grid is 8×8 and words run only left-to-right or top-to-bottom; the ``hardcore``
grid is 10×10 and words run in any of the 8 directions, backwards and diagonally included. The word
list is shown in both.

| event                                                  | reward                        |
|--------------------------------------------------------|-------------------------------|
| marking a listed word                                  | +0.5 / num_words              |
| marking a straight line that holds no listed word      |  0.0                          |
| the last word found (episode ends, success)            | +1.0, plus its word's reward  |
| off the grid / not a straight line / not 4 numbers     | -0.1                          |
| marking a found word again, or repeating a miss        | -0.1                          |
| no ``\\boxed{}`` in the reply                          | -0.1                          |
| turns run out                                          |  0.0 (the word rewards paid, 0.5 × fraction found, are the partial credit) |

The word rewards add up to 0.5, so a win without penalties returns exactly 1.5.
"""

from __future__ import annotations

import re
import string
from typing import Any

from gem_core.envs.games import wordlists
from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game

PROGRESS_REWARD = 0.5  # paid in total, one equal share per word found
WIN_REWARD = 1.0

EASY_DIRECTIONS = ((0, 1), (1, 0))
ALL_DIRECTIONS = tuple((dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc)

# What may stand between the 4 numbers of a move; a "+" or "-" right before a number is a sign.
_SEPARATORS = re.compile(r"->|→|\bto\b|\band\b|[\s,;:()\[\]-]")
_SIGNED = re.compile(r"(?:^|[\s(\[,;:])[-+][0-9]")

Line = tuple[int, int, int, int]  # first row, first column, last row, last column (from 0)


def occurrences(grid: list[str], word: str) -> list[Line]:
    """Every straight line of ``grid`` that spells ``word`` (any of the 8 directions)."""
    rows, cols, n = len(grid), len(grid[0]), len(word)
    found = []
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] != word[0]:
                continue
            for dr, dc in ALL_DIRECTIONS:
                end_r, end_c = r + (n - 1) * dr, c + (n - 1) * dc
                if (
                    0 <= end_r < rows
                    and 0 <= end_c < cols
                    and all(grid[r + k * dr][c + k * dc] == word[k] for k in range(n))
                ):
                    found.append((r, c, end_r, end_c))
    return found


class WordSearchEnv(GameEnv):
    def __init__(
        self, num_words: int = 5, hardcore: bool = True, max_turns: int = 20, reward_type: str = "dense"
    ):
        super().__init__(max_turns, reward_type)
        if not 1 <= num_words <= 10:
            raise ValueError("num_words must be between 1 and 10")
        self.num_words, self.hardcore = num_words, hardcore
        self.size = 10 if hardcore else 8
        self.grid: list[str] = []  # uppercase rows
        self.words: list[str] = []
        self.found: dict[str, Line] = {}
        self.misses: list[Line] = []

    def _new_game(self) -> str:
        vocabulary = sorted(set(wordlists.words("answers", 5)) | set(wordlists.words("answers", 7)))
        for _ in range(1000):
            words = self.rng.sample(vocabulary, self.num_words)
            if any(a != b and a in b for a in words for b in words):
                continue
            grid = self._hide([w.upper() for w in words])
            if grid is not None:
                break
        else:
            raise RuntimeError(f"could not hide {self.num_words} words in a {self.size}x{self.size} grid")
        self.grid, self.words = grid, sorted(words)
        self.found, self.misses = {}, []
        where = (
            "in any direction, backwards and diagonally too"
            if self.hardcore
            else "left-to-right or top-to-bottom"
        )
        return (
            f"You are playing Word Search. These {self.num_words} words are hidden in the grid below, "
            f"{where}: {', '.join(w.upper() for w in self.words)}. Mark one word per turn by the row and "
            "column of its first and last letters (numbered from 1), e.g. \\boxed{2 1 2 5} for a word in row "
            f"2 from column 1 to column 5.\n{self._board_text()}"
        )

    def _hide(self, words: list[str]) -> list[str] | None:
        """A grid holding each word exactly once, or None if this draw does not fit."""
        directions = ALL_DIRECTIONS if self.hardcore else EASY_DIRECTIONS
        n = self.size
        cells: dict[tuple[int, int], str] = {}
        for word in sorted(words, key=len, reverse=True):
            for _ in range(200):
                dr, dc = self.rng.choice(directions)
                r, c = self.rng.randrange(n), self.rng.randrange(n)
                line = [(r + k * dr, c + k * dc) for k in range(len(word))]
                if all(
                    0 <= y < n and 0 <= x < n and cells.get((y, x), ch) == ch
                    for (y, x), ch in zip(line, word)
                ):
                    cells.update(zip(line, word))
                    break
            else:
                return None
        for _ in range(20):
            grid = [
                "".join(cells.get((r, c)) or self.rng.choice(string.ascii_uppercase) for c in range(n))
                for r in range(n)
            ]
            if all(len(occurrences(grid, w)) == 1 for w in words):
                return grid
        return None

    # ---- what the player sees ------------------------------------------------------------------
    def board(self) -> list[str]:
        """The grid as the player sees it: letters of found words in lowercase."""
        marked = {cell for line in self.found.values() for cell in _cells(line)}
        return [
            "".join(ch.lower() if (r, c) in marked else ch for c, ch in enumerate(row))
            for r, row in enumerate(self.grid)
        ]

    def _board_text(self) -> str:
        width = len(str(self.size))
        header = " " * (width + 1) + " ".join(f"{c + 1:>{width}}" for c in range(self.size))
        lines = [
            f"{r + 1:>{width}} " + " ".join(f"{ch:>{width}}" for ch in row)
            for r, row in enumerate(self.board())
        ]
        left = [w.upper() for w in self.words if w not in self.found]
        return "\n".join([header, *lines, f"Words left to find: {', '.join(left) or '(none)'}"])

    # ---- moves ---------------------------------------------------------------------------------
    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        numbers = re.findall(r"[0-9]+", move)
        problem = None
        if _SEPARATORS.sub("", re.sub(r"[0-9]+", " ", move.lower())) or _SIGNED.search(move):
            problem = f"'{move[:40]}' is not a move: write 4 numbers, e.g. 2 1 2 5."
        elif len(numbers) != 4:
            problem = (
                f"A move is 4 numbers (first row, first column, last row, last column); got {len(numbers)}."
            )
        else:
            r1, c1, r2, c2 = (int(x[:4]) - 1 for x in numbers)
            line = (r1, c1, r2, c2)
            if not all(0 <= v < self.size for v in line):
                problem = f"Rows and columns run from 1 to {self.size}."
            elif (r1, c1) == (r2, c2) or not (r1 == r2 or c1 == c2 or abs(r1 - r2) == abs(c1 - c2)):
                problem = "The two cells must be different and on one row, column or diagonal."
        if problem is not None:
            return f"{problem}\n{self._board_text()}", INVALID_MOVE_PENALTY, False, {"invalid_move": True}
        text = "".join(self.grid[r][c] for r, c in _cells(line)).lower()
        word = text if text in self.words else text[::-1] if text[::-1] in self.words else None
        shown = f"({r1 + 1},{c1 + 1})-({r2 + 1},{c2 + 1})"
        if word in self.found:
            problem = f"You already found {word.upper()}."
        elif word is None and (line in self.misses or line[2:] + line[:2] in self.misses):
            problem = f"You already marked {shown}."
        if problem is not None:
            return f"{problem}\n{self._board_text()}", INVALID_MOVE_PENALTY, False, {"invalid_move": True}
        if word is None:
            self.misses.append(line)
            return (
                f"{shown} spells {text.upper()}, which is not a listed word.\n{self._board_text()}",
                0.0,
                False,
                {},
            )
        self.found[word] = line
        reward = PROGRESS_REWARD / self.num_words
        if len(self.found) == len(self.words):
            return (
                f"You found all the words!\n{self._board_text()}",
                reward + WIN_REWARD,
                True,
                {"success": True},
            )
        return f"Found {word.upper()}!\n{self._board_text()}", reward, False, {}

    def state_key(self) -> tuple:
        """The grid and words, the words found (with their lines) and the lines marked in vain; a line
        and its reverse are one line."""
        found = tuple(sorted((word, _undirected(line)) for word, line in self.found.items()))
        return (
            tuple(self.grid),
            tuple(self.words),
            found,
            tuple(sorted({_undirected(x) for x in self.misses})),
        )

    def _random_move(self) -> str:
        while True:
            r, c = self.action_rng.randrange(self.size), self.action_rng.randrange(self.size)
            dr, dc = self.action_rng.choice(ALL_DIRECTIONS)
            room = min(self._room(r, dr), self._room(c, dc))
            if room >= 1:
                k = self.action_rng.randint(1, room)
                return f"{r + 1} {c + 1} {r + k * dr + 1} {c + k * dc + 1}"

    def _room(self, x: int, step: int) -> int:
        """How many steps of ``step`` (-1, 0 or 1) fit from ``x`` inside the grid."""
        return self.size - 1 - x if step > 0 else x if step < 0 else self.size

    def solve_action(self) -> str:
        """Search the visible grid for the first listed word not yet found and mark it."""
        grid = [row.upper() for row in self.board()]
        left = [w for w in self.words if w not in self.found]
        for word in left:
            for r1, c1, r2, c2 in occurrences(grid, word.upper()):
                return f"\\boxed{{{r1 + 1} {c1 + 1} {r2 + 1} {c2 + 1}}}"
        return self.sample_random_action()


def _undirected(line: Line) -> Line:
    """``line`` or its reverse, whichever is smaller: the same cells either way."""
    return min(line, line[2:] + line[:2])


def _cells(line: Line) -> list[tuple[int, int]]:
    r1, c1, r2, c2 = line
    n = max(abs(r2 - r1), abs(c2 - c1))
    dr, dc = (r2 > r1) - (r2 < r1), (c2 > c1) - (c2 < c1)
    return [(r1 + k * dr, c1 + k * dc) for k in range(n + 1)]


register_game(
    "WordSearch",
    WordSearchEnv,
    {
        "easy": {"num_words": 5, "hardcore": False, "max_turns": 20},
        "hard": {"num_words": 5, "hardcore": True, "max_turns": 20},
    },
)

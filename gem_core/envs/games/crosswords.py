"""Crosswords: fill a small crossword grid from its clues.

``num_words`` answers (3-6 letters, from ``gem_core/data/words/clues.tsv``) are laid across and down so
that each crosses another one. Slots are numbered as in a printed crossword, and each clue says where
its word starts and how long it is. A move answers one slot: ``\\boxed{1 across apple}`` (``1a apple``,
``2-down: GRAPE`` and ``apple 2 down`` are read the same). A right answer writes its letters into the
grid, so crossing slots get letters for free.

Difficulty: the easy grid starts with the first letter of every answer filled in; in ``hardcore`` mode
the grid starts empty, with only the clues and word lengths to go on.

| event                                                  | reward                        |
|--------------------------------------------------------|-------------------------------|
| a right answer                                         | +0.5 / num_words              |
| a wrong answer of the right length                     |  0.0                          |
| the last slot filled (episode ends, success)           | +1.0, plus its word's reward  |
| no such slot / wrong length / not "N across/down WORD" | -0.1                          |
| answering a solved slot, or repeating a wrong answer   | -0.1                          |
| no ``\\boxed{}`` in the reply                          | -0.1                          |
| turns run out                                          |  0.0 (the word rewards paid, 0.5 × fraction solved, are the partial credit) |

The word rewards add up to 0.5, so a win without penalties returns exactly 1.5.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gem_core.envs.games import wordlists
from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game

PROGRESS_REWARD = 0.5  # paid in total, one equal share per word solved
WIN_REWARD = 1.0

BLOCK, BLANK = "#", "_"
STEP = {"across": (0, 1), "down": (1, 0)}
_MOVE = re.compile(r"[a-z0-9\s\-.:=,;()]*")
_SIGNED = re.compile(r"(?:^|[\s(,;:=])[-+][0-9]")  # a signed clue number ("-1 across")
_DIRECTIONS = {"across": "across", "a": "across", "ac": "across", "down": "down", "d": "down", "dn": "down"}


@dataclass
class Slot:
    number: int
    direction: str  # "across" or "down"
    row: int
    col: int
    answer: str
    clue: str

    @property
    def name(self) -> str:
        return f"{self.number} {self.direction}"

    def cells(self) -> list[tuple[int, int]]:
        dr, dc = STEP[self.direction]
        return [(self.row + k * dr, self.col + k * dc) for k in range(len(self.answer))]


def layout(words: list[str], rng: Any, tries: int = 60) -> list[tuple[str, str, int, int]] | None:
    """Place ``words`` in order, each crossing one already placed, with no other contact between them
    (as in a printed crossword): ``(word, direction, row, col)``, or None if they do not fit."""
    placed = [(words[0], "across", 0, 0)]
    letters: dict[tuple[int, int], str] = {(0, k): ch for k, ch in enumerate(words[0])}
    directions: dict[tuple[int, int], str] = dict.fromkeys(letters, "across")
    for word in words[1:]:
        options = []
        for other, other_dir, r0, c0 in placed:
            direction = "down" if other_dir == "across" else "across"
            dr, dc = STEP[direction]
            odr, odc = STEP[other_dir]
            for i, ch in enumerate(other):
                for j, wch in enumerate(word):
                    if ch == wch:
                        start = (r0 + i * odr - j * dr, c0 + i * odc - j * dc)
                        if _fits(word, direction, start, letters, directions):
                            options.append((word, direction, *start))
        if not options:
            return None
        choice = rng.choice(sorted(set(options)))
        placed.append(choice)
        for k, ch in enumerate(word):
            cell = (choice[2] + k * STEP[choice[1]][0], choice[3] + k * STEP[choice[1]][1])
            letters[cell] = ch
            directions[cell] = "both" if cell in directions else choice[1]
    return placed


def _fits(word: str, direction: str, start: tuple[int, int], letters: dict, directions: dict) -> bool:
    (dr, dc), (r, c) = STEP[direction], start
    if (r - dr, c - dc) in letters or (r + len(word) * dr, c + len(word) * dc) in letters:
        return False
    for k, ch in enumerate(word):
        cell = (r + k * dr, c + k * dc)
        if cell in letters:
            if letters[cell] != ch or directions[cell] in (direction, "both"):
                return False
        elif (cell[0] + dc, cell[1] + dr) in letters or (cell[0] - dc, cell[1] - dr) in letters:
            return False
    return True


class CrosswordsEnv(GameEnv):
    def __init__(
        self, num_words: int = 3, hardcore: bool = True, max_turns: int = 40, reward_type: str = "dense"
    ):
        super().__init__(max_turns, reward_type)
        if not 1 <= num_words <= 8:
            raise ValueError("num_words must be between 1 and 8")
        self.num_words, self.hardcore = num_words, hardcore
        self.rows = self.cols = 0
        self.slots: list[Slot] = []
        self.shown: set[tuple[int, int]] = set()  # cells whose letters the player sees
        self.solved: list[str] = []  # slot names
        self.wrong: dict[str, list[str]] = {}  # slot name -> wrong answers given

    def _new_game(self) -> str:
        vocabulary = sorted(wordlists.clues())
        for _ in range(10_000):
            placed = layout(self.rng.sample(vocabulary, self.num_words), self.rng)
            if placed is not None:
                break
        else:
            raise RuntimeError(f"could not lay out {self.num_words} crossing words")
        top = min(r for _, _, r, _ in placed)
        left = min(c for _, _, _, c in placed)
        starts = sorted({(r - top, c - left) for _, _, r, c in placed})
        clues = wordlists.clues()
        self.slots = sorted(
            (
                Slot(starts.index((r - top, c - left)) + 1, d, r - top, c - left, w, clues[w])
                for w, d, r, c in placed
            ),
            key=lambda s: (s.direction, s.number),
        )
        cells = {cell for slot in self.slots for cell in slot.cells()}
        self.rows, self.cols = max(r for r, _ in cells) + 1, max(c for _, c in cells) + 1
        self.shown = set() if self.hardcore else {slot.cells()[0] for slot in self.slots}
        self.solved, self.wrong = [], {}
        hint = "" if self.hardcore else " The first letter of every answer is already filled in."
        return (
            f"You are playing a crossword with {self.num_words} words. In the grid, # is a blocked square and "
            f"_ an empty letter square; rows and columns are numbered from 1.{hint} Answer one clue per turn "
            "by its number and direction, e.g. \\boxed{1 across apple}. A right answer is written into the "
            f"grid.\n{self._board_text()}"
        )

    # ---- what the player sees ------------------------------------------------------------------
    def grid(self) -> list[list[str]]:
        """The grid as the player sees it: ``#`` blocked, ``_`` unknown, otherwise the letter."""
        view = [[BLOCK] * self.cols for _ in range(self.rows)]
        for slot in self.slots:
            for (r, c), ch in zip(slot.cells(), slot.answer):
                view[r][c] = ch.upper() if (r, c) in self.shown else BLANK
        return view

    def clue_list(self) -> list[tuple[str, int, int, int, str]]:
        """Per slot: (name, start row, start column, length, clue), rows and columns counted from 0."""
        return [(s.name, s.row, s.col, len(s.answer), s.clue) for s in self.slots]

    def _board_text(self) -> str:
        width = len(str(max(self.rows, self.cols)))
        header = " " * (width + 1) + " ".join(f"{c + 1:>{width}}" for c in range(self.cols))
        lines = [
            f"{r + 1:>{width}} " + " ".join(f"{ch:>{width}}" for ch in row)
            for r, row in enumerate(self.grid())
        ]
        clues = [
            f"  {name} (row {r + 1}, column {c + 1}, {n} letters): {clue}"
            + ("  [solved]" if name in self.solved else "")
            for name, r, c, n, clue in self.clue_list()
        ]
        return "\n".join([header, *lines, "Clues:", *clues])

    # ---- moves ---------------------------------------------------------------------------------
    def _parse(self, move: str) -> tuple[Slot, str] | str:
        text = move.lower()
        usage = f"'{move[:40]}' is not an answer like '1 across apple'."
        if not _MOVE.fullmatch(text) or _SIGNED.search(text):
            return usage
        numbers = re.findall(r"[0-9]+", text)
        words = re.findall(r"[a-z]+", text)
        direction = next((_DIRECTIONS[w] for w in words if w in _DIRECTIONS), None)
        if len(numbers) != 1 or direction is None:
            return usage
        words.remove(next(w for w in words if w in _DIRECTIONS))
        answer = "".join(words)
        name = f"{int(numbers[0][:4])} {direction}"
        slot = next((s for s in self.slots if s.name == name), None)
        if slot is None:
            return f"There is no clue {name}. Clues: {', '.join(s.name for s in self.slots)}."
        if len(answer) != len(slot.answer):
            return f"{name} has {len(slot.answer)} letters; '{answer[:40]}' has {len(answer)}."
        return slot, answer

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        parsed = self._parse(move)
        if isinstance(parsed, str):
            return f"{parsed}\n{self._board_text()}", INVALID_MOVE_PENALTY, False, {"invalid_move": True}
        slot, answer = parsed
        if slot.name in self.solved:
            problem = f"{slot.name} is already solved."
        elif answer in self.wrong.get(slot.name, []):
            problem = f"You already tried '{answer}' for {slot.name}."
        else:
            problem = None
        if problem is not None:
            return f"{problem}\n{self._board_text()}", INVALID_MOVE_PENALTY, False, {"invalid_move": True}
        if answer != slot.answer:
            self.wrong.setdefault(slot.name, []).append(answer)
            return f"'{answer}' is not {slot.name}.\n{self._board_text()}", 0.0, False, {}
        self.solved.append(slot.name)
        self.shown.update(slot.cells())
        reward = PROGRESS_REWARD / self.num_words
        if len(self.solved) == len(self.slots):
            return (
                f"Solved! The crossword is complete.\n{self._board_text()}",
                reward + WIN_REWARD,
                True,
                {"success": True},
            )
        return f"Yes, {slot.name} is '{answer}'.\n{self._board_text()}", reward, False, {}

    def state_key(self) -> tuple:
        """The layout, the solved clues and each clue's wrong answers (the shown letters follow)."""
        layout = tuple((s.name, s.row, s.col, s.answer) for s in self.slots)
        wrong = tuple(sorted((name, tuple(sorted(set(answers)))) for name, answers in self.wrong.items()))
        return (layout, tuple(sorted(self.solved)), wrong)

    def _random_move(self) -> str:
        slot = self.action_rng.choice(self.slots)
        guess = self.action_rng.choice([w for w in sorted(wordlists.clues()) if len(w) == len(slot.answer)])
        return f"{slot.name} {guess}"

    def solve_action(self) -> str:
        """For the first unsolved clue, the untried word of the clue list whose clue matches and that fits
        the letters in the grid (or, failing that, any untried word that fits)."""
        grid = self.grid()
        clues = wordlists.clues()
        for name, r, c, length, clue in self.clue_list():
            if name in self.solved:
                continue
            dr, dc = STEP[name.split()[1]]
            pattern = [grid[r + k * dr][c + k * dc].lower() for k in range(length)]
            fitting = [
                w
                for w in sorted(clues)
                if len(w) == length
                and w not in self.wrong.get(name, [])
                and all(p in (BLANK, ch) for p, ch in zip(pattern, w))
            ]
            matching = [w for w in fitting if clues[w] == clue] or fitting
            if matching:
                return f"\\boxed{{{name} {matching[0]}}}"
        return self.sample_random_action()


register_game(
    "Crosswords",
    CrosswordsEnv,
    {
        "easy": {"num_words": 3, "hardcore": False, "max_turns": 30},
        "hard": {"num_words": 3, "hardcore": True, "max_turns": 40},
    },
)

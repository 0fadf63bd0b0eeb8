"""Mastermind: crack a hidden code from black and white pegs.

The code is ``code_length`` distinct symbols drawn from 1..``num_symbols``. A guess is ``code_length``
symbols separated by spaces, e.g. ``\\boxed{3 1 4 2}`` (``3142``, ``3,1,4,2``, ``3-1-4-2`` and
``[3, 1, 4, 2]`` are read the same; a guess may repeat a symbol). Anything else is a format error: a
sign (``-5``), a word, a digit that is not ASCII (``５``) or a stray separator. Each guess is marked with black pegs (right symbol, right place) and
white pegs (right symbol, wrong place). A guess's peg score is ``(black + 0.5 * white) / code_length``;
progress is the best score so far.

| event                                                  | reward                          |
|--------------------------------------------------------|---------------------------------|
| a guess that raises the best peg score                 | +0.5 × (new best − old best)    |
| a guess that does not                                  |  0.0                            |
| cracking the code (episode ends)                       | +1.0, plus the rise above       |
| wrong length / symbol out of range                     | -0.1                            |
| not a list of numbers (``format_error``)               | -0.1                            |
| repeated guess                                         | -0.1                            |
| no ``\\boxed{}`` in the reply                          | -0.1                            |
| turns run out                                          |  0.0 (the peg rewards paid, 0.5 × best score, are the partial credit) |

The peg rewards add up to 0.5 × best score, so a win without penalties returns exactly 1.5.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game

PROGRESS_REWARD = 0.5  # paid in total, as the best peg score climbs from 0 to 1
WIN_REWARD = 1.0

# ASCII numbers separated by blanks, or by one "," or ";" (with optional blanks) or one "-" (without),
# optionally in brackets.
_NUMBERS = r"\s*[0-9]+(?:(?:\s*[,;]\s*|\s+|-)[0-9]+)*\s*"
_GUESS = re.compile(rf"\s*(?:{_NUMBERS}|\({_NUMBERS}\)|\[{_NUMBERS}\])\s*")


def score_pegs(code: tuple[int, ...], guess: tuple[int, ...]) -> tuple[int, int]:
    """(black, white) pegs of ``guess`` against ``code``."""
    black = sum(c == g for c, g in zip(code, guess))
    common = sum(min(code.count(s), guess.count(s)) for s in set(guess))
    return black, common - black


class MastermindEnv(GameEnv):
    def __init__(
        self, code_length: int = 4, num_symbols: int = 8, max_turns: int = 30, reward_type: str = "dense"
    ):
        super().__init__(max_turns, reward_type)
        if not 1 <= code_length <= num_symbols:
            raise ValueError("need 1 <= code_length <= num_symbols (the code's symbols are distinct)")
        self.code_length, self.num_symbols = code_length, num_symbols
        self.code: tuple[int, ...] = ()
        self.history: list[
            tuple[tuple[int, ...], int, int]
        ] = []  # (guess, black, white), visible to the player
        self.best_score = 0.0

    def _new_game(self) -> str:
        self.code = tuple(self.rng.sample(range(1, self.num_symbols + 1), self.code_length))
        self.history = []
        self.best_score = 0.0
        example = " ".join(str(s) for s in range(1, self.code_length + 1))
        return (
            f"You are playing Mastermind. I have a secret code of {self.code_length} different symbols, each "
            f"a number from 1 to {self.num_symbols}. Guess the code. After each guess I give you black pegs "
            "(right number in the right position) and white pegs (right number in the wrong position). "
            f"Write your guess as {self.code_length} numbers separated by spaces inside \\boxed{{}}, "
            f"e.g. \\boxed{{{example}}}."
        )

    def _parse(self, move: str) -> tuple[int, ...] | str:
        """The guess, or an explanation of why it is not one."""
        if not _GUESS.fullmatch(move):
            return f"'{move[:40]}' is not a list of numbers like 1 2 3 4."
        numbers = re.findall(r"[0-9]+", move)
        if len(numbers) == 1 and len(numbers[0]) == self.code_length and self.num_symbols < 10:
            numbers = list(numbers[0])
        if len(numbers) != self.code_length:
            return f"A guess has exactly {self.code_length} numbers; you gave {len(numbers)}."
        guess = tuple(int(n) for n in numbers)
        if any(not 1 <= s <= self.num_symbols for s in guess):
            return f"Every number must be between 1 and {self.num_symbols}."
        return guess

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        if not _GUESS.fullmatch(move):
            why = (
                f"'{move[:40]}' is not a guess: write {self.code_length} numbers like {self._random_move()}."
            )
            return why, INVALID_MOVE_PENALTY, False, {"format_error": True, "invalid_move": True}
        guess = self._parse(move)
        if isinstance(guess, str):
            return guess, INVALID_MOVE_PENALTY, False, {"invalid_move": True}
        shown = " ".join(map(str, guess))
        if any(guess == g for g, _, _ in self.history):
            return f"You already guessed {shown}.", INVALID_MOVE_PENALTY, False, {"invalid_move": True}
        black, white = score_pegs(self.code, guess)
        self.history.append((guess, black, white))
        score = (black + 0.5 * white) / self.code_length
        reward = PROGRESS_REWARD * max(0.0, score - self.best_score)
        self.best_score = max(self.best_score, score)
        if black == self.code_length:
            return f"Correct! The code was {shown}.", reward + WIN_REWARD, True, {"success": True}
        return f"Guess {shown}: {black} black, {white} white.\n{self._history_text()}", reward, False, {}

    def _history_text(self) -> str:
        lines = [f"  {' '.join(map(str, g))} -> {b} black, {w} white" for g, b, w in self.history]
        return "Your guesses so far:\n" + "\n".join(lines)

    def state_key(self) -> tuple:
        """The code and the set of guesses (the pegs and the best score follow from them)."""
        return (self.code, tuple(sorted(g for g, _, _ in self.history)))

    def _random_move(self) -> str:
        return " ".join(map(str, self.action_rng.sample(range(1, self.num_symbols + 1), self.code_length)))

    def _legal_moves(self) -> list[str]:
        """The codes of distinct symbols not guessed yet."""
        tried = {tuple(guess) for guess, _, _ in self.history}
        codes = itertools.permutations(range(1, self.num_symbols + 1), self.code_length)
        return [" ".join(map(str, code)) for code in codes if code not in tried]

    def solve_action(self) -> str:
        """Guess the first code (in lexicographic order) consistent with every peg answer so far."""
        for candidate in itertools.permutations(range(1, self.num_symbols + 1), self.code_length):
            if all(score_pegs(candidate, g) == (b, w) for g, b, w in self.history):
                return f"\\boxed{{{' '.join(map(str, candidate))}}}"
        raise RuntimeError("no code fits the feedback")  # impossible: the secret code always fits


register_game(
    "Mastermind",
    MastermindEnv,
    {
        "easy": {"code_length": 2, "num_symbols": 6, "max_turns": 10},
        "hard": {"code_length": 4, "num_symbols": 8, "max_turns": 30},
    },
)

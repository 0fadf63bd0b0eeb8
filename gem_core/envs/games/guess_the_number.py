"""GuessTheNumber: find a hidden integer with higher/lower hints.

| event                               | reward |
|-------------------------------------|--------|
| correct guess (episode ends)        | +1.0   |
| wrong guess, in range               |  0.0   |
| guess out of range                  | -0.1   |
| not an integer (``format_error``)   | -0.1   |
| repeated guess                      | -0.1   |
| no ``\\boxed{}`` in the reply       | -0.1   |

``info["consistent_with_hints"]`` (in-range, new guesses): whether the guess lies in the range the hints
so far still allow.

Binary search always wins within ceil(log2(max - min + 1)) turns.
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game


class GuessTheNumberEnv(GameEnv):
    def __init__(
        self, min_number: int = 1, max_number: int = 50, max_turns: int = 7, reward_type: str = "dense"
    ):
        super().__init__(max_turns, reward_type)
        if min_number >= max_number:
            raise ValueError("min_number must be below max_number")
        self.min_number, self.max_number = min_number, max_number
        self.target = min_number
        self.guesses: list[int] = []
        self.low, self.high = min_number, max_number

    def _new_game(self) -> str:
        self.target = self.rng.randint(self.min_number, self.max_number)
        self.guesses = []
        self.low, self.high = self.min_number, self.max_number  # the range the hints still allow
        return (
            f"You are playing Guess The Number. I am thinking of an integer between {self.min_number} and "
            f"{self.max_number} (inclusive). Guess it in as few turns as you can. After each guess I say "
            "whether the number is higher or lower. Reply with your guess inside \\boxed{}, e.g. \\boxed{"
            f"{(self.min_number + self.max_number) // 2}}}."
        )

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        # Plain ASCII digits, a minus sign only where the range has negative numbers: int() would also
        # read "+25", "2 5" (spaces removed), "2_5" and "２５".
        if not re.fullmatch(r"-?[0-9]{1,30}" if self.min_number < 0 else r"[0-9]{1,30}", move):
            return (
                f"'{move[:40]}' is not an integer.",
                INVALID_MOVE_PENALTY,
                False,
                {"format_error": True, "invalid_move": True},
            )
        guess = int(move)
        if not self.min_number <= guess <= self.max_number:
            return (
                f"{guess} is outside the range {self.min_number}-{self.max_number}.",
                INVALID_MOVE_PENALTY,
                False,
                {"invalid_move": True},
            )
        if guess in self.guesses:
            return f"You already guessed {guess}.", INVALID_MOVE_PENALTY, False, {"invalid_move": True}
        self.guesses.append(guess)
        # whether the guess could still be the number, given every hint so far (how a player uses hints)
        facts = {"consistent_with_hints": self.low <= guess <= self.high}
        self.low, self.high = (guess + 1, self.high) if self.target > guess else (self.low, guess - 1)
        if guess == self.target:
            return f"Correct! The number was {guess}.", 1.0, True, {"success": True, **facts}
        direction = "higher" if self.target > guess else "lower"
        return f"{guess} is wrong: the number is {direction}.", 0.0, False, facts

    def state_key(self) -> tuple:
        """The number and the set of numbers guessed (their order changes nothing to come)."""
        return (self.target, tuple(sorted(self.guesses)))

    def _random_move(self) -> str:
        return str(self.action_rng.randint(self.min_number, self.max_number))

    def _legal_moves(self) -> list[str]:
        """The numbers the hints still allow."""
        return [str(n) for n in range(self.low, self.high + 1)]

    def solve_action(self) -> str:
        """Binary search over the range the hints still allow (only what the player has been told)."""
        return f"\\boxed{{{(self.low + self.high) // 2}}}"


register_game(
    "GuessTheNumber",
    GuessTheNumberEnv,
    {
        "easy": {"min_number": 1, "max_number": 10, "max_turns": 4},
        "hard": {"min_number": 1, "max_number": 50, "max_turns": 7},
    },
)

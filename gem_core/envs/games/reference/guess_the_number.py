"""Guess The Number as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0) plays it.

Guess a number in ``[min_number, max_number]`` within ``max_turns``; each guess is answered "higher"
or "lower". Move: ``\\boxed{N}`` (digits only).

| event                                   | reward | episode |
|-----------------------------------------|--------|---------|
| the number                              | 1.0    | ends (terminated) |
| another guess, out of range, repeated   | 0.0    | goes on |
| unreadable move (no ``\\boxed{digits}``)  | -0.1   | ends (terminated) |
| turns run out                           | ``1 - |guess - number| / (max - min)`` for the last guess, 0.0 if it was out of range | ends (terminated and truncated) |

``-random`` (settings ``None``): ``min`` in 1..10, ``max`` in ``min+5..min+50``,
``max_turns = ceil(sqrt(max - min)) + 1``, drawn each reset.

Reference behaviour kept as is (bugs): ``\\boxed{0}`` is a format error (the guess is tested for
truthiness); a repeated guess still earns the closeness credit when it is the last turn.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gem_core.envs.games.reference.base import (
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    MAX_TURNS_TEXT,
    SUCCESS_REWARD,
    ReferenceGame,
    last_match,
)

_MOVE = re.compile(r"\\boxed{(\d+)}")


class GuessTheNumberEnv(ReferenceGame):
    def __init__(self, min_number: int | None = 1, max_number: int | None = 20, max_turns: int | None = 20):
        self.min_number, self.max_number, self.max_turns = min_number, max_number, max_turns
        self._is_random = min_number is None or max_number is None

    def _draw_settings(self) -> None:
        if self._is_random:
            self.min_number = self.rng.randint(1, 10)
            self.max_number = self.rng.randint(self.min_number + 5, self.min_number + 50)
            self.max_turns = math.ceil(math.sqrt(self.max_number - self.min_number)) + 1

    def _new_game(self) -> None:
        self.game_number = self.rng.randint(self.min_number, self.max_number)
        self.previous_guesses: set[int] = set()

    def _instructions(self) -> str:
        return (
            "You are playing Guess The Number.\n"
            f"You have to guess the number between {self.min_number} and {self.max_number} (inclusive) "
            f"within {self.max_turns} turns.\n"
            "As you enter your guess, the game will provide you with hints such as the target number is "
            "'higher' or 'lower'.\n"
            "You may provide your response in any manner. Only the number that is wrapped inside \\boxed{} "
            f"will be considered as your guess, for example, {self._example(self.rng)}.\n"
            "As you play, the history of your guesses will be appended below. Use the information to "
            "complete the game before you run out of guesses.\n"
            "Enter your first guess to start the game.\n"
        )

    def get_task_suffix(self) -> str:
        return "Enter your next guess."

    def _parse(self, action: str) -> int | None:
        match = last_match(_MOVE, action)
        try:
            return int(match.group(1)) or None  # type: ignore[union-attr]
        except (AttributeError, ValueError):  # no match; more digits than int() takes
            return None

    def _play(self, guess: int) -> tuple[str, float, bool]:
        prefix = f"At turn {self.turn_count}, you guessed {guess}"
        if not self.min_number <= guess <= self.max_number:
            return f"{prefix}, which is outside the range specified.", INVALID_ACTION_REWARD, False
        if guess in self.previous_guesses:
            return f"{prefix}, which has been already guessed before.", INVALID_ACTION_REWARD, False
        self.previous_guesses.add(guess)
        if guess == self.game_number:
            return (
                f"Congratulations! You guessed the correct number {self.game_number} in {self.turn_count} turns.",
                SUCCESS_REWARD,
                True,
            )
        hint = "lower" if guess > self.game_number else "higher"
        return f"{prefix}, and the target number is {hint} than {guess}.", INTERNAL_STEP_REWARD, False

    def _out_of_turns(self, guess: int, reward: float) -> tuple[str, float]:
        if not self.min_number <= guess <= self.max_number:
            return MAX_TURNS_TEXT, INVALID_ACTION_REWARD
        return MAX_TURNS_TEXT, 1 - abs(guess - self.game_number) / (self.max_number - self.min_number)

    def state_key(self) -> tuple:
        """The range, the number and the set of numbers guessed."""
        return (self.min_number, self.max_number, self.game_number, tuple(sorted(self.previous_guesses)))

    def _example(self, rng: Any) -> str:
        return "\\boxed{" + str(rng.randint(self.min_number, self.max_number)) + "}"

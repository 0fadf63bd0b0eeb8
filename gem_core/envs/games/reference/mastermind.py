"""Mastermind as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0) plays it.

Guess a code of ``code_length`` digits from 1 to ``num_numbers`` (distinct unless
``duplicate_numbers``) within ``max_turns``. Move: ``\\boxed{1 2 3 4}`` (digits separated by spaces).
Each guess is scored with black pegs (right digit, right place) and white pegs (right digit, wrong place).

| event                                          | reward | episode |
|------------------------------------------------|--------|---------|
| a guess with more black pegs than any before   | (new black - best before) / code_length | goes on; ends (terminated) when all are black |
| another scored guess                           | 0.0    | goes on |
| wrong length, digit out of range, repeated     | 0.0    | goes on |
| unreadable move                                | -0.1   | ends (terminated) |
| turns run out                                  | the step's reward | ends (terminated and truncated) |

``-random``: (code_length, num_numbers, max_turns) drawn from (2, 4, 10), (4, 6, 20), (4, 8, 30).

Reference behaviour kept as is (bugs): ``reset`` returns an empty ``info`` (no ``"suffix"``); a guess
written without spaces (``\\boxed{1234}``) is one number, so a wrong-length guess; the example move in
the rules never repeats digits even when duplicates are allowed.
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.envs.games.reference.base import INVALID_ACTION_REWARD, ReferenceGame, last_match

_MOVE = re.compile(r"\\boxed{(\d+(?:\s+\d+)*)}")


class MastermindEnv(ReferenceGame):
    def __init__(
        self,
        code_length: int | None = 4,
        num_numbers: int | None = 6,
        duplicate_numbers: bool = False,
        max_turns: int | None = 20,
    ):
        self.code_length, self.num_numbers, self.max_turns = code_length, num_numbers, max_turns
        self.duplicate_numbers = duplicate_numbers
        self._is_random = code_length is None or num_numbers is None or max_turns is None

    def _draw_settings(self) -> None:
        if self._is_random:
            self.code_length, self.num_numbers, self.max_turns = self.rng.choice(
                [(2, 4, 10), (4, 6, 20), (4, 8, 30)]
            )

    def _new_game(self) -> None:
        digits = list(range(1, self.num_numbers + 1))
        draw = self.rng.choices if self.duplicate_numbers else self.rng.sample
        self.game_code = draw(digits, k=self.code_length)
        self.previous_guesses: set[tuple[int, ...]] = set()
        self.milestone = 0

    def _instructions(self) -> str:
        return (
            "You are playing Mastermind.\n"
            f"You have to guess the secret {self.code_length} digit code within {self.max_turns} turns.\n"
            f"The code consists of digits from 1 to {self.num_numbers} (inclusive). "
            f"Duplicate numbers are {'allowed' if self.duplicate_numbers else 'not allowed'}.\n"
            "After you enter your guess, I will say mark your guess with black and white pegs, where a black "
            "peg indicates a correct digit in the correct position, while a white peg indicates a correct "
            "digit in the wrong position.\n"
            f"After thinking, format your final answer inside \\boxed{{...}}, for example, {self._example(self.rng)}.\n"
            "As you play, the history of your guesses will be appended below. Use the information to "
            "complete the game before you run out of guesses.\n"
            "Enter your first guess to start the game.\n"
        )

    def _reset_info(self) -> dict[str, Any]:
        return {}

    def get_task_suffix(self) -> str:
        return "Enter your guess."

    def _parse(self, action: str) -> list[int] | None:
        match = last_match(_MOVE, action)
        try:
            return list(map(int, match.group(1).split())) or None  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            return None

    def _play(self, guess: list[int]) -> tuple[str, float, bool]:
        prefix = f"At turn {self.turn_count}, you guessed {guess}"
        if len(guess) != self.code_length:
            return (
                f"{prefix} which has {len(guess)} entries but the code has length {self.code_length}.",
                INVALID_ACTION_REWARD,
                False,
            )
        if any(not 1 <= d <= self.num_numbers for d in guess):
            return (
                f"{prefix}, which has numbers outside the range 1 to {self.num_numbers}.",
                INVALID_ACTION_REWARD,
                False,
            )
        if tuple(guess) in self.previous_guesses:
            return f"{prefix}, which has been already guessed before.", INVALID_ACTION_REWARD, False
        self.previous_guesses.add(tuple(guess))
        black, white = pegs(self.game_code, guess)
        reward = 0.0
        if black > self.milestone:
            reward, self.milestone = (black - self.milestone) / self.code_length, black
        if black == self.code_length:
            return (
                f"Congratulations! You guessed the correct code {self.game_code} in {self.turn_count} turns.",
                reward,
                True,
            )
        return f"{prefix}. This guess receives {black} black peg(s) and {white} white peg(s).", reward, False

    def state_key(self) -> tuple:
        """The symbols allowed, the code and the set of guesses (the milestone follows from them)."""
        return (self.num_numbers, tuple(self.game_code), tuple(sorted(self.previous_guesses)))

    def _example(self, rng: Any) -> str:
        return (
            "\\boxed{"
            + " ".join(map(str, rng.sample(range(1, self.num_numbers + 1), self.code_length)))
            + "}"
        )


def pegs(code: list[int], guess: list[int]) -> tuple[int, int]:
    """(black, white): right digit in the right place; right digit in the wrong place."""
    black = sum(c == g for c, g in zip(code, guess))
    rest_code = [c for c, g in zip(code, guess) if c != g]
    rest_guess = [g for c, g in zip(code, guess) if c != g]
    white = sum(min(rest_code.count(d), rest_guess.count(d)) for d in set(rest_guess))
    return black, white

"""Wordle as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0) plays it.

Guess a secret word of ``word_length`` letters, drawn from the lowercase alphabetic words of that
length in NLTK's ``en-basic`` list (850 Basic English words, shipped in ``gem_core/data/words/reference``).
Move: ``\\boxed{CRANE}`` (letters; spaces between letters are dropped). ANY letter string of the
right length is scored — the word need not be real (the reference's ``only_real_words`` is unused).
Feedback per letter: ``G`` right place, ``Y`` elsewhere in the word, ``X`` absent.

| event                                           | reward | episode |
|-------------------------------------------------|--------|---------|
| a guess turning positions green for the first time | 0.5 / word_length per such position | goes on |
| the secret word                                 | that + 0.5 | ends (terminated) |
| wrong length, repeated guess                    | 0.0    | goes on |
| unreadable move                                 | -0.1   | ends (terminated) |
| turns run out                                   | the step's reward | ends (terminated and truncated) |

``-random``: ``word_length`` in 3..5, ``max_turns = 5 * word_length``.

Reference behaviour kept as is (bugs): the feedback is printed as a Python list (``['G', 'X', ...]``);
only spaces are dropped from a guess, so a tab or newline between letters makes it the wrong length.
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.envs.games.reference.base import (
    INVALID_ACTION_REWARD,
    SUCCESS_REWARD,
    ReferenceGame,
    last_match,
)
from gem_core.envs.games.reference.words import nltk_words_of_length

_MOVE = re.compile(r"\\boxed{([a-zA-Z]+(?:\s+[a-zA-Z]+)*)}")


class WordleEnv(ReferenceGame):
    def __init__(self, word_length: int | None = 5, only_real_words: bool = True, max_turns: int | None = 20):
        self.word_length, self.only_real_words, self.max_turns = word_length, only_real_words, max_turns
        self._is_random = word_length is None or max_turns is None

    @property
    def available_words(self) -> tuple[str, ...]:
        return nltk_words_of_length("en-basic", self.word_length)

    def _draw_settings(self) -> None:
        if self._is_random:
            self.word_length = self.rng.randint(3, 5)
            self.max_turns = self.word_length * 5

    def _new_game(self) -> None:
        self.secret_word = self.rng.choice(self.available_words).upper()
        self.previous_guesses: set[str] = set()
        self.milestones = [0] * self.word_length

    def _instructions(self) -> str:
        return (
            "You are playing Wordle.\n"
            f"You have to guess the secret {self.word_length}-letter word within {self.max_turns} turns.\n"
            "After you enter your guess, I will say mark your guess as follows:\n"
            "  - G (green): correct letter in the correct position\n"
            "  - Y (yellow): letter exists in the word but in the wrong position\n"
            "  - X (wrong): letter is not in the word\n"
            f"After thinking, format your final answer inside \\boxed{{...}}, for example, {self._example(self.rng)}.\n"
            "As you play, the history of your guesses will be appended below. Use the information to "
            "complete the game before you run out of guesses.\n"
        )

    def get_task_suffix(self) -> str:
        return "Enter your guess."

    def _parse(self, action: str) -> str | None:
        match = last_match(_MOVE, action)
        return None if match is None else match.group(1).upper().replace(" ", "")

    def _play(self, guess: str) -> tuple[str, float, bool]:
        at = f"At turn {self.turn_count}, you guessed {guess}"
        if len(guess) != self.word_length:
            return (
                f"{at} which has {len(guess)} letters but the secret word has {self.word_length} letters.",
                INVALID_ACTION_REWARD,
                False,
            )
        if guess in self.previous_guesses:
            return f"{at}, which has been already guessed before.", INVALID_ACTION_REWARD, False
        self.previous_guesses.add(guess)
        feedback = score(self.secret_word, guess)
        reward = 0
        for i, mark in enumerate(feedback):
            if mark == "G" and self.milestones[i] == 0:
                reward += (
                    1 / len(self.milestones) * 0.5
                )  # summed one position at a time, as the reference does
                self.milestones[i] = 1
        if feedback.count("G") == self.word_length:
            reward += SUCCESS_REWARD * 0.5
            return (
                f"Congratulations! You guessed the secret word {self.secret_word} in {self.turn_count} turns.",
                reward,
                True,
            )
        return f"{at}\nFeedback:\n{guess}\n{feedback}", reward, False

    def state_key(self) -> tuple:
        """The word and the set of guesses (the milestones follow from them)."""
        return (self.secret_word, tuple(sorted(self.previous_guesses)))

    def _example(self, rng: Any) -> str:
        return f"\\boxed{{{rng.choice(self.available_words).upper()}}}"


def score(secret: str, guess: str) -> list[str]:
    """Wordle marks: greens first, then yellows from the letters of the secret not yet matched."""
    marks = ["G" if g == s else "" for g, s in zip(guess, secret)]
    unmatched = [s for s, mark in zip(secret, marks) if not mark]
    for i, g in enumerate(guess):
        if not marks[i]:
            if g in unmatched:
                unmatched.remove(g)
                marks[i] = "Y"
            else:
                marks[i] = "X"
    return marks

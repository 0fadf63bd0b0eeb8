"""Hangman as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0) plays it.

Find a secret word of ``word_length`` letters, drawn from the lowercase alphabetic words of that
length in NLTK's ``en-basic`` list (``en`` when ``hardcore``; both shipped in
``gem_core/data/words/reference``). Move: ``\\boxed{E}`` (one letter) or ``\\boxed{HOUSE}`` (the word);
any case. There are no lives: only the turn budget limits guessing.

| event                                       | reward | episode |
|---------------------------------------------|--------|---------|
| a new letter in the word, found ``k`` times | ``0.5 * k / word_length`` | goes on |
| the whole word                              | ``0.5 * (hidden letters) / word_length + 0.5`` | ends (terminated) |
| a letter not in the word, a wrong word of the right length | 0.0 | goes on |
| a repeated letter, a word of the wrong length | 0.0  | goes on |
| unreadable move                             | -0.1   | ends (terminated) |
| turns run out                               | the step's reward | ends (terminated and truncated) |

``-random``: (word_length, max_turns) drawn from (3, 10), (5, 15), (7, 20).

Reference behaviour kept as is (bugs): revealing every letter does not end the game — the word must
still be guessed whole; the rules text swaps its examples (a word for "one letter guesses", a letter
for "the entire word").
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.envs.games.reference.base import (
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    SUCCESS_REWARD,
    ReferenceGame,
    last_match,
)
from gem_core.envs.games.reference.words import nltk_words_of_length

_MOVE = re.compile(r"\\boxed{([a-zA-Z]+)}", re.IGNORECASE)
LETTERS = "abcdefghijklmnopqrstuvwxyz"


class HangmanEnv(ReferenceGame):
    def __init__(self, word_length: int | None = 5, hardcore: bool = False, max_turns: int | None = 20):
        self.word_length, self.hardcore, self.max_turns = word_length, hardcore, max_turns
        self._is_random = word_length is None or max_turns is None

    @property
    def available_words(self) -> tuple[str, ...]:
        return nltk_words_of_length("en" if self.hardcore else "en-basic", self.word_length)

    def _draw_settings(self) -> None:
        if self._is_random:
            self.word_length, self.max_turns = self.rng.choice([(3, 10), (5, 15), (7, 20)])

    def _new_game(self) -> None:
        self.secret_word = self.rng.choice(self.available_words).upper()
        self.board = ["_"] * len(self.secret_word)
        self.guessed_letters: set[str] = set()

    def _instructions(self) -> str:
        word = f"\\boxed{{{self.rng.choice(self.available_words).upper()}}}"
        letter = f"\\boxed{{{self.rng.choice(LETTERS).upper()}}}"
        return (
            "You are playing Hangman.\n"
            f"The objective of the game is to guess the {self.word_length}-letter word by providing one letter "
            "guesses or the entire word.\n"
            "The cells that need to be populated with letters are represented by '_'.\n\n"
            f"There are two ways you can answer. You can provide one letter guesses in the format of {word}, "
            f"or you can guess the entire word in the format of {letter}.\n"
            "If the given letter is in the word, it will be revealed in the grid.\n"
            "If the given word is correct, you win.\n"
            "As you play, the history of your choices will be appended below. Use the information to figure "
            "out the word and win.\n"
            "Some rules:\n"
            "1. You can only guess one letter/word at a time.\n"
            f"2. You have to win within {self.max_turns} turns.\n\n"
        )

    def get_task_suffix(self) -> str:
        header = " ".join(f"C{i:02}" for i in range(len(self.board)))
        row = "".join(f"  {cell} " for cell in self.board)
        return f"Here is the current state of the Hangman grid:\n{header}\n{row}\n\nEnter your guess."

    def _parse(self, action: str) -> str | None:
        match = last_match(_MOVE, action)
        return None if match is None else match.group(1).upper()

    def _format_error_text(self) -> str:
        return "You did not provide a valid guess."

    def _play(self, guess: str) -> tuple[str, float, bool]:
        at = f"At turn {self.turn_count},"
        secret = self.secret_word
        if len(guess) > 1:
            if guess == secret:
                hidden = sum(cell == "_" for cell in self.board) / len(self.board)
                return (
                    f"Congratulations! You guessed the word '{secret}' correctly!",
                    hidden * 0.5 + SUCCESS_REWARD * 0.5,
                    True,
                )
            if len(guess) != len(secret):
                return (
                    f"{at} You guessed '{guess}' which is of length {len(guess)}, but the secret word is of "
                    f"length {len(secret)}.",
                    INVALID_ACTION_REWARD,
                    False,
                )
            return f"{at} You guessed '{guess}' which is incorrect.", INTERNAL_STEP_REWARD, False
        if guess in self.guessed_letters:
            return (
                f"{at} you guessed '{guess}', which has been already guessed before.",
                INVALID_ACTION_REWARD,
                False,
            )
        self.guessed_letters.add(guess)
        if guess not in secret:
            return (
                f"{at} you guessed a letter '{guess}' that is not in the secret word.",
                INTERNAL_STEP_REWARD,
                False,
            )
        for i, letter in enumerate(secret):
            if letter == guess:
                self.board[i] = guess
        return (
            f"{at} you successfully guessed a letter '{guess}' that is in the secret word.",
            (secret.count(guess) / len(secret)) * 0.5,
            False,
        )

    def state_key(self) -> tuple:
        """The word and the set of letters guessed (the board follows from them)."""
        return (self.secret_word, tuple(sorted(self.guessed_letters)))

    def _example(self, rng: Any) -> str:
        if rng.random() < 0.5:
            return f"\\boxed{{{rng.choice(self.available_words).upper()}}}"
        return f"\\boxed{{{rng.choice(LETTERS).upper()}}}"

"""Hangman: reveal a hidden English word by guessing its letters.

The secret is a common ``word_length``-letter word (``gem_core/data/words/answers_<n>.txt``). A move
is one letter, ``\\boxed{e}``, which reveals every place it occurs, or the whole word, ``\\boxed{apple}``
(case and spaces ignored). There are no separate lives: every guess, right or wrong, costs a turn.
Progress is the fraction of the word's letters revealed.

| event                                                  | reward                             |
|--------------------------------------------------------|------------------------------------|
| a letter that is in the word                           | +0.5 × (places revealed) / length  |
| a letter that is not / a wrong whole-word guess        |  0.0                               |
| the last letters revealed, or the word guessed (ends)  | +1.0, plus the places revealed     |
| not a letter / wrong length / not a-z                  | -0.1                               |
| repeated letter or word                                | -0.1                               |
| no ``\\boxed{}`` in the reply                          | -0.1                               |
| turns run out                                          |  0.0 (the letter rewards paid, 0.5 × fraction revealed, are the partial credit) |

The letter rewards add up to 0.5 × the fraction revealed, so a win without penalties returns exactly 1.5.

``solve_action`` wins on all 400 seven-letter answers within the hard 20 turns, but on only 263 of
the 343 three-letter answers (77%) within the easy 10: after ``_ O T`` ten words remain (cot, dot, got,
hot, jot, lot, not, pot, rot, tot) and no letter tells more than one of them apart.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from gem_core.envs.games import wordlists
from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game

PROGRESS_REWARD = 0.5  # paid in total, as the revealed fraction climbs from 0 to 1
WIN_REWARD = 1.0


class HangmanEnv(GameEnv):
    def __init__(self, word_length: int = 7, max_turns: int = 20, reward_type: str = "dense"):
        super().__init__(max_turns, reward_type)
        if word_length not in (3, 5, 7):
            raise ValueError("word_length must be 3, 5 or 7 (the lengths with shipped word lists)")
        self.word_length = word_length
        self.secret = ""
        # What the player sees: the word with unrevealed places as None, and every guess so far.
        self.revealed: list[str | None] = []
        self.guessed_letters: list[str] = []
        self.guessed_words: list[str] = []

    def _new_game(self) -> str:
        self.secret = self.rng.choice(wordlists.words("answers", self.word_length))
        self.revealed = [None] * self.word_length
        self.guessed_letters, self.guessed_words = [], []
        return (
            f"You are playing Hangman. Find my secret {self.word_length}-letter English word. Each turn, guess "
            "one letter (every place it occurs is revealed) or the whole word. Every guess costs a turn.\n"
            f"Word: {self._pattern()}\nReply with a letter or the word inside \\boxed{{}}, e.g. \\boxed{{e}}."
        )

    def _pattern(self) -> str:
        return " ".join((ch or "_").upper() for ch in self.revealed)

    def _status(self) -> str:
        wrong = sorted(set(self.guessed_letters) - set(self.secret))
        return f"Word: {self._pattern()}\nLetters not in the word: {' '.join(wrong).upper() or '(none)'}"

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        guess = "".join(move.lower().split())
        problem = None
        if not (guess.isascii() and guess.isalpha()):
            problem = f"'{guess[:40]}' is not a letter a-z or a word."
        elif len(guess) not in (1, self.word_length):
            problem = (
                f"Guess one letter or a whole {self.word_length}-letter word; '{guess[:40]}' is neither."
            )
        elif guess in self.guessed_letters or guess in self.guessed_words:
            problem = f"You already guessed '{guess}'."
        if problem is not None:
            return f"{problem}\n{self._status()}", INVALID_MOVE_PENALTY, False, {"invalid_move": True}
        if len(guess) == 1:
            self.guessed_letters.append(guess)
            places = [i for i, ch in enumerate(self.secret) if ch == guess]
        else:
            self.guessed_words.append(guess)
            places = [i for i, ch in enumerate(self.revealed) if ch is None] if guess == self.secret else []
        for i in places:
            self.revealed[i] = self.secret[i]
        reward = PROGRESS_REWARD * len(places) / self.word_length
        if None not in self.revealed:
            return f"You found it: '{self.secret}'!", reward + WIN_REWARD, True, {"success": True}
        if len(guess) > 1:
            said = f"'{guess}' is not the word."
        elif places:
            said = f"Yes, '{guess}' is in the word {len(places)} time{'s' if len(places) > 1 else ''}."
        else:
            said = f"No, '{guess}' is not in the word."
        return f"{said}\n{self._status()}", reward, False, {}

    def state_key(self) -> tuple:
        """The word and the sets of letters and words guessed (the revealed places follow from them)."""
        return (self.secret, tuple(sorted(self.guessed_letters)), tuple(sorted(self.guessed_words)))

    def _random_move(self) -> str:
        return self.action_rng.choice("abcdefghijklmnopqrstuvwxyz")

    def _legal_moves(self) -> list[str]:
        """The letters not guessed yet (guessing a whole word is legal too, but not enumerated)."""
        return [c for c in "abcdefghijklmnopqrstuvwxyz" if c not in self.guessed_letters]

    def solve_action(self) -> str:
        """Among the answer-list words that fit the revealed pattern and every guess, guess the unguessed
        letter found in the most of them (ties: alphabetical); guess the word once only one fits."""
        guessed = set(self.guessed_letters)
        candidates = [
            w
            for w in wordlists.words("answers", self.word_length)
            if w not in self.guessed_words
            and all((ch == shown) if shown else (ch not in guessed) for ch, shown in zip(w, self.revealed))
        ]
        if len(candidates) == 1:
            return f"\\boxed{{{candidates[0]}}}"
        counts = Counter(ch for w in candidates for ch in set(w) - guessed)
        if not counts:  # the word is not in the list: fall back on English letter frequency
            order = [ch for ch in "etaoinshrdlucmfwygpbvkxqjz" if ch not in guessed]
            return f"\\boxed{{{order[0] if order else 'a'}}}"
        letter = min(counts, key=lambda ch: (-counts[ch], ch))
        return f"\\boxed{{{letter}}}"


register_game(
    "Hangman",
    HangmanEnv,
    {
        "easy": {"word_length": 3, "max_turns": 10},
        "hard": {"word_length": 7, "max_turns": 20},
    },
)

"""Wordle: find a hidden English word from green/yellow letter feedback.

The secret is a common ``word_length``-letter word (``gem_core/data/words/answers_<n>.txt``); a guess
must be an English word of that length (``allowed_<n>.txt``), e.g. ``\\boxed{crane}``, case and spaces
ignored. Each letter of a guess is marked ``G`` (right letter, right place), ``Y`` (in the word, but
elsewhere) or ``-`` (not in the word, or no further copies of it). A guess's letter score is
``(greens + 0.5 * yellows) / word_length``; progress is the best score so far.

| event                                                  | reward                          |
|--------------------------------------------------------|---------------------------------|
| a guess that raises the best letter score              | +0.5 × (new best − old best)    |
| a guess that does not                                  |  0.0                            |
| guessing the word (episode ends)                       | +1.0, plus the rise above       |
| wrong length / not letters / not an English word       | -0.1                            |
| repeated guess                                         | -0.1                            |
| no ``\\boxed{}`` in the reply                          | -0.1                            |
| turns run out                                          |  0.0 (the letter rewards paid, 0.5 × best score, are the partial credit) |

The letter rewards add up to 0.5 × best score, so a win without penalties returns exactly 1.5.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from gem_core.envs.games import wordlists
from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game

PROGRESS_REWARD = 0.5  # paid in total, as the best letter score climbs from 0 to 1
WIN_REWARD = 1.0


def feedback(secret: str, guess: str) -> str:
    """The marks of ``guess`` against ``secret``: one of ``G``, ``Y``, ``-`` per letter."""
    marks = ["-"] * len(guess)
    unmatched = Counter(s for s, g in zip(secret, guess) if s != g)
    for i, (s, g) in enumerate(zip(secret, guess)):
        if s == g:
            marks[i] = "G"
        elif unmatched[g] > 0:
            marks[i] = "Y"
            unmatched[g] -= 1
    return "".join(marks)


class WordleEnv(GameEnv):
    def __init__(self, word_length: int = 5, max_turns: int = 25, reward_type: str = "dense"):
        super().__init__(max_turns, reward_type)
        if word_length not in (3, 5):
            raise ValueError("word_length must be 3 or 5 (the lengths with shipped word lists)")
        self.word_length = word_length
        self.secret = ""
        self.history: list[tuple[str, str]] = []  # (guess, marks), visible to the player
        self.best_score = 0.0

    def _new_game(self) -> str:
        self.secret = self.rng.choice(wordlists.words("answers", self.word_length))
        self.history = []
        self.best_score = 0.0
        return (
            f"You are playing Wordle. Guess my secret {self.word_length}-letter English word. Each guess must "
            f"be a real {self.word_length}-letter word. After each guess every letter is marked: G = right "
            "letter in the right place, Y = the letter is in the word but in another place, - = the letter "
            "is not in the word (or not that many times). Write your guess inside \\boxed{}, e.g. "
            f"\\boxed{{{self._random_move()}}}."
        )

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        guess = "".join(move.lower().split())
        problem = None
        if len(guess) != self.word_length:
            problem = f"'{guess[:40]}' does not have {self.word_length} letters."
        elif not (guess.isascii() and guess.isalpha()):
            problem = f"'{guess}' must be letters a-z only."
        elif guess not in wordlists.word_set("allowed", self.word_length):
            problem = f"'{guess}' is not in my list of English words."
        elif any(guess == g for g, _ in self.history):
            problem = f"You already guessed '{guess}'."
        if problem is not None:
            return problem, INVALID_MOVE_PENALTY, False, {"invalid_move": True}
        marks = feedback(self.secret, guess)
        self.history.append((guess, marks))
        score = (marks.count("G") + 0.5 * marks.count("Y")) / self.word_length
        reward = PROGRESS_REWARD * max(0.0, score - self.best_score)
        self.best_score = max(self.best_score, score)
        if guess == self.secret:
            return f"Correct! The word was '{self.secret}'.", reward + WIN_REWARD, True, {"success": True}
        return f"{self._row(guess, marks)}\nYour guesses so far:\n{self._history_text()}", reward, False, {}

    @staticmethod
    def _row(guess: str, marks: str) -> str:
        return f"{' '.join(guess.upper())}  ->  {' '.join(marks)}"

    def _history_text(self) -> str:
        return "\n".join(f"  {self._row(g, m)}" for g, m in self.history)

    def state_key(self) -> tuple:
        """The word and the set of guesses (the marks and the best score follow from them)."""
        return (self.secret, tuple(sorted(g for g, _ in self.history)))

    def _random_move(self) -> str:
        return self.action_rng.choice(wordlists.words("answers", self.word_length))

    def _legal_moves(self) -> list[str]:
        """The answer-list words not tried yet."""
        tried = {guess for guess, _ in self.history}
        return [w for w in wordlists.words("answers", self.word_length) if w not in tried]

    def solve_action(self) -> str:
        """Guess the answer-list word consistent with all marks so far whose distinct letters are most
        common among the remaining candidates (ties: alphabetical)."""
        tried = {g for g, _ in self.history}
        candidates = [
            w
            for w in wordlists.words("answers", self.word_length)
            if w not in tried and all(feedback(w, g) == m for g, m in self.history)
        ]
        letter_counts = Counter(ch for w in candidates for ch in set(w))
        best = max(candidates, key=lambda w: (sum(letter_counts[ch] for ch in set(w)), [-ord(c) for c in w]))
        return f"\\boxed{{{best}}}"


register_game(
    "Wordle",
    WordleEnv,
    {
        "easy": {"word_length": 3, "max_turns": 15},
        "hard": {"word_length": 5, "max_turns": 25},
    },
)

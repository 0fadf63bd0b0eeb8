"""ReferenceGame: the turn structure that every game of the reference GEM (``gem-llm`` 0.1.0) shares.

The reference is Apache-2.0 (Copyright 2025 AxonRL Team); this package reproduces its game rules,
texts and reward values so that an id of the reference means the same game here. Its code is not
copied: each game is re-implemented and checked against the installed reference by
``tests/compat/``.

The shared structure, as the reference has it:

* ``reset`` returns the rules as the observation and ``info = {"suffix": <the board and a prompt>}``;
* each ``step`` counts a turn and reads the move with the game's regular expression (the last match
  in the reply). An action it cannot read is a format error: reward ``-0.1`` and the episode ENDS
  (``terminated=True``; ``truncated`` is true when it was also the last turn);
* otherwise the game answers with a one-line observation; a won or lost game terminates; when the
  turns run out the episode ends with ``terminated=True`` AND ``truncated=True`` (the reference sets
  both), a "maximum number of turns" message, and possibly partial credit instead of the step reward;
* every step's ``info`` is ``{"suffix": ...}``, rendered after the move.

Randomness comes from ``self.rng`` (a ``random.Random`` seeded by ``reset(seed)``), drawn in the same
order as the reference draws from the process-global ``random`` module that it seeds with the same
seed, so ``reset(seed=s)`` gives the reference's episode for ``s`` (Sokoban excepted, see its module).
The example move in the rules text is drawn from that stream too, as in the reference;
``sample_random_action`` draws from ``self.action_rng`` instead, so sampling never changes the episode.
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.core import Env, StepResult

# The reference's LanguageGameReward values.
SUCCESS_REWARD = 1.0
INTERNAL_STEP_REWARD = 0.0
FAIL_REWARD = 0.0
INVALID_ACTION_REWARD = 0.0
FORMAT_ERROR_REWARD = -0.1

MAX_TURNS_TEXT = "You have reached the maximum number of turns."


def last_match(pattern: re.Pattern[str], action: str) -> re.Match[str] | None:
    """The last non-overlapping match of ``pattern`` in ``action`` (how every reference game reads a move).

    The patterns used are sequences of disjoint character classes, so matching is linear.
    """
    found = None
    for found in pattern.finditer(action):  # noqa: B007 - the last one is wanted
        pass
    return found


def rows_key(grid: list[list[Any]]) -> tuple[tuple[Any, ...], ...]:
    """A grid (a list of rows) as a tuple of tuples: part of a state key."""
    return tuple(map(tuple, grid))


class ReferenceGame(Env[str]):
    """A game of the reference GEM. Subclasses set ``max_turns`` and implement:

    * ``_draw_settings()`` — for the ``-random`` ids (settings passed as ``None``): draw them from ``self.rng``;
    * ``_new_game()`` — draw the episode from ``self.rng``;
    * ``_instructions()`` — the rules text (may draw its example move from ``self.rng``);
    * ``get_task_suffix()`` — the board and prompt that ``info["suffix"]`` carries;
    * ``_parse(action)`` — the move, or ``None`` for a format error;
    * ``_play(move)`` — ``(observation, reward, game_over)``;
    * ``_example(rng)`` — a well-formed random action drawn from ``rng``;
    * optionally ``_format_error_text()``, ``_out_of_turns(move, reward)``.
    """

    max_turns: int

    # ---- for subclasses ------------------------------------------------------------------------
    def _draw_settings(self) -> None:
        pass

    def _new_game(self) -> None:
        raise NotImplementedError

    def _instructions(self) -> str:
        raise NotImplementedError

    def get_task_suffix(self) -> str:
        raise NotImplementedError

    def _parse(self, action: str) -> Any:
        raise NotImplementedError

    def _play(self, move: Any) -> tuple[str, float, bool]:
        raise NotImplementedError

    def _example(self, rng: Any) -> str:
        raise NotImplementedError

    def _format_error_text(self) -> str:
        return f"At turn {self.turn_count}, you did not provide a valid guess."

    def _out_of_turns(self, move: Any, reward: float) -> tuple[str, float]:
        """The observation and reward of a step that used the last turn without ending the game."""
        return MAX_TURNS_TEXT, reward

    def _reset_info(self) -> dict[str, Any]:
        return self._info()

    # ---- the Env API ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self._draw_settings()
        self._new_game()
        self.turn_count = 0
        return self._instructions(), self._reset_info()

    def step(self, action: str) -> StepResult:
        self.turn_count += 1
        move = self._parse(action)
        if move is None:
            last = self.turn_count == self.max_turns
            return self._format_error_text(), FORMAT_ERROR_REWARD, True, last, self._info()
        observation, reward, game_over = self._play(move)
        if game_over:
            return observation, reward, True, False, self._info()
        if self.turn_count >= self.max_turns:
            observation, reward = self._out_of_turns(move, reward)
            return observation, reward, True, True, self._info()
        return observation, reward, False, False, self._info()

    def sample_random_action(self) -> str:
        return self._example(self.action_rng)

    def _info(self) -> dict[str, Any]:
        return {"suffix": self.get_task_suffix()}

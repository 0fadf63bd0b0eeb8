"""GameEnv: what every game shares — the turn budget, ``\\boxed{}`` parsing and penalty messages.

A game implements ``_new_game()`` (draw a new episode from ``self.rng``; return the rules text),
``_play(move)`` (apply one parsed move; return feedback, reward, whether the game is over and an info
dict) and ``_random_move()``, and, where it can, ``_legal_moves()`` (for ``sample_legal_action``).
``GameEnv`` turns that into the Env API:

* the action's move is the content of the last ``\\boxed{...}``, matched case- and space-insensitively
  by the game; an action with no ``\\boxed{}`` costs ``FORMAT_PENALTY`` and is explained, and counts
  as a turn (so a model cannot stall forever);
* each observation says how many turns remain; when they run out the episode is truncated and
  ``_final_reward()`` may grant partial credit;
* a non-``str`` action, or a step outside an episode, raises as for every env (``gem_core.core``).

``reward_type`` chooses what a step pays (gymnasium-robotics' names): ``"dense"`` (the default) is the
game's reward table (penalties, progress, partial credit); ``"sparse"`` pays ``SUCCESS_REWARD`` on the
move that wins and 0 on every other step, for RL where a policy learns the shaping instead of the game.
"""

from __future__ import annotations

from typing import Any

from gem_core.core import Env, StepResult
from gem_core.parsing import extract_boxed, preview

FORMAT_PENALTY = -0.1
INVALID_MOVE_PENALTY = -0.1
MAX_MOVE_CHARS = 2_000  # a move longer than this is never legal in any game
SUCCESS_REWARD = 1.0
REWARD_TYPES = ("dense", "sparse")


class GameEnv(Env[str]):
    def __init__(self, max_turns: int, reward_type: str = "dense"):
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if reward_type not in REWARD_TYPES:
            raise ValueError(f"reward_type must be one of {REWARD_TYPES}, got {reward_type!r}")
        self.max_turns = max_turns
        self.reward_type = reward_type
        self.turn = 0

    # ---- for subclasses ------------------------------------------------------------------------
    def _new_game(self) -> str:
        """Start a new game from ``self.rng``; return the rules and the opening position."""
        raise NotImplementedError

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        """Apply a parsed move: ``(feedback, reward, game_over, info)``. Illegal moves are not errors:
        return an explanation with ``INVALID_MOVE_PENALTY`` and ``info["invalid_move"] = True``."""
        raise NotImplementedError

    def _random_move(self) -> str:
        """A random legal-looking move (the text inside ``\\boxed{}``), drawn from ``self.action_rng``."""
        raise NotImplementedError

    def _legal_moves(self) -> list[str] | None:
        """Every legal move of the current position (the texts inside ``\\boxed{}``), in a fixed order;
        None (the default): the game does not enumerate them."""
        return None

    def _final_reward(self) -> float:
        """Partial credit added when the turns run out before the game is won (default none)."""
        return 0.0

    # ---- the Env API ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self.turn = 0
        rules = self._new_game()
        return f"{rules}\n{self._turns_left_text()}", {}

    def step(self, action: str) -> StepResult:
        self.turn += 1
        move = extract_boxed(action)
        if move is None or len(move) > MAX_MOVE_CHARS:
            feedback = (
                f"Invalid format: put your move inside \\boxed{{}}, e.g. \\boxed{{{self._random_move()}}}. "
                f"Your reply was: {preview(action) or '(empty)'}"
            )
            reward, game_over, info = FORMAT_PENALTY, False, {"format_error": True}
        else:
            feedback, reward, game_over, info = self._play(move)
        truncated = not game_over and self.turn >= self.max_turns
        if truncated:
            reward += self._final_reward()
            feedback += "\nNo turns left: the game is over."
        elif not game_over:
            feedback += f"\n{self._turns_left_text()}"
        if game_over or truncated:
            info.setdefault("success", False)
        if self.reward_type == "sparse":
            reward = SUCCESS_REWARD if game_over and info.get("success") is True else 0.0
        return feedback, float(reward), game_over, truncated, info

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self._random_move()}}}"

    def sample_legal_action(self) -> str | None:
        moves = self._legal_moves()
        return f"\\boxed{{{self.action_rng.choice(moves)}}}" if moves else None

    def _turns_left_text(self) -> str:
        left = self.max_turns - self.turn
        return f"You have {left} turn{'s' if left != 1 else ''} left."

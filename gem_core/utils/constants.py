"""The reference gem's ``gem.utils.constants``: ``LanguageGameReward``, the reward values of its games
(``gem_core.envs.games.reference.base``, which the ``-v0`` game ids play by)."""

from __future__ import annotations

from gem_core.envs.games.reference import base


class LanguageGameReward:
    success_reward: float = base.SUCCESS_REWARD
    internal_step_reward: float = base.INTERNAL_STEP_REWARD
    fail_reward: float = base.FAIL_REWARD
    invalid_action_reward: float = base.INVALID_ACTION_REWARD
    format_error_reward: float = base.FORMAT_ERROR_REWARD

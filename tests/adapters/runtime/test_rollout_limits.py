"""RolloutLimits: checked once when built, taken by every driver as limits= or as keywords."""

from __future__ import annotations

import numpy as np
import pytest

from gem_adapters.runtime.rollout_limits import RolloutLimits


def test_defaults_and_bad_values():
    assert RolloutLimits() == RolloutLimits(None, 256, None, None)
    assert RolloutLimits(max_new_tokens=None, max_response_tokens=0).max_response_tokens == 0
    assert RolloutLimits(max_turns=np.int64(3)).max_turns == 3
    for bad, error in [
        ({"max_turns": 0}, "max_turns must be at least 1"),
        ({"max_new_tokens": 0}, "max_new_tokens must be at least 1"),
        ({"max_context_tokens": -1}, "max_context_tokens must not be negative"),
        ({"max_response_tokens": -5}, "max_response_tokens must not be negative"),
        ({"max_new_tokens": None}, "max_context_tokens or max_response_tokens must be set"),
    ]:
        with pytest.raises(ValueError, match=error):
            RolloutLimits(**bad)
    for bad in ({"max_turns": 2.0}, {"max_new_tokens": True}, {"max_context_tokens": "64"}):
        with pytest.raises(TypeError, match="must be an int or None"):
            RolloutLimits(**bad)


def test_of_takes_the_object_or_the_keywords_but_not_both():
    limits = RolloutLimits(max_turns=2)
    assert RolloutLimits.of(limits, {}) is limits
    assert RolloutLimits.of(None, {"max_turns": 2}) == limits
    assert RolloutLimits.of(None, {}) == RolloutLimits()
    with pytest.raises(TypeError, match="not both"):
        RolloutLimits.of(limits, {"max_turns": 2})
    with pytest.raises(TypeError, match="'max_turn'"):
        RolloutLimits.of(None, {"max_turn": 2})
    with pytest.raises(TypeError, match="must be a RolloutLimits"):
        RolloutLimits.of({"max_turns": 2}, {})  # type: ignore[arg-type]


def test_turn_budget_is_the_tightest_room_left():
    # 10 context ids of which 4 were the first prompt, 2 closing ids to keep room for.
    assert RolloutLimits(max_new_tokens=50).turn_budget(10, 4, 2) == 50
    assert RolloutLimits(max_new_tokens=50, max_context_tokens=30).turn_budget(10, 4, 2) == 18
    assert RolloutLimits(max_new_tokens=None, max_response_tokens=20).turn_budget(10, 4, 2) == 12
    both = RolloutLimits(max_new_tokens=None, max_context_tokens=30, max_response_tokens=9)
    assert both.turn_budget(10, 4, 2) == 1
    assert RolloutLimits(max_new_tokens=None, max_context_tokens=11).turn_budget(10, 4, 2) == -1

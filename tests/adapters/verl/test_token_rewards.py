"""The per-turn reward protocol on verl's token rows: what is written is read back, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gem_adapters.verl.token_rewards import rewards_on_tokens, turns_from_tokens


def test_written_rewards_read_back():
    spans = [(0, 2), (4, 5), (7, 9)]
    mask = [1, 1, 0, 0, 1, 0, 0, 1, 1, 0]
    row = rewards_on_tokens([0.5, -1.0, 2.0], spans, len(mask))
    assert row == [0.0, 0.5, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 2.0, 0.0]
    empty_row = [0.0] * len(mask)
    rewards, rows, row_spans = turns_from_tokens(
        np.array([row, empty_row]), np.array([mask, [0] * len(mask)])
    )
    assert rewards.tolist() == [0.5, -1.0, 2.0] and rows.tolist() == [0, 0, 0]
    assert row_spans == [spans, []]


def test_a_reward_after_the_last_action_counts_for_the_last_turn():
    # verl's other agent loops put one scalar on the row's last token.
    rewards, _, _ = turns_from_tokens(np.array([[0.0, 0.0, 0.0, 0.0, 3.0]]), np.array([[1, 0, 1, 0, 0]]))
    assert rewards.tolist() == [0.0, 3.0]


def test_one_reward_per_span():
    with pytest.raises(ValueError):
        rewards_on_tokens([1.0], [(0, 1), (2, 3)], 4)

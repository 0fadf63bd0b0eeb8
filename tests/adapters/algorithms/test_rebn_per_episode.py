"""ReBN in which every episode weighs the same (``rebn_per_episode``), against plain ReBN's bias toward
long episodes. Numbers checked by hand on small batches."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_adapters.algorithms.advantages import compute_advantages


def test_by_hand_one_long_and_two_short_episodes():
    # gamma=1, reward at the end: returns [1, 1] (T=2), [0] (T=1), [0] (T=1); 4 turns, 3 episodes.
    # Episode-weighted mean = (1 + 0 + 0) / 3 = 1/3; std = sqrt((4/9 + 1/9 + 1/9) / 3) = sqrt(2)/3.
    # Advantages: (G - 1/3) / (sqrt(2)/3) * (4/3) / T.
    out = compute_advantages("rebn_per_episode", [[0.0, 1.0], [0.0], [0.0]], gamma=1.0, eps=0.0)
    z_long, z_short = (2 / 3) / (math.sqrt(2) / 3), (-1 / 3) / (math.sqrt(2) / 3)
    np.testing.assert_allclose(out[0], [z_long * 2 / 3, z_long * 2 / 3])
    np.testing.assert_allclose(out[1], [z_short * 4 / 3])
    np.testing.assert_allclose(out[2], [z_short * 4 / 3])
    # Plain ReBN: mean over turns = 2/4, so the long episode's return pulls the baseline up.
    plain = compute_advantages("rebn", [[0.0, 1.0], [0.0], [0.0]], gamma=1.0, eps=0.0)
    np.testing.assert_allclose(np.concatenate(plain), [1.0, 1.0, -1.0, -1.0])


def test_equal_lengths_give_plain_rebn():
    episodes = [[0.0, 1.0, 0.5], [1.0, 0.0, 0.0], [0.2, 0.2, 0.2]]
    for gamma in (1.0, 0.9):
        a = np.concatenate(compute_advantages("rebn_per_episode", episodes, gamma=gamma))
        b = np.concatenate(compute_advantages("rebn", episodes, gamma=gamma))
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _episodes(rng, n, lengths, success_rate_by_length):
    """Episodes whose only reward (1 or 0) is at the end, with success probability set by length."""
    out = []
    for _ in range(n):
        length = int(rng.choice(lengths))
        won = rng.random() < success_rate_by_length(length)
        out.append([0.0] * (length - 1) + [1.0 if won else 0.0])
    return out


def test_plain_rebn_is_biased_toward_long_episodes_and_the_option_is_not():
    """Long episodes (20 turns) always fail, short ones (1 turn) succeed half the time; with gamma=1 an
    episode's turns share one return. Unbiased: the baseline is the mean over episodes (the average
    episode's advantage is 0) and episodes with the same return weigh the same in the loss."""
    rng = np.random.default_rng(0)
    episodes = _episodes(rng, 400, [1, 20], lambda length: 0.5 if length == 1 else 0.0)
    returns = np.array([ep[-1] for ep in episodes])
    lengths = np.array([len(ep) for ep in episodes])
    long_failed, short_failed = (lengths == 20) & (returns == 0), (lengths == 1) & (returns == 0)
    for name in ("rebn", "rebn_per_episode"):
        adv = compute_advantages(name, episodes, gamma=1.0)
        mean_over_episodes = np.mean([a.mean() * (1 if name == "rebn" else len(a)) for a in adv])
        weight = np.array([np.abs(a).sum() for a in adv])  # an episode's total weight in the loss
        weight_ratio = weight[long_failed].mean() / weight[short_failed].mean()
        if name == "rebn":
            # The long failures' many turns pull the baseline down: the average episode looks good...
            assert mean_over_episodes > 0.3
            # ...and a failed 20-turn episode weighs 20x a failed 1-turn one.
            assert weight_ratio == pytest.approx(20.0)
        else:
            assert mean_over_episodes == pytest.approx(0.0, abs=1e-9)
            assert weight_ratio == pytest.approx(1.0)
            # A failed short episode is below the baseline, a won one above.
            assert max(adv[i][0] for i in np.flatnonzero(short_failed)) < -0.5
            assert min(adv[i][0] for i in np.flatnonzero((lengths == 1) & (returns == 1))) > 0.5


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.lists(st.floats(-2, 2), min_size=1, max_size=6), min_size=2, max_size=10),
    st.floats(0.0, 1.0),
    st.integers(1, 9),
)
def test_split_over_two_workers_equals_single_batch(episode_rewards, gamma, cut):
    cut = min(cut, len(episode_rewards) - 1)
    single = np.concatenate(compute_advantages("rebn_per_episode", episode_rewards, gamma=gamma))
    shards = [episode_rewards[:cut], episode_rewards[cut:]]
    slots: list = [None, None]
    barrier = threading.Barrier(2)
    summed: dict = {}

    def reduce_for(rank):
        def reduce_fn(x):
            slots[rank] = np.array(x, dtype=np.float64)
            if barrier.wait() == 0:
                summed["value"] = np.sum(slots, axis=0)
            barrier.wait()
            return summed["value"].copy()

        return reduce_fn

    results: list = [None, None]

    def work(rank):
        results[rank] = compute_advantages(
            "rebn_per_episode", shards[rank], gamma=gamma, reduce_fn=reduce_for(rank)
        )

    threads = [threading.Thread(target=work, args=(rank,)) for rank in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    np.testing.assert_allclose(np.concatenate(results[0] + results[1]), single, rtol=1e-10, atol=1e-10)

"""The learner's ReBN step on Oat transitions, and how it differs from Oat's built-in whitening.

``oat_builtin`` below is Oat 0.2.4's own route, written out from ``PPOMultiTurnLearner`` (no critic):
``compute_advantages`` gives each turn its discounted return in float32 (values 0, lam 1, a done flag
ends the sum), ``process_feedback_data`` draws a random subsample of the turns, and
``learning_step`` with ``whiten_adv=True`` whitens that learning batch in float32 with a one-pass
variance, ``sqrt(E[x^2] - E[x]^2)``, and eps 1e-9.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("oat.types")

import torch
from oat.types import Transition

from gem_adapters.algorithms.advantages import compute_advantages_flat
from gem_adapters.oat import transition_advantages


def oat_builtin(rewards_per_episode, gamma, keep=None):
    """Oat 0.2.4's advantages for the kept turns (all turns when ``keep`` is None)."""
    flat = []
    for rewards in rewards_per_episode:
        dones = [0.0] * (len(rewards) - 1) + [1.0]
        advantages = np.zeros(len(rewards), dtype=np.float32)
        gae = 0.0
        for t in reversed(range(len(rewards))):
            gae = rewards[t] + gamma * (1 - dones[t]) * gae
            advantages[t] = gae
        flat.extend(advantages)
    if keep is not None:
        flat = [flat[i] for i in keep]
    x = torch.tensor(flat).reshape(-1, 1)
    mean = x.sum() / x.numel()
    std = torch.sqrt((x**2).sum() / x.numel() - mean**2)
    return ((x - mean) / (std + 1e-9)).reshape(-1).double().numpy()


def transitions(rewards_per_episode):
    return [
        [
            Transition(
                "o", "a", float(r), k == len(rewards) - 1, "", [1], "a", [2], [-0.1], False, True, info={}
            )
            for k, r in enumerate(rewards)
        ]
        for rewards in rewards_per_episode
    ]


def random_rewards(seed, episodes=24):
    rng = np.random.default_rng(seed)
    return [rng.choice([-0.1, 0.0, 0.5, 1.0], size=rng.integers(1, 7)).tolist() for _ in range(episodes)]


def test_writes_what_oats_dataset_reads_from_the_shared_estimator():
    rewards = random_rewards(0)
    episodes = transitions(rewards)
    got = transition_advantages(episodes, gamma=0.9, eps=1e-6)
    ids = np.repeat(np.arange(len(rewards)), [len(r) for r in rewards])
    flat = np.concatenate(rewards)
    np.testing.assert_array_equal(got, compute_advantages_flat("rebn", flat, ids, gamma=0.9, eps=1e-6))
    assert abs(got.mean()) < 1e-12 and abs(got.std() - 1) < 1e-5
    turns = [t for e in episodes for t in e]
    assert [t.info["advantages"] for t in turns] == got.tolist()
    assert all(t.info["values"] == 0.0 for t in turns)
    # returns: G_t = r_t + 0.9 G_{t+1}, within each episode.
    first = episodes[0]
    expected = [sum(0.9**j * r for j, r in enumerate(rewards[0][k:])) for k in range(len(first))]
    np.testing.assert_allclose([t.info["returns"] for t in first], expected, rtol=1e-12)


def test_transitions_without_info_get_one():
    episodes = transitions([[1.0, 0.0]])
    for t in episodes[0]:
        t.info = None
    transition_advantages(episodes)
    assert set(episodes[0][0].info) == {"advantages", "returns", "values"}


def test_agrees_with_oats_whitening_without_subsampling_and_with_the_same_eps():
    for seed in range(3):
        rewards = random_rewards(seed)
        ours = transition_advantages(transitions(rewards), gamma=0.9, eps=1e-9)
        np.testing.assert_allclose(ours, oat_builtin(rewards, 0.9), atol=2e-6, rtol=0)


def test_differs_when_oat_whitens_a_random_subsample():
    rewards = random_rewards(1, episodes=40)
    n = sum(map(len, rewards))
    keep = np.random.default_rng(0).choice(n, n // 4, replace=False)
    ours = transition_advantages(transitions(rewards), gamma=0.9, eps=1e-9)[keep]
    oats = oat_builtin(rewards, 0.9, keep=keep)
    # Oat's batch statistics are the subsample's own (mean 0 there); ours are those of all turns.
    assert abs(oats.mean()) < 1e-6 and abs(ours.mean()) > 1e-3
    assert np.abs(ours - oats).max() > 1e-2


def test_differs_through_eps_when_returns_barely_vary():
    rewards = [[0.0], [2e-7]]  # std 1e-7
    oats = oat_builtin(rewards, 1.0)
    ours = transition_advantages(transitions(rewards), eps=1e-6)
    np.testing.assert_allclose(oats, [-1.0, 1.0], atol=0.02)  # eps 1e-9 is negligible next to the std
    np.testing.assert_allclose(ours, [-1 / 11, 1 / 11], rtol=1e-6)  # 1e-7 / (1e-7 + 1e-6)


def test_one_pass_float32_variance_cancels_where_two_passes_do_not():
    rng = np.random.default_rng(0)
    rewards = [[1000.0 + float(x)] for x in rng.normal(0.0, 0.01, size=64)]  # returns share an offset
    returns = np.array([r[0] for r in rewards])
    exact = (returns - returns.mean()) / returns.std()
    ours = transition_advantages(transitions(rewards), eps=0.0)
    oats = oat_builtin(rewards, 1.0)
    np.testing.assert_allclose(ours, exact, rtol=1e-9, atol=1e-9)
    # E[x^2] - E[x]^2 in float32 loses every digit of a 1e-4 variance next to 1e6 (here it even goes
    # negative: NaN advantages).
    assert np.isnan(oats).any() or np.abs(oats - exact).max() > 0.1


def test_statistics_are_global_over_learners():
    """Two learners in threads, each with half of the episodes, all-reduce through ``reduce_fn``:
    each gets the advantages that one learner with every episode would compute."""
    rewards = random_rewards(2, episodes=30)
    expected = transition_advantages(transitions(rewards), gamma=0.8)
    halves = [rewards[:11], rewards[11:]]  # unequal shares of turns
    barrier, slots, results = threading.Barrier(2), [None, None], [None, None]

    def learner(rank):
        def all_reduce_sum(x):
            slots[rank] = x.copy()
            barrier.wait()
            total = slots[0] + slots[1]
            barrier.wait()
            return total

        results[rank] = transition_advantages(transitions(halves[rank]), gamma=0.8, reduce_fn=all_reduce_sum)

    threads = [threading.Thread(target=learner, args=(rank,)) for rank in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    np.testing.assert_allclose(np.concatenate(results), expected, rtol=1e-12, atol=1e-12)
    # Locally normalised halves would differ.
    local = transition_advantages(transitions(halves[0]), gamma=0.8)
    assert np.abs(local - results[0]).max() > 1e-3

"""ReBN within each env of a mixed batch (``rebn_per_env``): per-stratum z-scores checked by hand, rebn's
numbers bit for bit on one env, and the registry's ``needs_strata`` check for adapters that cannot feed it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_adapters.algorithms.advantages import (
    TurnBatch,
    advantages_for_episodes,
    compute_advantages,
    compute_advantages_flat,
    estimator_names,
    get_estimator,
    require_estimator,
    token_advantages,
)
from gem_adapters.episodes.episode import Episode, Turn


def zscores(values: list[float]) -> np.ndarray:
    values = np.array(values)
    return (values - values.mean()) / values.std()


def test_by_hand_two_envs_on_different_scales():
    # gamma=1. Env "a" (rewards 0/1): returns [1, 1] and [0]; env "b" (rewards 0/10): [10] and [0, 0].
    rewards = [[0.0, 1.0], [0.0], [10.0], [0.0, 0.0]]
    out = compute_advantages("rebn_per_env", rewards, gamma=1.0, eps=0.0, strata=["a", "a", "b", "b"])
    a, b = zscores([1.0, 1.0, 0.0]), zscores([10.0, 0.0, 0.0])
    np.testing.assert_allclose(np.concatenate(out), [*a, *b])
    assert out[0][0] == pytest.approx(math.sqrt(2) / 2) and out[2][0] == pytest.approx(math.sqrt(2))
    # Plain ReBN over the mixed batch: env b's scale sets the baseline, env a's winners look like losers.
    plain = np.concatenate(compute_advantages("rebn", rewards, gamma=1.0, eps=0.0))
    assert plain[0] < 0 < np.concatenate(out)[0]


def test_strata_may_be_interleaved_and_numbers():
    rewards = [[1.0], [5.0], [0.0], [7.0], [2.0]]
    out = np.concatenate(compute_advantages("rebn_per_env", rewards, eps=0.0, strata=[0, 1, 0, 1, 0]))
    np.testing.assert_allclose(out[[0, 2, 4]], zscores([1.0, 0.0, 2.0]))
    np.testing.assert_allclose(out[[1, 3]], [-1.0, 1.0])


def test_a_stratum_of_equal_returns_gets_zero():
    out = compute_advantages("rebn_per_env", [[1.0], [1.0], [0.0], [3.0]], strata=["x", "x", "y", "y"])
    np.testing.assert_array_equal(np.concatenate(out)[:2], [0.0, 0.0])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-5, 5, allow_nan=False) | st.none(), min_size=1, max_size=6),
        min_size=1,
        max_size=12,
    ),
    st.floats(0.0, 1.0),
)
def test_one_env_is_rebn_bit_for_bit(rewards, gamma):
    plain = compute_advantages("rebn", rewards, gamma=gamma)
    one = compute_advantages("rebn_per_env", rewards, gamma=gamma, strata=["game:X-v0"] * len(rewards))
    for p, o in zip(plain, one):
        assert p.tobytes() == o.tobytes()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.lists(st.floats(-3, 3), min_size=1, max_size=4)), min_size=1))
def test_each_stratum_is_rebn_of_its_own_episodes(episodes):
    strata = [s for s, _ in episodes]
    rewards = [r for _, r in episodes]
    out = compute_advantages("rebn_per_env", rewards, gamma=0.9, strata=strata)
    for s in set(strata):
        mine = [i for i, x in enumerate(strata) if x == s]
        alone = compute_advantages("rebn", [rewards[i] for i in mine], gamma=0.9)
        for i, a in zip(mine, alone):
            assert out[i].tobytes() == a.tobytes()


def test_flat_torch_and_token_entry_points_carry_strata():
    torch = pytest.importorskip("torch")
    rewards = torch.tensor([0.0, 1.0, 0.0, 10.0, 0.0, 0.0])
    episodes = torch.tensor([0, 0, 1, 2, 3, 3])
    strata = torch.tensor([7, 7, 7, 9, 9, 9])
    out = compute_advantages_flat("rebn_per_env", rewards, episodes, strata=strata, eps=0.0)
    assert isinstance(out, torch.Tensor) and out.dtype == rewards.dtype
    np.testing.assert_allclose(
        out.numpy(), [*zscores([1.0, 1.0, 0.0]), *zscores([10.0, 0.0, 0.0])], rtol=1e-6
    )
    tokens = token_advantages(
        "rebn_per_env", [[0.0, 1.0], [0.0], [10.0]], 4, turn_spans=[[(0, 1), (1, 2)], [(0, 2)], [(1, 4)]],
        strata=["a", "a", "b"],
    )  # fmt: skip
    np.testing.assert_allclose(tokens.advantages[2], [0.0, 0.0, 0.0, 0.0])  # env b alone: no baseline spread
    np.testing.assert_allclose(tokens.advantages[1], [-math.sqrt(2), -math.sqrt(2), 0.0, 0.0], rtol=1e-5)


def test_episodes_default_to_their_env_id():
    def episode(env_id, reward):
        return Episode(turns=[Turn("o", "x", [1], [2], reward=reward)], env_id=env_id, seed=0)

    episodes = [episode("a", 1.0), episode("a", 0.0), episode("b", 10.0), episode("b", 0.0)]
    out = np.concatenate(advantages_for_episodes("rebn_per_env", episodes, eps=0.0))
    np.testing.assert_allclose(out, [1.0, -1.0, 1.0, -1.0])


def test_without_strata_or_with_a_reduce_fn_it_says_what_it_needs():
    with pytest.raises(ValueError, match="needs strata"):
        compute_advantages("rebn_per_env", [[1.0], [0.0]])
    with pytest.raises(ValueError, match="gathered"):
        compute_advantages("rebn_per_env", [[1.0], [0.0]], strata=["a", "b"], reduce_fn=lambda x: x)
    with pytest.raises(ValueError, match="one entry per episode"):
        compute_advantages("rebn_per_env", [[1.0], [0.0]], strata=["a"])
    with pytest.raises(ValueError, match="same stratum"):
        TurnBatch.from_arrays([1.0, 0.0], [0, 0], strata=["a", "b"])


def test_registry_flag_and_the_adapters_that_cannot_feed_strata():
    estimator = get_estimator("rebn_per_env")
    assert estimator.needs_strata and not estimator.needs_groups and not get_estimator("rebn").needs_strata
    assert "rebn_per_env" not in estimator_names(values=False, groups=True, state_keys=True)
    assert "rebn_per_env" in estimator_names(values=False, groups=True, state_keys=True, strata=True)
    with pytest.raises(ValueError, match=r"Oat's learner cannot feed estimator 'rebn_per_env': it needs each "
                       r"episode's stratum \(the env id of its task\); choose one of \[.*'rebn'"):  # fmt: skip
        require_estimator("rebn_per_env", values=False, groups=False, trainer="Oat's learner")
    assert require_estimator("rebn_per_env", strata=True, trainer="TRL") is estimator

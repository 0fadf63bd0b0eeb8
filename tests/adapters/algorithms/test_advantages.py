"""Advantage estimators: hand-computed examples, ReBN against its formula, numpy == torch, distributed ReBN."""

from __future__ import annotations

import math
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_adapters.algorithms.advantages import (
    ESTIMATORS,
    compute_advantages,
    compute_advantages_flat,
    discounted_returns,
    estimator_names,
    get_estimator,
    mask_runs,
    register_estimator,
    require_estimator,
    state_key_code,
    state_keys_from_json,
    state_keys_to_json,
    turn_values_to_tokens,
)

SQRT2 = math.sqrt(2.0)


def test_discounted_returns_by_hand():
    np.testing.assert_allclose(discounted_returns([1.0, 0.0, 2.0], gamma=0.5), [1.5, 1.0, 2.0])
    np.testing.assert_allclose(discounted_returns([1.0, 0.0, 2.0], gamma=1.0), [3.0, 2.0, 2.0])
    # Flat turns of two interleaved episodes: 0 -> [1, 2], 1 -> [10].
    np.testing.assert_allclose(
        discounted_returns([1.0, 10.0, 2.0], 0.5, episode_ids=[0, 1, 0]), [2.0, 10.0, 2.0]
    )


def test_reinforce_by_hand():
    out = compute_advantages("reinforce", [[1.0, 0.0, 2.0], [3.0]], gamma=0.5)
    np.testing.assert_allclose(out[0], [1.5, 1.0, 2.0])
    np.testing.assert_allclose(out[1], [3.0])


def test_rebn_by_hand():
    # returns (gamma=1): [1, 1] and [2]; mean 4/3, population std sqrt(2)/3.
    out = compute_advantages("rebn", [[0.0, 1.0], [2.0]], gamma=1.0, eps=0.0)
    np.testing.assert_allclose(np.concatenate(out), [-1 / SQRT2, -1 / SQRT2, SQRT2])
    with_eps = compute_advantages("rebn", [[0.0, 1.0], [2.0]], gamma=1.0, eps=0.1)
    np.testing.assert_allclose(
        np.concatenate(with_eps), np.array([-1 / 3, -1 / 3, 2 / 3]) / (SQRT2 / 3 + 0.1)
    )


def test_rebn_discounts_before_normalising():
    # gamma=0.5: returns [0.5, 1] and [2] -> mean 7/6; population std computed by hand below.
    returns = np.array([0.5, 1.0, 2.0])
    std = math.sqrt(((0.5 - 7 / 6) ** 2 + (1 - 7 / 6) ** 2 + (2 - 7 / 6) ** 2) / 3)
    out = compute_advantages("rebn", [[0.0, 1.0], [2.0]], gamma=0.5, eps=0.0)
    np.testing.assert_allclose(np.concatenate(out), (returns - 7 / 6) / std)


def test_grpo_dr_grpo_by_hand():
    # Group "a": returns 1 and 0 (the second episode has two turns); group "b": a lone episode.
    rewards = [[1.0], [0.0, 0.0], [3.0]]
    groups = ["a", "a", "b"]
    grpo = compute_advantages("grpo", rewards, group_ids=groups, eps=0.0)
    # mean 0.5, sample std sqrt(0.5); every turn of an episode gets the episode's advantage.
    np.testing.assert_allclose(grpo[0], [1 / SQRT2])
    np.testing.assert_allclose(grpo[1], [-1 / SQRT2, -1 / SQRT2])
    np.testing.assert_allclose(grpo[2], [0.0])  # a group of one has no baseline
    dr = compute_advantages("dr_grpo", rewards, group_ids=groups)
    np.testing.assert_allclose(np.concatenate(dr), [0.5, -0.5, -0.5, 0.0])


def test_grpo_uses_the_discounted_episode_return():
    rewards = [[0.0, 2.0], [0.0, 0.0]]  # gamma 0.5 -> returns 1 and 0
    out = compute_advantages("dr_grpo", rewards, group_ids=[0, 0], gamma=0.5)
    np.testing.assert_allclose(np.concatenate(out), [0.5, 0.5, -0.5, -0.5])


def test_rloo_by_hand():
    out = compute_advantages("rloo", [[1.0], [2.0], [6.0], [5.0]], group_ids=[0, 0, 0, 1])
    # Baselines: (2+6)/2, (1+6)/2, (1+2)/2; the lone episode gets 0.
    np.testing.assert_allclose(np.concatenate(out), [1 - 4, 2 - 3.5, 6 - 1.5, 0.0])


def test_gae_by_hand():
    # delta_1 = 1 - 0.8 = 0.2; delta_0 = 0 + 0.9 * 0.8 - 0.5 = 0.22; A_0 = 0.22 + 0.9 * 0.5 * 0.2.
    out = compute_advantages("gae", [[0.0, 1.0]], values=[[0.5, 0.8]], gamma=0.9, lam=0.5)
    np.testing.assert_allclose(out[0], [0.31, 0.2])
    # lam = 1 gives the Monte Carlo return minus the value.
    out = compute_advantages("gae", [[0.0, 1.0], [2.0]], values=[[0.5, 0.8], [1.5]], gamma=0.9, lam=1.0)
    np.testing.assert_allclose(np.concatenate(out), [0.9 - 0.5, 1.0 - 0.8, 2.0 - 1.5])


# ---- GiGPO -------------------------------------------------------------------------------------
# Group "g": three episodes from one initial state A (gamma 0.5). E2's first move is illegal (-0.1)
# and leaves it in A, so A is visited twice by E2:
#   E0  states A B    rewards 0    1      episode return 1     discounted returns 0.5  1
#   E1  states A C    rewards 0    0      episode return 0     discounted returns 0    0
#   E2  states A A B  rewards -0.1 0 1    episode return 0.9   discounted returns 0.15 0.5 1
# Group "h": E3 alone, state A (the same key in another group is another step group).
GIGPO_REWARDS = [[0.0, 1.0], [0.0, 0.0], [-0.1, 0.0, 1.0], [1.0]]
GIGPO_KEYS = [["A", "B"], ["A", "C"], ["A", "A", "B"], ["A"]]
GIGPO_GROUPS = ["g", "g", "g", "h"]


def test_gigpo_by_hand():
    # Episode level over g's undiscounted returns 1, 0, 0.9: mean 19/30, deviations 11/30, -19/30,
    # 8/30, sum of squares 546/900, sample std sqrt(546/900/2) = 0.5508.
    episode_std = math.sqrt(546 / 900 / 2)
    a_e = np.array([11, -19, 8]) / 30 / episode_std
    # Step group (g, A): returns 0.5, 0, 0.15, 0.5 -> mean 0.2875, deviations 0.2125, -0.2875,
    # -0.1375, 0.2125, sample std sqrt(0.191875 / 3). (g, B): returns 1 and 1 -> 0. (g, C): alone -> 0.
    step_std = math.sqrt(0.191875 / 3)
    a_s = {d: d / step_std for d in (0.2125, -0.2875, -0.1375)}
    expected = [
        [a_e[0] + a_s[0.2125], a_e[0]],
        [a_e[1] + a_s[-0.2875], a_e[1]],
        [a_e[2] + a_s[-0.1375], a_e[2] + a_s[0.2125], a_e[2]],
        [0.0],  # a lone episode in a lone step group: no baseline at either level
    ]
    with np.errstate(invalid="ignore"):
        out = compute_advantages(
            "gigpo", GIGPO_REWARDS, gamma=0.5, group_ids=GIGPO_GROUPS, state_keys=GIGPO_KEYS, eps=0.0
        )
    # eps=0 leaves (g, B)'s 0/0: a step group whose returns are all equal gets 0 only through eps.
    assert np.isnan(out[0][1]) and np.isnan(out[2][2])
    out = compute_advantages(
        "gigpo", GIGPO_REWARDS, gamma=0.5, group_ids=GIGPO_GROUPS, state_keys=GIGPO_KEYS, eps=1e-12
    )
    for got, want in zip(out, expected):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    # Rounded, for the record: E0 [1.5060, 0.6657]  E1 [-2.2867, -1.1499]  E2 [-0.0595, 1.3244, 0.4842]
    np.testing.assert_allclose(
        np.concatenate(out),
        [1.5060, 0.6657, -2.2867, -1.1499, -0.0595, 1.3244, 0.4842, 0.0],
        atol=1e-4,
    )


def test_gigpo_no_std_and_omega_by_hand():
    out = compute_advantages(
        "gigpo_no_std", GIGPO_REWARDS, gamma=0.5, group_ids=GIGPO_GROUPS, state_keys=GIGPO_KEYS
    )
    expected = [
        [11 / 30 + 0.2125, 11 / 30],
        [-19 / 30 - 0.2875, -19 / 30],
        [8 / 30 - 0.1375, 8 / 30 + 0.2125, 8 / 30],
        [0.0],
    ]
    for got, want in zip(out, expected):
        np.testing.assert_allclose(got, want, atol=1e-12)
    # omega weighs the step level: a registration of functools.partial(gigpo_no_std, omega=...)
    import functools

    from gem_adapters.algorithms.advantages import gigpo_no_std

    register_estimator("test_gigpo_half", needs_groups=True, needs_state_keys=True)(
        functools.partial(gigpo_no_std, omega=0.5)
    )
    try:
        half = compute_advantages(
            "test_gigpo_half", GIGPO_REWARDS, gamma=0.5, group_ids=GIGPO_GROUPS, state_keys=GIGPO_KEYS
        )
        np.testing.assert_allclose(half[0], [11 / 30 + 0.5 * 0.2125, 11 / 30], atol=1e-12)
    finally:
        del ESTIMATORS["test_gigpo_half"]


def test_gigpo_turns_without_a_state_key_get_the_episode_advantage():
    keys = [["A", None], ["A", None], [None, None, None], [None]]
    out = compute_advantages(
        "gigpo", GIGPO_REWARDS, gamma=0.5, group_ids=GIGPO_GROUPS, state_keys=keys, eps=0.0
    )
    grpo = compute_advantages("grpo", GIGPO_REWARDS, gamma=1.0, group_ids=GIGPO_GROUPS, eps=0.0)
    # Without anchors (and gamma 1 for GRPO's return) GiGPO is GRPO: the episode level alone.
    for got, episode_level, key_row in zip(out, grpo, keys):
        for value, base, key in zip(got, episode_level, key_row):
            if key is None:
                assert value == pytest.approx(base)
    # The two turns anchored at A: returns 0.5 and 0 -> +-(0.25 / sample std 0.3536) = +-0.7071.
    assert out[0][0] - grpo[0][0] == pytest.approx(1 / SQRT2)
    assert out[1][0] - grpo[1][0] == pytest.approx(-1 / SQRT2)


def test_gigpo_needs_state_keys_and_groups():
    with pytest.raises(ValueError, match="state_keys"):
        compute_advantages("gigpo", GIGPO_REWARDS, group_ids=GIGPO_GROUPS)
    with pytest.raises(ValueError, match="group_ids"):
        compute_advantages("gigpo", GIGPO_REWARDS, state_keys=GIGPO_KEYS)
    with pytest.raises(ValueError, match="one entry per turn"):
        compute_advantages("gigpo", GIGPO_REWARDS, group_ids=GIGPO_GROUPS, state_keys=[["A"]] * 4)
    with pytest.raises(ValueError, match="episode 2 has 2 for 3 turns"):  # names the episode
        compute_advantages(
            "gigpo", GIGPO_REWARDS, group_ids=GIGPO_GROUPS, state_keys=[*GIGPO_KEYS[:2], ["A", "A"], ["A"]]
        )
    with pytest.raises(ValueError, match="3 episodes for 4"):
        compute_advantages("gigpo", GIGPO_REWARDS, group_ids=GIGPO_GROUPS, state_keys=GIGPO_KEYS[:3])
    assert get_estimator("gigpo").needs_state_keys and get_estimator("gigpo").needs_groups
    assert "gigpo" not in estimator_names() and "gigpo" in estimator_names(state_keys=True)


def test_require_estimator_names_the_trainer_what_it_lacks_and_what_it_can_use():
    assert require_estimator("grpo", state_keys=True) is get_estimator("grpo")
    with pytest.raises(
        ValueError, match=r"Oat cannot feed estimator 'grpo': it needs group ids; choose one of \["
    ):
        require_estimator("grpo", groups=False, trainer="Oat")
    with pytest.raises(ValueError, match="'gae': it needs a critic's per-turn values"):
        require_estimator("gae", state_keys=True)
    with pytest.raises(ValueError, match="needs per-turn env state keys") as refused:
        require_estimator("gigpo")
    assert "'rebn'" in str(refused.value) and "'gigpo'" not in str(refused.value).split("choose one of")[1]
    with pytest.raises(ValueError, match="unknown estimator 'nope' for this trainer"):
        require_estimator("nope")


def test_gigpo_integer_state_keys_as_a_tensor_and_unhashable_keys():
    flat = dict(gamma=0.9, group_ids=[0, 0, 0, 0])
    as_list = compute_advantages_flat(
        "gigpo", [0.0, 1.0, 0.0, 0.0], [0, 0, 1, 1], state_keys=[5, 6, 5, 7], **flat
    )
    as_tensor = compute_advantages_flat(
        "gigpo", [0.0, 1.0, 0.0, 0.0], [0, 0, 1, 1], state_keys=torch.tensor([5, 6, 5, 7]), **flat
    )
    np.testing.assert_array_equal(as_list, as_tensor)
    with pytest.raises(ValueError, match="hashable"):
        compute_advantages_flat("gigpo", [0.0, 1.0], [0, 0], state_keys=[{"a": 1}, None], group_ids=[0, 0])


def test_gigpo_state_keys_read_back_from_json_are_the_same_anchors():
    # Tuples come back from JSON as lists; they name the same states.
    as_tuples = [[("A", 1), ("B", (2, 3))], [("A", 1), ("C", ())]]
    as_lists = [[["A", 1], ["B", [2, 3]]], [["A", 1], ["C", []]]]
    kwargs = dict(gamma=0.9, group_ids=[0, 0])
    np.testing.assert_array_equal(
        np.concatenate(compute_advantages("gigpo", [[0, 1], [0, 0]], state_keys=as_tuples, **kwargs)),
        np.concatenate(compute_advantages("gigpo", [[0, 1], [0, 0]], state_keys=as_lists, **kwargs)),
    )


# ---- per-turn rewards with None (the turn_rewards contract) ---------------------------------------
TURN_REWARDS = [[None, None, 1.0], [0.5, None], [None], [-0.1, 2.0]]
FILLED = [[0.0, 0.0, 1.0], [0.5, 0.0], [0.0], [-0.1, 2.0]]


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_every_estimator_reads_none_as_a_zero_reward(name):
    kwargs = dict(
        gamma=0.9,
        lam=0.8,
        group_ids=[0, 0, 1, 1],
        values=[[0.1, 0.2, 0.3], [0.4, 0.5], [0.6], [0.7, 0.8]],
        state_keys=[["s", "t", "u"], ["s", "t"], ["s"], ["s", "v"]],
        strata=["a", "b", "a", "b"],  # rebn_per_env's env of each episode
    )
    with_none = compute_advantages(name, TURN_REWARDS, **kwargs)
    filled = compute_advantages(name, FILLED, **kwargs)
    for got, want in zip(with_none, filled):
        np.testing.assert_array_equal(got, want)
    lengths = [len(r) for r in TURN_REWARDS]
    flat = compute_advantages_flat(
        name,
        [x for r in TURN_REWARDS for x in r],
        np.repeat(np.arange(4), lengths),
        group_ids=np.repeat([0, 0, 1, 1], lengths),
        values=[x for v in kwargs["values"] for x in v],
        state_keys=[x for k in kwargs["state_keys"] for x in k],
        strata=np.repeat(["a", "b", "a", "b"], lengths),
        gamma=0.9,
        lam=0.8,
    )
    np.testing.assert_array_equal(flat, np.concatenate(filled))


def test_a_turn_without_a_reward_still_gets_credit_for_what_followed():
    # reinforce is the return itself: the two silent turns earn the discounted final reward.
    out = compute_advantages("reinforce", [[None, None, 1.0]], gamma=0.5)
    np.testing.assert_allclose(out[0], [0.25, 0.5, 1.0])
    assert discounted_returns([None, 2.0], gamma=0.5).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_rewards_are_an_error_not_a_missing_signal(bad):
    with pytest.raises(ValueError, match="use None"):
        compute_advantages("rebn", [[1.0, bad]])
    with pytest.raises(ValueError, match="use None"):
        compute_advantages_flat("rebn", torch.tensor([1.0, bad]), torch.tensor([0, 0]))


def test_missing_inputs_are_explained():
    with pytest.raises(ValueError, match="group_ids"):
        compute_advantages("grpo", [[1.0]])
    with pytest.raises(ValueError, match="values"):
        compute_advantages("gae", [[1.0]])
    with pytest.raises(KeyError, match="unknown estimator"):
        compute_advantages("ppo?", [[1.0]])
    with pytest.raises(ValueError, match="same group"):
        compute_advantages_flat("grpo", [1.0, 2.0], [0, 0], group_ids=[0, 1])


def test_registry_names_and_custom_estimator():
    assert {"rebn", "reinforce", "grpo", "dr_grpo", "rloo", "gae"} <= set(ESTIMATORS)

    @register_estimator("test_negated_returns")
    def negated(batch, *, gamma, **_):
        return -batch.returns(gamma)

    try:
        out = compute_advantages("test_negated_returns", [[1.0, 1.0]], gamma=0.5)
        np.testing.assert_allclose(out[0], [-1.5, -1.0])
        with pytest.raises(ValueError, match="already registered"):
            register_estimator("test_negated_returns")(negated)
    finally:
        del ESTIMATORS["test_negated_returns"]


def test_turn_values_to_tokens():
    out = turn_values_to_tokens([0.5, -1.0], [(2, 4), (6, 7)], seq_len=8)
    np.testing.assert_array_equal(out, [0, 0, 0.5, 0.5, 0, 0, -1.0, 0])
    masked = turn_values_to_tokens([0.5, -1.0], [(2, 4), (6, 7)], 8, loss_mask=[1, 1, 1, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(masked, [0, 0, 0.5, 0, 0, 0, -1.0, 0])
    as_tensor = turn_values_to_tokens(torch.tensor([0.5, -1.0]), [(2, 4), (6, 7)], 8)
    assert isinstance(as_tensor, torch.Tensor) and as_tensor.dtype == torch.float32
    np.testing.assert_array_equal(as_tensor.numpy(), out)
    with pytest.raises(ValueError, match="outside"):
        turn_values_to_tokens([1.0], [(3, 9)], 8)


def test_mask_runs_by_hand():
    assert mask_runs([0, 1, 1, 0, 0, 1, 0, 1]) == [(1, 3), (5, 6), (7, 8)]
    assert mask_runs([1, 1, 0, 1]) == [(0, 2), (3, 4)]
    assert mask_runs([]) == [] and mask_runs([0, 0]) == [] and mask_runs([1, 1]) == [(0, 2)]
    # Any nonzero entry counts, in any array kind; the spans are plain ints.
    assert mask_runs(np.array([0.5, -2.0, 0.0, 3.0])) == [(0, 2), (3, 4)]
    runs = mask_runs(torch.tensor([False, True, True, False]))
    assert runs == [(1, 3)] and all(type(i) is int for span in runs for i in span)
    assert mask_runs(torch.tensor([0, 2, 0, 1], dtype=torch.int64)) == [(1, 2), (3, 4)]
    with pytest.raises(ValueError, match="1-D"):
        mask_runs([[0, 1], [1, 0]])


@settings(max_examples=200, deadline=None)
@given(mask=st.lists(st.sampled_from([0, 0.0, 1, 2, -1.5, True, False]), max_size=40))
def test_mask_runs_are_the_maximal_nonzero_runs(mask):
    runs = mask_runs(mask)
    nonzero = [float(x) != 0 for x in mask]
    covered = [False] * len(mask)
    for k, (start, end) in enumerate(runs):
        assert 0 <= start < end <= len(mask) and all(nonzero[start:end])
        assert start == 0 or not nonzero[start - 1]  # maximal on the left
        assert end == len(mask) or not nonzero[end]  # and on the right
        assert k == 0 or runs[k - 1][1] < start  # in order, separated by a zero
        covered[start:end] = [True] * (end - start)
    assert covered == nonzero
    # The runs are the spans that put one value per turn back on exactly the mask's tokens.
    ones = turn_values_to_tokens([1.0] * len(runs), runs, len(mask))
    np.testing.assert_array_equal(ones, np.array(nonzero, dtype=np.float64))


# ---- property tests -----------------------------------------------------------------------------
episodes_strategy = st.lists(
    st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=6), min_size=1, max_size=12
)


def reference_rebn(episode_rewards, gamma, eps):
    """ReBN written out from its definition, with plain Python loops."""
    returns = []
    for rewards in episode_rewards:
        g, out = 0.0, []
        for r in reversed(rewards):
            g = r + gamma * g
            out.append(g)
        returns.append(out[::-1])
    flat = [g for ep in returns for g in ep]
    mean = sum(flat) / len(flat)
    std = math.sqrt(sum((g - mean) ** 2 for g in flat) / len(flat))
    return [[(g - mean) / (std + eps) for g in ep] for ep in returns]


@settings(max_examples=60, deadline=None)
@given(episodes_strategy, st.floats(0.0, 1.0), st.sampled_from([1e-6, 1e-2, 1.0]))
def test_rebn_matches_its_formula(episode_rewards, gamma, eps):
    out = compute_advantages("rebn", episode_rewards, gamma=gamma, eps=eps)
    expected = reference_rebn(episode_rewards, gamma, eps)
    assert [len(a) for a in out] == [len(e) for e in expected]
    np.testing.assert_allclose(np.concatenate(out), np.concatenate(expected), rtol=1e-9, atol=1e-9)


def _flat_batch(draw_episodes, groups_of):
    lengths = [len(e) for e in draw_episodes]
    rewards = np.array([r for e in draw_episodes for r in e])
    episode_ids = np.repeat(np.arange(len(lengths)), lengths)
    group_ids = np.repeat(np.array([groups_of(i) for i in range(len(lengths))]), lengths)
    return rewards, episode_ids, group_ids


@settings(max_examples=40, deadline=None)
@given(episodes_strategy, st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(1, 4), st.randoms())
def test_numpy_and_torch_give_identical_numbers(episode_rewards, gamma, lam, group_size, rnd):
    rewards, episode_ids, group_ids = _flat_batch(episode_rewards, lambda i: i // group_size)
    values = np.array([rnd.uniform(-1, 1) for _ in rewards])
    # Interleave the episodes' turns at random, keeping each episode's turns in order.
    slots = np.array(rnd.sample(range(len(rewards)), len(rewards)))
    for episode in np.unique(episode_ids):
        turns = np.flatnonzero(episode_ids == episode)
        slots[turns] = np.sort(slots[turns])
    order = np.argsort(slots)
    r, e, g, v = rewards[order], episode_ids[order], group_ids[order], values[order]
    keys = [rnd.choice([None, "a", "b", ("c", 1)]) for _ in rewards]  # state keys (GiGPO), None: no anchor
    k = [keys[i] for i in order]
    strata = episode_ids % 2  # two envs (rebn_per_env)
    assert {"rebn", "grpo", "gae", "gigpo"} <= set(ESTIMATORS)
    for name in ESTIMATORS:
        kwargs = dict(group_ids=g, values=v, state_keys=k, strata=strata[order], gamma=gamma, lam=lam)
        ref = compute_advantages_flat(name, r, e, **kwargs)
        out = compute_advantages_flat(
            name,
            torch.from_numpy(r),
            torch.from_numpy(e),
            group_ids=torch.from_numpy(g),
            values=torch.from_numpy(v),
            state_keys=k,
            strata=torch.from_numpy(strata[order]),
            gamma=gamma,
            lam=lam,
        )
        assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
        assert np.array_equal(out.numpy(), ref), name
        # The turn order of the flat layout does not matter: unshuffle and compare with the ordered batch.
        ordered = compute_advantages_flat(
            name,
            rewards,
            episode_ids,
            group_ids=group_ids,
            values=values,
            state_keys=keys,
            strata=strata,
            gamma=gamma,
            lam=lam,
        )
        unshuffled = np.empty_like(ref)
        unshuffled[order] = ref
        np.testing.assert_allclose(unshuffled, ordered, rtol=1e-12, atol=1e-12)


def test_torch_float32_in_float32_out():
    r = torch.tensor([1.0, 0.0, 2.0, 3.0], dtype=torch.float32)
    out = compute_advantages_flat("rebn", r, torch.tensor([0, 0, 1, 1]))
    ref = compute_advantages_flat("rebn", r.double().numpy(), np.array([0, 0, 1, 1]))
    assert out.dtype == torch.float32
    assert torch.equal(out, torch.from_numpy(ref).float())


# ---- distributed ReBN ---------------------------------------------------------------------------
class FakeAllReduce:
    """``world_size`` threads, each holding part of the batch, sum their vectors as an all-reduce would."""

    def __init__(self, world_size):
        self.barrier = threading.Barrier(world_size)
        self.slots = [None] * world_size
        self.result = None

    def for_rank(self, rank):
        def reduce_fn(x):
            self.slots[rank] = np.array(x, dtype=np.float64)
            if self.barrier.wait() == 0:
                self.result = np.sum(self.slots, axis=0)
            self.barrier.wait()
            return self.result.copy()

        return reduce_fn


@settings(max_examples=25, deadline=None)
@given(episodes_strategy.filter(lambda e: len(e) >= 2), st.floats(0.0, 1.0), st.integers(1, 11))
def test_rebn_split_over_two_workers_equals_single_batch(episode_rewards, gamma, cut):
    cut = min(cut, len(episode_rewards) - 1)
    single = np.concatenate(compute_advantages("rebn", episode_rewards, gamma=gamma))
    shards = [episode_rewards[:cut], episode_rewards[cut:]]
    fake = FakeAllReduce(2)
    results = [None, None]

    def work(rank):
        results[rank] = compute_advantages("rebn", shards[rank], gamma=gamma, reduce_fn=fake.for_rank(rank))

    threads = [threading.Thread(target=work, args=(rank,)) for rank in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    split = np.concatenate(results[0] + results[1])
    np.testing.assert_allclose(split, single, rtol=1e-10, atol=1e-10)
    # Without the reduce, each worker would normalise over its own shard: a different answer in general.


def _gloo_worker(rank, world_size, port, shards, queue):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)

    def reduce_fn(x):
        dist.all_reduce(x)
        return x

    rewards, episode_ids = shards[rank]
    out = compute_advantages_flat(
        "rebn",
        torch.tensor(rewards, dtype=torch.float64),
        torch.tensor(episode_ids),
        gamma=0.9,
        reduce_fn=reduce_fn,
    )
    queue.put((rank, out.tolist()))
    dist.destroy_process_group()


def test_rebn_with_torch_distributed_gloo(free_port):
    import torch.multiprocessing as mp

    episodes = [[0.0, 1.0], [2.0], [-1.0, 0.5, 0.5], [3.0, 0.0]]
    single = np.concatenate(compute_advantages("rebn", episodes, gamma=0.9))

    def shard(eps):
        return [r for e in eps for r in e], [i for i, e in enumerate(eps) for _ in e]

    shards = [shard(episodes[:1]), shard(episodes[1:])]
    ctx = mp.get_context("fork")  # torch is already imported: forking is quick
    queue = ctx.Queue()
    procs = [ctx.Process(target=_gloo_worker, args=(rank, 2, free_port, shards, queue)) for rank in (0, 1)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    np.testing.assert_allclose(results[0] + results[1], single, rtol=1e-12, atol=1e-12)


def test_state_keys_cross_processes_as_json_and_as_codes():
    """How state keys travel between a trainer's processes: JSON (lists read back as tuples) where a
    transport carries strings, a 63-bit code (-1: no key) where it carries numbers; both group turns as
    the keys themselves do, in any process."""
    keys = [("board", (1, 2), "x"), "s", 3, None, ("board", (1, 2), "x"), ("s",)]
    text = state_keys_to_json(keys)
    assert state_keys_from_json(text) == keys
    codes = [state_key_code(k) for k in keys]
    assert codes[3] == -1 and codes[0] == codes[4] and len({codes[i] for i in (0, 1, 2, 5)}) == 4
    assert all(0 <= c < 2**63 for c in codes if c != -1)
    assert state_key_code(["board", [1, 2], "x"]) == codes[0]  # a key read back from JSON
    fresh = subprocess.run(  # str hashes are salted per process; the codes are not
        [
            sys.executable,
            "-c",
            f"from gem_adapters.algorithms.advantages import state_key_code as c; print(c({keys[0]!r}))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert fresh.returncode == 0, fresh.stderr
    assert int(fresh.stdout) == codes[0]
    rewards = [[1.0, 0.0, 2.0], [0.0, 3.0, 1.0]]
    by_key = compute_advantages("gigpo", rewards, group_ids=[0, 0], state_keys=[keys[:3], keys[3:]])
    by_json = compute_advantages(
        "gigpo",
        rewards,
        group_ids=[0, 0],
        state_keys=[
            state_keys_from_json(state_keys_to_json(keys[:3])),
            state_keys_from_json(state_keys_to_json(keys[3:])),
        ],
    )
    by_code = compute_advantages(
        "gigpo",
        rewards,
        group_ids=[0, 0],
        state_keys=[[None if c < 0 else c for c in codes[:3]], [None if c < 0 else c for c in codes[3:]]],
    )
    for a, b, c in zip(by_key, by_json, by_code):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    with pytest.raises(ValueError, match="plain JSON data"):
        state_keys_to_json([object()])
    with pytest.raises(ValueError, match="plain JSON data"):
        state_key_code(float("nan"))

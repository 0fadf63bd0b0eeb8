import time

import numpy as np
import pytest

import gem_core
from gem_core.vector import AsyncVectorEnv, SyncVectorEnv

from .toy_envs import CountdownEnv

BACKENDS = [SyncVectorEnv, AsyncVectorEnv]


def fns(n, **kwargs):
    return [lambda: CountdownEnv(**kwargs) for _ in range(n)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_reset_seeds_env_i_with_seed_plus_i(backend):
    vec = backend(fns(3))
    obs, infos = vec.reset(seed=10)
    for i in range(3):
        assert obs[i] == CountdownEnv().reset(seed=10 + i)[0]
    assert len(infos) == 3 and all(isinstance(i, dict) for i in infos)
    vec.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_next_step_autoreset_keeps_final_observation(backend):
    vec = backend(fns(2, length=1), autoreset_mode="next_step")
    vec.reset(seed=0)
    obs, rew, term, trunc, infos = vec.step(["x", "x"])
    assert all(o.startswith("t=1") for o in obs)  # the final observations themselves
    assert (term | trunc).all() and vec.done.all()
    obs, rew, term, trunc, infos = vec.step(["ignored", "ignored"])
    assert all(o.startswith("guess a digit") for o in obs)
    assert all(info["autoreset"] for info in infos) and not (term | trunc).any()
    assert not vec.done.any() and (rew == 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_step_autoreset_keeps_final_obs_and_info_in_info(backend):
    vec = backend(fns(2, length=1), autoreset_mode="same_step")
    vec.reset(seed=0)
    obs, rew, term, trunc, infos = vec.step(["x", "x"])
    assert (term | trunc).all()
    assert all(o.startswith("guess a digit") for o in obs)  # already the next episode
    for info in infos:
        assert info["final_obs"].startswith("t=1") and info["final_info"]["t"] == 1
    assert not vec.done.any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_disabled_autoreset_requires_explicit_reset(backend):
    vec = backend(fns(2, length=1), autoreset_mode="disabled")
    vec.reset(seed=0)
    vec.step(["x", "x"])
    with pytest.raises(RuntimeError, match="autoreset is disabled"):
        vec.step(["x", "x"])
    obs, _ = vec.reset(seed=[5], indices=[1])
    assert vec.done.tolist() == [True, False]
    assert obs[1] == CountdownEnv().reset(seed=5)[0]
    _, _, term, trunc, infos = vec.step({1: "x"})
    assert infos[0] == {"stepped": False} and infos[1]["stepped"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_subset_stepping_leaves_other_envs_untouched(backend):
    vec = backend(fns(3, length=5))
    first, _ = vec.reset(seed=0)
    obs, rew, term, trunc, infos = vec.step({1: "3"})
    assert obs[0] == first[0] and obs[2] == first[2] and obs[1] != first[1]
    assert [i["stepped"] for i in infos] == [False, True, False]
    assert vec.envs[0].t == 0 and vec.envs[1].t == 1
    with pytest.raises(IndexError):
        vec.step({7: "x"})
    with pytest.raises(ValueError, match="2 actions for 3 envs"):
        vec.step(["a", "b"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_raising_env_is_reported_replaced_and_batch_goes_on(backend):
    vec = backend([lambda: CountdownEnv(length=5), lambda: CountdownEnv(length=5, raise_on_step=1)])
    vec.reset(seed=0)
    obs, rew, term, trunc, infos = vec.step(["x", "x"])
    assert "ValueError: boom" in infos[1]["error"] and trunc[1] and not term[1]
    assert "error" not in infos[0] and not trunc[0]
    # next_step mode: the replacement env is reset on the next step, and the batch keeps going
    obs, rew, term, trunc, infos = vec.step(["x", "x"])
    assert infos[1]["autoreset"] and obs[1].startswith("guess a digit")


def test_hung_env_times_out_in_async_and_others_finish():
    vec = AsyncVectorEnv(
        [lambda: CountdownEnv(length=5), lambda: CountdownEnv(length=5, hang_on_step=1)], step_timeout=0.5
    )
    vec.reset(seed=0)
    start = time.perf_counter()
    obs, rew, term, trunc, infos = vec.step(["x", "x"])
    assert time.perf_counter() - start < 2.0
    assert "timeout" in infos[1]["error"] and trunc[1]
    assert infos[0]["t"] == 1
    obs, *_ = vec.step(["x", "x"])
    assert obs[1].startswith("guess a digit")  # the replacement env was reset; the batch goes on
    assert vec.envs[1].hang_on_step == 1 and vec.envs[1].t == 0


def test_slow_env_is_reported_by_sync_backend():
    vec = SyncVectorEnv([lambda: CountdownEnv(length=5, sleep=0.05)], step_timeout=0.01)
    vec.reset(seed=0)
    *_, infos = vec.step(["x"])
    assert "step timeout" in infos[0]["error"]


def test_steps_overlap_in_threads():
    vec = AsyncVectorEnv(fns(8, length=5, sleep=0.1))
    vec.reset(seed=0)
    start = time.perf_counter()
    vec.step(["x"] * 8)
    assert time.perf_counter() - start < 0.5  # serially this would take 0.8 s


def _episodes_one_by_one(env_id, seeds, steps):
    transcripts = []
    for seed in seeds:
        env = gem_core.make(env_id)
        obs, _ = env.reset(seed=seed)
        t = [obs]
        for _ in range(steps):
            action = env.sample_random_action()
            obs, r, term, trunc, _ = env.step(action)
            t.append((action, obs, r, term, trunc))
            if term or trunc:
                break
        transcripts.append(t)
    return transcripts


def test_64_async_envs_reproduce_one_by_one_trajectories():
    env_id, seed, steps = "game:GuessTheNumber-v1-hard", 1000, 7
    expected = _episodes_one_by_one(env_id, range(seed, seed + 64), steps)
    vec = gem_core.make_vec(env_id, 64, backend="threads", autoreset_mode="disabled")
    obs, _ = vec.reset(seed=seed)
    got = [[o] for o in obs]
    for _ in range(steps):
        active = [i for i in range(64) if not vec.done[i]]
        if not active:
            break
        actions = dict(zip(active, [a for i, a in enumerate(vec.sample_random_actions()) if i in active]))
        obs, rew, term, trunc, _ = vec.step(actions)
        for i in active:
            got[i].append((actions[i], obs[i], float(rew[i]), bool(term[i]), bool(trunc[i])))
    vec.close()
    assert got == expected


def test_rewards_are_numpy_arrays():
    vec = SyncVectorEnv(fns(2))
    vec.reset(seed=0)
    _, rew, term, trunc, _ = vec.step(["1", "2"])
    assert rew.dtype == np.float64 and term.dtype == bool and trunc.dtype == bool
    with pytest.raises(RuntimeError, match="reset"):
        SyncVectorEnv(fns(1)).step(["x"])

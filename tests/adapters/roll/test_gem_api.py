"""gem_core envs through the reference GEM API (``gem.make`` of gem-llm), the way ROLL builds and steps them."""

from __future__ import annotations

import random

import pytest

gem = pytest.importorskip("gem", reason="the reference GEM (pip install gem-llm) is what ROLL consumes")
from gem.envs.registration import ENV_REGISTRY  # noqa: E402

import gem_core  # noqa: E402
from gem_adapters.roll import (  # noqa: E402
    NAMESPACE,
    StripSpecialTokens,
    register_gem_core_envs,
    strip_special_tokens,
)
from gem_adapters.roll.env import METRICS_AGG_MODE, RollEnv  # noqa: E402
from gem_adapters.roll.registration import is_gem_core_entry  # noqa: E402
from tests.adapters.roll.players import END_OF_TURN, agent_action, play  # noqa: E402

SUDOKU = "game:Sudoku-v1-easy"
SHARED = "game:Sudoku-v0-easy"  # an id gem-llm registers too (gem_core plays the reference's game)


@pytest.fixture(autouse=True)
def gem_registry():
    """gem's registry is process-global: each test gets it back as it found it."""
    saved = dict(ENV_REGISTRY)
    yield ENV_REGISTRY
    ENV_REGISTRY.clear()
    ENV_REGISTRY.update(saved)


# ---- registration and the collision policy -------------------------------------------------------
def test_default_registration_keeps_other_owners_and_adds_every_alias(gem_registry):
    before = dict(gem_registry)
    done = register_gem_core_envs()
    ours = gem_core.list_envs()
    assert done.aliases == [NAMESPACE + i for i in ours]
    assert sorted(done.kept) == sorted(i for i in ours if i in before)
    assert sorted(done.ids) == sorted(i for i in ours if i not in before)
    assert done.kept and done.ids  # gem-llm owns most game ids, not all
    for env_id in done.kept:
        assert gem_registry[env_id] is before[env_id]
    assert not isinstance(gem.make(SHARED), RollEnv)  # gem-llm's Sudoku, untouched
    assert isinstance(gem.make(NAMESPACE + SUDOKU), RollEnv)
    assert isinstance(gem.make(done.ids[0]), RollEnv)
    assert {k: v for k, v in gem_registry.items() if k not in ours and not k.startswith(NAMESPACE)} == {
        k: v for k, v in before.items() if k not in ours
    }  # nothing of anyone else's changed
    again = register_gem_core_envs()  # idempotent, and our own bare ids stay ours
    assert (again.aliases, again.ids, again.kept) == (done.aliases, done.ids, done.kept)


def test_override_takes_the_shared_ids_only(gem_registry):
    foreign = [k for k in gem_registry if k not in set(gem_core.list_envs())]
    done = register_gem_core_envs(override=True)
    assert not done.kept and done.ids == gem_core.list_envs()
    assert isinstance(gem.make(SHARED), RollEnv) and is_gem_core_entry(SHARED)
    assert foreign and not any(is_gem_core_entry(k) for k in foreign)


def test_registering_a_chosen_id_and_an_unknown_one():
    done = register_gem_core_envs([SUDOKU], override=True)
    assert done.aliases == [NAMESPACE + SUDOKU] and done.ids == [SUDOKU]
    assert not is_gem_core_entry("game:Mastermind-v1-easy")
    with pytest.raises(gem_core.EnvNotFoundError, match="Sudoku"):
        register_gem_core_envs(["game:Sudoku-v9"])


# ---- what ROLL reads ----------------------------------------------------------------------------
def test_solver_episode_through_gem_make_with_roll_info():
    register_gem_core_envs(override=True)
    env = gem.make(SUDOKU)
    assert isinstance(env, gem.Env) and env.env_id == SUDOKU  # gem.make's own bookkeeping
    global_state = random.getstate()
    obs, info = env.reset(seed=11)
    assert isinstance(obs, str) and "Sudoku" in obs
    assert info["env_instruction"] == "" and isinstance(info["env_info"], dict)
    rewards, terminated, turns = [], False, 0
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(
            agent_action(env, random.Random(0), 0.0) + END_OF_TURN
        )
        rewards.append(reward)
        turns += 1
        assert isinstance(reward, float) and isinstance(info, dict)
        assert set(info["metrics"]) == set(METRICS_AGG_MODE) == set(info["metrics_agg_mode"])
        assert info["metrics"]["action_is_valid"] and info["metrics"]["reward"] == reward
        assert END_OF_TURN not in obs
    assert not truncated and info["metrics"]["success"] and info["env_info"]["success"]
    assert turns == 6 and sum(rewards) == pytest.approx(1.5)  # 6 empty cells; the table return
    assert random.getstate() == global_state  # gem-llm's own envs reseed the global RNG here
    assert rewards == play(gem.make(NAMESPACE + SUDOKU), 11, random.Random(0), 0.0)  # same seed, same episode


def test_the_turn_limit_ends_the_episode_as_terminated_and_truncated():
    register_gem_core_envs()
    env = gem.make(NAMESPACE + "game:GuessTheNumber-v1-easy")  # 1..10, 4 turns
    env.reset(seed=0)
    flags = [env.step("no move here")[2:4] for _ in range(4)]
    assert flags == [(False, False)] * 3 + [(True, True)]


def test_env_kwargs_seed_and_instruction_through_gem_make():
    register_gem_core_envs()
    env = gem.make(
        NAMESPACE + "game:GuessTheNumber-v1",
        min_number=3,
        max_number=4,
        max_turns=2,
        instruction_from_observation=True,
        seed=5,
    )
    obs, info = env.reset()  # the first reset without a seed uses the constructor's (gem.make_vec passes one)
    assert "between 3 and 4" in obs and info["env_instruction"] == obs
    assert env.reset(seed=5)[0] == obs
    assert env.sample_random_action() in ("\\boxed{3}", "\\boxed{4}")
    twin = env.spawn(same_state=True)
    assert isinstance(twin, RollEnv) and twin.step("\\boxed{3}")[1] == env.step("\\boxed{3}")[1]


def test_gem_make_vec_builds_and_seeds_gem_core_envs():
    register_gem_core_envs()
    vec = gem.make_vec([NAMESPACE + SUDOKU] * 2, seed=40)
    obs, _ = vec.reset()
    assert obs[0] == gem.make(NAMESPACE + SUDOKU).reset(seed=40)[0]
    assert obs[1] == gem.make(NAMESPACE + SUDOKU).reset(seed=41)[0]


def test_every_game_and_one_env_of_each_other_kind_steps_through_gem():
    register_gem_core_envs()
    others = ["math:Fractions-v0", "code:PythonBasics-v0", "qa:LocalWiki-v0", "logic:RuleTaker-v0-d1"]
    others.append("rg:letter_counting")
    for env_id in gem_core.list_envs("game:*") + others:
        env = gem.make(NAMESPACE + env_id)
        obs, info = env.reset(seed=0)
        assert isinstance(obs, str) and "env_instruction" in info, env_id
        action = env.sample_random_action()
        obs, reward, terminated, truncated, info = env.step(action + END_OF_TURN)
        assert isinstance(reward, float) and isinstance(terminated, bool), env_id
        assert not truncated or terminated, env_id
        assert set(info["metrics"]) == set(METRICS_AGG_MODE), env_id
        assert all(isinstance(float(v), float) for v in info["metrics"].values())  # ROLL float()s them
        env.close()


# ---- special tokens -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "stripped"),
    [
        ("\\boxed{3}<|im_end|>", "\\boxed{3}"),
        ("x \n<|im_end|><|endoftext|>\n<|endoftext|>", "x \n"),
        ("<|begin_of_text|>\\boxed{3}<|eot_id|>", "\\boxed{3}"),
        ("<s>[INST] a </s>", "[INST] a "),
        ("a<|im_end|>b", "a<|im_end|>b"),  # inside the text: the model wrote it, the env judges it
        ("  plain  ", "  plain  "),
        ("<|im_end|>", ""),
        ("", ""),
    ],
)
def test_strip_special_tokens(text, stripped):
    assert strip_special_tokens(text) == stripped


def test_stripping_is_linear_on_long_runs():
    import time

    start = time.perf_counter()
    assert strip_special_tokens("<|im_end|> " * 50_000 + "x" + "</s>" * 50_000) == " x"
    assert time.perf_counter() - start < 2.0


def test_the_env_sees_the_action_without_the_end_of_turn_tokens():
    register_gem_core_envs()
    # A format error echoes the reply back: what the env saw.
    stripped = gem.make(NAMESPACE + SUDOKU)
    kept = gem.make(NAMESPACE + SUDOKU, special_tokens=())
    for env in (stripped, kept):
        env.reset(seed=0)
    assert "hello<" not in stripped.step("hello<|im_end|><|endoftext|>")[0]
    assert "hello<|im_end|>" in kept.step("hello<|im_end|><|endoftext|>")[0]


def test_strip_special_tokens_wrapper_passes_check_env():
    gem_core.check_env(StripSpecialTokens(gem_core.make("game:GuessTheNumber-v1-easy")))

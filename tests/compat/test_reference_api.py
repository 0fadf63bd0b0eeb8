"""The reference GEM's public API on gem_core: ``make(id, seed=...)``, ``make_vec`` in the reference's
form, ``print_envs``, ``info["suffix"]`` and the wrapper factory — the observation wrappers' text
checked against the reference's own wrapper, turn by turn."""

from __future__ import annotations

import random

import numpy as np
import pytest

import gem_core
from gem_core.wrappers import WRAPPER_FACTORY, get_wrapper_fns
from gem_core.wrappers.reference_observation import ReferenceObservation
from tests.compat.test_reference_games import make_ours, reset_both, solver_move, step_both

WRAPPED_IDS = ["game:GuessTheNumber-v0-hard", "game:Minesweeper-v0-easy", "game:Crosswords-v0-easy"]
OBSERVATION_SETTINGS = {
    "concat": {"include_action": False, "include_chat_template": False},
    "concat_with_action": {"include_action": True, "include_chat_template": False},
    "concat_chat": {"include_action": True, "include_chat_template": True},
    "concat_chat_on_reset": {
        "include_action": True,
        "include_chat_template": False,
        "apply_chat_template_on_reset": True,
    },
    "concat_last_2": {"include_action": True, "include_chat_template": False, "max_history_length": 2},
}


@pytest.fixture(scope="module")
def tokenizer():
    from gem_adapters.runtime.models import load_tokenizer

    return load_tokenizer("smollm2")


@pytest.mark.parametrize("env_id", WRAPPED_IDS)
@pytest.mark.parametrize("name", sorted(OBSERVATION_SETTINGS))
def test_observation_text_is_the_references(reference_gem, tokenizer, env_id, name):
    from gem.wrappers.observation_wrapper import ObservationWrapper

    settings = OBSERVATION_SETTINGS[name]
    needs_tokenizer = settings["include_chat_template"] or settings.get("apply_chat_template_on_reset")
    kwargs = {**settings, "tokenizer": tokenizer if needs_tokenizer else None}
    ref = ObservationWrapper(reference_gem.make(env_id), **kwargs)
    ours = ReferenceObservation(make_ours(env_id), **kwargs)
    for seed in range(3):
        expected, got = reset_both(ref, ours, seed)
        assert got == expected
        rng = random.Random(seed)
        for _ in range(8):
            action = f"My move: {solver_move(ref.unwrapped, rng)}"
            expected, got = step_both(ref, ours, action)
            assert got == expected
            if expected[2] or expected[3]:
                break


def test_factory_names_are_the_references(reference_gem):
    from gem.wrappers.wrapper_factory import TOKENIZER_REQUIRED as REF_TOKENIZER_REQUIRED
    from gem.wrappers.wrapper_factory import WRAPPER_FACTORY as REF_FACTORY

    from gem_core.wrappers.wrapper_factory import TOKENIZER_REQUIRED

    assert set(WRAPPER_FACTORY) == set(REF_FACTORY)
    assert TOKENIZER_REQUIRED == REF_TOKENIZER_REQUIRED


def test_get_wrapper_fns(tokenizer):
    fns = get_wrapper_fns("episode_tracking,concat_chat", tokenizer=tokenizer)
    env = make_ours("game:GuessTheNumber-v0-easy")
    for fn in fns:
        env = fn(env)
    obs, _ = env.reset(seed=0)
    assert "Guess The Number" in obs and obs.endswith("<|im_start|>assistant\nEnter your next guess.")
    assert get_wrapper_fns("") == [] and get_wrapper_fns(None) == []
    with pytest.raises(KeyError, match="concatt"):
        get_wrapper_fns("concatt")
    with pytest.raises(ValueError, match="tokenizer"):
        WRAPPER_FACTORY["concat_chat"](gem_core.make("game:GuessTheNumber-v0-easy"))


def test_tool_wrappers_are_built_per_env():
    a, b = (WRAPPER_FACTORY["python_tool"](gem_core.make("game:GuessTheNumber-v0-easy")) for _ in range(2))
    assert (a.tool_reward, a.tool_success_reward, a.max_tool_uses) == (0.05, 0.25, 5)
    assert a.tools[0] is not b.tools[0] and a.tools[0].limits.timeout == 5


def test_make_with_a_seed_fixes_the_first_episode():
    first = gem_core.make("game:Wordle-v0-hard", seed=3).reset()
    assert gem_core.make("game:Wordle-v0-hard", seed=3).reset() == first
    assert gem_core.make("game:Wordle-v0-hard").reset(seed=3) == first
    assert {gem_core.make("game:Wordle-v0-hard", seed=s).reset()[0] for s in range(5)} != {first[0]}


@pytest.mark.parametrize("async_mode", [False, True])
def test_make_vec_in_the_references_form(async_mode):
    env_id, num_env = "game:GuessTheNumber-v0-easy", 3
    env = gem_core.make_vec(
        [env_id] * num_env,
        vec_kwargs=[{"seed": 233 + j} for j in range(num_env)],
        wrappers=get_wrapper_fns("concat"),
        async_mode=async_mode,
    )
    try:
        assert type(env).__name__ == ("AsyncVectorEnv" if async_mode else "SyncVectorEnv")
        assert env.autoreset_mode.value == "same_step"  # the reference's autoreset
        observations, _ = env.reset()
        concat = WRAPPER_FACTORY["concat"]
        assert observations == [
            concat(gem_core.make(env_id, seed=233 + j)).reset()[0] for j in range(num_env)
        ]
        finished = 0
        for _ in range(8):  # "no answer" is never right: every episode ends within the 4 turns
            observations, rewards, terminated, truncated, infos = env.step(["no answer"] * num_env)
            assert isinstance(rewards, np.ndarray) and np.all(rewards < 0)
            for obs, info, done in zip(observations, infos, terminated | truncated):
                if done:  # same_step: the next episode has started, the last one is in the info
                    finished += 1
                    assert "final_obs" in info and obs.startswith("You are playing Guess The Number")
        assert finished >= 2 * num_env
    finally:
        env.close()


def test_make_vec_seed_gives_each_env_its_own():
    env = gem_core.make_vec("game:Mastermind-v0-hard", wrappers=None, seed=10)
    try:
        assert len(env.envs) == 1
        assert env.reset()[0] == [gem_core.make("game:Mastermind-v0-hard", seed=10).reset()[0]]
    finally:
        env.close()
    with pytest.raises(ValueError, match="vec_kwargs"):
        gem_core.make_vec(["game:Mastermind-v0-hard"] * 2, vec_kwargs=[{}])


def test_print_envs(capsys):
    gem_core.print_envs()
    out = capsys.readouterr().out
    assert "  - game:Sokoban-v0-hard:\n      Entry Point: " in out
    assert out.count("  - ") == len(gem_core.list_envs())


def test_games_give_the_suffix_every_turn():
    for env_id in ("game:Sudoku-v0-easy", "game:Hangman-v0-easy"):
        env = make_ours(env_id)
        _, info = env.reset(seed=0)
        assert info["suffix"].endswith("Enter your guess.") or info["suffix"].endswith("Enter your move.")
        assert "suffix" in env.step(env.sample_random_action())[4]

"""Wordle: letter marks, the reward table, word validation and the consistent-guess solver."""

import pickle
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_core import make
from gem_core.envs.games import wordlists
from gem_core.envs.games.wordle import WordleEnv, feedback


def play(env, seed):
    env.reset(seed=seed)
    rewards, info, done, start = [], {}, False, time.perf_counter()
    while not done:
        _, reward, terminated, truncated, info = env.step(env.solve_action())
        rewards.append(reward)
        done = terminated or truncated
    return rewards, info, time.perf_counter() - start


def test_marks_handle_repeated_letters():
    assert feedback("apple", "paper") == "YYGY-"
    assert feedback("crane", "crane") == "GGGGG"
    # abbey vs bobby: b(0) is in abbey elsewhere -> Y; o -> -; b(2)=b -> G; b(3) vs e: no b left -> -; y=y -> G
    assert feedback("abbey", "bobby") == "Y-G-G"
    assert feedback("cat", "tat") == "-GG"


def test_word_lists_ship_and_are_consistent():
    for length in (3, 5):
        answers, allowed = wordlists.words("answers", length), wordlists.word_set("allowed", length)
        assert len(answers) >= 300 and len(allowed) >= len(answers)
        assert all(len(w) == length and w.isascii() and w.isalpha() and w.islower() for w in answers)
        assert set(answers) <= allowed


@pytest.mark.parametrize("variant", ["easy", "hard"])
def test_solver_wins_every_seeded_episode_with_the_full_return(variant):
    env = make(f"game:Wordle-v1-{variant}").unwrapped
    for seed in range(50):
        rewards, info, seconds = play(env, seed)
        assert info["success"], seed
        assert sum(rewards) == pytest.approx(1.5)  # letter rewards add up to 0.5, plus 1.0
        assert seconds < 10.0  # a hang guard, not a speed claim (games_step_cost.txt)


def test_reward_table_on_a_known_word():
    env = WordleEnv(word_length=5, max_turns=25)
    env.reset(seed=0)
    env.secret = "crane"
    steps = [
        ("\\boxed{slate}", 0.5 * 2 / 5),  # --G-G: score 0.4
        ("\\boxed{nacre}", 0.5 * (0.6 - 0.4)),  # YYYYG: score (1 + 0.5 * 4) / 5 = 0.6
        ("\\boxed{pious}", 0.0),  # ----- : no rise
        ("\\boxed{slate}", -0.1),  # repeated
        ("\\boxed{xqzvk}", -0.1),  # not a word
        ("\\boxed{cranes}", -0.1),  # wrong length
        ("\\boxed{cr4ne}", -0.1),  # not letters
        ("crane", -0.1),  # no box: format penalty
        ("\\boxed{ C R A N E }", 0.5 * (1 - 0.6) + 1.0),  # case and spaces ignored; win
    ]
    total = 0.0
    for action, expected in steps:
        obs, reward, terminated, _, info = env.step(action)
        assert reward == pytest.approx(expected), (action, obs)
        total += reward
    assert terminated and info["success"]
    assert total == pytest.approx(1.5 - 5 * 0.1)


def test_observation_explains_marks_and_invalid_words():
    env = WordleEnv(word_length=3, max_turns=15)
    obs, _ = env.reset(seed=3)
    assert "3-letter" in obs and "\\boxed" in obs and "15 turns left" in obs
    env.secret = "cat"
    obs, *_ = env.step("\\boxed{act}")
    assert "A C T  ->  Y Y G" in obs and "14 turns left" in obs
    obs, _, _, _, info = env.step("\\boxed{qqq}")
    assert "not in my list" in obs and info["invalid_move"]


def test_turns_run_out_with_partial_credit_only():
    env = WordleEnv(word_length=3, max_turns=1)
    env.reset(seed=0)
    env.secret = "cat"
    _, reward, terminated, truncated, info = env.step("\\boxed{cot}")
    assert reward == pytest.approx(0.5 * 2 / 3) and truncated and not terminated and not info["success"]


def test_state_is_cheap():
    env = make("game:Wordle-v1-hard").unwrapped
    env.reset(seed=0)
    env.step("\\boxed{crane}")
    # Two generators (~2.5 kB each) and the game; the word lists (4,653 allowed words) are not copied.
    assert len(pickle.dumps(env.get_state())) < 10_000


def test_determinism():
    a, b = make("game:Wordle-v1-easy").unwrapped, make("game:Wordle-v1-easy").unwrapped
    assert a.reset(seed=11) == b.reset(seed=11)
    assert play(a, 11)[0] == play(b, 11)[0] and a.history == b.history
    secrets = set()
    for seed in range(20):
        a.reset(seed=seed)
        secrets.add(a.secret)
    assert len(secrets) > 10


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40))
def test_any_boxed_text_gets_an_explained_observation(text):
    env = make("game:Wordle-v1-hard").unwrapped
    env.reset(seed=0)
    obs, reward, terminated, *_ = env.step(f"\\boxed{{{text}}}")
    assert obs.strip() and (terminated or "turns left" in obs) and reward <= 1.5

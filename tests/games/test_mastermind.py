"""Mastermind: pegs, the reward table, penalties and the consistent-guess solver."""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_core import make
from gem_core.envs.games.mastermind import MastermindEnv, score_pegs


def play(env, seed):
    env.reset(seed=seed)
    rewards, info, done, start = [], {}, False, time.perf_counter()
    while not done:
        _, reward, terminated, truncated, info = env.step(env.solve_action())
        rewards.append(reward)
        done = terminated or truncated
    return rewards, info, time.perf_counter() - start


def test_pegs():
    assert score_pegs((1, 2, 3, 4), (1, 2, 3, 4)) == (4, 0)
    assert score_pegs((1, 2, 3, 4), (4, 3, 2, 1)) == (0, 4)
    assert score_pegs((1, 2, 3, 4), (1, 3, 5, 6)) == (1, 1)
    assert score_pegs((1, 2, 3, 4), (1, 1, 1, 1)) == (1, 0)  # one 1 in the code: one peg


@pytest.mark.parametrize("variant", ["easy", "hard"])
def test_solver_wins_every_seeded_episode_with_the_full_return(variant):
    env = make(f"game:Mastermind-v1-{variant}").unwrapped
    for seed in range(50):
        rewards, info, seconds = play(env, seed)
        assert info["success"], seed
        assert sum(rewards) == pytest.approx(1.5)  # table: peg rewards add up to 0.5, plus 1.0
        assert all(r >= 0 for r in rewards)
        assert seconds < 10.0  # a hang guard, not a speed claim (games_step_cost.txt)


def test_reward_table_on_a_known_code():
    env = MastermindEnv(code_length=4, num_symbols=8, max_turns=10)
    env.reset(seed=0)
    env.code = (1, 2, 3, 4)
    steps = [
        ("\\boxed{1 3 5 6}", 0.5 * (1 + 0.5) / 4),  # 1 black, 1 white: score 0.375
        ("\\boxed{1 2 5 6}", 0.5 * (0.5 - 0.375)),  # 2 black: score 0.5
        ("\\boxed{5 6 7 8}", 0.0),  # no pegs: no rise
        ("\\boxed{1 3 5 6}", -0.1),  # repeated guess
        ("\\boxed{1 2 3}", -0.1),  # wrong length
        ("\\boxed{1 2 3 9}", -0.1),  # symbol out of range
        ("\\boxed{one two}", -0.1),  # not numbers
        ("no box here", -0.1),  # format penalty
        ("\\boxed{ 1,2,3,4 }", 0.5 * (1 - 0.5) + 1.0),  # win
    ]
    total = 0.0
    for action, expected in steps:
        obs, reward, terminated, _, info = env.step(action)
        assert reward == pytest.approx(expected), (action, obs)
        total += reward
    assert terminated and info["success"]
    assert total == pytest.approx(1.5 - 5 * 0.1)


def test_feedback_and_penalty_info():
    env = MastermindEnv(code_length=2, num_symbols=6, max_turns=10)
    env.reset(seed=1)
    env.code = (3, 5)
    obs, _, _, _, info = env.step("\\boxed{5 3}")
    assert "0 black, 2 white" in obs and "turns left" in obs and info == {}
    obs, reward, _, _, info = env.step("\\boxed{5 3}")
    assert reward == -0.1 and info["invalid_move"] and "already" in obs
    obs, reward, _, _, info = env.step("I think 53")
    assert reward == -0.1 and info["format_error"] and "boxed" in obs
    obs, _, _, _, _ = env.step("\\boxed{35}")  # compact form is read digit by digit
    assert "Correct" in obs


def test_partial_credit_when_turns_run_out():
    env = MastermindEnv(code_length=4, num_symbols=8, max_turns=2)
    env.reset(seed=0)
    env.code = (1, 2, 3, 4)
    _, r1, *_ = env.step("\\boxed{2 1 5 6}")  # 0 black, 2 white: score 0.25
    _, r2, terminated, truncated, info = env.step("\\boxed{1 5 6 7}")  # 1 black: score 0.25, no rise
    assert (r1, r2) == (pytest.approx(0.125), 0.0)
    assert truncated and not terminated and info["success"] is False


def test_determinism():
    a, b = make("game:Mastermind-v1-hard").unwrapped, make("game:Mastermind-v1-hard").unwrapped
    assert a.reset(seed=7) == b.reset(seed=7)
    assert play(a, 7)[0] == play(b, 7)[0] and a.history == b.history
    codes = set()
    for seed in range(20):
        a.reset(seed=seed)
        codes.add(a.code)
    assert len(codes) > 10


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40))
def test_any_boxed_text_gets_an_explained_observation(text):
    env = make("game:Mastermind-v1-hard").unwrapped
    env.reset(seed=0)
    obs, reward, terminated, *_ = env.step(f"\\boxed{{{text}}}")
    assert obs.strip() and (terminated or "turns left" in obs) and reward <= 1.5

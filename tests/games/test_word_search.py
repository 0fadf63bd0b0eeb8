"""WordSearch: hidden words occur once, directions by difficulty, the reward table and the solver."""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_core import make
from gem_core.envs.games.word_search import WordSearchEnv, occurrences


def play(env, seed):
    env.reset(seed=seed)
    rewards, info, done, start = [], {}, False, time.perf_counter()
    while not done:
        _, reward, terminated, truncated, info = env.step(env.solve_action())
        rewards.append(reward)
        done = terminated or truncated
    return rewards, info, time.perf_counter() - start


def directions(env):
    steps = set()
    for word in env.words:
        ((r1, c1, r2, c2),) = occurrences(env.grid, word.upper())
        steps.add(((r2 > r1) - (r2 < r1), (c2 > c1) - (c2 < c1)))
    return steps


def test_each_word_hidden_once_and_directions_follow_difficulty():
    easy, hard = WordSearchEnv(5, hardcore=False), WordSearchEnv(5, hardcore=True)
    hard_directions = set()
    for seed in range(50):
        easy.reset(seed=seed)
        hard.reset(seed=seed)
        assert len(easy.grid) == 8 and len(hard.grid) == 10
        assert directions(easy) <= {(0, 1), (1, 0)}  # occurrences() asserts exactly one hit per word
        hard_directions |= directions(hard)
    assert len(hard_directions) == 8  # backwards and diagonal placements all occur


@pytest.mark.parametrize("variant", ["easy", "hard"])
def test_solver_wins_every_seeded_episode_with_the_full_return(variant):
    env = make(f"game:WordSearch-v1-{variant}").unwrapped
    for seed in range(50):
        rewards, info, seconds = play(env, seed)
        assert info["success"], seed
        assert rewards == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.1 + 1.0])  # 0.5 / 5 per word, plus 1.0
        assert seconds < 10.0  # a hang guard, not a speed claim (games_step_cost.txt)


def test_reward_table_and_penalties():
    env = WordSearchEnv(num_words=2, hardcore=False, max_turns=20)
    obs, _ = env.reset(seed=2)
    first, second = env.words
    assert first.upper() in obs and second.upper() in obs
    ((r1, c1, r2, c2),) = occurrences(env.grid, first.upper())
    ((s1, t1, s2, t2),) = occurrences(env.grid, second.upper())
    miss = next(
        (r, 0, r, 3)
        for r in range(8)
        if env.grid[r][:4].lower() not in env.words and env.grid[r][:4][::-1].lower() not in env.words
    )
    steps = [
        (f"\\boxed{{{miss[0] + 1} 1 {miss[0] + 1} 4}}", 0.0),  # a line with no listed word
        (f"\\boxed{{{miss[0] + 1} 4 {miss[0] + 1} 1}}", -0.1),  # the same miss, marked backwards
        ("\\boxed{1 1 1 9}", -0.1),  # off the grid
        ("\\boxed{1 1 2 3}", -0.1),  # not a straight line
        ("\\boxed{3 3 3 3}", -0.1),  # one cell
        ("\\boxed{1 2 3}", -0.1),  # three numbers
        (f"{r1 + 1} {c1 + 1} {r2 + 1} {c2 + 1}", -0.1),  # no box
        (f"\\boxed{{ ({r2 + 1}, {c2 + 1}) -> ({r1 + 1}, {c1 + 1}) }}", 0.25),  # end to start counts
        (f"\\boxed{{{r1 + 1} {c1 + 1} {r2 + 1} {c2 + 1}}}", -0.1),  # already found
    ]
    total = 0.0
    for action, expected in steps:
        obs, reward, terminated, _, _ = env.step(action)
        assert reward == pytest.approx(expected), (action, obs)
        assert not terminated
        total += reward
    assert first.lower() in "".join(env.board()[r1]) or first.lower() in "".join(
        row[c1] for row in env.board()
    )
    obs, reward, terminated, _, info = env.step(f"\\boxed{{{s1 + 1} {t1 + 1} {s2 + 1} {t2 + 1}}}")
    assert reward == pytest.approx(0.25 + 1.0) and terminated and info["success"]
    assert total + reward == pytest.approx(1.5 - 7 * 0.1)


def test_turns_run_out_with_partial_credit_only():
    env = WordSearchEnv(num_words=5, hardcore=True, max_turns=1)
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(env.solve_action())
    assert reward == pytest.approx(0.1) and truncated and not terminated and not info["success"]


def test_determinism():
    a, b = make("game:WordSearch-v1-hard").unwrapped, make("game:WordSearch-v1-hard").unwrapped
    assert a.reset(seed=8) == b.reset(seed=8)
    assert play(a, 8)[0] == play(b, 8)[0] and a.grid == b.grid
    grids = set()
    for seed in range(20):
        a.reset(seed=seed)
        grids.add(tuple(a.grid))
    assert len(grids) == 20


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40))
def test_any_boxed_text_gets_an_explained_observation(text):
    env = make("game:WordSearch-v1-hard").unwrapped
    env.reset(seed=0)
    obs, reward, terminated, *_ = env.step(f"\\boxed{{{text}}}")
    assert obs.strip() and (terminated or "turns left" in obs) and reward <= 1.5

"""Crosswords: a valid layout, hints by difficulty, the reward table and the clue-matching solver."""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_core import make
from gem_core.envs.games import wordlists
from gem_core.envs.games.crosswords import CrosswordsEnv


def play(env, seed):
    env.reset(seed=seed)
    rewards, info, done, start = [], {}, False, time.perf_counter()
    while not done:
        _, reward, terminated, truncated, info = env.step(env.solve_action())
        rewards.append(reward)
        done = terminated or truncated
    return rewards, info, time.perf_counter() - start


def solution(env):
    """The filled grid: every slot's letters, checking that crossing slots agree."""
    letters = {}
    for slot in env.slots:
        for cell, ch in zip(slot.cells(), slot.answer):
            assert letters.setdefault(cell, ch) == ch
    return letters


def runs(letters, rows, cols):
    """Every maximal across/down run of 2+ letter cells: {(row, col, direction, length)}."""
    found = set()
    for direction, (dr, dc) in (("across", (0, 1)), ("down", (1, 0))):
        for r in range(rows):
            for c in range(cols):
                if (r, c) in letters and (r - dr, c - dc) not in letters:
                    n = 0
                    while (r + n * dr, c + n * dc) in letters:
                        n += 1
                    if n >= 2:
                        found.add((r, c, direction, n))
    return found


@pytest.mark.parametrize("hardcore", [False, True])
def test_layout_is_a_real_crossword(hardcore):
    env = CrosswordsEnv(num_words=3, hardcore=hardcore, max_turns=30)
    clues = wordlists.clues()
    for seed in range(100):
        env.reset(seed=seed)
        letters = solution(env)
        # No stray words: the only runs of letters are the slots themselves.
        assert runs(letters, env.rows, env.cols) == {
            (s.row, s.col, s.direction, len(s.answer)) for s in env.slots
        }
        # Every word crosses another, and each clue belongs to its answer.
        for slot in env.slots:
            others = {cell for s in env.slots if s is not slot for cell in s.cells()}
            assert set(slot.cells()) & others
            assert clues[slot.answer] == slot.clue
        shown = sum(ch.isalpha() for row in env.grid() for ch in row)
        assert shown == (0 if hardcore else len({s.cells()[0] for s in env.slots}))


@pytest.mark.parametrize("variant", ["easy", "hard"])
def test_solver_wins_every_seeded_episode_with_the_full_return(variant):
    env = make(f"game:Crosswords-v1-{variant}").unwrapped
    for seed in range(50):
        rewards, info, seconds = play(env, seed)
        assert info["success"], seed
        assert rewards == pytest.approx([0.5 / 3, 0.5 / 3, 0.5 / 3 + 1.0])
        assert seconds < 10.0  # a hang guard, not a speed claim (games_step_cost.txt)


def test_reward_table_and_penalties():
    env = make("game:Crosswords-v1-hard").unwrapped
    obs, _ = env.reset(seed=4)
    first, second, third = env.slots
    assert first.clue in obs and f"{len(first.answer)} letters" in obs
    wrong = next(w for w in sorted(wordlists.clues()) if len(w) == len(first.answer) and w != first.answer)
    steps = [
        (f"\\boxed{{{first.name} {wrong}}}", 0.0),
        (f"\\boxed{{{first.name} {wrong}}}", -0.1),  # repeated wrong answer
        (f"\\boxed{{{first.name} {first.answer}xyz}}", -0.1),  # wrong length
        ("\\boxed{9 across apple}", -0.1),  # no such slot
        ("\\boxed{the answer is obvious}", -0.1),  # no slot named
        (f"{first.name} {first.answer}", -0.1),  # no box
        (f"\\boxed{{ {first.name.upper()}: {first.answer.upper()} }}", 0.5 / 3),
        (f"\\boxed{{{first.name} {first.answer}}}", -0.1),  # already solved
        (f"\\boxed{{{second.answer} {second.name}}}", 0.5 / 3),  # word first, then slot
    ]
    total = 0.0
    for action, expected in steps:
        obs, reward, terminated, _, _ = env.step(action)
        assert reward == pytest.approx(expected), (action, obs)
        assert not terminated
        total += reward
    # The crossing letters of solved words now show in the last slot.
    grid = env.grid()
    crossing = [cell for cell in third.cells() if cell in set(first.cells()) | set(second.cells())]
    assert crossing and all(grid[r][c].isalpha() for r, c in crossing)
    short = third.direction[0]  # "1a"/"2d" style
    obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{third.number}{short} {third.answer}}}")
    assert reward == pytest.approx(0.5 / 3 + 1.0) and terminated and info["success"]
    assert total + reward == pytest.approx(1.5 - 6 * 0.1)


def test_turns_run_out_with_partial_credit_only():
    env = CrosswordsEnv(num_words=3, hardcore=False, max_turns=1)
    env.reset(seed=0)
    slot = env.slots[0]
    _, reward, terminated, truncated, info = env.step(f"\\boxed{{{slot.name} {slot.answer}}}")
    assert reward == pytest.approx(0.5 / 3) and truncated and not terminated and not info["success"]


def test_determinism():
    a, b = make("game:Crosswords-v1-easy").unwrapped, make("game:Crosswords-v1-easy").unwrapped
    assert a.reset(seed=9) == b.reset(seed=9)
    assert play(a, 9)[0] == play(b, 9)[0] and a.slots == b.slots
    puzzles = set()
    for seed in range(20):
        a.reset(seed=seed)
        puzzles.add(tuple(s.answer for s in a.slots))
    assert len(puzzles) == 20


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40))
def test_any_boxed_text_gets_an_explained_observation(text):
    env = make("game:Crosswords-v1-hard").unwrapped
    env.reset(seed=0)
    obs, reward, terminated, *_ = env.step(f"\\boxed{{{text}}}")
    assert obs.strip() and (terminated or "turns left" in obs) and reward <= 1.5

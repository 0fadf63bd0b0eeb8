"""Sokoban: reverse-play levels solvable within the budget, pushing rules, the reward table and the A* player."""

import time
from collections import deque

import pytest

from gem_core import make
from gem_core.envs.games.sokoban import SokobanEnv, solve


def play(env, seed):
    env.reset(seed=seed)
    rewards, info, done, start = [], {}, False, time.perf_counter()
    while not done:
        _, reward, terminated, truncated, info = env.step(env.solve_action())
        rewards.append(reward)
        done = terminated or truncated
    return rewards, info, time.perf_counter() - start


def on_target(env):
    return len(env.boxes & env.targets) / env.num_boxes


def connected(floor):
    start = next(iter(floor))
    seen, queue = {start}, deque([start])
    while queue:
        r, c = queue.popleft()
        for nxt in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if nxt in floor and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen == set(floor)


def open_room(boxes, targets, player):
    """A 6x6 room with no inner walls and the given pieces."""
    env = SokobanEnv(rows=6, cols=6, num_boxes=len(boxes), max_turns=20)
    env.reset(seed=0)
    env.floor = frozenset((r, c) for r in range(1, 5) for c in range(1, 5))
    env.boxes, env.targets, env.player = frozenset(boxes), frozenset(targets), player
    return env


def test_solver_wins_every_easy_episode_with_the_table_return():
    env = make("game:Sokoban-v1-easy").unwrapped
    for seed in range(50):
        env.reset(seed=seed)
        p0 = on_target(env)
        rewards, info, seconds = play(env, seed)
        assert info["success"], seed
        assert sum(rewards) == pytest.approx(1.0 + 0.5 * (1 - p0))  # table: box rewards telescope, + 1.0
        assert seconds < 10.0  # a hang guard, not a speed claim (games_step_cost.txt)


@pytest.mark.parametrize("seed", range(4))
def test_hard_levels_are_solved_within_the_budget(seed):
    env = make("game:Sokoban-v1-hard").unwrapped
    env.reset(seed=seed)
    p0 = on_target(env)
    rewards, info, seconds = play(env, seed)
    assert info["success"] and len(rewards) <= 50
    assert sum(rewards) == pytest.approx(1.0 + 0.5 * (1 - p0))
    assert seconds < 10.0


@pytest.mark.parametrize(("variant", "seeds"), [("easy", 50), ("hard", 5)])
def test_levels_are_well_formed_and_optimally_solvable_in_budget(variant, seeds):
    env = make(f"game:Sokoban-v1-{variant}").unwrapped
    levels = set()
    for seed in range(seeds):
        obs, _ = env.reset(seed=seed)
        assert all((r, c) not in env.floor for r in (0, env.rows - 1) for c in range(env.cols))
        assert all((r, c) not in env.floor for r in range(env.rows) for c in (0, env.cols - 1))
        assert connected(env.floor)
        assert len(env.boxes) == len(env.targets) == env.num_boxes
        assert env.boxes | env.targets <= env.floor and env.player in env.floor - env.boxes
        assert env.boxes != env.targets
        plan = solve(env.floor, env.targets, env.boxes, env.player, weight=1.0)
        assert plan is not None and len(plan) <= env.max_turns
        levels.add(obs)
    assert len(levels) == seeds


def test_pushing_onto_and_off_targets():
    env = open_room(boxes=[(2, 2), (4, 4)], targets=[(2, 3), (1, 1)], player=(2, 1))
    obs, reward, terminated, _, info = env.step("\\boxed{right}")
    assert env.boxes == {(2, 3), (4, 4)} and env.player == (2, 2)
    assert reward == pytest.approx(0.5 / 2) and not terminated and "onto a target" in obs
    obs, reward, _, _, _ = env.step("\\boxed{ R }")
    assert env.boxes == {(2, 4), (4, 4)} and reward == pytest.approx(-0.5 / 2) and "off a target" in obs
    assert env.step("\\boxed{down}")[1] == 0.0  # a plain step


def test_last_box_on_target_wins():
    env = open_room(boxes=[(2, 2)], targets=[(2, 3)], player=(2, 1))
    obs, reward, terminated, truncated, info = env.step("\\boxed{right}")
    assert terminated and not truncated and info["success"]
    assert reward == pytest.approx(0.5 + 1.0) and "solved" in obs


@pytest.mark.parametrize(
    ("player", "move", "reason"),
    [
        ((1, 1), "up", "walks into a wall"),
        ((2, 3), "right", "a wall is behind it"),  # box at (2, 4) against the east wall
        ((3, 1), "right", "another box is behind it"),  # box at (3, 2), then a box at (3, 3)
        ((1, 1), "jump", "not a direction"),
    ],
)
def test_invalid_moves_are_penalised_and_explained(player, move, reason):
    env = open_room(boxes=[(2, 4), (3, 2), (3, 3)], targets=[(1, 2), (1, 3), (1, 4)], player=player)
    before = (env.boxes, env.player)
    obs, reward, terminated, _, info = env.step(f"\\boxed{{{move}}}")
    assert reward == -0.1 and info["invalid_move"] and not terminated
    assert reason in obs and (env.boxes, env.player) == before


def test_format_penalty():
    env = make("game:Sokoban-v1-easy").unwrapped
    env.reset(seed=0)
    before = (env.boxes, env.player)
    obs, reward, _, _, info = env.step("left")
    assert reward == -0.1 and info["format_error"] and (env.boxes, env.player) == before and "19 turns" in obs


def test_partial_credit_when_turns_run_out():
    env = open_room(boxes=[(2, 2), (4, 2)], targets=[(2, 3), (1, 4)], player=(2, 1))
    env.max_turns = 1
    _, reward, terminated, truncated, info = env.step("\\boxed{right}")
    assert truncated and not terminated and info["success"] is False
    assert reward == pytest.approx(0.5 / 2 + 0.5 * 1 / 2)


def test_rendering():
    env = open_room(boxes=[(2, 2), (3, 3)], targets=[(2, 3), (3, 3)], player=(1, 1))
    assert env.render().splitlines()[1:] == [
        "# # # # # #",
        "# P _ _ _ #",
        "# _ X O _ #",
        "# _ _ * _ #",
        "# _ _ _ _ #",
        "# # # # # #",
    ]
    obs, _ = make("game:Sokoban-v1-hard").reset(seed=0)
    assert "# wall" in obs and "\\boxed{left}" in obs and "50 turns left" in obs


def test_determinism():
    first = make("game:Sokoban-v1-hard").reset(seed=11)
    assert make("game:Sokoban-v1-hard").reset(seed=11) == first
    assert make("game:Sokoban-v1-hard").reset(seed=12) != first

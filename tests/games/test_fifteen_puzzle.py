"""FifteenPuzzle: moves, scrambles within the turn budget, the reward table, penalties and the A* player."""

import time
from collections import deque

import pytest

from gem_core import make
from gem_core.envs.games.fifteen_puzzle import (
    FifteenPuzzleEnv,
    apply_move,
    heuristic,
    legal_moves,
    solve,
)

SOLVED_2 = (1, 2, 3, 0)
SOLVED_3 = (1, 2, 3, 4, 5, 6, 7, 8, 0)


def play(env, seed):
    env.reset(seed=seed)
    rewards, info, done, start = [], {}, False, time.perf_counter()
    while not done:
        _, reward, terminated, truncated, info = env.step(env.solve_action())
        rewards.append(reward)
        done = terminated or truncated
    return rewards, info, time.perf_counter() - start


def distances(solved, size):
    """BFS from the solved board over every reachable board: optimal solution lengths."""
    dist, queue = {solved: 0}, deque([solved])
    while queue:
        board = queue.popleft()
        for d in legal_moves(board, size):
            nxt = apply_move(board, size, d)
            if nxt not in dist:
                dist[nxt] = dist[board] + 1
                queue.append(nxt)
    return dist


def tiles_in_place(board):
    return sum(v == i + 1 for i, v in enumerate(board) if v)


def test_solver_wins_every_easy_episode_optimally_with_the_table_return():
    env = make("game:FifteenPuzzle-v1-easy").unwrapped
    dist = distances(SOLVED_2, 2)
    for seed in range(50):
        env.reset(seed=seed)
        p0, optimal = tiles_in_place(env.board) / 3, dist[env.board]
        assert 1 <= optimal <= env.max_turns
        rewards, info, seconds = play(env, seed)
        assert info["success"], seed
        assert len(rewards) == optimal
        assert sum(rewards) == pytest.approx(1.0 + 0.5 * (1 - p0))  # table: tile rewards telescope, + 1.0
        assert seconds < 10.0  # a hang guard, not a speed claim (games_step_cost.txt)


@pytest.mark.parametrize("seed", range(4))
def test_hard_scrambles_are_solved_within_the_budget(seed):
    env = make("game:FifteenPuzzle-v1-hard").unwrapped
    env.reset(seed=seed)
    p0 = tiles_in_place(env.board) / 15
    rewards, info, seconds = play(env, seed)
    assert info["success"] and len(rewards) <= 50
    assert sum(rewards) == pytest.approx(1.0 + 0.5 * (1 - p0))
    assert seconds < 10.0


def test_exact_search_is_optimal_and_the_heuristic_admissible():
    dist = distances(SOLVED_3, 3)
    boards = sorted(dist)[:: len(dist) // 200]
    for board in boards:
        assert heuristic(board, 3) <= dist[board]
    for board in boards[:20]:
        plan = solve(board, 3, max_moves=0)  # no budget: falls through to exact A*
        assert len(plan) == dist[board]
        for d in plan:
            board = apply_move(board, 3, d)
        assert board == SOLVED_3


def test_directions_and_tile_numbers():
    env = FifteenPuzzleEnv(size=3, max_turns=20)
    env.reset(seed=0)
    env.board = (1, 2, 3, 4, 0, 5, 7, 8, 6)
    obs, reward, _, _, info = env.step("\\boxed{ Left }")  # tile 5, right of the blank, moves left
    assert env.board == (1, 2, 3, 4, 5, 0, 7, 8, 6) and not info
    assert reward == pytest.approx(0.5 / 8) and "slid 5 left" in obs
    obs, reward, terminated, _, info = env.step("\\boxed{6}")  # tile 6, below the blank
    assert env.board == SOLVED_3 and terminated and info["success"]
    assert reward == pytest.approx(0.5 / 8 + 1.0)


def test_moving_a_tile_off_its_home_costs_what_it_earned():
    env = FifteenPuzzleEnv(size=3, max_turns=20)
    env.reset(seed=0)
    env.board = (1, 2, 3, 4, 5, 6, 7, 0, 8)
    assert env.step("\\boxed{r}")[1] == pytest.approx(-0.5 / 8)  # tile 7 leaves its home
    assert env.step("\\boxed{l}")[1] == pytest.approx(0.5 / 8)  # and returns


@pytest.mark.parametrize(
    ("move", "reason"),
    [
        ("up", "No tile can slide up"),
        ("left", "No tile can slide left"),
        ("1", "not next to the blank"),
        ("9", "no tile 9"),
        ("0", "no tile 0"),
        ("slide the 3", "not a move"),
        ("²", "not a move"),  # a digit to str.isdigit, but not a number to int()
    ],
)
def test_invalid_moves_are_penalised_and_explained(move, reason):
    env = FifteenPuzzleEnv(size=3, max_turns=20)
    env.reset(seed=0)
    env.board = (5, 2, 3, 4, 1, 6, 7, 8, 0)
    before = env.board
    obs, reward, terminated, _, info = env.step(f"\\boxed{{{move}}}")
    assert reward == -0.1 and info["invalid_move"] and not terminated
    assert reason in obs and env.board == before


def test_format_penalty():
    env = FifteenPuzzleEnv(size=2, max_turns=10)
    env.reset(seed=0)
    before = env.board
    obs, reward, _, _, info = env.step("up")
    assert reward == -0.1 and info["format_error"] and env.board == before and "9 turns left" in obs


def test_partial_credit_when_turns_run_out():
    env = FifteenPuzzleEnv(size=3, max_turns=1)
    env.reset(seed=0)
    env.board = (1, 2, 3, 4, 5, 6, 0, 7, 8)
    _, reward, terminated, truncated, info = env.step("\\boxed{left}")  # tile 7 home: 7 of 8 in place
    assert truncated and not terminated and info["success"] is False
    assert reward == pytest.approx(0.5 / 8 + 0.5 * 7 / 8)


def test_rules_prompt_and_determinism():
    env = make("game:FifteenPuzzle-v1-hard").unwrapped
    obs, _ = env.reset(seed=3)
    assert "15-puzzle" in obs and "__" in obs and "\\boxed{up}" in obs and "50 turns left" in obs
    assert make("game:FifteenPuzzle-v1-hard").reset(seed=3)[0] == obs
    assert make("game:FifteenPuzzle-v1-hard").reset(seed=4)[0] != obs

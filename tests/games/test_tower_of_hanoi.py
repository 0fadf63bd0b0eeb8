"""TowerOfHanoi: rules, the reward table, penalties and the optimal solver from any legal position."""

import itertools
import time
from collections import deque

import pytest

from gem_core import make
from gem_core.envs.games.tower_of_hanoi import TowerOfHanoiEnv


def play(env, seed):
    env.reset(seed=seed)
    rewards, info, done, start = [], {}, False, time.perf_counter()
    while not done:
        _, reward, terminated, truncated, info = env.step(env.solve_action())
        rewards.append(reward)
        done = terminated or truncated
    return rewards, info, time.perf_counter() - start


def pegs_of(assignment):
    """Pegs from a tuple giving each disk's peg (disk 1 first); stacks are bottom to top."""
    pegs = {"A": [], "B": [], "C": []}
    for disk in range(len(assignment), 0, -1):
        pegs[assignment[disk - 1]].append(disk)
    return pegs


def distances_to_goal(n):
    """BFS over all 3**n legal positions: moves left to gather every disk on C."""
    goal = ("C",) * n
    dist, queue = {goal: 0}, deque([goal])
    while queue:
        state = queue.popleft()
        pegs = pegs_of(state)
        for src, dst in itertools.permutations("ABC", 2):
            if pegs[src] and (not pegs[dst] or pegs[dst][-1] > pegs[src][-1]):
                disk = pegs[src][-1]
                nxt = state[: disk - 1] + (dst,) + state[disk:]
                if nxt not in dist:
                    dist[nxt] = dist[state] + 1
                    queue.append(nxt)
    return dist


@pytest.mark.parametrize(("variant", "disks"), [("easy", 3), ("hard", 5)])
def test_solver_wins_every_seeded_episode_optimally(variant, disks):
    env = make(f"game:TowerOfHanoi-v1-{variant}")
    for seed in range(50):
        rewards, info, seconds = play(env, seed)
        assert info["success"], seed
        assert len(rewards) == 2**disks - 1
        assert sum(rewards) == pytest.approx(1.5)  # table: 0.5 / n for each disk placed, plus 1.0
        assert seconds < 10.0  # a hang guard, not a speed claim (games_step_cost.txt)


def test_reward_sequence_of_the_optimal_three_disk_game():
    env = TowerOfHanoiEnv(num_disks=3, max_turns=10)
    rewards, _, _ = play(env, 0)
    # Disk 3 lands on C at move 4, disk 2 at move 6, disk 1 (the win) at move 7: 0.5 / 3 each, + 1.0.
    assert rewards == pytest.approx([0, 0, 0, 1 / 6, 0, 1 / 6, 1 / 6 + 1.0])


def test_solver_is_optimal_from_every_legal_position():
    n = 4
    dist = distances_to_goal(n)
    assert len(dist) == 3**n
    env = TowerOfHanoiEnv(num_disks=n, max_turns=100)
    for start, moves_left in dist.items():
        if moves_left == 0:
            continue
        env.reset(seed=0)
        env.pegs = pegs_of(start)
        for _ in range(moves_left):
            _, reward, terminated, _, info = env.step(env.solve_action())
            assert not info.get("invalid_move")
        assert terminated and info["success"], start


def test_disk_rewards_telescope():
    env = TowerOfHanoiEnv(num_disks=3, max_turns=10)
    env.reset(seed=0)
    env.pegs = {"A": [1], "B": [2], "C": [3]}
    assert env.step("\\boxed{B C}")[1] == pytest.approx(0.5 / 3)  # disk 2 into place
    assert env.step("\\boxed{C B}")[1] == pytest.approx(-0.5 / 3)  # and out again
    assert env.step("\\boxed{A C}")[1] == 0.0  # disk 1 on disk 3: not its final position


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        ("\\boxed{B C}", "Peg B is empty"),
        ("\\boxed{A A}", "both peg A"),
        ("\\boxed{A D}", "not a move"),
        ("\\boxed{move it}", "not a move"),
    ],
)
def test_invalid_moves_are_penalised_and_explained(action, reason):
    env = TowerOfHanoiEnv(num_disks=3, max_turns=10)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == -0.1 and info["invalid_move"] and not terminated and not truncated
    assert reason in obs
    assert env.pegs == {"A": [3, 2, 1], "B": [], "C": []}


def test_larger_disk_onto_smaller_is_rejected():
    env = TowerOfHanoiEnv(num_disks=3, max_turns=10)
    env.reset(seed=0)
    env.step("\\boxed{A C}")
    obs, reward, _, _, info = env.step("\\boxed{A C}")
    assert reward == -0.1 and info["invalid_move"] and "smaller" in obs
    assert env.pegs == {"A": [3, 2], "B": [], "C": [1]}


@pytest.mark.parametrize("move", ["A C", " a   c ", "a,c", "A->C", "from a to c", "A to C", "AC"])
def test_moves_are_read_tolerantly(move):
    env = TowerOfHanoiEnv(num_disks=3, max_turns=10)
    env.reset(seed=0)
    obs, reward, _, _, info = env.step(f"I will move \\boxed{{{move}}}")
    assert not info.get("invalid_move") and "moved disk 1 from A to C" in obs
    assert env.pegs["C"] == [1]


def test_format_penalty_costs_a_turn_and_changes_nothing():
    env = TowerOfHanoiEnv(num_disks=3, max_turns=10)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("A C")
    assert reward == -0.1 and info["format_error"] and not terminated
    assert "\\boxed" in obs and "9 turns left" in obs
    assert env.pegs["A"] == [3, 2, 1]


def test_partial_credit_when_turns_run_out():
    env = TowerOfHanoiEnv(num_disks=3, max_turns=5)
    env.reset(seed=0)
    moves = ["A C", "A B", "C B", "A C"]  # disk 3 is now in its final position
    for move in moves:
        env.step(f"\\boxed{{{move}}}")
    _, reward, terminated, truncated, info = env.step("\\boxed{B B}")
    assert truncated and not terminated and info["success"] is False
    assert reward == pytest.approx(-0.1 + 0.5 * (1 / 3))  # the invalid move, plus 0.5 * progress


def test_rules_prompt_shows_the_board():
    obs, _ = make("game:TowerOfHanoi-v1-easy").reset(seed=0)
    assert "A: 3 2 1" in obs and "B: (empty)" in obs and "\\boxed{A C}" in obs and "10 turns left" in obs


def test_determinism_of_random_play():
    def transcript(seed):
        env = make("game:TowerOfHanoi-v1-hard")
        env.reset(seed=seed)
        return [env.step(env.sample_random_action())[:3] for _ in range(20)]

    assert transcript(3) == transcript(3)
    assert transcript(3) != transcript(4)

"""State keys of the games (``Env.state_key``): equal keys answer every move alike, keys are canonical
(the order of guesses, a move and its undo), plain data that survives JSON, and the env base's default."""

from __future__ import annotations

import itertools
import json
import random

import pytest

import gem_core
from gem_core.core import Env, Wrapper

# One id per game and version, plus the reference's random settings (drawn per episode).
GAME_IDS = sorted(
    {*gem_core.list_envs("game:*-v0-easy"), *gem_core.list_envs("game:*-v1-easy")}
    | {"game:GuessTheNumber-v0-random", "game:Mastermind-v0-random", "game:Sokoban-v0-random"}
)
TURN_COUNTER = ("turn", "turn_count")  # the v1 and v0 names of the turn budget's counter


def _from_json(key):
    return tuple(_from_json(k) for k in key) if isinstance(key, list) else key


def _counter(env: Env) -> str:
    return next(name for name in TURN_COUNTER if hasattr(env.unwrapped, name))


def _positions(env_id: str, seed: int, episodes: int = 12, turns: int = 8):
    """Snapshots of the states played from one seed (solver moves, random moves and repeats mixed),
    with their keys and the action taken from each."""
    env = gem_core.make(env_id)
    rng = random.Random(seed)
    out = []
    for _ in range(episodes):
        env.reset(seed=seed)
        previous = None
        for _ in range(turns):
            if env.episode_over:
                break
            solved = env.solve_action()
            choices = [env.sample_random_action(), previous or env.sample_random_action()]
            action = rng.choice([*choices, solved] if solved else choices)
            out.append((env.state_key(), env.get_state(), action))
            env.step(action)
            previous = action
    return env, out


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_equal_keys_answer_every_move_alike(env_id):
    """Two states with one key (reached by different paths or at different turns), given the same
    turn count and random stream, answer the same moves with the same reward, end and next key."""
    probe, positions = _positions(env_id, seed=3)
    assert all(hash(key) is not None for key, _, _ in positions)
    by_key: dict = {}
    for key, state, action in positions:
        by_key.setdefault(key, []).append((state, action))
    pairs = [(first, other) for states in by_key.values() for first, other in itertools.pairwise(states[:6])]
    assert pairs, "no state was reached twice"  # the start at least recurs in every episode
    left, right = probe, probe.spawn()
    for (state_a, action_a), (state_b, action_b) in pairs:
        for action in (action_a, action_b):
            left.set_state(state_a)
            right.set_state(state_b)
            counter = _counter(left)
            setattr(right.unwrapped, counter, getattr(left.unwrapped, counter))
            right.unwrapped.rng.setstate(left.unwrapped.rng.getstate())
            assert left.state_key() == right.state_key()
            _, reward_a, terminated_a, truncated_a, info_a = left.step(action)
            _, reward_b, terminated_b, truncated_b, info_b = right.step(action)
            assert (reward_a, terminated_a, truncated_a) == (reward_b, terminated_b, truncated_b), action
            assert {k: v for k, v in info_a.items() if k != "suffix"} == {
                k: v for k, v in info_b.items() if k != "suffix"
            }
            assert left.state_key() == right.state_key()


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_keys_are_plain_data_that_survive_json(env_id):
    _, positions = _positions(env_id, seed=5, episodes=2)
    for key, _, _ in positions:
        assert _from_json(json.loads(json.dumps(key))) == key


@pytest.mark.parametrize("version", ["v0", "v1"])
def test_the_order_of_guesses_does_not_make_another_state(version):
    env = gem_core.make(f"game:GuessTheNumber-{version}-hard")
    env.reset(seed=0)
    target = env.unwrapped.target if version == "v1" else env.unwrapped.game_number
    wrong = [n for n in range(1, 40) if n != target][:2]
    keys = []
    for order in (wrong, wrong[::-1]):
        env.reset(seed=0)
        for n in order:
            env.step(f"\\boxed{{{n}}}")
        keys.append(env.state_key())
    assert keys[0] == keys[1]
    env.reset(seed=0)
    start = env.state_key()
    env.step(f"\\boxed{{{wrong[0]}}}")
    assert env.state_key() != start  # a new guess is a new state


def test_an_illegal_move_keeps_the_state_and_the_turn_budget_is_not_part_of_it():
    env = gem_core.make("game:GuessTheNumber-v1-easy")
    env.reset(seed=1)
    start = env.state_key()
    env.step("\\boxed{99}")  # out of range: a penalty, nothing learned
    env.step("no move at all")  # a format error
    assert env.state_key() == start and env.unwrapped.turn == 2


def test_a_move_and_its_undo_come_back_to_the_same_key():
    env = gem_core.make("game:FifteenPuzzle-v1-easy")
    env.reset(seed=2)
    start = env.state_key()
    board, size = env.unwrapped.board, env.unwrapped.size
    blank = board.index(0)
    opposite = {"up": "down", "down": "up", "left": "right", "right": "left"}
    from gem_core.envs.games.fifteen_puzzle import legal_moves

    move = legal_moves(board, size)[0]
    env.step(f"\\boxed{{{move}}}")
    assert env.state_key() != start
    env.step(f"\\boxed{{{opposite[move]}}}")
    assert env.state_key() == start and env.unwrapped.board.index(0) == blank

    hanoi = gem_core.make("game:TowerOfHanoi-v1-easy")
    hanoi.reset(seed=0)
    start = hanoi.state_key()
    hanoi.step("\\boxed{A C}")
    hanoi.step("\\boxed{C A}")
    assert hanoi.state_key() == start


def test_the_env_base_names_no_states_and_wrappers_forward_the_key():
    class Plain(Env):
        def reset(self, seed=None, **kwargs):
            super().reset(seed)
            return "hi", {}

        def step(self, action):
            return "ok", 0.0, True, False, {}

    assert Plain().state_key() is None
    game = gem_core.make("game:Hangman-v1-easy")
    game.reset(seed=0)
    assert Wrapper(game).state_key() == game.state_key() is not None

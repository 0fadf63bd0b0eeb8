"""check_env over every registered id whose data ships offline (hub-backed ids are tested for a clear
offline failure in their own modules' tests)."""

import pytest

import gem_core
from gem_core import EpisodeOverError
from gem_core.wrappers import OrderEnforcing

OFFLINE_IDS = [i for i in gem_core.list_envs() if gem_core.spec(i).data_source == "offline"]


def test_there_are_registered_envs():
    assert len(OFFLINE_IDS) >= 4


@pytest.mark.parametrize("env_id", OFFLINE_IDS)
def test_check_env(env_id):
    gem_core.check_env(gem_core.make(env_id), seed=123)


NOT_STR = [None, 42, b"\\boxed{1}", ["\\boxed{1}"], {"action": "x"}]
RANDOM_STEPS = 200  # then the env's solver, from where random play left off
SOLVER_STEPS = 500


def play_to_the_end(env) -> bool:
    """Step ``env`` until its episode ends: random actions first, then its solver (``solve_action``)
    for an env random play does not end. False if neither ended it (an env without a solver)."""
    for _ in range(RANDOM_STEPS):
        *_, terminated, truncated, _ = env.step(env.sample_random_action())
        if terminated or truncated:
            return True
    for _ in range(SOLVER_STEPS):
        action = env.solve_action()
        if action is None:
            return False
        *_, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return True
    return False


@pytest.mark.parametrize("env_id", OFFLINE_IDS)
def test_one_behaviour_at_the_edges_of_an_episode(env_id):
    """Every env as make builds it (inside OrderEnforcing): a non-str action is a TypeError; a step before
    the first reset or after the end raises EpisodeOverError (and snapshots and same-state spawns keep
    the episode over). The end is reached by random play, or by the env's solver where random play
    does not end it."""
    env = gem_core.make(env_id)
    with pytest.raises(EpisodeOverError, match=r"^the episode is over; call reset\(\)$"):
        env.step(env_id)
    env.reset(seed=7)
    for action in NOT_STR:
        with pytest.raises(TypeError, match=rf"^an action is a str, got {type(action).__name__}$"):
            env.step(action)
    assert play_to_the_end(env), "neither random actions nor the env's solver ended an episode"
    assert env.episode_over
    with pytest.raises(EpisodeOverError):
        env.step(env.sample_random_action())
    with pytest.raises(EpisodeOverError):
        env.step(None)  # the episode's end is checked first
    state = env.get_state()
    clone = env.spawn(same_state=True)
    with pytest.raises(EpisodeOverError):
        clone.step("x")
    clone.reset(seed=1)
    clone.set_state(state)
    with pytest.raises(EpisodeOverError):
        clone.step("x")
    env.reset(seed=8)
    assert not env.episode_over
    env.step(env.sample_random_action())  # a new episode steps again
    env.close()
    clone.close()


class _Door(gem_core.Env):
    """Random actions knock forever; the solver opens the door."""

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        return "A door.", {}

    def step(self, action):
        opened = action == "open"
        return "Open." if opened else "Knock.", float(opened), opened, False, {}

    def sample_random_action(self):
        return "knock"

    def solve_action(self):
        return "open"


def test_an_env_random_play_does_not_end_is_ended_by_its_solver():
    env = OrderEnforcing(_Door())
    env.reset(seed=0)
    assert play_to_the_end(env) and env.episode_over
    no_solver = OrderEnforcing(_Door())
    no_solver.unwrapped.solve_action = lambda: None
    no_solver.reset(seed=0)
    assert not play_to_the_end(no_solver)

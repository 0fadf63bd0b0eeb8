import copy
import pickle
import random

import pytest

import gem_core
from gem_core import Env, Wrapper
from gem_core.wrappers import EpisodeStatistics, OrderEnforcing, TimeLimit

from .toy_envs import CountdownEnv


def play(env, seed, actions):
    transcript = [env.reset(seed=seed)]
    for a in actions:
        transcript.append(env.step(a))
    return transcript


def test_same_seed_same_episode_and_global_random_untouched():
    state = random.getstate()
    a = play(CountdownEnv(), 7, ["1", "2"])
    random.seed(12345)  # global state must not matter
    b = play(CountdownEnv(), 7, ["1", "2"])
    assert a == b
    assert play(CountdownEnv(), 8, ["1", "2"]) != a
    random.setstate(state)


def test_reset_without_seed_continues_the_generator():
    env = CountdownEnv()
    first = env.reset(seed=3)[0]
    second = env.reset()[0]
    assert first != second
    replay = CountdownEnv()
    assert [replay.reset(seed=3)[0], replay.reset()[0]] == [first, second]


def test_sample_random_action_does_not_perturb_the_episode():
    env, twin = CountdownEnv(length=5), CountdownEnv(length=5)
    env.reset(seed=1)
    twin.reset(seed=1)
    for _ in range(3):
        env.sample_random_action()
    assert env.step("x") == twin.step("x")


def test_spawn_keeps_constructor_arguments_and_overrides():
    env = CountdownEnv(length=9, sleep=0.0)
    clone = env.spawn(length=4)
    assert type(clone) is CountdownEnv and clone.length == 4 and clone.sleep == 0.0
    assert env.spawn().length == 9


class ShorterCountdown(CountdownEnv):
    """Passes its parent other arguments than it was given: the outermost construction is recorded."""

    def __init__(self, length=3):
        super().__init__(length=length - 1)


def test_constructor_arguments_are_recorded_as_given_and_are_not_state():
    env = ShorterCountdown(length=5)
    assert env._init_args == ((), {"length": 5}) and env.length == 4
    assert env.spawn().length == 4 and env.spawn(length=3).length == 2
    assert "_init_args" not in env.get_state()
    for copied in (pickle.loads(pickle.dumps(env)), copy.deepcopy(env)):
        assert copied._init_args == ((), {"length": 5}) and copied.spawn().length == 4
    wrapped = TimeLimit(env, 7)
    assert wrapped._init_args == ((env, 7), {})
    assert "_init_args" not in wrapped.get_state()["wrapper"]


def test_spawn_same_state_and_state_round_trip_continue_identically():
    env = CountdownEnv(length=6)
    env.reset(seed=5)
    env.step("1")
    clone = env.spawn(same_state=True)
    snapshot = env.get_state()
    expected = [env.step(a) for a in "234"]
    assert [clone.step(a) for a in "234"] == expected
    env.set_state(snapshot)
    assert [env.step(a) for a in "234"] == expected


def test_state_snapshot_is_independent_of_later_steps():
    env = CountdownEnv(length=6)
    env.reset(seed=5)
    snapshot = env.get_state()
    env.step("1")
    assert snapshot["t"] == 0


class Shout(Wrapper):
    def __init__(self, env, suffix="!"):
        super().__init__(env)
        self.suffix = suffix
        self.shouts = 0

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        self.shouts += 1
        return obs.upper() + self.suffix, r, term, trunc, info


def test_wrapper_forwards_explicitly_and_does_not_copy_attributes():
    env = Shout(CountdownEnv(length=4), suffix="?")
    assert not hasattr(env, "secret")  # no attribute copying from the inner env
    env.reset(seed=0)
    assert env.unwrapped.secret == env.get_wrapper_attr("secret")
    assert env.get_wrapper_attr("suffix") == "?"
    with pytest.raises(AttributeError):
        env.get_wrapper_attr("no_such_thing")
    assert env.step("x")[0].endswith("?")


def test_wrapper_spawn_rewraps_and_carries_state():
    env = EpisodeStatistics(Shout(CountdownEnv(length=5), suffix="?"))
    env.reset(seed=2)
    env.step("a")
    clone = env.spawn(same_state=True)
    assert isinstance(clone, EpisodeStatistics) and isinstance(clone.env, Shout)
    assert clone.env.suffix == "?" and clone.env.shouts == 1
    assert [clone.step(a) for a in "bc"] == [env.step(a) for a in "bc"]


def test_wrapper_rejects_non_env():
    with pytest.raises(TypeError, match=r"wraps a gem_core\.Env"):
        TimeLimit("not an env", max_turns=3)


def test_spec_is_set_by_make_and_visible_through_wrappers():
    env = TimeLimit(gem_core.make("game:GuessTheNumber-v1-easy"), max_turns=2)
    assert env.spec.id == "game:GuessTheNumber-v1-easy"
    assert env.spawn().spec.id == "game:GuessTheNumber-v1-easy"
    assert "GuessTheNumber" in str(env)


def test_base_env_step_is_abstract():
    env = Env()
    env.reset(seed=0)
    with pytest.raises(NotImplementedError):
        env.step("x")


def test_context_manager_closes():
    closed = []

    class Closing(CountdownEnv):
        def close(self):
            closed.append(True)

    with Closing() as env:
        env.reset(seed=0)
    assert closed == [True]


# ---- the edges of an episode: OrderEnforcing, which make() applies -------------------------------
class Counted(CountdownEnv):
    """Counts the calls that reach the env."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        return super().step(action)


class BrokenReset(CountdownEnv):
    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        raise ValueError("no episode today")


def test_make_wraps_the_env_in_order_enforcing_visibly():
    env = gem_core.make("game:GuessTheNumber-v0-easy")
    assert isinstance(env, OrderEnforcing) and str(env) == "<OrderEnforcing<game:GuessTheNumber-v0-easy>>"
    assert not isinstance(env.unwrapped, OrderEnforcing) and env.spec.id == "game:GuessTheNumber-v0-easy"
    assert isinstance(env.spawn(), OrderEnforcing) and env.episode_over
    vec = gem_core.make_vec("game:GuessTheNumber-v0-easy", 2, backend="sync", wrappers=[EpisodeStatistics])
    try:
        assert all(isinstance(e, EpisodeStatistics) and isinstance(e.env, OrderEnforcing) for e in vec.envs)
    finally:
        vec.close()


def test_episode_over_before_reset_and_after_the_end():
    from gem_core import EpisodeOverError

    assert issubclass(EpisodeOverError, RuntimeError)
    env = OrderEnforcing(Counted(length=2))
    assert env.episode_over
    with pytest.raises(EpisodeOverError, match=r"^the episode is over; call reset\(\)$"):
        env.step("1")
    env.reset(seed=0)
    assert not env.episode_over
    with pytest.raises(TypeError, match=r"^an action is a str, got bytes$"):
        env.step(b"1")
    wrong = str((env.unwrapped.secret + 1) % 10)
    env.step(wrong)
    *_, terminated, truncated, _ = env.step(wrong)
    assert truncated and env.episode_over and env.unwrapped.steps == 2
    with pytest.raises(EpisodeOverError):
        env.step(wrong)
    assert env.unwrapped.steps == 2  # the env's own step never ran
    env.reset(seed=1)
    env.step(wrong)
    assert env.unwrapped.steps == 3


def test_a_directly_constructed_env_is_bare():
    env = Counted(length=1)
    assert not hasattr(env, "episode_over")
    env.reset(seed=0)
    env.step("x")
    env.step("x")  # no wrapper, no check: the env's own step runs
    assert env.steps == 2


def test_order_enforcing_sees_the_end_of_the_whole_stack_below_it():
    from gem_core import EpisodeOverError

    env = OrderEnforcing(Shout(TimeLimit(CountdownEnv(length=10), max_turns=1)))
    env.reset(seed=0)
    *_, truncated, _ = env.step("x")
    assert truncated and env.episode_over
    with pytest.raises(EpisodeOverError):
        env.step("x")
    assert env.env.shouts == 1
    env.reset(seed=0)
    assert not env.episode_over


def test_a_reset_that_raises_leaves_no_episode():
    from gem_core import EpisodeOverError

    env = OrderEnforcing(BrokenReset())
    with pytest.raises(ValueError):
        env.reset(seed=0)
    with pytest.raises(EpisodeOverError):
        env.step("1")
    live = OrderEnforcing(CountdownEnv(length=5))
    live.reset(seed=0)
    live.step("x")
    live.env.reset = BrokenReset().reset  # the next reset fails mid-episode
    with pytest.raises(ValueError):
        live.reset(seed=1)
    assert live.episode_over


def test_snapshots_keep_the_end_of_an_episode():
    from gem_core import EpisodeOverError

    env = OrderEnforcing(CountdownEnv(length=1))
    env.reset(seed=0)
    live = env.get_state()
    env.step("x")
    over = env.get_state()
    for clone in (env.spawn(same_state=True), env.spawn()):
        with pytest.raises(EpisodeOverError):
            clone.step("x")
    env.set_state(live)
    assert env.step("x")[3]
    env.set_state(over)
    with pytest.raises(EpisodeOverError):
        env.step("x")

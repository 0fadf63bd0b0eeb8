"""Env and Wrapper: the two base classes every environment and wrapper derives from.

An environment speaks text: ``reset(seed) -> (observation, info)`` and
``step(action) -> (observation, reward, terminated, truncated, info)``.

Each env owns its random generators. They are seeded by ``reset(seed=...)``; ``reset()`` without a
seed continues the current generators (or seeds them from OS entropy the first time), exactly as in
Gymnasium. No code in this package touches the process-global ``random`` or ``numpy.random`` state,
so envs stepped concurrently in threads stay deterministic.

The edges of an episode are checked by a wrapper, as in Gymnasium: ``gem_core.make`` (and every env
of ``make_vec``) returns the env wrapped in ``gem_core.wrappers.OrderEnforcing``, which raises
``EpisodeOverError`` ("the episode is over; call reset()"), a ``RuntimeError``, for a ``step`` before
the first ``reset`` or after a step that returned ``terminated`` or ``truncated``, before anything
below it runs, and ``TypeError`` for an action that is not a ``str`` (``check_action``). An env class
constructed directly has no such wrapper: wrap it yourself (``OrderEnforcing(MyEnv())``) to get the
checks. ``ToolEnvWrapper`` checks its own episode (it runs no tool call after the end, wherever it sits
in a stack), and a ``MultiAgentEnv`` checks its own (``gem_core.envs.multiagent``).

Info keys with a shared meaning (envs set those that apply):
  ``success``       bool, the episode's goal was reached (set on the final step)
  ``format_error``  bool, the action could not be parsed (the env returned a format penalty)
  ``invalid_move``  bool, the action parsed but was not a legal move
  ``error``         str, an exception or timeout reported by a vector env
"""

from __future__ import annotations

import copy
import random
import secrets
from collections.abc import Hashable
from typing import Any, ClassVar, Generic, TypeVar

Obs = TypeVar("Obs")
StepResult = tuple[Any, float, bool, bool, dict[str, Any]]

EPISODE_OVER_MESSAGE = "the episode is over; call reset()"


class EpisodeOverError(RuntimeError):
    """``step`` was called before the first ``reset`` or after the episode ended."""

    def __init__(self, message: str = EPISODE_OVER_MESSAGE):
        super().__init__(message)


def check_action(action: Any) -> None:
    """Raise ``TypeError`` unless ``action`` is a ``str`` (an action is text)."""
    if not isinstance(action, str):
        raise TypeError(f"an action is a str, got {type(action).__name__}")


class EnvBase:
    """What every environment owns, single- or multi-agent: its random generators, the constructor
    arguments it was built with, and snapshots.

    ``_seed(seed)`` (called by ``reset``) seeds ``rng`` for the episode and ``action_rng`` for random
    actions; the default ``get_state``/``set_state`` snapshot the instance's attributes by deep copy,
    except those named in ``_static_attributes`` (big read-only data such as word lists), which are
    shared, not copied.

    Constructor arguments: ``EnvBase.__new__`` records the arguments of every env and wrapper
    construction, as given and before any ``__init__`` runs, in ``_init_args`` (``(args, kwargs)``), so
    no subclass has to. ``spawn`` (and ``Wrapper.spawn``) builds a sibling from them. They are not
    state: ``get_state`` and the vector workers' snapshots leave them out (as they leave out ``spec``),
    while pickling and ``copy`` carry them along with the other attributes.
    """

    spec: Any = None  # the EnvSpec this env was made from, set by ``gem_core.make``
    _static_attributes: ClassVar[tuple[str, ...]] = ()
    _init_args: tuple[tuple[Any, ...], dict[str, Any]]  # see "Constructor arguments" above

    def __new__(cls, *args: Any, **kwargs: Any) -> EnvBase:
        """Record the constructor arguments (see "Constructor arguments" in the class docstring)."""
        instance = super().__new__(cls)
        instance._init_args = (args, dict(kwargs))
        return instance

    def _seed(self, seed: int | None) -> None:
        """Re-seed the generators with ``seed``; without one, keep them (or seed from OS entropy once)."""
        if seed is not None or getattr(self, "rng", None) is None:
            self.seed = int(seed) if seed is not None else secrets.randbits(63)
            self.rng = random.Random(self.seed)
            self._action_rng = None

    @property
    def action_rng(self) -> random.Random:
        """The generator of random actions, separate from ``rng`` so that sampling actions never
        changes the episode; seeded from the episode seed on first use."""
        if getattr(self, "_action_rng", None) is None:
            if getattr(self, "seed", None) is None:
                raise RuntimeError("call reset() before sampling actions")
            self._action_rng = random.Random(f"action:{self.seed}")
        return self._action_rng

    # ---- copies and snapshots -----------------------------------------------------------------
    def spawn(self, same_state: bool = False, **overrides: Any) -> EnvBase:
        """A new env of the same class and constructor arguments (``overrides`` replace some).

        With ``same_state=True`` the new env continues from this env's exact state, e.g. so that a
        GRPO group shares one initial state.
        """
        args, kwargs = self._init_args
        clone = type(self)(*args, **{**kwargs, **overrides})
        clone.spec = self.spec
        if same_state:
            clone.set_state(self.get_state())
        return clone

    def get_state(self) -> dict[str, Any]:
        """A snapshot of everything that determines the env's future, restorable with ``set_state``."""
        skip = {"_init_args", "spec", *self._static_attributes}
        return copy.deepcopy({k: v for k, v in vars(self).items() if k not in skip})

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a snapshot taken by ``get_state`` (of this env or one spawned from the same arguments)."""
        vars(self).update(copy.deepcopy(state))

    def close(self) -> None:
        """Release resources (processes, servers, files). Safe to call twice."""

    def __enter__(self) -> EnvBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Env(EnvBase, Generic[Obs]):
    """Base class of a multi-turn text environment.

    Subclasses implement ``reset`` (calling ``super().reset(seed)`` first, then drawing the episode
    from ``self.rng``), ``step`` and ``sample_random_action`` (drawing from ``self.action_rng``).
    """

    # ---- the episode --------------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Obs, dict[str, Any]]:
        """Start an episode and return its first observation and an info dict.

        ``seed`` re-seeds the env's generators, so the same seed gives the same episode.
        Subclasses call ``super().reset(seed)`` before drawing anything from ``self.rng``.
        """
        self._seed(seed)
        return None, {}  # type: ignore[return-value]

    def step(self, action: str) -> StepResult:
        """Apply one action (untrusted model text) and return ``(obs, reward, terminated, truncated, info)``.

        Any string, however malformed, must give an observation (usually with a penalty), never an
        exception. (Through ``gem_core.make``, a non-``str`` action raises ``TypeError`` and a step
        outside an episode raises ``EpisodeOverError`` before this method runs: ``OrderEnforcing``.)
        """
        raise NotImplementedError

    def sample_random_action(self) -> str:
        """A random well-formed action, drawn from the env's action generator (not ``self.rng``)."""
        raise NotImplementedError

    def sample_legal_action(self) -> str | None:
        """A uniformly random legal move of the current state, drawn from ``self.action_rng``, where the
        env can enumerate its legal moves (the games do); None where it cannot, or when no move is legal.
        A player that plays legally without skill (a warm-up's scripted player, a baseline) calls this
        instead of reading the env's internals.
        """
        return None

    def solve_action(self) -> str | None:
        """The scripted solver's next action for the current state, or None: the env has no solver.

        An env with a solver overrides this (the games do); ``gem eval --model solver`` plays it. A
        solver reads only what a player has been shown, and draws any randomness from ``self.action_rng``.
        """
        return None

    def state_key(self) -> Hashable | None:
        """A key naming the current state, or None (the default): the env names no states.

        Trainers group turns taken from the same state by it (GiGPO's anchor states), so a key is
        hashable, cheap (it is read after every step) and canonical: two states of one env id have
        equal keys exactly when they are the same position, i.e. every move gets the same answer
        (reward, whether the episode ends, the next key), or the same distribution of answers where
        the env draws at random. The turn budget is not part of a position: the same board reached at
        turn 2 and at turn 5 has one key. Keys are plain data (tuples, strings, numbers), so they
        survive a trip through JSON (lists read back as tuples) and between processes.
        """
        return None

    @property
    def unwrapped(self) -> Env:
        """The innermost env, below all wrappers."""
        return self

    def __str__(self) -> str:
        name = self.spec.id if self.spec is not None else type(self).__name__
        return f"<{name}>"


class Wrapper(Env[Obs]):
    """Wraps an env to change some of its behaviour; everything else is forwarded explicitly.

    Only the methods of the Env API are forwarded. Attributes of the inner env are reached through
    ``wrapper.unwrapped.<name>`` or ``wrapper.get_wrapper_attr(name)``, never copied.
    """

    def __init__(self, env: Env):
        if not isinstance(env, Env):
            raise TypeError(f"{type(self).__name__} wraps a gem_core.Env, got {type(env).__name__}")
        self.env = env

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Obs, dict[str, Any]]:
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action: str) -> StepResult:
        return self.env.step(action)

    def sample_random_action(self) -> str:
        return self.env.sample_random_action()

    def sample_legal_action(self) -> str | None:
        return self.env.sample_legal_action()

    def solve_action(self) -> str | None:
        return self.env.solve_action()

    def state_key(self) -> Hashable | None:
        """The inner env's key (a wrapper whose own state changes what moves do may override it)."""
        return self.env.state_key()

    def spawn(self, same_state: bool = False, **overrides: Any) -> Wrapper:
        """Spawn the inner env, then wrap it again with this wrapper's own constructor arguments."""
        args, kwargs = self._init_args
        inner = self.env.spawn(same_state=same_state, **overrides)
        if args:
            clone = type(self)(inner, *args[1:], **kwargs)
        else:
            clone = type(self)(**{**kwargs, "env": inner})
        if same_state:
            clone.set_state(self.get_state())
        return clone

    def get_state(self) -> dict[str, Any]:
        """The inner env's snapshot and this wrapper's own attributes."""
        skip = {"_init_args", "env", *self._static_attributes}
        own = copy.deepcopy({k: v for k, v in vars(self).items() if k not in skip})
        return {"env": self.env.get_state(), "wrapper": own}

    def set_state(self, state: dict[str, Any]) -> None:
        self.env.set_state(state["env"])
        vars(self).update(copy.deepcopy(state["wrapper"]))

    @property
    def spec(self) -> Any:  # type: ignore[override]
        return self.env.spec

    @spec.setter
    def spec(self, value: Any) -> None:
        self.env.spec = value

    @property
    def unwrapped(self) -> Env:
        return self.env.unwrapped

    def get_wrapper_attr(self, name: str) -> Any:
        """The attribute ``name`` of the outermost layer (this wrapper or an inner one) that has it."""
        layer: Env = self
        while True:
            if name in vars(layer) or hasattr(type(layer), name):
                return getattr(layer, name)
            if not isinstance(layer, Wrapper):
                raise AttributeError(f"no layer of {self} has an attribute {name!r}")
            layer = layer.env

    def close(self) -> None:
        self.env.close()

    def __str__(self) -> str:
        return f"<{type(self).__name__}{self.env}>"


# The reference gem's name for the wrapper base class (gem.core.EnvWrapper).
EnvWrapper = Wrapper

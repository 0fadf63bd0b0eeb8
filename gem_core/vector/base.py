"""VectorEnv: N envs stepped as one batch, with autoreset, subset stepping and fault isolation.

Observations and infos are lists (one entry per env); rewards, terminated and truncated are numpy
arrays. ``reset(seed=s)`` seeds env ``i`` with ``s + i``; later autoresets continue each env's own
generator, so a run is reproducible from its first seed.

Autoreset modes (as in Gymnasium 1.x):
  ``next_step``  an env that finished returns its final observation; on the next ``step`` it is reset
                 instead of stepped (its action is ignored) and ``info["autoreset"]`` is True.
  ``same_step``  a finished env is reset within the same ``step``; the returned observation is the new
                 episode's, and ``info["final_obs"]`` / ``info["final_info"]`` keep the old episode's end.
  ``disabled``   finished envs stay finished until ``reset(indices=[...])``; stepping one is an error.

Fault isolation: an env whose ``step``/``reset`` raises, or exceeds ``step_timeout`` seconds, is
replaced by a fresh instance from its factory and reset; that step is reported as truncated with
``info["error"]`` set, so the episode ends visibly instead of vanishing or killing the batch. Only the
faulty env's episode ends: the others keep theirs (the process and Ray backends restore the envs of a
worker they must restart from snapshots, see ``gem_core.vector.worker_pool``). An env whose episode is lost
all the same (e.g. its state could not be snapshot) is reported the same way at its next ``step``.
A batch step returns within about ``step_timeout`` (plus a second, on the remote backends, for a
worker that cannot even report its hung calls), except on ``SyncVectorEnv``, which cannot interrupt,
and when a remote worker crashed mid-batch (its calls in flight run again: ``gem_core.vector.worker_pool``).
Each call runs under its step's deadline (``gem_core.deadline``), so what waits inside a step (a tool
call in the sandbox pool) ends by then rather than running on after the step was abandoned.

Backends receive calls as plain data, so that they can cross a process boundary:
``("reset", seed, kwargs)``, ``("step", action)``, ``("sample",)`` and ``("get_attr", name)``.
"""

from __future__ import annotations

import contextlib
import enum
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gem_core.core import Env, Wrapper
from gem_core.deadline import step_deadline


class AutoresetMode(str, enum.Enum):
    NEXT_STEP = "next_step"
    SAME_STEP = "same_step"
    DISABLED = "disabled"


class EnvFailure(Exception):
    """Raised by a backend's call when an env raised or timed out; carries a readable reason."""


class VectorEnv:
    """Shared logic of the vector envs; backends implement ``_call`` (run functions on envs)."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        step_timeout: float | None = None,
    ):
        if not env_fns:
            raise ValueError("a vector env needs at least one env factory")
        self.env_fns = list(env_fns)
        self.num_envs = len(self.env_fns)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.step_timeout = step_timeout
        self._obs: list[Any] = [None] * self.num_envs
        self._done = np.zeros(self.num_envs, dtype=bool)
        self._started = False
        # Envs whose episode a backend lost outside a call on them (their worker died while running
        # others), with the reason; the next step of each reports it instead of running it.
        self._lost: dict[int, str] = {}
        self._start()

    # ---- backend seam ----------------------------------------------------------------------------
    def _start(self) -> None:
        """Build the envs (in this process; remote backends start their workers instead)."""
        self.envs: list[Env] = [fn() for fn in self.env_fns]

    def _call(self, calls: Mapping[int, Call], timeout: float | None) -> dict[int, Any]:
        """Run ``calls[i]`` on env ``i`` for each index; a failed call's result is an ``EnvFailure``."""
        raise NotImplementedError

    def _replace(self, i: int) -> None:
        """Swap env ``i`` for a fresh instance (it raised or hung)."""
        with contextlib.suppress(Exception):
            self.envs[i].close()
        self.envs[i] = self.env_fns[i]()

    # ---- API -------------------------------------------------------------------------------------
    def reset(
        self,
        seed: int | Sequence[int | None] | None = None,
        indices: Sequence[int] | None = None,
        **kwargs: Any,
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        """Reset all envs (or ``indices``); an int ``seed`` gives env ``i`` the seed ``seed + i``."""
        idx = list(range(self.num_envs)) if indices is None else [int(i) for i in indices]
        if seed is None or isinstance(seed, (int, np.integer)):
            seeds = {i: None if seed is None else int(seed) + i for i in idx}
        else:
            if len(seed) != len(idx):
                raise ValueError(f"{len(seed)} seeds for {len(idx)} envs")
            seeds = dict(zip(idx, seed))
        for i in idx:
            self._lost.pop(i, None)  # a reset discards the episode anyway
        results = self._call({i: ("reset", seeds[i], kwargs) for i in idx}, self.step_timeout)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i in idx:
            result = results[i]
            if isinstance(result, EnvFailure):  # a reset that fails once is retried on a fresh env
                self._replace(i)
                result = self._call({i: ("reset", seeds[i], kwargs)}, self.step_timeout)[i]
                if isinstance(result, EnvFailure):
                    raise RuntimeError(f"env {i} failed to reset twice: {result}")
            self._obs[i], infos[i] = result
            self._done[i] = False
        self._started = True
        return list(self._obs), infos

    def step(
        self, actions: Sequence[str] | Mapping[int, str]
    ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step every env (a sequence of ``num_envs`` actions) or a subset (``{index: action}``).

        Envs not in a subset keep their observation and report reward 0 and ``info["stepped"] = False``.
        """
        if not self._started:
            raise RuntimeError("call reset() before step()")
        if isinstance(actions, Mapping):
            todo = {int(i): a for i, a in actions.items()}
            bad = [i for i in todo if not 0 <= i < self.num_envs]
            if bad:
                raise IndexError(f"env indices {bad} out of range for {self.num_envs} envs")
        else:
            if len(actions) != self.num_envs:
                raise ValueError(f"{len(actions)} actions for {self.num_envs} envs")
            todo = dict(enumerate(actions))

        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos: list[dict[str, Any]] = [{"stepped": False} for _ in range(self.num_envs)]

        to_reset = [i for i in todo if self._done[i]]
        if to_reset and self.autoreset_mode is AutoresetMode.DISABLED:
            raise RuntimeError(f"envs {to_reset} finished; reset(indices=...) them (autoreset is disabled)")
        # A lost env is reported, not run; one that had finished anyway just gets its reset.
        lost = {i: EnvFailure(self._lost.pop(i)) for i in todo if i in self._lost and not self._done[i]}
        for i in to_reset:
            self._lost.pop(i, None)
        calls: dict[int, Call] = {
            i: (("reset", None, {}) if i in to_reset else ("step", a))
            for i, a in todo.items()
            if i not in lost
        }
        results = {**self._call(calls, self.step_timeout), **lost}

        finished: list[int] = []
        for i, result in results.items():
            if isinstance(result, EnvFailure):
                self._replace(i)
                self._done[i] = False
                rewards[i], terminated[i], truncated[i] = 0.0, False, True
                infos[i] = {"error": str(result), "stepped": True}
                finished.append(i)  # the next reset (per the mode) starts the replacement env
                continue
            if i in to_reset:
                self._obs[i], info = result
                infos[i] = {**info, "autoreset": True, "stepped": True}
                self._done[i] = False
                continue
            obs, reward, term, trunc, info = result
            self._obs[i] = obs
            rewards[i], terminated[i], truncated[i] = float(reward), bool(term), bool(trunc)
            infos[i] = {**info, "stepped": True}
            if term or trunc:
                finished.append(i)

        for i in finished:
            self._done[i] = True
        if self.autoreset_mode is AutoresetMode.SAME_STEP and finished:
            resets = self._call({i: ("reset", None, {}) for i in finished}, self.step_timeout)
            for i in finished:
                final_obs, final_info = self._obs[i], infos[i]
                result = resets[i]
                if isinstance(result, EnvFailure):
                    self._replace(i)
                    result = self._call({i: ("reset", None, {})}, self.step_timeout)[i]
                    if isinstance(result, EnvFailure):
                        raise RuntimeError(f"env {i} failed to reset twice: {result}")
                self._obs[i], reset_info = result
                infos[i] = {**reset_info, "final_obs": final_obs, "final_info": final_info, "stepped": True}
                self._done[i] = False
        return list(self._obs), rewards, terminated, truncated, infos

    def sample_random_actions(self) -> list[str]:
        """One random action per env, from each env's own action generator."""
        results = self._call({i: ("sample",) for i in range(self.num_envs)}, self.step_timeout)
        return [r if isinstance(r, str) else "" for r in (results[i] for i in range(self.num_envs))]

    def get_attr(self, name: str) -> list[Any]:
        """Attribute ``name`` of each env (its outermost layer that has it), wherever the envs live."""
        results = self._call({i: ("get_attr", name) for i in range(self.num_envs)}, self.step_timeout)
        values = [results[i] for i in range(self.num_envs)]
        for value in values:
            if isinstance(value, EnvFailure):
                raise AttributeError(str(value))
        return values

    @property
    def done(self) -> np.ndarray:
        """Which envs have finished and await a reset (always all False in ``same_step`` mode)."""
        return self._done.copy()

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.num_envs


Call = tuple  # ("reset", seed, kwargs) | ("step", action) | ("sample",) | ("get_attr", name)


def apply_call(call: Call, env: Env) -> Any:
    """Run one call, described as data, on ``env``."""
    kind, *args = call
    if kind == "step":
        return env.step(*args)
    if kind == "reset":
        seed, kwargs = args
        return env.reset(seed=seed, **kwargs)
    if kind == "sample":
        return env.sample_random_action()
    if kind == "get_attr":
        (name,) = args
        return env.get_wrapper_attr(name) if isinstance(env, Wrapper) else getattr(env, name)
    raise ValueError(f"unknown vector env call {kind!r}")


def run_guarded(call: Call, env: Env, deadline: float | None = None) -> Any:
    """``call`` on ``env`` under the step deadline ``deadline`` (a ``time.monotonic()`` value, or None),
    with an exception turned into an ``EnvFailure`` carrying the traceback's last line."""
    try:
        with step_deadline(at=deadline):
            return apply_call(call, env)
    except Exception as exc:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return EnvFailure(f"{type(env.unwrapped).__name__} raised {last}")

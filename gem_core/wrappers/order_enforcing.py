"""OrderEnforcing: the order of calls at the edges of an episode, checked (Gymnasium's wrapper of that name).

``gem_core.make`` returns every env wrapped in it, and ``make_vec`` builds each of its envs with
``make`` (the ``wrappers`` it is given go around it), so it shows in the stack:
``str(gem_core.make("game:GuessTheNumber-v0"))`` is ``<OrderEnforcing<game:GuessTheNumber-v0>>``.
What it guarantees, for everything below it:

* ``step`` before the first ``reset``, or after a step that returned ``terminated`` or ``truncated``,
  raises ``gem_core.EpisodeOverError`` ("the episode is over; call reset()", a ``RuntimeError``), and
  nothing below runs (no env logic, no tool call);
* ``step`` with an action that is not a ``str`` raises ``TypeError("an action is a str, got <type>")``,
  and nothing below runs;
* a ``reset`` starts a new episode; one that raises leaves none running;
* ``episode_over`` says which of the two holds. It is this wrapper's state, so ``get_state`` /
  ``set_state`` snapshots and ``spawn(same_state=True)`` keep it; ``spawn()`` starts before the first
  reset.

It sees the results of the whole stack below it: an episode that a ``TimeLimit`` inside truncates is
over here, though the env below would take another step. Wrappers added on top of a made env are
not checked by it (as in Gymnasium); wrap the finished stack again (``OrderEnforcing(stack)``) to
check them too. An env class constructed directly is not wrapped: ``OrderEnforcing(MyEnv())``.
"""

from __future__ import annotations

from typing import Any

from gem_core.core import Env, EpisodeOverError, StepResult, Wrapper, check_action


class OrderEnforcing(Wrapper):
    def __init__(self, env: Env):
        super().__init__(env)
        self._episode_over = True  # no episode runs until the first reset

    @property
    def episode_over(self) -> bool:
        """True before the first ``reset`` and after the episode ended: ``step`` would raise
        ``EpisodeOverError``."""
        return self._episode_over

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._episode_over = True  # until the reset below returns
        result = self.env.reset(seed=seed, **kwargs)
        self._episode_over = False
        return result

    def step(self, action: str) -> StepResult:
        if self._episode_over:
            raise EpisodeOverError()
        check_action(action)
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._episode_over = bool(terminated or truncated)
        return obs, reward, terminated, truncated, info

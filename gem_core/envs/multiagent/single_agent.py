"""SingleAgentView: one agent of a MultiAgentEnv as an ordinary ``Env``, the others played by policies.

``SingleAgentView(env, agent, policies)`` plays ``agent``; every other agent is played by
``policies[name]``, a function from that agent's observation to its action, or the string
``"random"`` for the env's own ``sample_random_action``. Between two of the learner's actions the
others act until the learner is due again (sequential) or alongside it (parallel). The learner's
reward for a step is the sum of its rewards over every multi-agent step in between; its episode ends
when its own termination or truncation does.

Its ``step`` checks the edges of the learner's episode itself (``EpisodeOverError`` before the first
reset and after its end, ``TypeError`` for a non-``str`` action), as ``OrderEnforcing`` would.
Being an ``Env``, the view works with ``check_env``, wrappers, vector envs and every trainer adapter.
Policies are shared by spawned copies and are not part of snapshots: give deterministic policies
(or ``"random"``, which draws from the env's seeded generator) to keep episodes reproducible.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from gem_core.core import Env, EpisodeOverError, StepResult, check_action
from gem_core.envs.multiagent.core import MultiAgentEnv, Policy

MAX_OTHER_STEPS = 10_000  # others acting between two learner actions; a guard against a stuck env


class SingleAgentView(Env[str]):
    def __init__(self, env: MultiAgentEnv, agent: str, policies: Mapping[str, Policy | str]):
        if agent not in env.agents:
            raise ValueError(f"{agent!r} is not one of the env's agents {env.agents}")
        missing = set(env.agents) - {agent} - set(policies)
        if missing:
            raise ValueError(f"give a policy for every other agent; missing {sorted(missing)}")
        self.env = env
        self.agent = agent
        self.policies = dict(policies)
        self.observations: dict[str, str] = {}

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        # The inner env is seeded from this view's generator, so the same seed gives the same episode.
        self.observations, infos = self.env.reset(seed=self.rng.randrange(2**63), **kwargs)
        _, _, info = self._others_act()  # in a degenerate env the others end the episode here
        return self.observations[self.agent], {**infos.get(self.agent, {}), **info}

    @property
    def episode_over(self) -> bool:
        """True before the first reset and once the learner's episode ended (which the others may end
        before its first action, in a degenerate env): ``step`` would raise ``EpisodeOverError``."""
        return self.agent not in self.env.live_agents

    def step(self, action: str) -> StepResult:
        if self.episode_over:
            raise EpisodeOverError()
        check_action(action)
        actions = {self.agent: action}
        if self.env.turn_order == "parallel":
            actions.update(self._other_actions())
        reward, terminated, truncated, info = self._apply(actions)
        if not (terminated or truncated):
            more, (terminated, truncated), more_info = self._others_act()
            reward += more
            info.update(more_info)
        return self.observations[self.agent], float(reward), terminated, truncated, info

    def _apply(self, actions: dict[str, str]) -> tuple[float, bool, bool, dict[str, Any]]:
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        self.observations.update(observations)
        return rewards[self.agent], terminations[self.agent], truncations[self.agent], dict(infos[self.agent])

    def _other_actions(self) -> dict[str, str]:
        return {agent: self._act(agent) for agent in self.env.due_agents() if agent != self.agent}

    def _act(self, agent: str) -> str:
        policy = self.policies[agent]
        if policy == "random":
            return self.env.sample_random_action(agent)
        return policy(self.observations[agent])

    def _others_act(self) -> tuple[float, tuple[bool, bool], dict[str, Any]]:
        """Sequential envs: let the others move until the learner is due or its episode ends."""
        reward, info = 0.0, {}
        if self.env.turn_order == "parallel":
            return reward, (False, False), info
        for _ in range(MAX_OTHER_STEPS):
            due = self.env.due_agents()
            if not due or due == [self.agent]:
                break
            r, terminated, truncated, step_info = self._apply({due[0]: self._act(due[0])})
            reward += r
            info.update(step_info)
            if terminated or truncated:
                return reward, (terminated, truncated), info
        else:
            raise RuntimeError(f"the other agents acted {MAX_OTHER_STEPS} times without the learner's turn")
        return reward, (False, False), info

    def sample_random_action(self) -> str:
        return self.env.sample_random_action(self.agent)

    def sample_legal_action(self) -> str | None:
        return self.env.sample_legal_action(self.agent)

    def solve_action(self) -> str | None:
        return self.env.solve_action(self.agent)

    def spawn(self, same_state: bool = False, **overrides: Any) -> SingleAgentView:
        """A view of a spawned inner env (``overrides`` go to it) with the same agent and policies."""
        clone = SingleAgentView(self.env.spawn(**overrides), self.agent, self.policies)
        clone.spec = self.spec
        if same_state:
            clone.set_state(self.get_state())
        return clone

    def get_state(self) -> dict[str, Any]:
        skip = {"_init_args", "spec", "env", "policies"}
        own = copy.deepcopy({k: v for k, v in vars(self).items() if k not in skip})
        return {"env": self.env.get_state(), "view": own}

    def set_state(self, state: dict[str, Any]) -> None:
        self.env.set_state(state["env"])
        vars(self).update(copy.deepcopy(state["view"]))

    def close(self) -> None:
        self.env.close()

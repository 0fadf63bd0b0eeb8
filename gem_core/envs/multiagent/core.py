"""MultiAgentEnv: several named agents in one text environment, with messages between them.

The API mirrors ``gem_core.core.Env`` with a dict keyed by agent name wherever Env has one value:

``reset(seed) -> (observations, infos)``
``step(actions) -> (observations, rewards, terminations, truncations, infos)``

``agents`` lists every agent's name; ``live_agents`` those whose episode is not over. With
``turn_order = "sequential"`` only ``current_agent`` acts in a step (``actions`` holds just its
action); with ``"parallel"`` every live agent acts at once. ``step`` returns an observation, reward,
termination, truncation and info for every agent; an agent's observation is what it should read
before its next action.

Messages: any action may carry messages to other agents, ``<message to="NAME">text</message>``
(at most ``MAX_MESSAGES`` per action, each up to ``MAX_MESSAGE_CHARS``). They are removed from the
action before the env reads it and delivered at the top of the recipient's observation the next
time it is due to act (``From NAME: text``); a message to an unknown agent is reported back to the
sender the same way.

Like an Env (both derive from ``gem_core.core.EnvBase``), a MultiAgentEnv owns its generators
(``rng`` for the episode, ``action_rng`` for ``sample_random_action(agent)``), seeded by
``reset(seed)``, and has ``get_state``/``set_state``/``spawn``. ``step`` checks the edges of an episode
itself, before any of the subclass's code runs: before the first reset, or once no agent is live
(``episode_over``), it raises ``EpisodeOverError``; an action that is not a ``str`` raises
``TypeError``; a reset that raises leaves no agent live. Subclasses implement ``_reset()``
and ``_step(actions)`` (actions already stripped of messages) and ``_random_action(agent)``.
``single_agent.SingleAgentView`` exposes one agent as an Env, the others played by given policies;
``rollout`` plays a whole episode (self-play).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from gem_core.core import EnvBase, EpisodeOverError, check_action

MultiStepResult = tuple[dict[str, str], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict]]
Policy = Callable[[str], str]

MAX_MESSAGES = 5
MAX_MESSAGE_CHARS = 2_000
_MESSAGE_OPEN = re.compile(r'<message\s+to\s*=\s*"([^"<>\n]{0,64})"\s*>', re.IGNORECASE)
_MESSAGE_CLOSE = re.compile(r"</message\s*>", re.IGNORECASE)


def split_messages(action: str) -> tuple[str, list[tuple[str, str]]]:
    """``(action without its messages, [(recipient, text), ...])``; linear in the action's length."""
    messages: list[tuple[str, str]] = []
    kept: list[str] = []
    position = 0
    for opening in _MESSAGE_OPEN.finditer(action):
        if opening.start() < position:
            continue  # inside a message already taken
        close = _MESSAGE_CLOSE.search(action, opening.end()) if len(messages) < MAX_MESSAGES else None
        if close is None:
            break
        kept.append(action[position : opening.start()])
        text = action[opening.end() : close.start()].strip()[:MAX_MESSAGE_CHARS]
        messages.append((opening.group(1).strip(), text))
        position = close.end()
    kept.append(action[position:])
    return "".join(kept), messages


class MultiAgentEnv(EnvBase):
    """Base class of a multi-agent text environment (see the module docstring)."""

    agents: list[str] = []
    live_agents: list[str] = []  # until the first reset: no episode runs
    turn_order: ClassVar[str] = "sequential"  # or "parallel"

    # ---- for subclasses ------------------------------------------------------------------------
    def _reset(self) -> tuple[dict[str, str], dict[str, dict]]:
        """Start an episode from ``self.rng``: every agent's first observation and info; set
        ``self.current_agent`` in a sequential env."""
        raise NotImplementedError

    def _step(self, actions: dict[str, str]) -> MultiStepResult:
        """Apply the (message-free) actions; return the five dicts (for every agent)."""
        raise NotImplementedError

    def _random_action(self, agent: str) -> str:
        """A random well-formed action for ``agent`` drawn from ``self.action_rng``."""
        raise NotImplementedError

    # ---- the API -------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[dict[str, str], dict[str, dict]]:
        self.live_agents = []  # until ``_reset`` returns: one that raises leaves no episode
        self._seed(seed)
        self.inbox: dict[str, list[str]] = {agent: [] for agent in self.agents}
        self.current_agent: str | None = self.agents[0] if self.turn_order == "sequential" else None
        observations, infos = self._reset()
        self.live_agents = list(self.agents)
        return self._deliver(observations), infos

    @property
    def episode_over(self) -> bool:
        """True before the first reset and once no agent is live: ``step`` would raise ``EpisodeOverError``."""
        return not self.live_agents

    def step(self, actions: Mapping[str, str]) -> MultiStepResult:
        if self.episode_over:
            raise EpisodeOverError()
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions are a mapping from agent name to str, got {type(actions).__name__}")
        for action in actions.values():
            check_action(action)
        expected = {self.current_agent} if self.turn_order == "sequential" else set(self.live_agents)
        if set(actions) != expected:
            raise ValueError(f"this step takes actions from {sorted(expected)}, got {sorted(actions)}")
        stripped = {}
        for agent, action in actions.items():
            stripped[agent], messages = split_messages(action)
            for recipient, text in messages:
                if recipient in self.inbox and recipient != agent:
                    self.inbox[recipient].append(f"From {agent}: {text}")
                else:
                    self.inbox[agent].append(
                        f"Your message to {recipient!r} was not delivered: no such agent."
                    )
        observations, rewards, terminations, truncations, infos = self._step(stripped)
        self.live_agents = [a for a in self.live_agents if not (terminations[a] or truncations[a])]
        if not self.live_agents:
            self.current_agent = None
        return self._deliver(observations), rewards, terminations, truncations, infos

    def due_agents(self) -> list[str]:
        """The agents that act in the next step."""
        if self.turn_order == "sequential":
            return [self.current_agent] if self.current_agent is not None else []
        return list(self.live_agents)

    def _deliver(self, observations: dict[str, str]) -> dict[str, str]:
        for agent in self.due_agents():
            if self.inbox[agent]:
                notes = "\n".join(self.inbox[agent])
                observations[agent] = f"Messages:\n{notes}\n\n{observations[agent]}"
                self.inbox[agent] = []
        return observations

    def sample_random_action(self, agent: str) -> str:
        return self._random_action(agent)

    def sample_legal_action(self, agent: str) -> str | None:
        """A uniformly random legal move of ``agent`` now (``Env.sample_legal_action``); None (the
        default) where the env does not enumerate them."""
        return None

    def solve_action(self, agent: str) -> str | None:
        """The scripted solver's move for ``agent`` now (``Env.solve_action``); None (the default) where
        the env has no solver."""
        return None


def rollout(
    env: MultiAgentEnv, policies: Mapping[str, Policy], seed: int | None = None, max_steps: int = 1_000
) -> tuple[dict[str, float], list[tuple[str, str]]]:
    """Play one episode with a policy per agent (the same one twice for self-play).

    Returns each agent's total reward and the transcript ``[(agent, action), ...]``.
    """
    observations, _ = env.reset(seed=seed)
    totals = dict.fromkeys(env.agents, 0.0)
    transcript: list[tuple[str, str]] = []
    for _ in range(max_steps):
        due = env.due_agents()
        if not due:
            break
        actions = {agent: policies[agent](observations[agent]) for agent in due}
        transcript += list(actions.items())
        observations, rewards, *_ = env.step(actions)
        for agent, reward in rewards.items():
            totals[agent] += reward
    return totals, transcript

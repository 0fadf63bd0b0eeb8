"""ToolEnvWrapper: gives any env tools, turning a single-turn task into a multi-turn agent task.

At reset the tools' instructions are appended to the first observation. On each step the tools try
to parse the action in order; the first that finds a call runs it and its result is the next
observation (the inner env is not stepped, the episode goes on). An action with no tool call goes
to the inner env as usual. After ``max_tool_uses`` calls the agent is told to answer directly, and
later tool-call actions go to the inner env as answers.

Tool rewards cannot be farmed. Each call earns ``tool_reward``, plus ``tool_success_reward`` when it
worked or minus ``tool_error_penalty`` when it failed:

* what a call earns above zero is a *bonus*, held back: it is paid on the episode's last step, and
  only if the task was solved there (the inner env's ``info["success"]``, or, for an env that does
  not report it, a positive final reward), at most ``max_tool_bonus`` per episode (default: what one
  working call earns). An episode that does not solve its task never gets a positive return from
  tools, however many calls it makes, and a solved one gains nothing from padding with calls;
* what a call earns below zero (a failed call's penalty, a negative ``tool_reward``: a price per
  call) is paid at once, on the tool step.

So the bonus is meant as a tie-breaker among solved episodes (solve it *and* use the tool that
works), and the penalty as a price of broken or wasteful calls; a task's own reward stays the signal.
Every step's info carries the episode's counts (``tool_uses``, ``tool_successes``, ``tool_errors``),
``use_tool`` and the bonus held back so far (``tool_bonus_pending``); a tool step also names the
``tool`` and whether it was ``tool_ok``; the last step says what was paid (``tool_bonus``).

Tool calls are made on behalf of the env (``gem_core.tools.base.calling_for``): a shared tool
resource (the sandbox pool) shares itself fairly between the envs that use it, whatever one of them
sends.

The wrapper checks its own episode, wherever it sits in a stack (on top of ``gem_core.make``'s
``OrderEnforcing`` too): a step before the first reset or after the episode ended raises
``EpisodeOverError``, and a non-``str`` action ``TypeError``, before any tool is parsed or run.

Tools are shared, static resources (``_static_attributes``): snapshots do not copy them, spawned
envs use the same ones, and closing the env leaves them open (close them yourself).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gem_core.core import Env, EpisodeOverError, StepResult, Wrapper, check_action
from gem_core.tools.base import Tool, calling_for


class ToolEnvWrapper(Wrapper):
    _static_attributes = ("tools",)

    def __init__(
        self,
        env: Env,
        tools: Sequence[Tool],
        tool_reward: float = 0.0,
        tool_success_reward: float = 0.0,
        tool_error_penalty: float = 0.0,
        max_tool_uses: int | None = 10,
        max_tool_bonus: float | None = None,
    ):
        super().__init__(env)
        if not tools:
            raise ValueError("give at least one tool")
        if max_tool_uses is not None and max_tool_uses < 0:
            raise ValueError("max_tool_uses must be >= 0 (or None for no limit)")
        if max_tool_bonus is not None and not max_tool_bonus >= 0:
            raise ValueError("max_tool_bonus must be >= 0 (or None: what one working call earns)")
        self.tools = list(tools)
        self.tool_reward = tool_reward
        self.tool_success_reward = tool_success_reward
        self.tool_error_penalty = tool_error_penalty
        self.max_tool_uses = max_tool_uses
        self.max_tool_bonus = (
            max(0.0, tool_reward + tool_success_reward) if max_tool_bonus is None else max_tool_bonus
        )
        self.tool_uses = self.tool_successes = self.tool_errors = 0
        self.tool_bonus = 0.0  # earned by this episode's calls, paid only if it solves its task
        self.episode_over = True  # no tool runs before the first reset or after the episode ended

    def instructions(self) -> str:
        text = "\n\n".join(tool.instruction() for tool in self.tools)
        return f"Available tools:\n{text}" if len(self.tools) > 1 else text

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.episode_over = True  # until the reset below returns
        obs, info = self.env.reset(seed=seed, **kwargs)
        self.tool_uses = self.tool_successes = self.tool_errors = 0
        self.tool_bonus = 0.0
        self.episode_over = False
        return f"{obs}\n\n{self.instructions()}", {**info, **self._counts(), "use_tool": False}

    def step(self, action: str) -> StepResult:
        if self.episode_over:
            raise EpisodeOverError()
        check_action(action)
        found = self._find_call(action)
        if found is None:
            obs, reward, terminated, truncated, info = self.env.step(action)
            info = {**info, **self._counts(), "use_tool": False}
            if terminated or truncated:
                self.episode_over = True
                paid = min(self.tool_bonus, self.max_tool_bonus) if _solved(reward, info) else 0.0
                reward, info["tool_bonus"] = reward + paid, paid
            return obs, reward, terminated, truncated, info
        tool, call = found
        try:
            with calling_for(id(self)):
                obs, ok = tool.execute(call)
        except Exception as exc:  # a tool must not raise; if one does, the agent still gets an answer
            obs, ok = f"Tool error ({tool.name}): {type(exc).__name__}: {exc}", False
        self.tool_uses += 1
        if ok:
            self.tool_successes += 1
        else:
            self.tool_errors += 1
        earned = self.tool_reward + (self.tool_success_reward if ok else -self.tool_error_penalty)
        self.tool_bonus += max(earned, 0.0)
        if self.max_tool_uses is not None and self.tool_uses >= self.max_tool_uses:
            obs = (
                f"{obs}\n\nYou have used all {self.max_tool_uses} tool calls. "
                "Do not call a tool again: give your final answer directly."
            )
        info = {**self._counts(), "use_tool": True, "tool": tool.name, "tool_ok": ok}
        return obs, float(min(earned, 0.0)), False, False, info

    def _find_call(self, action: str) -> tuple[Tool, Any] | None:
        if self.max_tool_uses is not None and self.tool_uses >= self.max_tool_uses:
            return None
        for tool in self.tools:
            call = tool.parse(action)
            if call is not None:
                return tool, call
        return None

    def _counts(self) -> dict[str, Any]:
        return {
            "tool_uses": self.tool_uses,
            "tool_successes": self.tool_successes,
            "tool_errors": self.tool_errors,
            "tool_bonus_pending": self.tool_bonus,
        }


def _solved(reward: float, info: dict[str, Any]) -> bool:
    """Whether an episode's last step solved its task: the env's ``success`` (``gem_core.core``), else
    a positive final reward."""
    return bool(info["success"]) if "success" in info else reward > 0

"""RollEnv: a gem_core env behind the reference GEM's ``gem.Env`` API, shaped the way ROLL reads it.

ROLL (alibaba/ROLL) builds every env with ``gem.make(env_id=env_type, **env_config)`` from the
``gem-llm`` package and reads, in ``roll/pipeline/agentic/env_manager/*_env_manager.py``:

* ``reset(seed=...) -> (observation, info)`` with ``info["env_instruction"]`` (``StepEnvManager``
  renders it into every prompt; ``TrajEnvManager`` puts it before the first observation);
* ``step(text) -> (observation, reward, terminated, truncated, info)`` where ``text`` is the response
  decoded with ``skip_special_tokens=False``, so it ends in the chat template's end-of-turn token;
  ``info`` is merged into ROLL's per-step record, and ``info["metrics"]`` (numbers, aggregated per
  episode by ``info["metrics_agg_mode"]``: sum, mean, min, max, first or last) becomes ``env/<tag>/*``
  logs; the previous step's ``metrics["action_is_valid"]`` is read when history is rendered;
* ``terminated`` alone ends an episode (``TrajEnvManager.run_rollout_loop``): an env that only
  truncates would be stepped past its end.

So ``RollEnv`` (a ``gem.Env`` subclass, for code that checks ``isinstance(env, gem.Env)``) forwards to a
gem_core env wrapped in ``StripSpecialTokens`` and

* returns ``info = {"env_instruction": ...}`` on reset and ``info = {"metrics", "metrics_agg_mode"}`` on
  step, with gem_core's own info dict under ``info["env_info"]`` (nested, so that no gem_core key can
  overwrite one of the keys ROLL keeps in the same record: ``reward``, ``observation``, ``messages``...);
* reports the end of an episode as ``terminated=True`` whether the env terminated or truncated, as the
  reference GEM's games do; ``truncated`` is passed through, so a cut episode reads ``(True, True)``
  (gem_core envs never set both, so ``terminated and not truncated`` is the env's own flag).

``env_instruction`` is empty by default: a gem_core env's first observation already states the task,
and ``TrajEnvManager`` would print it twice. ``instruction_from_observation=True`` repeats the first
observation there instead; use it with ``StepEnvManager``, whose prompts hold only the instruction and
a window of recent turns.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import gem

import gem_core
from gem_adapters.roll.special_tokens import DEFAULT_SPECIAL_TOKENS, StripSpecialTokens

METRICS_AGG_MODE = {
    "action_is_valid": "mean",
    "format_error": "mean",
    "invalid_move": "mean",
    "success": "last",
    "reward": "sum",
}


class RollEnv(gem.Env):
    """A ``gem.Env`` that forwards to ``env`` (a gem_core env), with ROLL's info conventions."""

    def __init__(
        self,
        env: gem_core.Env,
        *,
        special_tokens: Iterable[str] = DEFAULT_SPECIAL_TOKENS,
        instruction_from_observation: bool = False,
        seed: int | None = None,
    ):
        if not isinstance(env, gem_core.Env):
            raise TypeError(f"RollEnv wraps a gem_core.Env, got {type(env).__name__}")
        self.special_tokens = tuple(special_tokens)
        self.gem_core_env = StripSpecialTokens(env, self.special_tokens)
        self.instruction_from_observation = instruction_from_observation
        self.first_seed = seed  # used by the first reset() without a seed (gem.make_vec passes seed=)

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if seed is None and self.first_seed is not None:
            seed, self.first_seed = self.first_seed, None
        observation, env_info = self.gem_core_env.reset(seed=seed, **kwargs)
        instruction = observation if self.instruction_from_observation else ""
        return observation, {"env_instruction": instruction, "env_info": env_info}

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, env_info = self.gem_core_env.step(action)
        format_error = bool(env_info.get("format_error", False))
        invalid_move = bool(env_info.get("invalid_move", False))
        metrics = {
            "action_is_valid": not (format_error or invalid_move),
            "format_error": format_error,
            "invalid_move": invalid_move,
            "success": bool(env_info.get("success", False)),
            "reward": float(reward),
        }
        info = {"metrics": metrics, "metrics_agg_mode": dict(METRICS_AGG_MODE), "env_info": env_info}
        return observation, float(reward), bool(terminated or truncated), bool(truncated), info

    def sample_random_action(self) -> str:
        return self.gem_core_env.sample_random_action()

    def spawn(self, same_state: bool = False, **kwargs: Any) -> RollEnv:
        clone = RollEnv(
            self.gem_core_env.env.spawn(**kwargs),
            special_tokens=self.special_tokens,
            instruction_from_observation=self.instruction_from_observation,
        )
        if same_state:  # the wrapper's state too (whether its episode is running)
            clone.gem_core_env.set_state(self.gem_core_env.get_state())
        return clone

    def close(self) -> None:
        self.gem_core_env.close()

    def __str__(self) -> str:
        return f"<RollEnv{self.gem_core_env}>"


def make_roll_env(
    gem_core_id: str,
    *,
    special_tokens: Iterable[str] = DEFAULT_SPECIAL_TOKENS,
    instruction_from_observation: bool = False,
    seed: int | None = None,
    **env_kwargs: Any,
) -> RollEnv:
    """``RollEnv(gem_core.make(gem_core_id, **env_kwargs))``: the entry point ``register_gem_core_envs``
    puts in gem's registry, so ``gem.make(id, **kwargs)`` lands here with the env's own kwargs."""
    return RollEnv(
        gem_core.make(gem_core_id, **env_kwargs),
        special_tokens=special_tokens,
        instruction_from_observation=instruction_from_observation,
        seed=seed,
    )

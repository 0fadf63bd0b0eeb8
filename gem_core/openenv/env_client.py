"""GemEnv: OpenEnv's typed client for ``gem serve`` (an ``openenv.core.EnvClient``).

This is the client an OpenEnv user gets from ``AutoEnv.from_env("gem", base_url=URL)`` once the
``openenv-gem_env`` package (the repo's ``hub/`` folder) is installed, or builds directly::

    from gem_core.openenv import GemAction, GemEnv

    with GemEnv(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(seed=7)
        print(result.observation.text)
        result = env.step(GemAction(action="\\\\boxed{5}"))
        print(result.reward, result.done, result.observation.info)

Observations are ``GemObservation`` models (``text``, ``terminated``, ``truncated``, ``info``, ...);
``gem_core.openenv.codec.decode_observation(result.observation.model_dump())`` rebuilds the gem_core
observation. To use a server as a gem_core ``Env`` (``make_vec``, the trainers), use
``gem_core.make("openenv:URL")`` instead (``gem_core.openenv.client``).
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from gem_core.openenv.protocol import GemAction, GemObservation, GemState


class GemEnv(EnvClient[GemAction, GemObservation, GemState]):
    """A session on a ``gem serve`` server, with typed actions, observations and state."""

    def _step_payload(self, action: GemAction | str) -> dict[str, Any]:
        if isinstance(action, str):
            return {"action": action}
        return action.model_dump(exclude_defaults=True) | {"action": action.action}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[GemObservation]:
        observation = GemObservation.model_validate(
            {
                **(payload.get("observation") or {}),
                "reward": payload.get("reward"),
                "done": bool(payload.get("done", False)),
            }
        )
        return StepResult(
            observation=observation,
            reward=payload.get("reward"),
            done=bool(payload.get("done", False)),
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> GemState:
        return GemState.model_validate(payload)

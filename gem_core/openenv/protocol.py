"""The wire types of ``gem serve``: OpenEnv ``Action``/``Observation``/``State`` models for a gem_core env.

OpenEnv's step result carries ``reward`` and ``done`` in its own fields; everything else a gem_core
step returns travels in the observation model (``GemObservation``), which OpenEnv serialises as the
``observation`` object of each response::

    {"observation": {"text": "...", "kind": "text", "images_png_base64": [], "data": null,
                     "terminated": false, "truncated": false, "info": {...}, "seed": 7, "env_id": "..."},
     "reward": 0.0, "done": false}

``done`` is ``terminated or truncated``. ``kind`` says how to rebuild the gem_core observation:
``"text"`` (a ``str``: ``text``), ``"multimodal"`` (a ``MultimodalObservation``: ``text`` and the PNG
images in base64) or ``"json"`` (anything else JSON-safe, e.g. the chat messages of the
``ChatMessages`` wrapper: ``data``; ``text`` then holds its JSON for readers that only show text).
``info`` is made JSON-safe (``to_jsonable``): tuples become lists, numpy scalars numbers, bytes base64.
The encoding itself is in ``gem_core.openenv.codec`` (no openenv needed).
"""

from __future__ import annotations

from typing import Any, Literal

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from gem_core.openenv.codec import decode_observation, encode_observation, to_jsonable

__all__ = [
    "GemAction",
    "GemObservation",
    "GemState",
    "decode_observation",
    "encode_observation",
    "to_jsonable",
]


class GemAction(Action):
    """One action: the model's text, exactly as a gem_core ``Env.step`` takes it."""

    action: str = Field(description="The agent's action text (untrusted model output).")


class GemObservation(Observation):
    """A gem_core observation with the step's ``terminated``/``truncated``/``info`` (``reward`` and
    ``done`` are OpenEnv's own fields)."""

    text: str = Field(default="", description="The observation as text.")
    kind: Literal["text", "multimodal", "json"] = Field(
        default="text", description="How to rebuild the observation: text | multimodal | json."
    )
    images_png_base64: list[str] = Field(default_factory=list, description="PNG images (multimodal).")
    data: Any = Field(default=None, description="The observation itself when kind is json.")
    terminated: bool = Field(default=False, description="The episode reached a terminal state.")
    truncated: bool = Field(default=False, description="The episode was cut short (turn limit, error).")
    info: dict[str, Any] = Field(default_factory=dict, description="The step's info dict, JSON-safe.")
    seed: int | None = Field(default=None, description="The episode's seed (set on reset).")
    env_id: str | None = Field(default=None, description="The served gem_core env id.")


class GemState(State):
    """The session's state: OpenEnv's ``episode_id``/``step_count`` plus the env id, seed and done."""

    env_id: str | None = None
    seed: int | None = None
    done: bool = False

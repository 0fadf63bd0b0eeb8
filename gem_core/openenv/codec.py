"""Encoding gem_core observations and infos as JSON for the wire (standard library only, so a client
can be built without importing openenv)."""

from __future__ import annotations

import base64
import dataclasses
import json
import math
from typing import Any

from gem_core.observation import MultimodalObservation


def encode_observation(obs: Any) -> dict[str, Any]:
    """The ``text``/``kind``/``images_png_base64``/``data`` fields for a gem_core observation."""
    if isinstance(obs, str):
        return {"text": obs, "kind": "text"}
    if isinstance(obs, MultimodalObservation):
        payload = obs.to_json_dict()
        return {
            "text": payload["text"],
            "kind": "multimodal",
            "images_png_base64": payload["images_png_base64"],
        }
    data = to_jsonable(obs)
    return {"text": json.dumps(data, ensure_ascii=False), "kind": "json", "data": data}


def decode_observation(fields: dict[str, Any]) -> Any:
    """The gem_core observation back from a ``GemObservation``'s fields (inverse of ``encode_observation``)."""
    kind = fields.get("kind", "text")
    if kind == "multimodal":
        return MultimodalObservation.from_json_dict(
            {"text": fields.get("text", ""), "images_png_base64": fields.get("images_png_base64") or []}
        )
    if kind == "json":
        return fields.get("data")
    return fields.get("text", "")


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """``value`` as plain JSON data: dicts (string keys), lists, strings, finite numbers, bools, None.

    Tuples and sets become lists, numpy scalars and arrays numbers and lists, bytes base64 text,
    dataclasses dicts, a ``MultimodalObservation`` its ``to_json_dict()``; anything else its ``repr``.
    Non-finite floats become None (JSON has no NaN).
    """
    if _depth > 64:
        return repr(value)
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v, _depth + 1) for v in items]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, MultimodalObservation):
        return value.to_json_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value), _depth + 1)
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays, without importing numpy
    if callable(tolist) and type(value).__module__.startswith("numpy"):
        return to_jsonable(tolist(), _depth + 1)
    return repr(value)

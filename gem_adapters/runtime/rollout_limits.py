"""RolloutLimits: how long an episode may grow, for every rollout driver (``gem_adapters.runtime.rollout``).

  ``max_turns``            actions per episode; an episode stopped here has its last turn flagged
                           truncated and ``episode.info["stopped_by"] = "max_turns"``.
  ``max_new_tokens``       per turn (None: no cap of its own, only the two budgets below).
  ``max_context_tokens``   the whole sequence (``episode.to_sequence()``, end-of-turn ids included).
  ``max_response_tokens``  every id after the first prompt (env and template ids and the closing
                           end-of-turn ids included): the response budget of verl
                           (``rollout.response_length``) and OpenRLHF.

A turn generates at most what still fits every budget, keeping room for the end-of-turn ids that
close a cut-off action; when not one token fits, the episode ends with ``info["stopped_by"] =
"max_context_tokens"`` (for either budget). A backend that returns more ids than asked for is cut
to the budget (``finish_reason="length"``); one that returns no id at all ends the episode with
``info["stopped_by"] = "empty_generation"``.

The drivers take ``limits=RolloutLimits(...)``, or the four names as keywords (``rollout(...,
max_turns=8, max_new_tokens=64)``), from which they build the object.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any


@dataclasses.dataclass(frozen=True)
class RolloutLimits:
    """The limits of one rollout (see the module docstring); checked when built."""

    max_turns: int | None = None
    max_new_tokens: int | None = 256
    max_context_tokens: int | None = None
    max_response_tokens: int | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
                raise TypeError(f"{f.name} must be an int or None, got {value!r}")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        for name in ("max_context_tokens", "max_response_tokens"):
            if (getattr(self, name) or 0) < 0:
                raise ValueError(f"{name} must not be negative")
        if (
            self.max_new_tokens is None
            and self.max_context_tokens is None
            and self.max_response_tokens is None
        ):
            raise ValueError("without max_new_tokens, max_context_tokens or max_response_tokens must be set")

    @classmethod
    def of(cls, limits: RolloutLimits | None, keywords: dict[str, Any]) -> RolloutLimits:
        """A driver's limits: ``limits``, or the object built from the limit ``keywords`` it was
        called with (not both; any other keyword is a ``TypeError``)."""
        unknown = sorted(set(keywords) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
        if limits is None:
            return cls(**keywords)
        if keywords:
            raise TypeError(f"pass limits= or the limit keywords {sorted(keywords)}, not both")
        if not isinstance(limits, cls):
            raise TypeError(f"limits must be a RolloutLimits, got {type(limits).__name__}")
        return limits

    def turn_budget(self, context_len: int, prompt_len: int, closing: int) -> int:
        """How many ids the next action may generate from a context of ``context_len`` ids, whose
        first prompt had ``prompt_len``, keeping room for ``closing`` end-of-turn ids."""
        rooms = [] if self.max_new_tokens is None else [self.max_new_tokens]
        if self.max_context_tokens is not None:
            rooms.append(self.max_context_tokens - context_len - closing)
        if self.max_response_tokens is not None:
            rooms.append(self.max_response_tokens - (context_len - prompt_len) - closing)
        return min(rooms)

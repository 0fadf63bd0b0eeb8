"""The reference gem's ``gem.tools.base_tool``: ``BaseTool``, and the reference's tool methods for gem_core's
tools (``ReferenceToolAPI``).

A reference tool has ``tool_type``, ``instruction_string()`` and ``execute_action(action) -> (is_valid,
has_error, observation, parsed_action)``; a gem_core tool (``gem_core.tools.base.Tool``) has ``name``,
``instruction()``, ``parse(action)`` and ``execute(call) -> (observation, ok)``. Each side here speaks the
other's too, so a tool written for the reference runs in gem_core's ``ToolEnvWrapper`` and gem_core's
tools answer the reference's calls.
"""

from __future__ import annotations

from typing import Any

from gem_core.tools.base import Tool


class BaseTool(Tool):
    """Subclass it as in the reference: set ``tool_type``, implement ``instruction_string()`` and
    ``execute_action(action)``. gem_core's ``ToolEnvWrapper`` then calls ``parse``, which runs
    ``execute_action`` once (the reference parses and runs in one call) and keeps its result when the
    action held a valid call; ``execute`` returns that result."""

    tool_type = "base"

    def __init__(self, num_workers: int = 1):
        self.num_workers = num_workers

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.tool_type

    def instruction_string(self) -> str:
        raise NotImplementedError("Subclass must implement this method")

    def execute_action(self, action: str) -> tuple[bool, bool, str, str]:
        raise NotImplementedError("Subclass must implement this method")

    def instruction(self) -> str:
        return self.instruction_string()

    def parse(self, action: str) -> tuple[str, bool] | None:
        is_valid, has_error, observation, _ = self.execute_action(action)
        return (observation, not has_error) if is_valid else None

    def execute(self, call: tuple[str, bool]) -> tuple[str, bool]:
        return call


class ReferenceToolAPI:
    """The reference's methods on a gem_core tool (mixed in before it): ``execute_action`` parses and runs
    the action with the tool's own ``parse``/``execute``; ``parsed_action`` is the action up to the end
    of its last call (its closing tag, or closing code fence)."""

    tool_type = "base"
    name: str

    def instruction_string(self) -> str:
        return self.instruction()  # type: ignore[attr-defined]

    def parsed_action(self, action: str) -> str:
        for marker in (f"</{self.name}>", "```"):
            end = action.rfind(marker)
            if end != -1:
                return action[: end + len(marker)]
        return action

    def execute_action(self, action: str) -> tuple[bool, bool, str, str]:
        call: Any = self.parse(action)  # type: ignore[attr-defined]
        if call is None:
            return False, True, "", action
        observation, ok = self.execute(call)  # type: ignore[attr-defined]
        return True, not ok, observation, self.parsed_action(action)

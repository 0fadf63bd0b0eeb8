"""Tool: something an agent can call in the middle of an episode (run code, search, call an MCP server).

A tool is three functions over untrusted model text:

``instruction()``      how to call it, appended to the episode's first observation
``parse(action)``      the call found in the action, or None when the action holds no call for this tool
``execute(call)``      run it: ``(observation, ok)``; failures come back as an observation with
                       ``ok=False``, never as an exception

Tools are shared, static resources (a sandbox pool, a search index, a server connection): wrappers
and spawned envs hold references to the same tool, and ``close()`` releases what it holds.
"""

from __future__ import annotations

from typing import Any


class Tool:
    name: str = "tool"

    def instruction(self) -> str:
        """How the agent calls this tool (shown once, at reset)."""
        raise NotImplementedError

    def parse(self, action: str) -> Any | None:
        """The call held by ``action``, or None. Linear-time and never raises on any str."""
        raise NotImplementedError

    def execute(self, call: Any) -> tuple[str, bool]:
        """Run a parsed call: ``(observation, ok)``. Errors are observations, not exceptions."""
        raise NotImplementedError

    def close(self) -> None:
        """Release processes, connections or servers. Safe to call twice."""

    def __enter__(self) -> Tool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

"""Tool: something an agent can call in the middle of an episode (run code, search, call an MCP server).

A tool is three functions over untrusted model text:

``instruction()``      how to call it, appended to the episode's first observation
``parse(action)``      the call found in the action, or None when the action holds no call for this tool
``execute(call)``      run it: ``(observation, ok)``; failures come back as an observation with
                       ``ok=False``, never as an exception

Tools are shared, static resources (a sandbox pool, a search index, a server connection): wrappers
and spawned envs hold references to the same tool, and ``close()`` releases what it holds. A shared
resource serves its callers fairly (the sandbox pool does): ``calling_for(key)`` names whom the calls
made inside it are for (``ToolEnvWrapper`` names its env); by default each thread is its own caller.

What a program prints is untrusted text: ``fence(text)`` shows it so that it cannot pass for the
tool's own lines.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import threading
from collections.abc import Hashable, Iterator
from typing import Any

_CALLER: contextvars.ContextVar[Hashable | None] = contextvars.ContextVar("gem_tool_caller", default=None)


def current_caller() -> Hashable:
    """Whom the tool call being made is for: the key of the innermost ``calling_for``, else the
    calling thread."""
    caller = _CALLER.get()
    return ("thread", threading.get_ident()) if caller is None else caller


@contextlib.contextmanager
def calling_for(caller: Hashable) -> Iterator[None]:
    """Make the tool calls of this block on behalf of ``caller`` (e.g. an env, a session)."""
    token = _CALLER.set(caller)
    try:
        yield
    finally:
        _CALLER.reset(token)


# C0 and C1 control characters but newline and tab (ANSI escapes start with ESC or CSI), DEL, and the
# Unicode characters that reorder or hide text (bidi overrides and isolates, zero-width marks).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def escape_control(text: str) -> str:
    """``text`` with every control character but newline and tab shown as an escape (``\\x1b``,
    ``\\x00``, ``\\u202e``): no terminal colour, cursor movement, carriage-return overwrite or
    hidden text reaches whoever reads it."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text.replace("\r\n", "\n"))


def fence(text: str) -> str:
    """``text`` (control characters escaped) in a Markdown code fence of backticks longer than any run
    of backticks inside it, so nothing in it can close the fence: the lines after the fence are the
    tool's own, whatever the text holds."""
    text = escape_control(text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}\n{text.rstrip(chr(10))}\n{ticks}"


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

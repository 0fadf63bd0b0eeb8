"""MCPTool: the tools of MCP servers (Model Context Protocol), callable from an agent's action.

Built on the official ``mcp`` SDK (2.x). Servers come from a config in the common ``mcpServers``
format, as a dict or a JSON file::

    {"mcpServers": {
        "orders": {"command": "python", "args": ["-m", "gem_core.tools.mcp_demo_server", "--db", "o.sqlite"]},
        "remote": {"url": "http://127.0.0.1:8765/mcp"}}}

A ``command`` server is launched and spoken to over stdio, a ``url`` server over streamable HTTP.
Each connection stays open for the tool's lifetime on a private asyncio loop in a background
thread, so a call costs one round trip. The instructions list every tool with its JSON schema; the
agent calls them in its model family's own format (``call_format``: ``hermes``, the default,
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``; ``qwen3_xml``, ``llama3_json``,
``mistral``; or a tokenizer or chat template to read it from, ``gem_core.tools.call_formats``). An
action may hold several calls: they run in order and their results come back together. A call has a
timeout; a broken or timed-out connection is reopened and the call retried (``retries``); every
failure (a malformed call in any format, unknown tool, server error, time-out) comes back as an
observation.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import sys
import threading
import weakref
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from gem_core.extras import require
from gem_core.parsing import preview
from gem_core.tools.base import Tool
from gem_core.tools.call_formats import (
    CallFormat,
    ParsedCalls,
    ToolCall,
    call_format_for,
    coerce_arguments,
    get_format,
)


@dataclass
class MCPCall:
    """A parsed ``<tool_call>``; ``error`` says why it could not be parsed."""

    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass
class _Connection:
    session: Any
    tools: list[Any]
    stop: asyncio.Event
    task: asyncio.Task


def load_config(config: dict[str, Any] | str | Path) -> dict[str, dict[str, Any]]:
    """``{server name: spec}`` from an ``mcpServers`` config (a dict, or the path of a JSON file)."""
    if isinstance(config, (str, Path)):
        config = json.loads(Path(config).read_text())
    if not isinstance(config, dict):
        raise TypeError("an MCP config is a dict or the path of a JSON file")
    servers = config.get("mcpServers", config)
    if "command" in servers or "url" in servers:
        servers = {"server": servers}
    for name, spec in servers.items():
        if not isinstance(spec, dict) or ("command" in spec) == ("url" in spec):
            raise ValueError(f"MCP server {name!r} needs exactly one of 'command' (stdio) or 'url' (HTTP)")
    if not servers:
        raise ValueError("the MCP config names no server")
    return servers


def parse_tool_call(action: str) -> MCPCall | None:
    """The last ``<tool_call>{json}</tool_call>`` of ``action`` (the Hermes format); None if there is none."""
    if not isinstance(action, str):
        return None
    close = action.rfind("</tool_call>")
    at = action.rfind("<tool_call>", 0, max(close, 0))
    parsed = None if at == -1 else get_format("hermes").parse(action[at : close + len("</tool_call>")])
    if parsed is None:
        return None
    if parsed.error is not None:
        return MCPCall(error=parsed.error)
    (call,) = parsed.calls
    return MCPCall(name=call.name, arguments=call.arguments)


def format_result(result: Any, max_chars: int) -> str:
    """The text of a ``CallToolResult``: its text contents, else its structured content as JSON."""
    parts = []
    for item in result.content:
        text = getattr(item, "text", None)
        parts.append(text if text is not None else f"[{getattr(item, 'type', 'content')} content]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    text = "\n".join(parts) or "(no content)"
    return (
        text if len(text) <= max_chars else text[:max_chars] + f"\n[... truncated at {max_chars} characters]"
    )


class MCPTool(Tool):
    """Calls the tools of the MCP servers in ``config``.

    ``timeout`` bounds each call, ``connect_timeout`` each connection, ``retries`` how often a
    failed call is retried on a fresh connection. With several servers, tool names that clash are
    prefixed with the server name (``server.tool``). ``server_stderr`` receives the stdio servers'
    logs (default: this process's stderr). ``call_format``: how the agent writes calls, a format's
    name, a ``CallFormat``, or a tokenizer or chat template whose format is detected (module docstring).
    """

    name = "mcp"

    def __init__(
        self,
        config: dict[str, Any] | str | Path,
        timeout: float = 10.0,
        connect_timeout: float = 30.0,
        retries: int = 1,
        max_output: int = 8_000,
        server_stderr: TextIO | None = None,
        call_format: str | CallFormat | Any = "hermes",
    ):
        require("mcp", package="mcp", extra="tools", needed_by="the MCP tool")
        self.servers = load_config(config)
        self.call_format = call_format_for(call_format)
        self.timeout, self.connect_timeout, self.retries = timeout, connect_timeout, retries
        self.max_output = max_output
        self._options = {
            "timeout": timeout,
            "connect_timeout": connect_timeout,
            "retries": retries,
            "max_output": max_output,
            "call_format": self.call_format.name,
        }
        self._stderr = server_stderr or sys.stderr
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gem-mcp-client", daemon=True)
        self._thread.start()
        self._connections: dict[str, _Connection] = {}
        self._lock = threading.Lock()
        self._closed = False
        _LIVE_TOOLS.add(self)
        try:
            for server in self.servers:
                self._connect(server)
        except BaseException:
            self.close()
            raise
        self.tools = self._tool_table()

    def __getstate__(self) -> dict[str, Any]:
        """Pickling (e.g. to a vector-env worker process) keeps the config: the copy opens its own
        connections (and launches its own stdio servers) in the process it lands in."""
        return {"config": {"mcpServers": self.servers}, **self._options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)

    # ---- connections ----------------------------------------------------------------------------
    def _run(self, coro: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _connect(self, server: str) -> None:
        try:
            self._connections[server] = self._run(self._open(self.servers[server]), self.connect_timeout)
        except Exception as exc:
            raise ConnectionError(f"could not connect to MCP server {server!r}: {_describe(exc)}") from exc

    async def _open(self, spec: dict[str, Any]) -> _Connection:
        ready: asyncio.Future = self._loop.create_future()
        stop = asyncio.Event()
        task = asyncio.ensure_future(self._hold(spec, ready, stop))
        try:
            session, tools = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except BaseException:
            stop.set()
            task.cancel()
            raise
        return _Connection(session, tools, stop, task)

    async def _hold(self, spec: dict[str, Any], ready: asyncio.Future, stop: asyncio.Event) -> None:
        """Open the transport and session, publish them, and keep them open until ``stop``.

        The SDK's context managers must be entered and left in one task: this is that task.
        """
        from mcp import ClientSession, StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        try:
            async with AsyncExitStack() as stack:
                if "url" in spec:
                    transport = streamable_http_client(spec["url"])
                else:
                    params = StdioServerParameters(
                        command=spec["command"],
                        args=spec.get("args", []),
                        env=spec.get("env"),
                        cwd=spec.get("cwd"),
                    )
                    transport = stdio_client(params, errlog=self._stderr)
                read, write = await stack.enter_async_context(transport)
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                listing = await session.list_tools()
                ready.set_result((session, listing.tools))
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError(repr(exc)))
            if not isinstance(exc, Exception):
                raise

    def _disconnect(self, server: str) -> None:
        connection = self._connections.pop(server, None)
        if connection is None:
            return

        async def stop() -> None:
            connection.stop.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(connection.task, 10)

        with contextlib.suppress(Exception):
            self._run(stop(), 15)

    def _tool_table(self) -> dict[str, tuple[str, Any]]:
        names: dict[str, int] = {}
        for connection in self._connections.values():
            for tool in connection.tools:
                names[tool.name] = names.get(tool.name, 0) + 1
        table = {}
        for server, connection in self._connections.items():
            for tool in connection.tools:
                public = tool.name if names[tool.name] == 1 else f"{server}.{tool.name}"
                table[public] = (server, tool)
        return table

    # ---- the Tool API ---------------------------------------------------------------------------
    def instruction(self) -> str:
        example = self.call_format.render([ToolCall("TOOL_NAME", {"ARGUMENT": "VALUE"})])
        lines = [
            "You can call tools. To call one, write",
            example,
            "with the tool's name and its arguments, and its result comes back as the next message. "
            "Available tools:",
        ]
        for public, (_, tool) in self.tools.items():
            schema = json.dumps(tool.input_schema, separators=(",", ":"))
            lines.append(f"- {public}: {(tool.description or '').strip()} Arguments (JSON schema): {schema}")
        return "\n".join(lines)

    def parse(self, action: str) -> ParsedCalls | None:
        return self.call_format.parse(action)

    def execute(self, call: ParsedCalls | MCPCall) -> tuple[str, bool]:
        """Run every call of a parsed action in order; the results, one per call, come back together
        (``ok`` when all worked)."""
        if isinstance(call, MCPCall):
            call = (
                ParsedCalls(error=call.error)
                if call.error is not None
                else ParsedCalls((ToolCall(call.name, call.arguments),))
            )
        if call.error is not None:
            return f"Tool call error: {call.error}", False
        results = [self._execute_one(c) for c in call.calls]
        return "\n\n".join(text for text, _ in results), all(ok for _, ok in results)

    def _execute_one(self, call: ToolCall) -> tuple[str, bool]:
        if call.name not in self.tools:
            known = ", ".join(self.tools) or "(none)"
            return (
                f"Tool call error: unknown tool '{preview(call.name, 60)}'. Available tools: {known}",
                False,
            )
        server, tool = self.tools[call.name]
        arguments = coerce_arguments(call.arguments, tool.input_schema)
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        last_error = ""
        for attempt in range(self.retries + 1):
            with self._lock:
                if self._closed:
                    return "Tool call error: the MCP tool is closed", False
                if attempt > 0 or server not in self._connections:
                    self._disconnect(server)
                    try:
                        self._connect(server)
                    except ConnectionError as exc:
                        last_error = str(exc)
                        continue
                session = self._connections[server].session
            try:
                result = self._run(
                    asyncio.wait_for(session.call_tool(tool.name, arguments), self.timeout),
                    self.timeout + 5,
                )
            except MCPError as exc:
                if exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):  # an answer: retrying will not help
                    return f"Tool call error ({call.name}): {exc}", False
                last_error = f"the connection failed ({exc})"
                continue
            except Exception as exc:
                last_error = (
                    f"timed out after {self.timeout:g} s"
                    if isinstance(exc, (TimeoutError, asyncio.TimeoutError))
                    else _describe(exc)
                )
                continue
            text = format_result(result, self.max_output)
            if result.is_error:
                return f"Tool error ({call.name}): {text}", False
            return f"Tool result ({call.name}):\n{text}", True
        return f"Tool call error ({call.name}): {last_error} (after {self.retries + 1} attempts)", False

    def close(self) -> None:
        """Close every session (stdio servers are terminated) and stop the loop thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for server in list(self._connections):
                self._disconnect(server)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()
        _LIVE_TOOLS.discard(self)


def _describe(exc: BaseException) -> str:
    """One line for an exception, unwrapping the exception groups of the SDK's task groups."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:
        exc = exc.exceptions[0]  # an exception group
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


_LIVE_TOOLS: weakref.WeakSet[MCPTool] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for tool in list(_LIVE_TOOLS):
        tool.close()

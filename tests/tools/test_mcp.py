"""The MCP tool against real MCP servers: the shipped sqlite orders server over stdio and HTTP, and a
small server written here (slow and crashing tools) for time-outs and retries."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from gem_core.tools.mcp import MCPTool, load_config, parse_tool_call

pytestmark = pytest.mark.timeout(180)


def orders_server(db: Path) -> dict:
    return {"command": sys.executable, "args": ["-m", "gem_core.tools.mcp_demo_server", "--db", str(db)]}


def call(tool: MCPTool, name: str, **arguments) -> tuple[str, bool]:
    action = f"Let me check. <tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"
    return tool.execute(tool.parse(action))


def payload(observation: str):
    return json.loads(observation.split("\n", 1)[1])


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    return tmp_path_factory.mktemp("orders") / "orders.sqlite"


@pytest.fixture(scope="module")
def orders(db_path):
    with MCPTool({"mcpServers": {"orders": orders_server(db_path)}}, timeout=10) as tool:
        yield tool


def test_instructions_list_tools_with_their_schemas(orders):
    text = orders.instruction()
    assert "<tool_call>" in text
    for name in ("lookup_order", "list_orders", "update_order_status", "order_total"):
        assert f"- {name}: " in text
    lookup = next(line for line in text.splitlines() if line.startswith("- lookup_order"))
    schema = json.loads(lookup.split("Arguments (JSON schema): ", 1)[1])
    assert schema["properties"]["order_id"]["type"] == "integer" and schema["required"] == ["order_id"]


def test_lookup_reads_the_database(orders, db_path):
    observation, ok = call(orders, "lookup_order", order_id=1002)
    assert ok and observation.startswith("Tool result (lookup_order):")
    with sqlite3.connect(db_path) as db:
        row = db.execute("SELECT customer, item, total FROM orders WHERE id = 1002").fetchone()
    got = payload(observation)
    assert (got["customer"], got["item"], got["total"]) == row


def test_update_is_written_to_the_database(orders, db_path):
    observation, ok = call(orders, "update_order_status", order_id=1004, status="shipped")
    assert ok and payload(observation)["status"] == "shipped"
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT status FROM orders WHERE id = 1004").fetchone() == ("shipped",)
    observation, ok = call(orders, "order_total", customer="bob")
    assert ok and observation.endswith("\n59.7")  # bob's usb hub was cancelled


@pytest.mark.parametrize(
    "action, message",
    [
        ('<tool_call>{"name": "lookup_order", "arguments": {"order_id": 42}}</tool_call>', "no order with id 42"),
        ('<tool_call>{"name": "update_order_status", "arguments": {"order_id": 1001, "status": "lost"}}</tool_call>',
         "status must be one of"),
        ('<tool_call>{"name": "lookup_order", "arguments": {"order_id": "abc"}}</tool_call>', "valid integer"),
        ('<tool_call>{"name": "lookup_order", "arguments": {}}</tool_call>', "Field required"),
        ('<tool_call>{"name": "drop_tables", "arguments": {}}</tool_call>', "unknown tool 'drop_tables'"),
        ("<tool_call>{not json}</tool_call>", "not valid JSON"),
        ('<tool_call>["lookup_order"]</tool_call>', "is a JSON object"),
        ('<tool_call>{"name": "lookup_order", "arguments": [1]}</tool_call>', "must be a JSON object"),
    ],
)  # fmt: skip
def test_errors_come_back_as_observations(orders, action, message):
    observation, ok = orders.execute(orders.parse(action))
    assert not ok and message in observation


def test_actions_without_a_tool_call_are_not_calls(orders):
    for action in ("", "just an answer", "<tool_call>unclosed", "A" * 100_000, "\x00\xff" * 100):
        assert orders.parse(action) is None
    assert parse_tool_call("<tool_call>" + "x" * 200_000 + "</tool_call>").error is not None


FLAKY_SERVER = textwrap.dedent(
    """
    import os, sys, time
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("flaky", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        "Return the text."
        return text

    @server.tool()
    def sleep(seconds: float) -> str:
        "Sleep, then answer."
        time.sleep(seconds)
        return "woke up"

    @server.tool()
    def crash() -> str:
        "Kill the server process."
        os._exit(3)

    @server.tool()
    def pid() -> int:
        "The server's process id."
        return os.getpid()

    server.run("stdio")
    """
)


@pytest.fixture(scope="module")
def flaky(tmp_path_factory):
    script = tmp_path_factory.mktemp("flaky") / "flaky_server.py"
    script.write_text(FLAKY_SERVER)
    with MCPTool({"command": sys.executable, "args": [str(script)]}, timeout=0.5, retries=1) as tool:
        yield tool


def test_call_timeout_is_reported_and_the_tool_recovers(flaky):
    start = time.monotonic()
    observation, ok = call(flaky, "sleep", seconds=30)
    assert not ok and "timed out after 0.5 s (after 2 attempts)" in observation
    assert time.monotonic() - start < 30  # two 1 s attempts plus a reconnect, never the full sleep
    assert call(flaky, "echo", text="still here") == ("Tool result (echo):\nstill here", True)


def test_a_crashed_server_is_restarted(flaky):
    before, ok = call(flaky, "pid")
    assert ok
    observation, ok = call(flaky, "crash")
    assert not ok and "after 2 attempts" in observation
    after, ok = call(flaky, "pid")
    assert ok and after != before  # a fresh server process answers
    assert call(flaky, "echo", text="hi") == ("Tool result (echo):\nhi", True)


def test_config_file_with_two_servers_prefixes_clashing_names(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "shop": orders_server(tmp_path / "a.sqlite"),
                    "depot": orders_server(tmp_path / "b.sqlite"),
                }
            }
        )
    )
    assert set(load_config(config)) == {"shop", "depot"}
    with MCPTool(config) as tool:
        assert "shop.lookup_order" in tool.tools and "depot.lookup_order" in tool.tools
        assert call(tool, "shop.update_order_status", order_id=1001, status="cancelled")[1]
        assert payload(call(tool, "shop.lookup_order", order_id=1001)[0])["status"] == "cancelled"
        assert payload(call(tool, "depot.lookup_order", order_id=1001)[0])["status"] == "delivered"
        servers = _processes_running("gem_core.tools.mcp_demo_server", str(tmp_path))
        assert len(servers) == 2
    # Leaving the block closed the tool: both server processes are gone.
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in servers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in servers)
    tool.close()  # twice is fine
    assert call(tool, "shop.lookup_order", order_id=1001) == (
        "Tool call error: the MCP tool is closed",
        False,
    )


def test_bad_configs_fail_clearly(tmp_path):
    with pytest.raises(ValueError, match="exactly one of"):
        load_config({"mcpServers": {"x": {"command": "a", "url": "b"}}})
    with pytest.raises(ValueError, match="no server"):
        load_config({"mcpServers": {}})
    with pytest.raises(ConnectionError, match="could not connect to MCP server 'server'"):
        MCPTool({"command": str(tmp_path / "no-such-program")}, connect_timeout=10)


def test_streamable_http_server(tmp_path, free_port):
    port = free_port
    server = subprocess.Popen(
        [sys.executable, "-m", "gem_core.tools.mcp_demo_server", "--db", str(tmp_path / "h.sqlite"),
         "--transport", "streamable-http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        with MCPTool({"mcpServers": {"orders": {"url": f"http://127.0.0.1:{port}/mcp"}}}) as tool:
            observation, ok = call(tool, "list_orders", customer="alice")
            assert ok and "monitor" in observation and "keyboard" in observation
    finally:
        server.kill()
        server.wait(timeout=10)


def _processes_running(*needles: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if all(n in cmdline for n in needles):
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_pickled_tool_opens_its_own_connection(orders):
    import pickle

    copy = pickle.loads(pickle.dumps(orders))
    try:
        assert copy.tools.keys() == orders.tools.keys() and copy._connections is not orders._connections
        assert payload(call(copy, "lookup_order", order_id=1005)[0])["item"] == "usb hub"
    finally:
        copy.close()

"""The MCP tool reads calls in each model family's format (against the shipped orders server over
stdio): the arguments take the tool's schema types, malformed calls come back as observations, the
instructions show the family's format, and the format can come from a chat template."""

from __future__ import annotations

import json
import pickle
import sys

import pytest

pytest.importorskip("mcp")

from gem_core.tools.call_formats import FORMATS, ToolCall, get_format
from gem_core.tools.mcp import MCPTool

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def orders(tmp_path_factory):
    db = tmp_path_factory.mktemp("orders") / "orders.sqlite"
    server = {"command": sys.executable, "args": ["-m", "gem_core.tools.mcp_demo_server", "--db", str(db)]}
    with MCPTool({"mcpServers": {"orders": server}}, timeout=10) as tool:
        yield tool
        tool.call_format = get_format("hermes")


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_call_in_each_format_reaches_the_server(orders, name):
    orders.call_format = FORMATS[name]
    action = "Checking.\n" + FORMATS[name].render([ToolCall("lookup_order", {"order_id": 1002})])
    if name == "llama3_json":  # Llama's call is the whole reply
        action = FORMATS[name].render([ToolCall("lookup_order", {"order_id": 1002})])
    observation, ok = orders.execute(orders.parse(action))
    assert ok and observation.startswith("Tool result (lookup_order):")
    assert json.loads(observation.split("\n", 1)[1])["id"] == 1002
    assert FORMATS[name].render([ToolCall("TOOL_NAME", {"ARGUMENT": "VALUE"})]) in orders.instruction()


def test_xml_values_take_the_schemas_types(orders):
    orders.call_format = get_format("qwen3_xml")
    action = "<tool_call>\n<function=lookup_order>\n<parameter=order_id>\n1003\n</parameter>\n</function>\n</tool_call>"
    observation, ok = orders.execute(orders.parse(action))
    assert ok and json.loads(observation.split("\n", 1)[1])["id"] == 1003


def test_several_calls_run_in_order_and_answer_together(orders):
    orders.call_format = get_format("mistral")
    calls = [ToolCall("lookup_order", {"order_id": 1001}), ToolCall("lookup_order", {"order_id": 42})]
    observation, ok = orders.execute(orders.parse(FORMATS["mistral"].render(calls)))
    first, second = observation.split("\n\n")
    assert first.startswith("Tool result (lookup_order)") and "no order with id 42" in second and not ok


@pytest.mark.parametrize(
    "name, action, message",
    [
        ("hermes", '<tool_call>{"name": "lookup_order", "arguments": {"order_id": 1,}}</tool_call>', "not valid JSON"),
        ("qwen3_xml", "<tool_call><function=lookup_order><parameter=order_id>1</function></tool_call>", "not closed"),
        ("llama3_json", '{"name": "lookup_order", "parameters": "oops"}', "must be a JSON object"),
        ("mistral", "[TOOL_CALLS][{]", "not a valid JSON array"),
        ("mistral", '[TOOL_CALLS][{"name": "drop_tables", "arguments": {}}]', "unknown tool 'drop_tables'"),
    ],
)  # fmt: skip
def test_malformed_calls_in_any_format_are_observations(orders, name, action, message):
    orders.call_format = FORMATS[name]
    observation, ok = orders.execute(orders.parse(action))
    assert not ok and message in observation


def test_the_format_comes_from_a_chat_template_and_survives_pickling(tmp_path):
    class Tokenizer:  # what MCPTool reads of a tokenizer: its chat template
        chat_template = "{{- '[TOOL_CALLS] [' }}{{ message.content }}"

    server = {
        "command": sys.executable,
        "args": ["-m", "gem_core.tools.mcp_demo_server", "--db", str(tmp_path / "o.db")],
    }
    with MCPTool({"mcpServers": {"orders": server}}, call_format=Tokenizer()) as tool:
        assert tool.call_format.name == "mistral"
        assert tool.parse('<tool_call>{"name": "lookup_order", "arguments": {}}</tool_call>') is None
        copy = pickle.loads(pickle.dumps(tool))
        try:
            assert copy.call_format.name == "mistral"
        finally:
            copy.close()

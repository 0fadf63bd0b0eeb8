"""Tool-call formats of each model family: reading what each family writes, writing it back, malformed
calls as errors (never exceptions) on any text, linear-size work on hostile text, and picking the
format from a chat template."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_core.tools.call_formats import (
    FORMATS,
    MAX_CALL_CHARS,
    MAX_CALLS,
    ParsedCalls,
    ToolCall,
    call_format_for,
    coerce_arguments,
    detect_format,
    get_format,
)

CALLS = [ToolCall("get_weather", {"city": "Paris", "days": 3, "units": {"t": "C"}}), ToolCall("now", {})]

# What each family's models write, as their published formats show it.
WRITTEN = {
    "hermes": (
        'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, '
        '"units": {"t": "C"}}}\n</tool_call>\n<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>'
    ),
    "qwen3_xml": (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
        '</parameter>\n<parameter=units>\n{"t": "C"}\n</parameter>\n</function>\n</tool_call>\n'
        "<tool_call>\n<function=now>\n</function>\n</tool_call>"
    ),
    "llama3_json": (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "days": 3, "units": {"t": "C"}}}; '
        '{"name": "now", "parameters": {}}'
    ),
    "mistral": (
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "units": {"t": "C"}}}, '
        '{"name": "now", "arguments": {}}]'
    ),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_family_reads_what_its_models_write(name):
    assert FORMATS[name].parse(WRITTEN[name]) == ParsedCalls(tuple(CALLS))


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_rendered_calls_read_back(name):
    fmt = FORMATS[name]
    assert fmt.parse(fmt.render(CALLS)).calls == tuple(CALLS)
    assert fmt.parse(fmt.render(CALLS[:1])).calls == tuple(CALLS[:1])


def test_variants_each_family_accepts():
    # Mistral's v11+ tokenizers write one [TOOL_CALLS]NAME[ARGS]{...} per call, and ids with v3.
    v11 = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3, "units": {"t": "C"}}[TOOL_CALLS]now[ARGS]{}'
    assert FORMATS["mistral"].parse(v11).calls == tuple(CALLS)
    with_id = '[TOOL_CALLS][{"name": "now", "arguments": {}, "id": "a1b2c3d4e"}]'
    assert FORMATS["mistral"].parse(with_id).calls == (ToolCall("now", {}, "a1b2c3d4e"),)
    assert FORMATS["mistral"].render([ToolCall("now", {}, "a1b2c3d4e")]) == with_id
    # Llama without the python tag, with "arguments" (as vLLM's parser also takes), and a string of JSON.
    assert FORMATS["llama3_json"].parse('{"name": "now", "arguments": "{}"}').calls == (ToolCall("now", {}),)
    # Qwen3-Coder values: text stays text, JSON other than a string is read as JSON.
    xml = "<tool_call><function=f><parameter=q>\nhello world\n</parameter><parameter=n>7</parameter></function></tool_call>"
    assert FORMATS["qwen3_xml"].parse(xml).calls == (ToolCall("f", {"q": "hello world", "n": 7}),)
    # Reasoning before the call is not part of it.
    assert FORMATS["hermes"].parse("<think>which tool?</think>" + WRITTEN["hermes"]).calls == tuple(CALLS)
    preamble = "I will call it." + WRITTEN["llama3_json"]
    assert FORMATS["llama3_json"].parse(preamble).calls == tuple(CALLS)


@pytest.mark.parametrize(
    "name, text",
    [
        ("hermes", "The answer is \\boxed{4}."),
        ("hermes", "<tool_call>never closed"),
        ("qwen3_xml", "no call here </function>"),
        ("llama3_json", "\\boxed{4} {not first}"),
        ("llama3_json", ""),
        ("mistral", "[TOOL_RESULTS] is not a call"),
    ],
)
def test_text_without_a_call_is_not_a_call(name, text):
    assert FORMATS[name].parse(text) is None


@pytest.mark.parametrize(
    "name, text, reason",
    [
        ("hermes", '<tool_call>{"name": "f", "arguments": {"a": 1,}}</tool_call>', "not valid JSON"),
        ("hermes", '<tool_call>{"arguments": {}}</tool_call>', "is a JSON object"),
        ("hermes", '<tool_call>{"name": "f", "arguments": [1]}</tool_call>', "must be a JSON object"),
        ("hermes", "<tool_call>   </tool_call>", "not valid JSON"),
        ("qwen3_xml", "<tool_call><function=f><parameter=a>1</function></tool_call>", "not closed"),
        ("qwen3_xml", "<tool_call>{\"name\": \"f\"}</tool_call>", "<function=NAME>"),
        ("qwen3_xml", "<tool_call><function=f><parameter=a>1</parameter><parameter=a>2</parameter></function></tool_call>", "twice"),
        ("qwen3_xml", "<tool_call><function=>x</function></tool_call>", "<function=NAME>"),
        ("llama3_json", '{"name": "f", "parameters": {"a": 1}', "not valid JSON"),
        ("llama3_json", '{"name": "f", "parameters": 3}', "must be a JSON object"),
        ("llama3_json", '{"name": 5}', "is a JSON object"),
        ("mistral", '[TOOL_CALLS][{"name": "f", "arguments": {}', "not a valid JSON array"),
        ("mistral", '[TOOL_CALLS]{"name": "f"}', "[TOOL_CALLS]NAME[ARGS]"),
        ("mistral", "[TOOL_CALLS]f[ARGS]{oops}", "not valid JSON"),
        ("mistral", '[TOOL_CALLS]"f"', "[TOOL_CALLS]NAME[ARGS]"),
    ],
)  # fmt: skip
def test_malformed_calls_are_errors_with_a_reason(name, text, reason):
    parsed = FORMATS[name].parse(text)
    assert parsed is not None and not parsed.calls and reason in parsed.error


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_limits_on_size_and_count(name):
    fmt = FORMATS[name]
    huge = fmt.render([ToolCall("f", {"x": "y" * (MAX_CALL_CHARS + 10)})])
    assert "longer than" in fmt.parse(huge).error
    many = fmt.render([ToolCall("f", {})] * (MAX_CALLS + 1))
    assert f"more than {MAX_CALLS}" in fmt.parse(many).error
    assert len(fmt.parse(fmt.render([ToolCall("f", {})] * MAX_CALLS)).calls) == MAX_CALLS


HOSTILE = [
    "<tool_call>" * 200_000,
    "<tool_call>" + "[" * 200_000 + "</tool_call>",  # nesting past the JSON decoder's recursion limit
    "<tool_call><function=f>" + "<parameter=a>" * 100_000 + "</function></tool_call>",
    "<tool_call>" + "<function=f>" * 100_000,
    "{" * 300_000,
    '{"name": "f", "parameters": {}};' * 50_000,
    "[TOOL_CALLS]" * 100_000,
    "[TOOL_CALLS][" + "[" * 200_000,
    "[TOOL_CALLS]f[ARGS]" * 100_000,
    "\x00\udcff<tool_call>\u202e" * 10_000,
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_hostile_text_is_answered_not_raised(name):
    for text in HOSTILE:
        parsed = FORMATS[name].parse(text)
        assert parsed is None or isinstance(parsed, ParsedCalls)
        assert parsed is None or parsed.error is not None or len(parsed.calls) <= MAX_CALLS


PIECES = list('<>/{}[]",:;= \nabcf0123') + [
    "<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>",
    "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", '"name"', '"arguments"', '"parameters"',
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_any_text_parses_to_none_calls_or_an_error(text):
    for fmt in FORMATS.values():
        parsed = fmt.parse(text)
        if parsed is not None:
            assert (parsed.error is None) == bool(parsed.calls)
            assert all(
                isinstance(c.name, str) and c.name and isinstance(c.arguments, dict) for c in parsed.calls
            )


def test_non_strings_are_not_calls():
    for fmt in FORMATS.values():
        assert fmt.parse(None) is None and fmt.parse(b"<tool_call>") is None  # type: ignore[arg-type]


def test_the_format_is_read_from_a_chat_template():
    assert detect_format("{{ '<tool_call>\\n' }}{{ tool | tojson }}").name == "hermes"
    coder = "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"
    assert detect_format(coder).name == "qwen3_xml"  # both Qwen forms show <tool_call>: XML first
    assert detect_format("{{- '[TOOL_CALLS] [' }}").name == "mistral"
    assert (
        detect_format('<|start_header_id|>ipython<|end_header_id|> {"name": f, "parameters": d}').name
        == "llama3_json"
    )
    assert detect_format("<|python_tag|>").name == "llama3_json"
    assert detect_format("{{ message.content }}") is None and detect_format(None) is None

    class Tokenizer:
        chat_template = {"default": "plain", "tool_use": "{{ '[TOOL_CALLS]' }}"}

    assert call_format_for(Tokenizer()).name == "mistral"
    assert call_format_for(None).name == call_format_for("{{ plain }}").name == "hermes"
    assert call_format_for("qwen3_xml") is get_format("qwen3_xml")
    assert call_format_for(FORMATS["mistral"]) is FORMATS["mistral"]
    with pytest.raises(KeyError, match="known"):
        get_format("json5")


def test_arguments_take_the_types_of_the_tools_schema():
    schema = {
        "properties": {
            "id": {"type": "integer"},
            "price": {"type": "number"},
            "ok": {"type": "boolean"},
            "tags": {"type": "array"},
            "code": {"type": "string"},
            "note": {"type": "string"},
        }
    }
    raw = {"id": "42", "price": "2.5", "ok": "true", "tags": '["a"]', "code": 7, "note": "x", "extra": "1"}
    assert coerce_arguments(raw, schema) == {
        "id": 42, "price": 2.5, "ok": True, "tags": ["a"], "code": "7", "note": "x", "extra": "1"
    }  # fmt: skip
    # What does not read as the declared type is left for the tool to refuse.
    assert coerce_arguments({"id": "4.5", "ok": "1"}, schema) == {"id": "4.5", "ok": "1"}
    assert coerce_arguments({"a": 1}, None) == {"a": 1}

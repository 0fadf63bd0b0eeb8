"""Tool calls in each model family's own format: parse them from an action, write them, and pick the
format from a chat template.

Every family writes its calls its own way, as its chat template and its published tool-use format
say; the one reading the action must use the model's own:

==============  ===========================================================================  =========================
name            a call as the model writes it                                                families
==============  ===========================================================================  =========================
``hermes``      ``<tool_call>\\n{"name": "f", "arguments": {"x": 1}}\\n</tool_call>``, one       Hermes 2 Pro / 3,
                block per call                                                               Qwen2.5, Qwen3
``qwen3_xml``   ``<tool_call>\\n<function=f>\\n<parameter=x>\\n1\\n</parameter>\\n</function>\\n``   Qwen3-Coder, Qwen3.5
                ``</tool_call>``, one block per call; values are text (see below)
``llama3_json`` ``{"name": "f", "parameters": {"x": 1}}`` as the whole reply, optionally after   Llama 3.1 / 3.2 / 3.3
                ``<|python_tag|>``; several calls separated by ``;``
``mistral``     ``[TOOL_CALLS][{"name": "f", "arguments": {"x": 1}}, ...]`` (v3 tokenizers), or  Mistral 7B v0.3, Nemo,
                ``[TOOL_CALLS]f[ARGS]{"x": 1}`` per call (v11+ tokenizers)                       Small, Large
==============  ===========================================================================  =========================

``parse(text)`` returns None when the text holds no call (an answer for the env), else a
``ParsedCalls``: the calls in order, or the reason they could not be read (``error``). A malformed
call is therefore never an exception: the caller turns the error into an observation, with the
penalty the env decides. Parsers run in time linear in the text (``str.find`` scans and one JSON
decode per call); a call longer than ``MAX_CALL_CHARS`` and more than ``MAX_CALLS`` calls in one
action are errors.

``qwen3_xml`` values are text: a value that is valid JSON other than a string (``3``, ``true``,
``{"a": 1}``) is read as that JSON, anything else as the string. ``coerce_arguments`` applies a tool's
JSON schema afterwards, so a parameter declared ``"type": "string"`` gets its text back.

Choosing the format: ``call_format_for(source)`` takes a format or its name, or a chat template (a
string) or an object with a ``chat_template`` attribute (a tokenizer or a processor), and reads the
template's own markers (``detect_format``); no torch or transformers is imported here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_CALL_CHARS = 100_000
MAX_CALLS = 16

_DECODER = json.JSONDecoder()
# A JSON error, or nesting deep enough to exhaust the decoder's recursion: both are malformed calls.
_JSON_ERRORS = (ValueError, RecursionError)


@dataclass(frozen=True)
class ToolCall:
    """One call: the tool's name, its arguments and, where the family has them, the call's id."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class ParsedCalls:
    """What an action that tries to call tools holds: the calls in order, or why they could not be read."""

    calls: tuple[ToolCall, ...] = ()
    error: str | None = None


class CallFormat:
    """One family's format. ``parse`` reads an action, ``render`` writes calls as the family does,
    ``markers`` are the chat-template texts that identify it (``detect_format``)."""

    name: str = ""
    markers: tuple[str, ...] = ()
    description: str = ""

    def parse(self, text: str) -> ParsedCalls | None:
        raise NotImplementedError

    def render(self, calls: Sequence[ToolCall]) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<CallFormat {self.name}>"


# ---- shared readers -----------------------------------------------------------------------------
def _blocks(text: str, open_tag: str, close_tag: str) -> list[str]:
    """The bodies of the complete ``open_tag ... close_tag`` blocks of ``text``, in order (linear)."""
    bodies, position = [], 0
    while (start := text.find(open_tag, position)) != -1:
        end = text.find(close_tag, start + len(open_tag))
        if end == -1:
            break
        bodies.append(text[start + len(open_tag) : end])
        position = end + len(close_tag)
    return bodies


def _call_from_json(data: Any, arguments_keys: tuple[str, ...]) -> ToolCall | str:
    """A call from a decoded JSON object, or why it is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return 'a tool call is a JSON object {"name": "...", "' + arguments_keys[0] + '": {...}}'
    key = next((k for k in arguments_keys if k in data), None)
    arguments = {} if key is None else data[key]
    if isinstance(arguments, str):  # some families' servers send the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except _JSON_ERRORS:
            return f"'{key}' must be a JSON object"
    if not isinstance(arguments, dict):
        return f"'{key}' must be a JSON object"
    call_id = data.get("id")
    return ToolCall(data["name"], arguments, call_id if isinstance(call_id, str) else None)


def _finish(calls: list[ToolCall | str], sizes: Sequence[int]) -> ParsedCalls:
    """The calls read, or the first reason one could not be read."""
    if any(size > MAX_CALL_CHARS for size in sizes):
        return ParsedCalls(error=f"the tool call is longer than {MAX_CALL_CHARS} characters")
    if len(calls) > MAX_CALLS:
        return ParsedCalls(error=f"more than {MAX_CALLS} tool calls in one reply")
    for call in calls:
        if isinstance(call, str):
            return ParsedCalls(error=call)
    if not calls:
        return ParsedCalls(error="the tool call holds no call")
    return ParsedCalls(tuple(calls))  # type: ignore[arg-type]


def _reason(exc: BaseException) -> str:
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# ---- the formats --------------------------------------------------------------------------------
class _ToolCallBlocks(CallFormat):
    """A format whose calls are ``<tool_call>...</tool_call>`` blocks, one per call; ``_call`` reads one."""

    def parse(self, text: str) -> ParsedCalls | None:
        if not isinstance(text, str):
            return None
        bodies = _blocks(text, "<tool_call>", "</tool_call>")
        if not bodies:
            return None
        kept = bodies[: MAX_CALLS + 1]
        calls = [self._call(body) for body in kept if len(body) <= MAX_CALL_CHARS]
        return _finish(calls, [len(body) for body in kept])

    def _call(self, body: str) -> ToolCall | str:
        raise NotImplementedError


class HermesFormat(_ToolCallBlocks):
    name = "hermes"
    markers = ("<tool_call>",)
    description = "Hermes 2 Pro / 3, Qwen2.5, Qwen3: <tool_call> blocks holding JSON"

    def _call(self, body: str) -> ToolCall | str:
        try:
            return _call_from_json(json.loads(body), ("arguments", "parameters"))
        except _JSON_ERRORS as exc:
            return f"the tool call is not valid JSON ({_reason(exc)})"

    def render(self, calls: Sequence[ToolCall]) -> str:
        return "\n".join(
            f"<tool_call>\n{_json_text({'name': c.name, 'arguments': c.arguments})}\n</tool_call>"
            for c in calls
        )


class Qwen3XMLFormat(_ToolCallBlocks):
    name = "qwen3_xml"
    markers = ("<function=", "<parameter=")
    description = "Qwen3-Coder, Qwen3.5: <tool_call><function=NAME><parameter=P>value</parameter>..."

    def _call(self, body: str) -> ToolCall | str:
        usage = "a tool call is <function=NAME> with <parameter=NAME>value</parameter> inside, closed by </function>"
        start = body.find("<function=")
        if start == -1 or body[:start].strip():
            return usage
        name_end = body.find(">", start)
        close = body.rfind("</function>")
        if name_end == -1 or close == -1 or close < name_end or body[close + len("</function>") :].strip():
            return usage
        name = body[start + len("<function=") : name_end].strip()
        if not name or "<" in name:
            return usage
        arguments: dict[str, Any] = {}
        inner, position = body[name_end + 1 : close], 0
        while (open_at := inner.find("<parameter=", position)) != -1:
            if inner[position:open_at].strip():
                return usage
            key_end = inner.find(">", open_at)
            value_end = inner.find("</parameter>", key_end + 1) if key_end != -1 else -1
            if value_end == -1:
                return "a <parameter=...> is not closed by </parameter>"
            key = inner[open_at + len("<parameter=") : key_end].strip()
            if not key or "<" in key:
                return usage
            if key in arguments:
                return f"parameter '{key[:40]}' is given twice"
            arguments[key] = _xml_value(inner[key_end + 1 : value_end])
            position = value_end + len("</parameter>")
        if inner[position:].strip():
            return usage
        return ToolCall(name, arguments)

    def render(self, calls: Sequence[ToolCall]) -> str:
        out = []
        for call in calls:
            parameters = "".join(
                f"<parameter={key}>\n{value if isinstance(value, str) else _json_text(value)}\n</parameter>\n"
                for key, value in call.arguments.items()
            )
            out.append(f"<tool_call>\n<function={call.name}>\n{parameters}</function>\n</tool_call>")
        return "\n".join(out)


def _xml_value(raw: str) -> Any:
    """A parameter's text, one newline trimmed at each end (the format puts the value on its own
    lines); JSON other than a string is read as JSON."""
    value = raw[1:] if raw.startswith("\n") else raw
    value = value[:-1] if value.endswith("\n") else value
    try:
        decoded = json.loads(value)
    except _JSON_ERRORS:
        return value
    return value if isinstance(decoded, str) else decoded


class Llama3JSONFormat(CallFormat):
    name = "llama3_json"
    markers = ("<|python_tag|>", '"parameters"', "ipython")
    description = 'Llama 3.1 / 3.2 / 3.3: {"name": ..., "parameters": {...}} as the reply'
    _TAG = "<|python_tag|>"

    def parse(self, text: str) -> ParsedCalls | None:
        if not isinstance(text, str):
            return None
        body = text.strip()
        if body.startswith(self._TAG):
            body = body[len(self._TAG) :].lstrip()
        elif self._TAG in body:  # a reasoning preamble, then the tag and the call
            body = body[body.find(self._TAG) + len(self._TAG) :].lstrip()
        if not body.startswith("{"):
            return None
        if len(body) > MAX_CALL_CHARS * MAX_CALLS:
            return ParsedCalls(error=f"the tool call is longer than {MAX_CALL_CHARS} characters")
        calls: list[ToolCall | str] = []
        sizes, position = [], 0
        while position < len(body) and len(calls) <= MAX_CALLS:
            try:
                data, end = _DECODER.raw_decode(body, position)
            except _JSON_ERRORS as exc:
                calls.append(f"the tool call is not valid JSON ({_reason(exc)})")
                break
            sizes.append(end - position)
            calls.append(_call_from_json(data, ("parameters", "arguments")))
            position = _skip(body, end, ";")
        return _finish(calls, sizes)

    def render(self, calls: Sequence[ToolCall]) -> str:
        return "; ".join(_json_text({"name": c.name, "parameters": c.arguments}) for c in calls)


def _skip(text: str, position: int, separator: str) -> int:
    """The position after blanks, at most one ``separator``, and blanks again."""
    while position < len(text) and text[position].isspace():
        position += 1
    if position < len(text) and text[position] == separator:
        position += 1
    while position < len(text) and text[position].isspace():
        position += 1
    return position


class MistralFormat(CallFormat):
    name = "mistral"
    markers = ("[TOOL_CALLS]",)
    description = "Mistral: [TOOL_CALLS][{...}, ...] (v3) or [TOOL_CALLS]NAME[ARGS]{...} (v11+)"
    _TAG, _ARGS = "[TOOL_CALLS]", "[ARGS]"

    def parse(self, text: str) -> ParsedCalls | None:
        if not isinstance(text, str):
            return None
        first = text.find(self._TAG)
        if first == -1:
            return None
        rest = text[first + len(self._TAG) :].lstrip()
        if len(rest) > MAX_CALL_CHARS * MAX_CALLS:
            return ParsedCalls(error=f"the tool call is longer than {MAX_CALL_CHARS} characters")
        if rest.startswith("["):  # v3: one JSON array of calls
            try:
                data, _ = _DECODER.raw_decode(rest)
            except _JSON_ERRORS as exc:
                return ParsedCalls(error=f"the tool calls are not a valid JSON array ({_reason(exc)})")
            if not isinstance(data, list):
                return ParsedCalls(error="[TOOL_CALLS] is followed by a JSON array of calls")
            kept = data[: MAX_CALLS + 1]
            calls = [_call_from_json(item, ("arguments", "parameters")) for item in kept]
            return _finish(calls, [len(_json_text(item)) for item in kept])
        calls, sizes = [], []
        for segment in rest.split(self._TAG)[: MAX_CALLS + 1]:  # v11: NAME[ARGS]{json} per call
            at = segment.find(self._ARGS)
            name = segment[:at].strip() if at != -1 else ""
            if not name or not re.fullmatch(r"[A-Za-z0-9_.\-]{1,128}", name):
                calls.append("a Mistral tool call is [TOOL_CALLS][{...}] or [TOOL_CALLS]NAME[ARGS]{...}")
                continue
            body = segment[at + len(self._ARGS) :].strip()
            sizes.append(len(body))
            try:
                arguments = json.loads(body)
            except _JSON_ERRORS as exc:
                calls.append(f"the arguments of '{name}' are not valid JSON ({_reason(exc)})")
                continue
            calls.append(_call_from_json({"name": name, "arguments": arguments}, ("arguments",)))
        return _finish(calls, sizes)

    def render(self, calls: Sequence[ToolCall]) -> str:
        items = []
        for call in calls:
            item: dict[str, Any] = {"name": call.name, "arguments": call.arguments}
            if call.id is not None:
                item["id"] = call.id
            items.append(item)
        return self._TAG + _json_text(items)


FORMATS: dict[str, CallFormat] = {
    f.name: f for f in (HermesFormat(), Qwen3XMLFormat(), Llama3JSONFormat(), MistralFormat())
}
DEFAULT_FORMAT = "hermes"


def get_format(name: str | CallFormat) -> CallFormat:
    if isinstance(name, CallFormat):
        return name
    try:
        return FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown tool-call format {name!r}; known: {sorted(FORMATS)}") from None


def detect_format(chat_template: str | None) -> CallFormat | None:
    """The format a chat template writes tool calls in (its own markers), or None when it shows none.
    Qwen3-Coder's XML markers are looked for before ``<tool_call>``, which both Qwen forms use."""
    if not isinstance(chat_template, str):
        return None
    for name in ("qwen3_xml", "mistral", "hermes"):
        if all(marker in chat_template for marker in FORMATS[name].markers):
            return FORMATS[name]
    if "<|python_tag|>" in chat_template or ('"parameters"' in chat_template and "ipython" in chat_template):
        return FORMATS["llama3_json"]
    return None


def call_format_for(source: Any = None, default: str = DEFAULT_FORMAT) -> CallFormat:
    """The format for ``source``: a ``CallFormat`` or its name; a chat template; or an object with a
    ``chat_template`` (a tokenizer or processor), read by ``detect_format``. ``default`` (``hermes``)
    when ``source`` is None or its template shows no format."""
    if source is None:
        return get_format(default)
    if isinstance(source, CallFormat) or (isinstance(source, str) and source in FORMATS):
        return get_format(source)
    template = source if isinstance(source, str) else getattr(source, "chat_template", None)
    if isinstance(template, dict):  # a tokenizer with several named templates
        template = template.get("tool_use") or template.get("default")
    return detect_format(template) or get_format(default)


def coerce_arguments(arguments: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    """``arguments`` with each value turned into the type its JSON schema property names, where the
    value reads as that type: text that holds a number for ``integer``/``number``, ``true``/``false``
    for ``boolean``, JSON for ``object``/``array``; a non-string value for a ``string`` property
    becomes its JSON text. Anything else is left for the tool to refuse."""
    properties = (schema or {}).get("properties") or {}
    out = dict(arguments)
    for key, value in arguments.items():
        kind = (properties.get(key) or {}).get("type")
        if kind == "string" and not isinstance(value, str):
            out[key] = _json_text(value)
        elif isinstance(value, str) and kind in ("integer", "number", "boolean", "object", "array"):
            try:
                decoded = json.loads(value)
            except _JSON_ERRORS:
                continue
            wanted = {"integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list}[
                kind
            ]
            if isinstance(decoded, wanted) and not (
                kind in ("integer", "number") and isinstance(decoded, bool)
            ):
                out[key] = decoded
    return out

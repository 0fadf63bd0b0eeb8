"""What ``gem serve`` answers to bad input: one documented error per kind, the session kept wherever the
protocol allows, and every refusal saying why.

``ProtocolGuard`` is ASGI middleware in front of openenv's routes. Over a ``/ws`` session it checks each
frame before openenv's handler sees it and answers a bad one itself, in OpenEnv's error form
(``{"type": "error", "data": {"code": ..., "message": ...}}``), then waits for the next frame:

===================  =================================================================  ==============
code                 the frame                                                          the session
===================  =================================================================  ==============
PAYLOAD_TOO_LARGE    text or binary over ``max_payload_bytes``                          kept
INVALID_JSON         text that is not JSON, or a binary frame (messages are JSON text)  kept
VALIDATION_ERROR     JSON that is not a message object, or a message whose fields are   kept
                     wrong; the text names each missing, unexpected or mistyped field
                     (a step's action travels as ``{"action": "<text>"}``)
UNKNOWN_TYPE         ``type`` missing or not one of reset, step, state, close, mcp      kept
EXECUTION_ERROR      a valid request the session cannot serve now: a step before the    kept
                     first reset or after the episode ended, an env that raised or
                     exceeded the step deadline, a session that expired
CAPACITY_REACHED     a connection past ``--max-sessions``                               none: closed
                                                                                        (1013)
===================  =================================================================  ==============

A server at capacity has no session to give: openenv sends ``CAPACITY_REACHED`` as the connection
opens; the guard then answers the client's first frame with the same error (a client that sends before
it reads still gets it) and closes with code 1013 (Try Again Later), the reason saying the same.
A frame over ``HARD_LIMIT_FACTOR`` times the limit is refused unread by the WebSocket layer itself:
close code 1009 (Message Too Big), its reason naming the limit.

Over HTTP, a body over the limit gets ``413`` with ``{"detail": ..., "code": "PAYLOAD_TOO_LARGE"}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

HARD_LIMIT_FACTOR = 16
CAPACITY_GRACE_S = 10.0
CAPACITY_CLOSE_CODE = 1013  # RFC 6455 "Try Again Later"
MESSAGE_TYPES = ("reset", "step", "state", "close", "mcp")
STEP_EXAMPLE = '{"type": "step", "data": {"action": "<your text>"}}'


class FrameError(Exception):
    """A frame the guard answers itself: ``code`` and a message that says why."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def error_frame(code: str, message: str, **extra: Any) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code, **extra}})


def describe_validation_error(exc: ValidationError, where: str) -> str:
    """``"step data: missing field 'action'; unexpected field 'message'"`` from pydantic's errors."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "(the object)"
        if error["type"] == "missing":
            parts.append(f"missing field {field!r}")
        elif error["type"] == "extra_forbidden":
            parts.append(f"unexpected field {field!r}")
        else:
            parts.append(f"field {field!r}: {error['msg']}")
    return f"{where}: " + "; ".join(parts)


def _json_kind(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


class MessageCheck:
    """Checks one parsed WebSocket message against OpenEnv's message models and the served action model."""

    def __init__(self, action_cls: type[BaseModel]):
        from openenv.core.env_server.mcp_types import WSMCPMessage
        from openenv.core.env_server.types import (
            WSCloseMessage,
            WSResetMessage,
            WSStateMessage,
            WSStepMessage,
        )

        self.action_cls = action_cls
        self.models: dict[str, type[BaseModel]] = {
            "reset": WSResetMessage,
            "step": WSStepMessage,
            "state": WSStateMessage,
            "close": WSCloseMessage,
            "mcp": WSMCPMessage,
        }
        fields = [name for name in action_cls.model_fields if name != "metadata"]
        self.action_hint = (
            f"the action field is 'action': send {STEP_EXAMPLE}"
            if fields == ["action"]
            else f"the action fields are {', '.join(map(repr, fields))}"
        )

    def __call__(self, message: Any) -> None:
        """Raise ``FrameError`` when ``message`` is not a valid request."""
        if not isinstance(message, dict):
            raise FrameError(
                "VALIDATION_ERROR",
                f"a message is a JSON object such as {STEP_EXAMPLE}; got {_json_kind(message)}",
            )
        kind = message.get("type")
        if kind not in self.models:
            shown = "no 'type' field" if "type" not in message else f"type {kind!r}"
            raise FrameError(
                "UNKNOWN_TYPE", f"unknown message ({shown}): the types are {', '.join(MESSAGE_TYPES)}"
            )
        try:
            self.models[kind].model_validate(message)
        except ValidationError as exc:
            hint = f" ({self.action_hint})" if kind == "step" else ""
            raise FrameError(
                "VALIDATION_ERROR", describe_validation_error(exc, f"{kind} message") + hint
            ) from None
        data = message.get("data") or {}
        if kind == "step":
            try:
                self.action_cls.model_validate(data)
            except ValidationError as exc:
                raise FrameError(
                    "VALIDATION_ERROR",
                    describe_validation_error(exc, "step data") + f" ({self.action_hint})",
                ) from None
        elif kind == "reset":
            seed = data.get("seed")
            if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
                raise FrameError(
                    "VALIDATION_ERROR", f"reset data: seed must be an integer or null, got {seed!r}"
                )


class ProtocolGuard:
    """ASGI middleware: the payload limit for HTTP and WebSocket, and the frame checks above."""

    def __init__(
        self,
        app: Any,
        max_bytes: int,
        action_cls: type[BaseModel],
        capacity_grace_s: float = CAPACITY_GRACE_S,
    ):
        self.app = app
        self.max_bytes = max_bytes
        self.check = MessageCheck(action_cls)
        self.capacity_grace_s = capacity_grace_s

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            from starlette.websockets import WebSocketDisconnect

            # openenv's handler closing a socket the client already dropped raises: nothing to do.
            with contextlib.suppress(WebSocketDisconnect):
                await self.app(
                    scope, self._checked_receive(receive, send), self._capacity_send(receive, send)
                )
        else:
            await self.app(scope, receive, send)

    def _too_large(self, size: int | str) -> str:
        return f"payload of {size} bytes exceeds the {self.max_bytes}-byte limit"

    # ---- WebSocket --------------------------------------------------------------------------------
    def frame_error(self, message: dict) -> FrameError | None:
        """Why a received frame is refused, or None for one to pass on."""
        if message.get("bytes") is not None:
            if len(message["bytes"]) > self.max_bytes:
                return FrameError("PAYLOAD_TOO_LARGE", self._too_large(len(message["bytes"])))
            return FrameError(
                "INVALID_JSON", "binary frames are not part of the protocol: send each message as JSON text"
            )
        text = message.get("text") or ""
        if len(text) > self.max_bytes // 4 and len(text.encode()) > self.max_bytes:
            return FrameError("PAYLOAD_TOO_LARGE", self._too_large(len(text.encode())))
        try:
            parsed = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            return FrameError("INVALID_JSON", f"the frame is not JSON: {exc}")
        try:
            self.check(parsed)
        except FrameError as exc:
            return exc
        return None

    def _checked_receive(self, receive: Callable, send: Callable) -> Callable:
        async def checked() -> dict:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive":
                    return message
                refusal = self.frame_error(message)
                if refusal is None:
                    return message
                # Answered here in the protocol's error form; the session waits for the next frame.
                await send({"type": "websocket.send", "text": error_frame(refusal.code, str(refusal))})

        return checked

    def _capacity_send(self, receive: Callable, send: Callable) -> Callable:
        """openenv refuses a connection past capacity with its first frame, a CAPACITY_REACHED error,
        then closes: that close becomes ``_refuse_capacity``. Only the first frame is looked at."""
        state: dict[str, Any] = {"first": True, "refused": None}

        async def capacity_send(message: dict) -> None:
            if message["type"] == "websocket.send" and state["first"]:
                state["first"] = False
                text = message.get("text") or ""
                if text.startswith('{"type":"error"'):
                    with contextlib.suppress(ValueError, TypeError, KeyError):
                        data = json.loads(text)["data"]
                        if data.get("code") == "CAPACITY_REACHED":
                            state["refused"] = data
            if message["type"] == "websocket.close" and state["refused"]:
                await self._refuse_capacity(receive, send, state["refused"])
                return
            await send(message)

        return capacity_send

    async def _refuse_capacity(self, receive: Callable, send: Callable, refused: dict[str, Any]) -> None:
        """Answer the client's first frame with the same refusal, then close with 1013."""
        text = refused.get("message") or "the server is at capacity"
        with contextlib.suppress(asyncio.TimeoutError):
            message = await asyncio.wait_for(receive(), timeout=self.capacity_grace_s)
            if message["type"] == "websocket.receive":
                await send({"type": "websocket.send", "text": error_frame(**refused)})
        reason = f"CAPACITY_REACHED: {text}".encode()[:120].decode(errors="ignore")
        await send({"type": "websocket.close", "code": CAPACITY_CLOSE_CODE, "reason": reason})

    # ---- HTTP -------------------------------------------------------------------------------------
    async def _http(self, scope: dict, receive: Callable, send: Callable) -> None:
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._refuse_http(receive, send, int(length), more_body=True)
            return
        # Read the body up front (bounded), then replay it to the app.
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._refuse_http(receive, send, f"more than {size}", message.get("more_body", False))
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse_http(self, receive: Callable, send: Callable, size: int | str, more_body: bool) -> None:
        """413 with a JSON body, after reading (and dropping) the rest of the body up to 16x the
        limit, so that a client that sends it all before reading still gets the answer."""
        drained = 0
        while more_body and drained < HARD_LIMIT_FACTOR * self.max_bytes:
            message = await receive()
            if message["type"] != "http.request":
                break
            drained += len(message.get("body", b""))
            more_body = message.get("more_body", False)
        await json_response(send, 413, {"detail": self._too_large(size), "code": "PAYLOAD_TOO_LARGE"})


async def json_response(send: Callable, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": data})

"""EvalError and the one-line messages it carries."""

from __future__ import annotations

from typing import Any


class EvalError(Exception):
    """A problem with the user's request (unknown env, unreachable endpoint, model that does not
    load): its message is one line meant for the user, not a traceback."""


def reason(exc: BaseException) -> str:
    """Why a connection failed: the OS error's text, else the first line of the exception."""
    cause = getattr(exc, "reason", None) or exc
    if isinstance(cause, BaseException) and getattr(cause, "strerror", None):
        return str(cause.strerror)
    return one_line(cause)


def one_line(exc: Any) -> str:
    """The first line of ``exc``'s message (its type's name if empty), at most 300 characters."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first if len(first) <= 300 else first[:297] + "..."

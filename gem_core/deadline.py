"""The deadline of the step being run, so that nothing a step starts outlives it.

Whoever runs an env's step under a time limit sets it (the vector envs, for ``step_timeout``); what
waits inside the step reads it: the sandbox pool stops waiting for a worker by then and cuts a tool
call's time limit to what is left, so a step that is abandoned at its deadline leaves no call
running behind it.

    with step_deadline(2.0):     # the step run here must be over within 2 s
        env.step(action)         # a PythonTool call inside gets at most what is left of them
    time_left()                  # None outside any deadline

The deadline is a ``contextvars.ContextVar``: it belongs to the thread (or asyncio task) that set it,
and nested deadlines keep the nearest.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("gem_step_deadline", default=None)


def deadline() -> float | None:
    """The current deadline (a ``time.monotonic()`` value), or None."""
    return _DEADLINE.get()


def time_left() -> float | None:
    """Seconds until the current deadline (negative once it has passed), or None without one."""
    at = _DEADLINE.get()
    return None if at is None else at - time.monotonic()


@contextlib.contextmanager
def step_deadline(seconds: float | None = None, *, at: float | None = None) -> Iterator[None]:
    """Run the block under a deadline ``seconds`` from now (or at the ``time.monotonic()`` value
    ``at``); None for both sets none. An enclosing deadline that comes sooner is kept."""
    if at is None and seconds is not None:
        at = time.monotonic() + seconds
    outer = _DEADLINE.get()
    if at is None or (outer is not None and outer <= at):
        yield
        return
    token = _DEADLINE.set(at)
    try:
        yield
    finally:
        _DEADLINE.reset(token)

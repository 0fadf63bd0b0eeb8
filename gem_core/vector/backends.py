"""The vector env backends by name, and the one place that decides which one a ``make_vec`` call gets.

``backend=`` is the way to choose: ``"sync"``, ``"threads"`` (the default), ``"processes"`` or ``"ray"``.
Two boolean keywords map onto it: ``async_mode`` (the reference GEM's name, kept as a documented
alias) and ``asynchronous`` (deprecated); ``True`` means ``"threads"``, ``False`` means ``"sync"``.
"""

from __future__ import annotations

import warnings

from gem_core.vector.base import VectorEnv
from gem_core.vector.processes import ProcessVectorEnv
from gem_core.vector.ray_backend import RayVectorEnv
from gem_core.vector.sync import SyncVectorEnv
from gem_core.vector.threads import AsyncVectorEnv

BACKENDS: dict[str, type[VectorEnv]] = {
    "sync": SyncVectorEnv,
    "threads": AsyncVectorEnv,
    "processes": ProcessVectorEnv,
    "ray": RayVectorEnv,
}
DEFAULT_BACKEND = "threads"


def resolve_backend(
    backend: str | None = None, *, async_mode: bool | None = None, asynchronous: bool | None = None
) -> str:
    """The name of the backend that ``backend``, ``async_mode`` and ``asynchronous`` ask for.

    A keyword left at ``None`` asks for nothing. The ones given must agree (``backend="processes"``
    with ``async_mode=True`` raises ``ValueError``); ``asynchronous`` warns with a
    ``DeprecationWarning``. With none given: ``DEFAULT_BACKEND``.
    """
    if asynchronous is not None:
        warnings.warn(
            "make_vec(asynchronous=...) is deprecated; use backend='threads' or backend='sync'",
            DeprecationWarning,
            stacklevel=3,  # the caller of make_vec
        )
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"unknown vector env backend {backend!r}; choose from {sorted(BACKENDS)}")
    asked = {
        keyword: value
        for keyword, value in (
            ("backend", backend),
            ("async_mode", _from_flag(async_mode)),
            ("asynchronous", _from_flag(asynchronous)),
        )
        if value is not None
    }
    if len(set(asked.values())) > 1:
        given = ", ".join(
            f"{keyword}={value!r}" if keyword == "backend" else f"{keyword}={value == 'threads'}"
            for keyword, value in asked.items()
        )
        raise ValueError(f"conflicting vector env backends: {given}; pass backend= alone")
    return next(iter(asked.values()), DEFAULT_BACKEND)


def _from_flag(flag: bool | None) -> str | None:
    if flag is None:
        return None
    if not isinstance(flag, bool):
        raise TypeError(f"async_mode and asynchronous are True or False, got {flag!r}")
    return "threads" if flag else "sync"

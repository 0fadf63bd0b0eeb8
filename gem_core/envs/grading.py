"""Grading untrusted answers in worker processes under a hard deadline.

Answer checkers such as math-verify (sympy) and the reasoning-gym scorers can run for hours or exhaust
memory on a crafted answer like ``9^{9^{9^{9}}}``, and math-verify's own timeout uses ``signal.alarm``,
which works only in the main thread, while ``AsyncVectorEnv`` steps envs in worker threads. So a
grading function runs in one of a few persistent worker processes: ``call`` sends it the function's
name and arguments, and if no answer comes back by the deadline the worker is killed (replaced on next
use) and the caller gets ``GradingTimeout``. The caller's thread is never blocked longer than that.

Workers are plain ``python -c`` subprocesses (not ``multiprocessing``), so the user's main script is
never re-imported in them. A worker's stdout carries the replies; whatever the graded code prints goes
to /dev/null. Each worker caps its address space (``GEM_GRADER_MEMORY_MB``, default 4096) so that a
runaway computation fails with ``MemoryError`` instead of swapping the machine.

A ``warmup`` call (e.g. importing math-verify, or building a reasoning-gym dataset) runs once per worker
with a generous timeout before the first timed call, so slow imports never count against the deadline.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from typing import Any

STARTUP_TIMEOUT = 120.0  # seconds for a worker to start and to run a warmup call
_HEADER = struct.Struct("<Q")


class GradingError(RuntimeError):
    """The grading function raised, or its worker process died."""


class GradingTimeout(GradingError):
    """The grading function did not return before its deadline; its worker was killed."""


def call(
    target: str,
    *args: Any,
    timeout: float,
    warmup: tuple[str, tuple[Any, ...]] | None = None,
) -> Any:
    """Run ``target`` (``"module:function"``) on ``args`` in a worker process; return its result.

    The result must be JSON-serialisable (a bool, number or string). Raises ``GradingTimeout`` after
    ``timeout`` seconds and ``GradingError`` if the function raises. ``warmup`` names a function and its
    arguments to run once per worker first, outside the deadline.
    """
    return _pool().call(target, args, timeout, warmup)


# ---- the parent side ------------------------------------------------------------------------------
class _Worker:
    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, "1")
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from gem_core.envs.grading import serve; serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # a Ctrl-C in the terminal reaches the parent only
        )
        self.warmed: set[str] = set()

    def request(self, target: str, args: tuple[Any, ...], timeout: float) -> Any:
        payload = pickle.dumps((target, args))
        try:
            self.process.stdin.write(_HEADER.pack(len(payload)) + payload)
            self.process.stdin.flush()
            deadline = time.monotonic() + timeout
            size = _HEADER.unpack(self._read(_HEADER.size, deadline))[0]
            reply = json.loads(self._read(size, deadline))
        except TimeoutError:
            self.kill()
            raise GradingTimeout(f"grading took longer than {timeout:g}s") from None
        except (OSError, EOFError, ValueError) as exc:
            self.kill()
            raise GradingError(f"the grading worker died ({type(exc).__name__}: {exc})") from None
        if "error" in reply:
            raise GradingError(reply["error"])
        return reply["ok"]

    def _read(self, n: int, deadline: float) -> bytes:
        fd = self.process.stdout.fileno()
        buf = bytearray()
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise EOFError("the worker exited")
            buf += chunk
        return bytes(buf)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                stream.close()


class _Pool:
    """Up to ``max_workers`` workers; a caller checks one out for the length of its call."""

    def __init__(self, max_workers: int) -> None:
        self.pid = os.getpid()
        self.slots = threading.BoundedSemaphore(max_workers)
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []

    def call(self, target: str, args: tuple[Any, ...], timeout: float, warmup: Any) -> Any:
        with self.slots:
            with self.lock:
                worker = self.idle.pop() if self.idle else None
            if worker is None or not worker.alive():
                try:
                    worker = _Worker()
                except OSError as exc:  # e.g. out of processes or memory
                    raise GradingError(f"could not start a grading worker: {exc}") from exc
            try:
                if warmup is not None:
                    key = repr(warmup)
                    if key not in worker.warmed:
                        worker.request(warmup[0], tuple(warmup[1]), STARTUP_TIMEOUT)
                        worker.warmed.add(key)
                result = worker.request(target, args, timeout)
            finally:
                if worker.alive():
                    with self.lock:
                        self.idle.append(worker)
            return result

    def close(self) -> None:
        with self.lock:
            workers, self.idle = self.idle, []
        for worker in workers:
            worker.kill()


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> _Pool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():  # a forked child must not share its parent's pipes
            size = int(os.environ.get("GEM_GRADER_WORKERS", 0)) or min(8, os.cpu_count() or 1)
            _POOL = _Pool(size)
        return _POOL


@atexit.register
def shutdown() -> None:
    """Kill the idle workers (they also exit by themselves when this process ends)."""
    if _POOL is not None and _POOL.pid == os.getpid():
        _POOL.close()


# ---- the worker side ------------------------------------------------------------------------------
def serve() -> None:
    """A worker's main loop: read ``(target, args)`` requests from stdin, write JSON replies to stdout."""
    import resource

    limit = int(os.environ.get("GEM_GRADER_MEMORY_MB", "4096")) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # graded code that prints must not corrupt the reply stream
    requests = os.fdopen(0, "rb")
    while True:
        header = requests.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return  # the parent closed the pipe
        target, args = pickle.loads(requests.read(_HEADER.unpack(header)[0]))
        try:
            module, _, name = target.partition(":")
            reply = {"ok": getattr(importlib.import_module(module), name)(*args)}
            data = json.dumps(reply).encode()
        except BaseException as exc:  # the worker must survive anything the graded code does
            data = json.dumps({"error": f"{type(exc).__name__}: {str(exc)[:500]}"}).encode()
        replies.write(_HEADER.pack(len(data)) + data)
        replies.flush()

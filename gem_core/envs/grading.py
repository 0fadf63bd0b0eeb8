"""Grading untrusted answers in worker processes under a hard deadline.

Answer checkers such as math-verify (sympy) and the reasoning-gym scorers can run for hours or exhaust
memory on a crafted answer like ``9^{9^{9^{9}}}``, and math-verify's own timeout uses ``signal.alarm``,
which works only in the main thread, while ``AsyncVectorEnv`` steps envs in worker threads. So a
grading function runs in one of a few persistent worker processes: ``call`` sends it the function's
name and arguments, and if no answer comes back by the deadline the worker is killed (and replaced, in
the background) and the caller gets ``GradingTimeout`` at once: the kill is not waited for (a worker
tearing down gigabytes of a power tower can take a second to die; a reaper thread collects it). The
deadline counts from the call, so the wait for a free worker is part of it: when every worker is
stuck on a crafted answer, the other callers get ``GradingTimeout`` at their deadline instead of
queueing behind them. The caller's thread is never blocked longer than that, except by the very
first ``warmup`` of its kind in the process when nothing waited for it before (below).

Workers are plain ``python -c`` subprocesses (not ``multiprocessing``), so the user's main script is
never re-imported in them. A worker's stdout carries the replies; whatever the graded code prints goes
to /dev/null. Each worker caps its address space (``GEM_GRADER_MEMORY_MB``, default 4096) so that a
runaway computation fails with ``MemoryError`` instead of swapping the machine.

A ``warmup`` call (e.g. importing math-verify, or building a reasoning-gym dataset) runs once per worker
with a generous timeout, on a background thread, before the worker takes a timed call: a caller takes
only a worker warmed up for its call, and waits for one (starting one, if there is room) no longer
than its deadline. Replacements of killed workers are warmed up the same way. ``warm_up`` waits for
the first warmup of a kind in a process (a one-time cost, as an import is): the math envs call it when
they are built, so that every grading, the first included, is timed from the call's start. A ``call``
whose warmup no worker has run yet waits for it first and is timed from then.

A second pool, ``pool="generation"``, runs trusted generators (reasoning-gym puzzles) under a deadline
the same way; its replies are pickles (see ``call``).
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
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

STARTUP_TIMEOUT = 120.0  # seconds for a worker to start and to run a warmup call
_REAPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gem-grading-reaper")
# CPU time of one call past which its worker dies (every deadline is far below it).
REQUEST_CPU_SECONDS = int(os.environ.get("GEM_GRADER_CPU_SECONDS", "300"))
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
    pool: str = "grading",
) -> Any:
    """Run ``target`` (``"module:function"``) on ``args`` in a worker process; return its result.

    Raises ``GradingTimeout`` when no result is back ``timeout`` seconds after this call (the wait for
    a free worker counts), and ``GradingError`` if the function raises or its worker dies. ``warmup``
    names a function and its arguments to run once per worker first, outside the deadline.

    ``pool="grading"`` (untrusted answers) returns JSON-serialisable results only (a bool, number or
    string): a worker that graded a crafted answer may be under its control, and JSON cannot run code
    in this process. ``pool="generation"`` is a separate pool that only ever runs trusted code on
    trusted inputs (e.g. generating a puzzle), so its results may be any picklable object.
    """
    if pool not in POOLS:
        raise ValueError(f"pool is one of {sorted(POOLS)}, got {pool!r}")
    return _pool(pool).call(target, args, timeout, warmup)


def warm_up(
    warmup: tuple[str, tuple[Any, ...]], pool: str = "grading", timeout: float = STARTUP_TIMEOUT
) -> None:
    """Return once a worker of ``pool`` has run ``warmup`` (at once if one already has in this process):
    every later ``call`` with that warmup is then timed from its start. Raises ``GradingError`` if the
    warmup fails, ``GradingTimeout`` if no worker has run it within ``timeout`` seconds."""
    if pool not in POOLS:
        raise ValueError(f"pool is one of {sorted(POOLS)}, got {pool!r}")
    _pool(pool).warm_up(warmup, timeout)


# ---- the parent side ------------------------------------------------------------------------------
class _Worker:
    def __init__(self, replies: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, "1")
        if replies == "pickle":  # generators: the same items in every worker (some iterate over sets)
            env.setdefault("PYTHONHASHSEED", "0")
        self.replies = replies
        self.process = subprocess.Popen(
            [sys.executable, "-c", f"from gem_core.envs.grading import serve; serve({replies!r})"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # a Ctrl-C in the terminal reaches the parent only
        )
        self.warmups: dict[str, tuple[str, tuple[Any, ...]]] = {}  # the warmups it has run, by key
        self.checked_out, self.first = 0.0, False  # when its caller took it; whether waited for
        self.owner = os.getpid()
        _STARTED.add(self)

    def warm(self, warmup: tuple[str, tuple[Any, ...]] | None) -> None:
        """Run ``warmup`` unless this worker already has (under ``STARTUP_TIMEOUT``)."""
        if warmup is not None and repr(warmup) not in self.warmups:
            self.request(warmup[0], tuple(warmup[1]), time.monotonic() + STARTUP_TIMEOUT, STARTUP_TIMEOUT)
            self.warmups[repr(warmup)] = warmup

    def request(self, target: str, args: tuple[Any, ...], deadline: float, timeout: float) -> Any:
        payload = pickle.dumps((target, args))
        try:
            self.process.stdin.write(_HEADER.pack(len(payload)) + payload)
            self.process.stdin.flush()
            size = _HEADER.unpack(self._read(_HEADER.size, deadline))[0]
            data = self._read(size, deadline)
            reply = pickle.loads(data) if self.replies == "pickle" else json.loads(data)
        except TimeoutError:
            self.kill()
            raise GradingTimeout(f"grading took longer than {timeout:g}s") from None
        except (OSError, EOFError, ValueError, pickle.UnpicklingError) as exc:
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
        """SIGKILL the worker and return at once: a reaper thread waits for its end."""
        if self.alive():
            self.process.kill()
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        try:
            _REAPER.submit(self.process.wait)
        except RuntimeError:  # at interpreter exit the reaper is gone: wait here
            self.process.wait()


class _Pool:
    """Up to ``max_workers`` workers; a caller checks one out for the length of its call.

    A caller waits for a free worker warmed up for its call only until its own deadline (then
    ``GradingTimeout``), so a few stuck calls cannot hold up the others for longer than the deadline.
    Workers are started and warmed up on background threads (``_start``) and join the idle ones when
    ready; a worker that missed a deadline is killed, and a replacement warmed up as it was starts at
    once, so the next callers find a ready worker rather than paying for its start.
    """

    def __init__(self, max_workers: int, replies: str = "json") -> None:
        self.pid = os.getpid()
        self.max_workers, self.replies = max_workers, replies
        self.cond = threading.Condition()
        self.idle: list[_Worker] = []
        self.count = 0  # workers alive or starting, idle or checked out
        self.warming: dict[str, int] = {}  # warmup key -> workers being started or warmed up for it
        self.warmed: set[str] = set()  # warmup keys some worker of this pool has run
        self.failed: dict[str, tuple[float, str]] = {}  # warmup key -> when and why its warmup failed

    def call(self, target: str, args: tuple[Any, ...], timeout: float, warmup: Any) -> Any:
        deadline = time.monotonic() + timeout
        worker = self._checkout(deadline, warmup, timeout)
        try:
            deadline = max(deadline, worker.checked_out + timeout) if worker.first else deadline
            return worker.request(target, args, deadline, timeout)
        except GradingTimeout:
            self._replace(worker)
            worker = None
            raise
        finally:
            if worker is not None:
                self._checkin(worker)

    def warm_up(self, warmup: tuple[str, tuple[Any, ...]], timeout: float) -> None:
        """Wait until some worker of this pool has run ``warmup``, starting one if none is."""
        key = repr(warmup)
        with self.cond:
            since = time.monotonic()
            while key not in self.warmed:
                failed_at, why = self.failed.get(key, (0.0, ""))
                if failed_at >= since:
                    raise GradingError(f"the grading worker could not warm up: {why}")
                self._start_unless_warming(warmup)
                remaining = since + timeout - time.monotonic()
                if remaining <= 0:
                    raise GradingTimeout(f"no grading worker warmed up within {timeout:g}s")
                self.cond.wait(remaining)

    def _start_unless_warming(self, warmup: Any) -> None:
        """Start warming up a worker for ``warmup`` unless one is: a new one if there is room, else an
        idle one (warmed up for other calls). Call with ``cond`` held."""
        if self.warming.get(repr(warmup)):
            return
        if self.count < self.max_workers:
            self.count += 1
            self._start(warmup)
        elif self.idle:
            self._start(warmup, self.idle.pop(0))

    def _checkout(self, deadline: float, warmup: Any, timeout: float) -> _Worker:
        key = repr(warmup)
        with self.cond:
            first = warmup is not None and key not in self.warmed  # its kind's first warmup: waited for
            since = time.monotonic()
            first_until = since + STARTUP_TIMEOUT
            while True:
                ready = [i for i, w in enumerate(self.idle) if warmup is None or key in w.warmups]
                if ready:
                    worker = self.idle.pop(ready[-1])
                    worker.checked_out, worker.first = time.monotonic(), first
                    return worker
                failed_at, why = self.failed.get(key, (0.0, ""))
                if first and failed_at >= since:  # the warmup this caller waited for failed
                    raise GradingError(f"the grading worker could not warm up: {why}")
                self._start_unless_warming(warmup)
                if first and key in self.warmed:  # another worker's warmup came first: timed from now
                    first, deadline = False, max(deadline, time.monotonic() + timeout)
                remaining = (first_until if first else deadline) - time.monotonic()
                if remaining <= 0:
                    busy = self.count - len(self.idle)
                    raise GradingTimeout(
                        f"no grading worker was free within {timeout:g}s ({busy} of {self.max_workers} busy)"
                    )
                self.cond.wait(remaining)

    def _start(self, warmup: Any, worker: _Worker | None = None, also: tuple = ()) -> None:
        """On a background thread: start a worker (or take ``worker``), run ``warmup`` (and the warmups
        ``also``) in it, and add it to the idle ones. Call with ``cond`` held and the worker counted."""
        key = repr(warmup)
        self.warming[key] = self.warming.get(key, 0) + 1

        def run() -> None:
            started, error = worker, None
            try:
                if started is None:
                    started = _Worker(self.replies)
                for each in (*also, warmup):
                    started.warm(each)
            except (OSError, GradingError) as exc:
                error = str(exc)
                if started is not None:
                    started.kill()
            with self.cond:
                self.warming[key] -= 1
                if error is not None:
                    self.count -= 1
                    self.failed[key] = (time.monotonic(), error)
                else:
                    self.failed.pop(key, None)
                    self.warmed.update(started.warmups)
                    self.idle.append(started)
                self.cond.notify_all()

        threading.Thread(target=run, name="gem-grading-start", daemon=True).start()

    def _checkin(self, worker: _Worker) -> None:
        with self.cond:
            if worker.alive():
                self.idle.append(worker)
            else:
                worker.kill()  # reaped in the background
                self.count -= 1
            self.cond.notify_all()

    def _replace(self, dead: _Worker) -> None:
        """Start a worker in place of ``dead`` (killed), warmed up as ``dead`` was, in the background."""
        warmups = list(dead.warmups.values())
        with self.cond:
            self._start(warmups[-1] if warmups else None, also=tuple(warmups[:-1]))

    def close(self) -> None:
        with self.cond:
            workers, self.idle = self.idle, []
            self.count -= len(workers)
        for worker in workers:
            worker.kill()


# name -> (reply format, default size)
POOLS = {"grading": "json", "generation": "pickle"}
_POOLS: dict[str, _Pool] = {}
_STARTED: weakref.WeakSet[_Worker] = weakref.WeakSet()  # every live worker, for shutdown
_POOL_LOCK = threading.Lock()


def _pool(name: str = "grading") -> _Pool:
    with _POOL_LOCK:
        pool = _POOLS.get(name)
        if pool is None or pool.pid != os.getpid():  # a forked child must not share its parent's pipes
            if name == "grading":
                size = int(os.environ.get("GEM_GRADER_WORKERS", 0)) or min(8, os.cpu_count() or 1)
            else:
                size = int(os.environ.get("GEM_GENERATOR_WORKERS", 0)) or min(4, os.cpu_count() or 1)
            pool = _POOLS[name] = _Pool(size, POOLS[name])
        return pool


@atexit.register
def shutdown() -> None:
    """Kill every worker this process started, idle or in the middle of a call."""
    for pool in list(_POOLS.values()):
        if pool.pid == os.getpid():
            pool.close()
    for worker in list(_STARTED):
        if worker.owner == os.getpid():
            worker.kill()


# ---- the worker side ------------------------------------------------------------------------------
def serve(reply_format: str = "json") -> None:
    """A worker's main loop: read ``(target, args)`` requests from stdin, write replies (JSON, or
    pickles in the generation pool) to stdout."""
    import resource

    _exit_when_orphaned()
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
        # A call past its deadline is killed by the parent; if the parent died instead, the kernel ends
        # a call that computes on without ever returning to the interpreter (SIGXCPU).
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu_limit = int(used.ru_utime + used.ru_stime) + REQUEST_CPU_SECONDS
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        if hard != resource.RLIM_INFINITY:
            cpu_limit = min(cpu_limit, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, hard))
        try:
            module, _, name = target.partition(":")
            reply = {"ok": getattr(importlib.import_module(module), name)(*args)}
            data = pickle.dumps(reply) if reply_format == "pickle" else json.dumps(reply).encode()
        except BaseException as exc:  # the worker must survive anything the graded code does
            error = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
            data = pickle.dumps(error) if reply_format == "pickle" else json.dumps(error).encode()
        replies.write(_HEADER.pack(len(data)) + data)
        replies.flush()


def _exit_when_orphaned(period: float = 1.0) -> None:
    """End this worker once its parent is gone, even in the middle of a computation that never returns
    to read the closed pipe. (Not ``PR_SET_PDEATHSIG``: it fires when the *thread* that started the
    worker ends, and replacements are started from short-lived threads.)"""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period)
        os._exit(0)

    threading.Thread(target=watch, name="gem-orphan-watch", daemon=True).start()

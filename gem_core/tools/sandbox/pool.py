"""SandboxPool: warm sandboxed template processes that run untrusted Python in milliseconds, shared
fairly by every env, session and thread that calls them.

Each worker is one template process (``template.py``) started once in the isolation mode of
``launcher.py``; a call is a ``fork()`` of that clean template, so it costs a few milliseconds
instead of a fresh interpreter start, and no state survives from one call to the next (no process,
file, IPC object or shared memory: see ``template``). A worker that stops answering is killed and
replaced; the caller gets an error result, never an exception.

Sharing. Every call is made for a *caller* (``gem_core.tools.base.current_caller``: the env whose
``ToolEnvWrapper`` makes it, else the calling thread), and one caller's calls never hold up
another's for longer than one call can run:

* fair shares: waiting calls are served in the order of the worker time their callers have used
  recently (decaying with a half-life of ``USAGE_HALF_LIFE_S``, as a batch scheduler's fair-share
  does), first come first served among equals: envs whose calls take milliseconds go before an env
  whose calls run to their limit, and a heavy caller's place recovers as its use ages;
* quotas: a caller runs at most ``max_calls_per_caller`` calls at once (its other calls wait);
* capacity: when every worker is busy and a caller waits, the pool starts another worker in the
  background, up to ``max_workers`` (extra workers retire after ``IDLE_RETIRE_S`` idle); beyond that
  a waiting call gets the next worker that frees, which is within one call's time limit;
* deadlines: a call waits for a worker at most ``max_wait`` seconds (default: its time limit plus
  ``HOST_GRACE_S``, the longest one call can hold a worker) and never past the deadline of the step
  it runs in (``gem_core.deadline``), which also cuts its time limit: when a vector env abandons a
  step at ``step_timeout``, the step's call has already been killed and its worker serves the next
  one. A call that gets no worker in time comes back as an error result ("the sandbox is busy"), never
  a hang.

Limits per call (``SandboxLimits``): wall time, CPU time, address space, process count, file size,
output size. ``close()`` (also run at exit) ends every worker; workers also die with their parent.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import itertools
import json
import os
import select
import shutil
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gem_core import deadline
from gem_core.tools.base import current_caller
from gem_core.tools.sandbox import launcher

HEADER = struct.Struct(">Q")
MAX_CODE_CHARS = 1_000_000
READY_TIMEOUT_S = 60.0
HOST_GRACE_S = 5.0  # beyond the call's own timeout, before the host declares a worker dead
MAX_WORKERS = 32  # default ceiling of a pool that grows while callers wait (one worker per caller)
IDLE_RETIRE_S = 60.0  # an extra worker idle this long is ended
STEP_MARGIN_S = 0.3  # a call under a step deadline ends this long before it, to leave time to answer
MIN_RUN_S = 0.05  # a call with less time than this left before its step's deadline does not start
USAGE_HALF_LIFE_S = 60.0  # a caller's use of the pool counts half as much this much later
# bwrap's --die-with-parent fires when the *thread* that started it ends, so every worker is started
# from this one long-lived thread rather than from whichever (possibly short-lived) caller needs it.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gem-sandbox-spawner")


@dataclass(frozen=True)
class SandboxLimits:
    """Per-call limits. ``max_processes`` counts the call's own process and its threads."""

    timeout: float = 5.0
    memory_mb: int = 512
    max_output: int = 16_384
    max_processes: int = 1
    max_file_mb: int = 16


@dataclass
class ExecResult:
    """What one call did. ``error`` is set when the sandbox itself failed (the code may not have run).

    ``ok``: the code ran to completion with exit status 0 and all its output was kept.
    """

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    signal: str | None = None
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0
    error: str | None = None
    time_limit_s: float | None = None  # the wall-clock limit the call ran under (cut to its step's deadline)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and not self.truncated and self.exit_code == 0


class WorkerError(RuntimeError):
    """A template process died or stopped answering."""


class _Worker:
    """One template process and its framed pipe protocol."""

    def __init__(self, mode: str, config: dict[str, Any]):
        self.proc: subprocess.Popen = _SPAWNER.submit(
            launcher.spawn,
            mode,
            config["tmpfs_mb"],
            config.get("workspace"),
            config["workspace_mb"],
            config["shm_mb"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=launcher.HOST_ENV,
            start_new_session=True,
        ).result()
        self._buffer = bytearray()
        self.info: dict[str, Any] | None = None
        self._send(config)  # the template's configuration is its first frame

    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode()
        try:
            self.proc.stdin.write(HEADER.pack(len(data)) + data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerError(f"the sandbox worker is gone ({exc})") from exc

    def ensure_ready(self) -> dict[str, Any]:
        if self.info is None:
            self.info = self._read(time.monotonic() + READY_TIMEOUT_S)
            if not self.info.get("ready"):
                raise WorkerError(f"the sandbox did not start: {self.info}")
        return self.info

    def call(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.ensure_ready()
        # A launcher that has exited takes its sandbox with it (--die-with-parent), but not at once: a
        # process inside may still read one more request and answer it. The worker is gone already.
        if self.proc.poll() is not None:
            raise WorkerError(f"the sandbox worker exited (status {self.proc.returncode})")
        self._send(request)
        return self._read(time.monotonic() + timeout)

    def _read(self, deadline: float) -> dict[str, Any]:
        fd = self.proc.stdout.fileno()
        while True:
            if len(self._buffer) >= HEADER.size:
                (size,) = HEADER.unpack_from(self._buffer)
                if len(self._buffer) >= HEADER.size + size:
                    frame = bytes(self._buffer[HEADER.size : HEADER.size + size])
                    del self._buffer[: HEADER.size + size]
                    return json.loads(frame)
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerError("the sandbox worker stopped answering")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise WorkerError(f"the sandbox worker exited (status {self.proc.poll()})")
                self._buffer += chunk

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        self.proc.wait()


@dataclass
class _Caller:
    """A caller's share of the pool: the worker time it has used (decaying, as of ``stamp``), its calls
    running, and its calls waiting (first come, first served among them)."""

    used: float = 0.0
    stamp: float = 0.0
    running: int = 0
    waiting: collections.deque = field(default_factory=collections.deque)

    def recent_use(self, now: float) -> float:
        """The worker seconds used, each counting half as much ``USAGE_HALF_LIFE_S`` later."""
        return self.used * 0.5 ** ((now - self.stamp) / USAGE_HALF_LIFE_S)


class _Ticket:
    """One waiting call: given a worker slot by ``_dispatch``."""

    __slots__ = ("order", "slot")

    def __init__(self, order: int):
        self.order, self.slot = order, None


class SandboxPool:
    """Warm sandbox workers shared fairly by their callers; ``run(code)`` executes code in one of them.

    ``size`` workers start with the pool and stay; while calls wait and every worker is busy, more
    start in the background, up to ``max_workers`` (default ``max(size, MAX_WORKERS)``).
    ``max_calls_per_caller`` caps the calls one caller runs at once; ``max_wait`` caps the seconds a
    call waits for a worker (default: its time limit plus ``HOST_GRACE_S``). See the module docstring.

    ``mode`` is ``"auto"`` (the strongest that works, see ``launcher``) or one of ``bwrap``, ``unshare``,
    ``none``. ``preload`` names modules imported once in the template, so calls importing them are
    instant (e.g. ``("numpy", "sympy")``). ``seccomp`` adds the syscall filter where supported.

    Each call gets a private working directory (also its ``TMPDIR``) on a fresh tmpfs of ``tmpfs_mb``
    MB and ``max_files`` files and directories (default: 256 per MB), a ``/dev/shm`` of a quarter of
    that size and an IPC namespace of its own; all vanish with the call (see ``template``; in the
    weak modes without root, a directory wiped after the call).

    ``workspace_mb`` > 0 gives the (single) worker a persistent working directory, ``self.workspace``:
    every call starts there and the files it leaves are seen by the next call, until
    ``reset_workspace()``, the pool closes or its worker is replaced (``restarts`` counts the
    replacements). Under bubblewrap it is a tmpfs of that size (and ``max_files`` files, default 256
    per MB) at ``/workspace``; in the weak modes a host directory, a tmpfs where the template may mount
    one. Such a pool never grows.
    """

    def __init__(
        self,
        size: int = 2,
        limits: SandboxLimits | None = None,
        mode: str = "auto",
        preload: tuple[str, ...] = (),
        seccomp: bool = True,
        tmpfs_mb: int = 64,
        workspace_mb: int = 0,
        max_files: int | None = None,
        max_workers: int | None = None,
        max_calls_per_caller: int = 1,
        max_wait: float | None = None,
    ):
        if size < 1:
            raise ValueError("size must be at least 1")
        if workspace_mb > 0 and (size != 1 or (max_workers or 1) != 1):
            raise ValueError(
                "a pool with a workspace has exactly one worker (the workspace is that worker's)"
            )
        if max_workers is not None and max_workers < size:
            raise ValueError(f"max_workers ({max_workers}) must be at least size ({size})")
        if max_calls_per_caller < 1:
            raise ValueError("max_calls_per_caller must be at least 1")
        if max_wait is not None and not max_wait >= 0:
            raise ValueError("max_wait must be >= 0 seconds (or None)")
        self.limits = limits or SandboxLimits()
        if mode == "auto":
            mode = launcher.detect_mode()
        elif mode not in launcher.MODES:
            raise ValueError(f"unknown sandbox mode {mode!r}; choose 'auto' or one of {launcher.MODES}")
        elif mode != "bwrap":
            launcher.warn_weak(mode)
        self.mode = mode
        self.size = size
        self.max_workers = 1 if workspace_mb > 0 else max_workers or max(size, MAX_WORKERS)
        self.max_calls_per_caller = max_calls_per_caller
        self.max_wait = max_wait
        self._preload, self._seccomp, self._tmpfs_mb = tuple(preload), seccomp, tmpfs_mb
        self._max_files = max_files
        self._host_dir = None if mode == "bwrap" else tempfile.mkdtemp(prefix="gem-sandbox-")
        if self._host_dir is not None:
            os.chmod(self._host_dir, 0o711)
        self._workspace_mb = workspace_mb
        self.workspace: str | None = None
        if workspace_mb > 0:
            self.workspace = (
                "/workspace" if self._host_dir is None else os.path.join(self._host_dir, "workspace")
            )
        self.restarts = 0
        # Each worker drops its calls to a uid of its own, so process counts never mix between workers
        # (nor between pools of this process: each pool takes the next block of its process's range).
        self._uid_base = _allocate_uids(self.max_workers)
        self._cond = threading.Condition()
        self._closed = False
        self._workers: dict[int, _Worker] = {}  # slot -> worker (the slot picks the worker's uid)
        self._idle: list[int] = []  # slots, the most recently used last
        self._idle_since: dict[int, float] = {}
        self._starting = 0  # workers being started in the background
        self._start_error: str | None = None  # why the last background start failed
        self._callers: dict[Hashable, _Caller] = {}
        self._order = itertools.count()
        for slot in range(size):
            self._workers[slot] = self._start(slot)
            self._idle.append(slot)
            self._idle_since[slot] = time.monotonic()
        _LIVE_POOLS.add(self)

    # ---- workers --------------------------------------------------------------------------------
    def _start(self, slot: int) -> _Worker:
        work_root = "/tmp/calls" if self._host_dir is None else os.path.join(self._host_dir, f"w{slot}")
        files = lambda mb: self._max_files or max(1024, mb * 256)  # noqa: E731
        config = {
            "drop_uid": self._uid_base + slot,
            "work_root": work_root,
            "preload": list(self._preload),
            "seccomp": self._seccomp,
            "workspace": self.workspace,
            "tmpfs_mb": self._tmpfs_mb,
            "tmpfs_inodes": files(self._tmpfs_mb),
            "shm_mb": max(1, self._tmpfs_mb // 4),
            "shm_inodes": 1024,
            "workspace_mb": self._workspace_mb,
            "workspace_inodes": files(self._workspace_mb),
            "own_ipc_ns": self.mode in ("bwrap", "unshare"),
            # Exit reports for single-process calls (see ``template``); not for workspaces, whose
            # shells run many processes (each child's end would stop the shell for the template).
            "trace_exit": self.workspace is None,
            **launcher.python_config(self.mode),
        }
        return _Worker(self.mode, config)

    def _start_in_background(self) -> None:
        """Start a worker for a free slot on a thread of its own; it joins the idle ones when ready.
        Call with ``_cond`` held."""
        free = [slot for slot in range(self.max_workers) if slot not in self._workers]
        if not free:
            return
        slot = free[0]
        self._workers[slot] = None  # reserved while it starts
        self._starting += 1

        def bring_up() -> None:
            worker, error = None, None
            try:
                worker = self._start(slot)
                worker.ensure_ready()
            except Exception as exc:  # bwrap missing, out of processes or memory, ...
                error = f"{type(exc).__name__}: {exc}"
            with self._cond:
                self._starting -= 1
                if error is None and not self._closed:
                    self._workers[slot] = worker
                    self._make_idle(slot)
                    self._dispatch()
                    return
                self._workers.pop(slot, None)  # close() may have emptied the table already
                self._start_error = error
                self._cond.notify_all()
            if worker is not None:
                worker.kill()

        threading.Thread(target=bring_up, name="gem-sandbox-start", daemon=True).start()

    def _make_idle(self, slot: int) -> None:
        self._idle.append(slot)
        self._idle_since[slot] = time.monotonic()

    def _grow(self) -> None:
        """Start workers for the waiting calls that could run now but find no idle worker, within
        ``max_workers``; and keep ``size`` workers. Call with ``_cond`` held."""
        runnable = sum(
            min(len(c.waiting), self.max_calls_per_caller - c.running) for c in self._callers.values()
        )
        wanted = max(runnable - len(self._idle) - self._starting, self.size - len(self._workers), 0)
        for _ in range(min(wanted, self.max_workers - len(self._workers))):
            self._start_in_background()

    def _retire_idle(self) -> list[_Worker]:
        """Take out the extra workers (above ``size``) idle for ``IDLE_RETIRE_S``; the caller kills
        them after releasing ``_cond``."""
        retired, now = [], time.monotonic()
        for slot in list(self._idle):
            if len(self._workers) <= self.size:
                break
            if now - self._idle_since[slot] > IDLE_RETIRE_S:
                self._idle.remove(slot)
                retired.append(self._workers.pop(slot))
        return retired

    @property
    def isolation(self) -> dict[str, Any]:
        """How calls are isolated here: mode, seccomp, uid drop, namespaces per call, preloaded
        modules, limits."""
        key = ("isolation", id(self))
        slot = self._acquire(key, time.monotonic() + READY_TIMEOUT_S)
        if slot is None:
            raise RuntimeError(f"no sandbox worker was free within {READY_TIMEOUT_S:g} s")
        start = time.monotonic()
        try:
            info = self._workers[slot].ensure_ready()
        finally:
            self._release(slot, key, time.monotonic() - start)
        return {
            "mode": self.mode,
            "seccomp": info["seccomp"],
            "uid_drop": info["drop_uid"] is not None,
            "call_namespaces": info["call_namespaces"],
            "mount_sources_hidden": info["mount_sources_hidden"],
            "mount_sources_shown": info["mount_sources_shown"],
            "preloaded": info["preloaded"],
            "limits": asdict(self.limits),
        }

    # ---- fair scheduling ------------------------------------------------------------------------
    def _acquire(self, key: Hashable, wait_until: float) -> int | None:
        """A worker slot for a call of ``key``, or None if none came its turn by ``wait_until``."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the sandbox pool is closed")
            caller = self._callers.setdefault(key, _Caller())
            ticket = _Ticket(next(self._order))
            caller.waiting.append(ticket)
            self._dispatch()
            self._grow()
            while ticket.slot is None:
                left = wait_until - time.monotonic()
                if left <= 0 or self._closed:
                    caller.waiting.remove(ticket)
                    self._forget()
                    return None
                self._cond.wait(left)
            return ticket.slot

    def _release(self, slot: int, key: Hashable, held: float, failed: bool = False) -> None:
        """Give back ``slot`` after a call of ``key`` that held it ``held`` seconds (charged to ``key``);
        ``failed``: its worker stopped answering, so it is killed and another starts in its place."""
        with self._cond:
            caller = self._callers[key]
            now = time.monotonic()
            caller.running -= 1
            caller.used, caller.stamp = caller.recent_use(now) + held, now
            dead = self._workers.pop(slot, None) if failed else None
            if failed and not self._closed:
                self.restarts += 1
            elif not failed and slot in self._workers:
                self._make_idle(slot)
            retired = self._retire_idle()
            self._dispatch()
            self._grow()
            self._forget()
        for worker in [*retired, *([dead] if dead is not None else [])]:
            worker.kill()

    def _dispatch(self) -> None:
        """Give idle workers to the waiting calls whose callers have used the least worker time lately
        (and are under their quota), first come first served among equals. Call with ``_cond`` held."""
        served, now = False, time.monotonic()
        while self._idle:
            ready = [c for c in self._callers.values() if c.waiting and c.running < self.max_calls_per_caller]
            if not ready:
                break
            best = min(ready, key=lambda c: (c.recent_use(now), c.waiting[0].order))
            ticket = best.waiting.popleft()
            ticket.slot = self._idle.pop()
            best.running += 1
            served = True
        if served:
            self._cond.notify_all()

    def _forget(self) -> None:
        """Drop the callers with nothing running or waiting whose use has aged away (under 1 ms): they
        would start from nothing anyway. Call with ``_cond`` held."""
        now = time.monotonic()
        for key, caller in list(self._callers.items()):
            if not caller.running and not caller.waiting and caller.recent_use(now) < 1e-3:
                del self._callers[key]

    # ---- calls ----------------------------------------------------------------------------------
    def run(self, code: str, stdin: str = "", **limits: Any) -> ExecResult:
        """Run ``code`` as a script (stdin from ``stdin``); ``limits`` override ``SandboxLimits`` fields."""
        lim = replace(self.limits, **limits)
        if not isinstance(code, str) or len(code) > MAX_CODE_CHARS:
            return ExecResult(error=f"the code must be a str of at most {MAX_CODE_CHARS} characters")
        return self._request({"code": code, "stdin": stdin, **asdict(lim)}, lim.timeout)

    def reset_workspace(self) -> ExecResult:
        """Empty the workspace (under bubblewrap: a fresh tmpfs replaces it, whatever it held)."""
        if self.workspace is None:
            raise ValueError("this pool has no workspace (workspace_mb=0)")
        return self._request({"op": "reset_workspace"}, 30.0)

    def _request(self, request: dict[str, Any], timeout: float) -> ExecResult:
        if self._closed:
            raise RuntimeError("the sandbox pool is closed (or belongs to the parent of this forked process)")
        key, start = current_caller(), time.monotonic()
        step_left = deadline.time_left()
        patience = self.max_wait if self.max_wait is not None else timeout + HOST_GRACE_S
        step_bound = step_left is not None and step_left - STEP_MARGIN_S < patience
        wait_until = start + (step_left - STEP_MARGIN_S if step_bound else patience)
        slot = self._acquire(key, wait_until)
        if slot is None:
            return ExecResult(error=self._busy(time.monotonic() - start, step_bound))
        held_from, failed = time.monotonic(), False
        try:
            worker = self._workers[slot]
            worker.ensure_ready()
            if "code" in request:
                request = self._fit_to_step(request)
                if request is None:
                    return ExecResult(error="the step's deadline came before the code could start")
                timeout = request["timeout"]
            reply = worker.call(request, timeout + HOST_GRACE_S)  # the template ends the call by its timeout
        except WorkerError as exc:
            failed = True
            return ExecResult(error=str(exc))
        except BaseException:
            failed = True
            raise
        finally:
            self._release(slot, key, time.monotonic() - held_from, failed)
        if "error" in reply:
            return ExecResult(error=f"sandbox error: {reply['error']}")
        return ExecResult(**reply, time_limit_s=request.get("timeout"))

    @staticmethod
    def _fit_to_step(request: dict[str, Any]) -> dict[str, Any] | None:
        """``request`` with its wall-clock limit cut to end ``STEP_MARGIN_S`` before the step's deadline
        (None when less than ``MIN_RUN_S`` is left)."""
        left = deadline.time_left()
        if left is None or left - STEP_MARGIN_S >= request["timeout"]:
            return request
        if left - STEP_MARGIN_S < MIN_RUN_S:
            return None
        return {**request, "timeout": left - STEP_MARGIN_S}

    def _busy(self, waited: float, under_step: bool) -> str:
        why = " before its step's deadline" if under_step else ""
        with self._cond:
            failed = self._start_error if not self._workers else None
            busy = len(self._workers) - len(self._idle)
        if failed:
            return f"the sandbox could not start a worker ({failed}); the code did not run"
        return (
            f"the sandbox is busy: no worker was free within {waited:.1f} s{why} ({busy} running other "
            "calls); the code did not run"
        )

    @property
    def closed(self) -> bool:
        """Whether ``close()`` ran (or this is a forked copy of another process's pool)."""
        return self._closed

    def close(self) -> None:
        """End every worker (safe to call twice; in a forked child it leaves the parent's alone)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            workers = [w for w in self._workers.values() if w is not None]
            self._workers, self._idle = {}, []
            self._cond.notify_all()
        for worker in workers:
            worker.kill()
        if self._host_dir is not None:
            shutil.rmtree(self._host_dir, ignore_errors=True)
        _LIVE_POOLS.discard(self)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_LIVE_POOLS: set[SandboxPool] = set()
UIDS_PER_PROCESS = 65_536
_uid_next = 0
_uid_lock = threading.Lock()


def _allocate_uids(count: int) -> int:
    """The first of ``count`` consecutive uids for a new pool: this process's range (by pid) is split
    into blocks handed out in turn, wrapping around after ``UIDS_PER_PROCESS``."""
    global _uid_next
    with _uid_lock:
        if _uid_next + count > UIDS_PER_PROCESS:
            _uid_next = 0
        offset, _uid_next = _uid_next, _uid_next + count
    return 200_000 + (os.getpid() % 60_000) * UIDS_PER_PROCESS + offset


_SHARED: dict[tuple, SandboxPool] = {}
_SHARED_LOCK = threading.Lock()


def shared_pool(size: int = 2, limits: SandboxLimits | None = None, **options: Any) -> SandboxPool:
    """One pool per configuration per process, shared by every tool that asks for it."""
    key = (size, limits or SandboxLimits(), tuple(sorted((k, repr(v)) for k, v in options.items())))
    with _SHARED_LOCK:
        pool = _SHARED.get(key)
        if pool is None or pool._closed:
            pool = _SHARED[key] = SandboxPool(size, limits, **options)
        return pool


@atexit.register
def _close_all() -> None:
    for pool in list(_LIVE_POOLS):
        pool.close()


def _forget_after_fork() -> None:
    """In a forked child (multiprocessing, Ray), the parent's workers and spawner thread are not
    ours: disown them (never kill them) so that the child starts its own pools on demand."""
    global _SPAWNER
    _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gem-sandbox-spawner")
    for pool in list(_LIVE_POOLS):
        pool._closed = True
        pool._workers, pool._idle = {}, []
        pool._cond = threading.Condition()  # another thread may have held it at the fork
    _LIVE_POOLS.clear()
    _SHARED.clear()


os.register_at_fork(after_in_child=_forget_after_fork)

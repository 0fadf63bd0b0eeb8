"""SandboxPool: warm sandboxed template processes that run untrusted Python in milliseconds.

Each worker is one template process (``template.py``) started once in the isolation mode of
``launcher.py``; a call is a ``fork()`` of that clean template, so it costs a few milliseconds
instead of a fresh interpreter start, and no state survives from one call to the next (no process,
file, IPC object or shared memory: see ``template``). Calls from
many threads share the pool: each takes an idle worker (or waits for one). A worker that stops
answering is killed and replaced; the caller gets an error result, never an exception.

Limits per call (``SandboxLimits``): wall time, CPU time, address space, process count, file size,
output size. ``close()`` (also run at exit) ends every worker; workers also die with their parent.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import select
import shutil
import struct
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

from gem_core.tools.sandbox import launcher

HEADER = struct.Struct(">Q")
MAX_CODE_CHARS = 1_000_000
READY_TIMEOUT_S = 60.0
HOST_GRACE_S = 5.0  # beyond the call's own timeout, before the host declares a worker dead
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


class SandboxPool:
    """``size`` warm sandbox workers; ``run(code)`` executes code in one of them.

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
    one.
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
    ):
        if size < 1:
            raise ValueError("size must be at least 1")
        if workspace_mb > 0 and size != 1:
            raise ValueError(
                "a pool with a workspace has exactly one worker (the workspace is that worker's)"
            )
        self.limits = limits or SandboxLimits()
        if mode == "auto":
            mode = launcher.detect_mode()
        elif mode not in launcher.MODES:
            raise ValueError(f"unknown sandbox mode {mode!r}; choose 'auto' or one of {launcher.MODES}")
        elif mode != "bwrap":
            launcher.warn_weak(mode)
        self.mode = mode
        self.size = size
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
        self._uid_base = _allocate_uids(size)
        self._lock = threading.Lock()
        self._closed = False
        self._idle: queue.LifoQueue[int] = queue.LifoQueue()
        self._workers: list[_Worker] = [self._start(i) for i in range(size)]
        for i in range(size):
            self._idle.put(i)
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
        }
        return _Worker(self.mode, config)

    def _replace(self, slot: int) -> None:
        self._workers[slot].kill()
        if not self._closed:
            self.restarts += 1
            self._workers[slot] = self._start(slot)

    @property
    def isolation(self) -> dict[str, Any]:
        """How calls are isolated here: mode, seccomp, uid drop, namespaces per call, preloaded
        modules, limits."""
        slot = self._idle.get()
        try:
            info = self._workers[slot].ensure_ready()
        finally:
            self._idle.put(slot)
        return {
            "mode": self.mode,
            "seccomp": info["seccomp"],
            "uid_drop": info["drop_uid"] is not None,
            "call_namespaces": info["call_namespaces"],
            "preloaded": info["preloaded"],
            "limits": asdict(self.limits),
        }

    # ---- calls ----------------------------------------------------------------------------------
    def run(self, code: str, stdin: str = "", **limits: Any) -> ExecResult:
        """Run ``code`` as a script (stdin from ``stdin``); ``limits`` override ``SandboxLimits`` fields."""
        lim = replace(self.limits, **limits)
        if not isinstance(code, str) or len(code) > MAX_CODE_CHARS:
            return ExecResult(error=f"the code must be a str of at most {MAX_CODE_CHARS} characters")
        return self._request({"code": code, "stdin": stdin, **asdict(lim)}, lim.timeout + HOST_GRACE_S)

    def reset_workspace(self) -> ExecResult:
        """Empty the workspace (under bubblewrap: a fresh tmpfs replaces it, whatever it held)."""
        if self.workspace is None:
            raise ValueError("this pool has no workspace (workspace_mb=0)")
        return self._request({"op": "reset_workspace"}, 30.0 + HOST_GRACE_S)

    def _request(self, request: dict[str, Any], timeout: float) -> ExecResult:
        if self._closed:
            raise RuntimeError("the sandbox pool is closed (or belongs to the parent of this forked process)")
        slot = self._idle.get()
        try:
            reply = self._workers[slot].call(request, timeout)
        except WorkerError as exc:
            with self._lock:
                self._replace(slot)
            return ExecResult(error=str(exc))
        except Exception:
            with self._lock:
                self._replace(slot)
            raise
        finally:
            self._idle.put(slot)
        if "error" in reply:
            return ExecResult(error=f"sandbox error: {reply['error']}")
        return ExecResult(**reply)

    @property
    def closed(self) -> bool:
        """Whether ``close()`` ran (or this is a forked copy of another process's pool)."""
        return self._closed

    def close(self) -> None:
        """End every worker (safe to call twice; in a forked child it leaves the parent's alone)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for worker in self._workers:
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
        pool._workers = []
    _LIVE_POOLS.clear()
    _SHARED.clear()


os.register_at_fork(after_in_child=_forget_after_fork)

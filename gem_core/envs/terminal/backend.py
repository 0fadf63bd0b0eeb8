"""Where a terminal task's commands run: the ``TerminalBackend`` interface and ``SandboxBackend``.

A backend owns one workspace directory, reused episode after episode:

``start(files)``             empty the workspace and write the task's files; returns the workspace path
``run(command, timeout)``    run ``bash -c command`` in the workspace: an ``ExecResult`` (stdout, stderr,
                             exit code, time-out, truncation, or ``error`` when the backend failed)
``run_python(code, stdin)``  run a Python script in the workspace (how checks read files and run commands)
``snapshot()``               the workspace as a .tar.gz archive (bytes); ``restore(archive)`` puts one back
``close()``                  release the workspace

``SandboxBackend`` runs everything in ``gem_core.tools.sandbox`` (bubblewrap, seccomp, an unprivileged
uid, resource limits) with the pool's persistent workspace: a size-limited tmpfs at ``/workspace``
that nothing outside the sandbox can see. Files persist from command to command; processes,
shell variables and ``cd`` do not (every command is a fresh ``bash`` in the workspace, and whatever
it leaves running is killed when it returns). The backend never reads the workspace itself: even
snapshots are made inside the sandbox, so the agent's files (symlinks, FIFOs, huge files) cannot
reach the host. A container backend (Docker, podman) would implement the same methods with
``exec`` into a container.

Every ``start`` and ``restore`` begins with ``SandboxPool.reset_workspace``: a fresh tmpfs replaces
the workspace whatever the last episode left there (a directory thousands of levels deep, locked
modes, its full inode quota), in constant time; every command has its own IPC namespace, scratch
``TMPDIR`` and ``/dev/shm``, so no IPC object or shared memory outlives it. If the sandbox's worker is
replaced mid-episode (it died), the workspace is gone: every later call of the episode returns an
error saying so (``LOST``) instead of running in an empty workspace, until the next ``start``.

Starting a sandbox takes ~0.3 s, so backends that are closed (or garbage-collected) hand their
sandbox back to a small per-process cache, and the next backend with the same limits reuses it
(with a fresh workspace from its next ``start``).
"""

from __future__ import annotations

import base64
import json
import threading
import weakref

from gem_core.tools.sandbox import ExecResult, SandboxLimits, SandboxPool

MAX_COMMAND_CHARS = 20_000
SETUP_MTIME = 1_704_067_200  # 2024-01-01 UTC: task files look the same in every episode (`ls -l`)


class TerminalBackend:
    """A workspace and a shell to run commands in; see the module docstring."""

    def start(self, files: dict[str, str]) -> str:
        raise NotImplementedError

    def run(self, command: str, timeout: float | None = None) -> ExecResult:
        raise NotImplementedError

    def run_python(self, code: str, stdin: str = "", timeout: float | None = None) -> ExecResult:
        raise NotImplementedError

    def snapshot(self) -> bytes:
        raise NotImplementedError

    def restore(self, archive: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release the workspace. Safe to call twice."""


# Scripts run inside the workspace, as the agent's uid, after ``SandboxPool.reset_workspace`` (a fresh,
# empty workspace: nothing the agent left there is ever walked).
_START = """
import json, os, sys
spec = json.load(sys.stdin)
for path, content in spec["files"].items():
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(content)
for root, dirs, files in os.walk("."):
    for name in dirs + files:
        os.utime(os.path.join(root, name), (spec["mtime"], spec["mtime"]))
"""

# The agent may have locked files or directories (chmod 000); it owns them all, so the snapshot opens
# them up for tar, records their own modes, and locks them again. The walk is iterative (any depth);
# entries whose path is too long for the kernel to open in one piece are left out of the archive.
_SNAPSHOT = """
import base64, io, os, stat, sys, tarfile
MAX_PATH = 3800
locked, paths, todo = {}, [], ["."]
os.chmod(".", 0o700)
while todo:
    top = todo.pop()
    with os.scandir(top) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    for entry in entries:
        path = os.path.join(top, entry.name)
        if len(os.fsencode(path)) > MAX_PATH:
            continue
        mode = entry.stat(follow_symlinks=False).st_mode
        need = 0o700 if stat.S_ISDIR(mode) else 0o400 if stat.S_ISREG(mode) else 0
        if mode & need != need:
            locked[path] = stat.S_IMODE(mode)
            os.chmod(path, stat.S_IMODE(mode) | need)
        paths.append(path)
        if stat.S_ISDIR(mode):
            todo.append(path)
def own_mode(info):
    info.mode = locked.get("./" + info.name, info.mode)
    return info
buffer = io.BytesIO()
with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1, format=tarfile.PAX_FORMAT) as tar:
    for path in paths:  # parents before their children
        tar.add(path, arcname=path[2:], recursive=False, filter=own_mode)
for path in sorted(locked, key=len, reverse=True):  # children before their directories
    os.chmod(path, locked[path])
sys.stdout.write(base64.b64encode(buffer.getvalue()).decode())
"""

# Members must stay below the workspace (no absolute name, no ".."): checked on the names, in linear
# time. (tarfile's "tar" filter resolves every member's real path, quadratic in the depth: 24 s for a
# directory 1100 levels deep.) Links may point anywhere: this runs inside the sandbox, as the agent.
_RESTORE = """
import base64, io, sys, tarfile
with tarfile.open(fileobj=io.BytesIO(base64.b64decode(sys.stdin.read())), mode="r:gz") as tar:
    members = tar.getmembers()
    for member in members:
        if member.name.startswith("/") or ".." in member.name.split("/"):
            raise ValueError(f"{member.name!r} is outside the workspace")
    if hasattr(tarfile, "fully_trusted_filter"):
        tar.extractall(".", members=members, filter="fully_trusted")
    else:  # a Python without extraction filters (< 3.10.12)
        tar.extractall(".", members=members)
"""

LOST = "the sandbox was restarted and the workspace lost; reset the env to start again"


class SandboxBackend(TerminalBackend):
    """Commands run in a ``SandboxPool`` worker with a persistent workspace (see the module docstring).

    ``limits`` bound each command (default: 10 s, 256 MB per process, 16 processes, 64 KB of output,
    16 MB per file); ``workspace_mb`` bounds the workspace; ``mode`` is the sandbox mode.
    """

    def __init__(self, limits: SandboxLimits | None = None, workspace_mb: int = 16, mode: str = "auto"):
        self.limits = limits or SandboxLimits(
            timeout=10.0, memory_mb=256, max_output=65_536, max_processes=16, max_file_mb=16
        )
        self.workspace_mb = workspace_mb
        self._key = (self.limits, workspace_mb, mode)
        self._pool: SandboxPool | None = None
        self._release = None

    @property
    def pool(self) -> SandboxPool:
        if self._pool is None or self._pool.closed:
            self._pool = _checkout(self._key)
            self._release = weakref.finalize(self, _checkin, self._key, self._pool)
            self._restarts = None
        return self._pool

    def start(self, files: dict[str, str]) -> str:
        for path in files:
            if path.startswith("/") or ".." in path.split("/"):
                raise ValueError(f"task files live inside the workspace; got {path!r}")
        spec = json.dumps({"files": files, "mtime": SETUP_MTIME})
        result = self._fresh_workspace(_START, spec)
        if not result.ok:  # should not happen: take a fresh sandbox
            self._discard()
            result = self._fresh_workspace(_START, spec)
            if not result.ok:
                raise RuntimeError(f"could not set up the workspace: {result.error or result.stderr}")
        return self.pool.workspace

    def run(self, command: str, timeout: float | None = None) -> ExecResult:
        command = command.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")
        if len(command) > MAX_COMMAND_CHARS:
            return ExecResult(error=f"the command is longer than {MAX_COMMAND_CHARS} characters")
        code = f"import os\nos.execv('/bin/bash', ['bash', '-c', {command!r}])\n"
        return self._run(code, timeout=timeout or self.limits.timeout)

    def run_python(self, code: str, stdin: str = "", timeout: float | None = None) -> ExecResult:
        return self._run(code, stdin=stdin, timeout=timeout or self.limits.timeout)

    def snapshot(self) -> bytes:
        cap = self.workspace_mb * 1024 * 1024 * 3 // 2 + 65_536  # base64 of a full workspace and tar headers
        result = self._run(_SNAPSHOT, timeout=max(self.limits.timeout, 30.0), max_output=cap)
        if not result.ok:
            raise RuntimeError(f"could not snapshot the workspace: {result.error or result.stderr[-2000:]}")
        return base64.b64decode(result.stdout)

    def restore(self, archive: bytes) -> None:
        stdin = base64.b64encode(archive).decode()
        result = self._fresh_workspace(_RESTORE, stdin, timeout=max(self.limits.timeout, 30.0))
        if not result.ok:
            self._discard()
            result = self._fresh_workspace(_RESTORE, stdin, timeout=max(self.limits.timeout, 30.0))
            if not result.ok:
                raise RuntimeError(
                    f"could not restore the workspace: {result.error or result.stderr[-2000:]}"
                )

    def close(self) -> None:
        if self._release is not None:
            self._release()  # hands the sandbox back to the cache (once)
        self._pool = self._release = None

    # ---- internals ----------------------------------------------------------------------------
    _restarts: int | None = None  # the pool's restart count when this backend's workspace was filled

    def _fresh_workspace(self, script: str, stdin: str, timeout: float | None = None) -> ExecResult:
        """An empty workspace (whatever the last user left there), then ``script`` run in it."""
        pool = self.pool
        reset = pool.reset_workspace()
        if not reset.ok:
            return reset
        self._restarts = pool.restarts
        return self._run(script, stdin=stdin, timeout=timeout or self.limits.timeout)

    def _run(self, code: str, **options) -> ExecResult:
        pool = self.pool
        if self._restarts is not None and pool.restarts != self._restarts:
            return ExecResult(error=LOST)  # a replaced worker comes with an empty workspace: say so
        return pool.run(code, **options)

    def _discard(self) -> None:
        """Close this backend's sandbox for good; the next call takes another one."""
        if self._release is not None:
            self._release.detach()
        if self._pool is not None:
            self._pool.close()
        self._pool = self._release = None
        self._restarts = None


# ---- the cache of idle sandboxes ------------------------------------------------------------------
MAX_IDLE_PER_KEY = 4
_idle: dict[tuple, list[SandboxPool]] = {}
_idle_lock = threading.Lock()


def _checkout(key: tuple) -> SandboxPool:
    limits, workspace_mb, mode = key
    with _idle_lock:
        pools = _idle.get(key, [])
        while pools:
            pool = pools.pop()
            if not pool.closed:
                return pool
    return SandboxPool(size=1, limits=limits, mode=mode, workspace_mb=workspace_mb)


def _checkin(key: tuple, pool: SandboxPool) -> None:
    """Keep an idle sandbox for the next backend (its workspace is emptied by the next ``start``)."""
    if pool.closed:
        return
    with _idle_lock:
        pools = _idle.setdefault(key, [])
        if len(pools) < MAX_IDLE_PER_KEY:
            pools.append(pool)
            return
    pool.close()

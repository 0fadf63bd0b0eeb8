"""How a sandbox worker is started: the isolation mode and the command line that gives it.

Modes, strongest first (``detect_mode`` picks the first that works here):

``bwrap``    bubblewrap (Debian package ``bubblewrap``): fresh mount, PID, network, IPC, UTS and cgroup
             namespaces. The file system holds only read-only binds of ``/usr`` (and its ``/bin``,
             ``/lib`` links), ``/etc/alternatives`` (the targets of Debian's ``awk``, ``which``, ...
             links) and the Python installation (with the virtual environment in use, whose parent
             directories can be traversed but not listed), a private ``/proc`` and ``/dev``, small
             tmpfs at ``/tmp`` and ``/dev/shm`` (and, when the pool asks for one, a size-limited
             tmpfs at ``/workspace`` that outlives calls); no home, no project, nothing else of ``/etc``.
             The environment is cleared; the sandbox dies with its parent. bwrap's options reach it
             through a memory file and the template is copied into the sandbox's own root, so
             neither the configuration nor a host path of the project shows inside. Run as root,
             bwrap keeps only the capabilities the template needs: to give each call namespaces and
             file systems of its own and drop it to an unprivileged uid with no capability at all
             (see ``template``).
``unshare``  util-linux ``unshare``: fresh PID, network, IPC, UTS and mount namespaces, but the host
             file system stays visible; files are protected only by the unprivileged uid's permissions.
``none``     a plain subprocess: only resource limits and the uid drop. No network isolation.

bubblewrap was chosen over raw namespaces or a seccomp-only design because it is a small, audited,
packaged tool that builds a minimal root file system in one command, needs no daemon, and works both
as root and (through user namespaces) as an ordinary user. The weaker modes exist so the tool still
runs where bubblewrap is missing; they log a loud warning and report their mode.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

MODES = ("bwrap", "unshare", "none")
TEMPLATE = Path(__file__).with_name("template.py")
SANDBOX_TEMPLATE = "/opt/gem-sandbox/template.py"  # where bwrap shows the template inside
MQUEUE_DIR = "/opt/gem-sandbox/ipc/mqueue"  # the template's (root-only) view of the worker's queues
# Capabilities the template keeps inside bwrap (root only): switch uid, own and wipe the call's
# directory, signal the call's processes, give each call namespaces and mounts of its own, and empty
# the call's capability bounding set. Every call drops all of them before its code runs.
TEMPLATE_CAPS = (
    "CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_FOWNER", "CAP_DAC_OVERRIDE", "CAP_KILL",
    "CAP_SYS_ADMIN", "CAP_SETPCAP",
)  # fmt: skip
HOST_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def python_executable() -> str:
    """The interpreter the sandbox runs: this process's virtual environment's ``python`` (a link to
    the real interpreter, so that the environment's site-packages are on ``sys.path``), else the
    real interpreter (not a pyenv shim)."""
    if sys.prefix != sys.base_prefix and os.path.realpath(sys.executable) != sys.executable:
        return sys.executable
    return os.path.realpath(sys.executable)


def python_roots() -> list[str]:
    """Directories the interpreter, its standard library and site-packages (and the virtual
    environment's) live in."""
    exe_dir = os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, exe_dir)}
    # Keep only top-most directories (a venv inside the base prefix needs no second bind).
    ordered = sorted(roots, key=len)
    kept: list[str] = []
    for root in ordered:
        if not any(root == k or root.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(root)
    return [r for r in kept if r not in ("/", "/usr")]


def bwrap_options(
    tmpfs_mb: int, workspace: str | None = None, workspace_mb: int = 0, shm_mb: int = 16
) -> list[str]:
    """bwrap's options (everything between ``bwrap`` and the command) but the template and the final
    read-only remount of the root."""
    cmd = [
        "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--die-with-parent", "--new-session", "--clearenv",
        "--hostname", "sandbox",
        "--ro-bind", "/usr", "/usr",
    ]  # fmt: skip
    if os.geteuid() == 0:
        cmd += ["--cap-drop", "ALL"]
        for cap in TEMPLATE_CAPS:
            cmd += ["--cap-add", cap]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    # Debian's /usr/bin/awk, which, ... are links through /etc/alternatives (links only, nothing secret).
    cmd += ["--perms", "0755", "--dir", "/etc", "--ro-bind-try", "/etc/alternatives", "/etc/alternatives"]
    # /tmp before the interpreter's binds: a Python under /tmp (a venv in a clone there) is bound on top.
    cmd += ["--size", str(tmpfs_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    made: set[str] = set()
    for root in python_roots():
        # bwrap would create the missing parents (e.g. /root for a pyenv Python) private to root;
        # make them traversable (not listable) so the unprivileged uid of a call can reach the
        # interpreter and nothing else shows (the project holding a venv lists as unreadable).
        for parent in reversed(Path(root).parents[:-1]):
            if str(parent) not in made and not str(parent).startswith("/usr"):
                made.add(str(parent))
                cmd += ["--perms", "0711", "--dir", str(parent)]
        cmd += ["--ro-bind", root, root]
    cmd += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--perms", "1777", "--size", str(shm_mb * 1024 * 1024), "--tmpfs", "/dev/shm",
        # The worker's POSIX message queues, listed by the template only (where calls share the
        # worker's IPC namespace, it removes the calls' queues after each call).
        "--perms", "0700", "--dir", MQUEUE_DIR.rsplit("/", 1)[0], "--mqueue", MQUEUE_DIR,
    ]  # fmt: skip
    if workspace:
        cmd += ["--size", str(workspace_mb * 1024 * 1024), "--tmpfs", workspace]
    return cmd


def template_command(template: str) -> list[str]:
    return [python_executable(), "-I", "-B", template]


def unshare_prefix() -> list[str]:
    return [
        "unshare",
        "--pid",
        "--fork",
        "--kill-child",
        "--net",
        "--ipc",
        "--uts",
        "--mount",
        "--mount-proc",
    ]


def spawn(
    mode: str,
    tmpfs_mb: int = 64,
    workspace: str | None = None,
    workspace_mb: int = 0,
    shm_mb: int = 16,
    **popen: Any,
) -> subprocess.Popen:
    """Start one template process in ``mode`` (``popen``: ``subprocess.Popen``'s keyword arguments).

    Under bubblewrap the command line visible inside the sandbox (``/proc/1/cmdline``) is only
    ``bwrap --args FD python ... template``: the options travel in a memory file, and the template is
    copied from another into the sandbox's own root file system (no host path shows in its mounts).
    The template's configuration is the first frame the host writes to its stdin."""
    if mode not in MODES:
        raise ValueError(f"unknown sandbox mode {mode!r}; choose one of {MODES}")
    if mode != "bwrap":
        prefix = unshare_prefix() if mode == "unshare" else []
        return subprocess.Popen([*prefix, *template_command(str(TEMPLATE))], **popen)
    template_fd = _memory_file("gem-sandbox-template", TEMPLATE.read_bytes())
    try:
        options = [
            *bwrap_options(tmpfs_mb, workspace, workspace_mb, shm_mb),
            "--perms", "0444", "--file", str(template_fd), SANDBOX_TEMPLATE,
            "--remount-ro", "/", "--chdir", "/tmp",
        ]  # fmt: skip
        args_fd = _memory_file("gem-sandbox-args", b"".join(o.encode() + b"\0" for o in options))
        try:
            argv = ["bwrap", "--args", str(args_fd), *template_command(SANDBOX_TEMPLATE)]
            return subprocess.Popen(argv, pass_fds=(template_fd, args_fd), **popen)
        finally:
            os.close(args_fd)
    finally:
        os.close(template_fd)


def _memory_file(name: str, data: bytes) -> int:
    fd = os.memfd_create(name)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


@functools.cache
def mode_works(mode: str) -> bool:
    """Whether ``mode`` can start an interpreter here (tried once per process)."""
    if mode == "bwrap" and shutil.which("bwrap") is None:
        return False
    if mode == "unshare" and shutil.which("unshare") is None:
        return False
    probe = {
        "bwrap": ["bwrap", *bwrap_options(1), "--remount-ro", "/", "--chdir", "/tmp"],
        "unshare": unshare_prefix(),
    }.get(mode, [])
    try:
        result = subprocess.run(
            [*probe, python_executable(), "-I", "-S", "-c", "print('ok')"],
            capture_output=True,
            env=HOST_ENV,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and result.stdout.strip() == b"ok"


@functools.cache
def detect_mode() -> str:
    """The strongest isolation mode that works on this machine; warns loudly when it is not bwrap."""
    for mode in MODES:
        if mode_works(mode):
            if mode != "bwrap":
                warn_weak(mode)
            return mode
    raise RuntimeError("no sandbox mode works here")  # unreachable: 'none' always runs


def warn_weak(mode: str) -> None:
    message = {
        "unshare": "bubblewrap (bwrap) is not available: the Python sandbox falls back to `unshare` "
        "namespaces. The host file system is VISIBLE to sandboxed code (protected only by file "
        "permissions). Install bubblewrap (apt-get install bubblewrap) for full isolation.",
        "none": "neither bubblewrap nor unshare works here: sandboxed Python runs as a plain subprocess "
        "with resource limits only, WITH NETWORK ACCESS and the host file system visible. "
        "Install bubblewrap (apt-get install bubblewrap) before running untrusted code.",
    }[mode]
    logger.warning("*** SANDBOX WEAKENED (mode=%s) *** %s", mode, message)
    print(f"WARNING: *** SANDBOX WEAKENED (mode={mode}) *** {message}", file=sys.stderr)

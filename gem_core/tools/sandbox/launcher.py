"""How a sandbox worker is started: the isolation mode and the command line that gives it.

Modes, strongest first (``detect_mode`` picks the first that works here):

``bwrap``    bubblewrap (Debian package ``bubblewrap``): fresh mount, PID, network, IPC, UTS and cgroup
             namespaces. The file system holds only read-only binds of ``/usr`` (and its ``/bin``,
             ``/lib`` links), ``/etc/alternatives`` (the targets of Debian's ``awk``, ``which``, ...
             links) and the Python installation, a private ``/proc`` and ``/dev``, and a small
             tmpfs at ``/tmp`` for the calls' working directories (and, when the pool asks for one, a
             second size-limited tmpfs at ``/workspace`` that outlives calls); no home, no project,
             nothing else of ``/etc``.
             The environment is cleared; the sandbox dies with its parent. Run as root, bwrap keeps
             only the capabilities the template needs to drop each call to an unprivileged uid.
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
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

MODES = ("bwrap", "unshare", "none")
TEMPLATE = Path(__file__).with_name("template.py")
SANDBOX_TEMPLATE = "/opt/gem-sandbox/template.py"  # where bwrap shows the template inside
# Capabilities the template keeps inside bwrap (root only): switch uid, own and wipe the call's
# directory, signal the call's processes. Every call drops all of them with its uid switch.
TEMPLATE_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_FOWNER", "CAP_DAC_OVERRIDE", "CAP_KILL")
HOST_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def python_executable() -> str:
    """The real interpreter (not a pyenv shim or venv symlink)."""
    return os.path.realpath(sys.executable)


def python_roots() -> list[str]:
    """Directories the interpreter and its standard library and site-packages live in."""
    exe_dir = os.path.dirname(os.path.dirname(python_executable()))
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, exe_dir)}
    # Keep only top-most directories (a venv inside the base prefix needs no second bind).
    ordered = sorted(roots, key=len)
    kept: list[str] = []
    for root in ordered:
        if not any(root == k or root.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(root)
    return [r for r in kept if r not in ("/", "/usr")]


def bwrap_command(config: dict, tmpfs_mb: int, workspace_mb: int = 0) -> list[str]:
    cmd = [
        "bwrap",
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
    made: set[str] = set()
    for root in python_roots():
        # bwrap would create the missing parents (e.g. /root for a pyenv Python) private to root;
        # make them traversable so the unprivileged uid of a call can reach the interpreter.
        for parent in reversed(Path(root).parents[:-1]):
            if str(parent) not in made and not str(parent).startswith("/usr"):
                made.add(str(parent))
                cmd += ["--perms", "0755", "--dir", str(parent)]
        cmd += ["--ro-bind", root, root]
    cmd += [
        "--ro-bind", str(TEMPLATE), SANDBOX_TEMPLATE,
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", str(tmpfs_mb * 1024 * 1024), "--tmpfs", "/tmp",
    ]  # fmt: skip
    if config.get("workspace"):
        cmd += ["--size", str(workspace_mb * 1024 * 1024), "--tmpfs", config["workspace"]]
    cmd += ["--remount-ro", "/", "--chdir", "/tmp"]
    return [*cmd, python_executable(), "-I", "-B", SANDBOX_TEMPLATE, json.dumps(config)]


def unshare_command(config: dict) -> list[str]:
    return [
        "unshare", "--pid", "--fork", "--kill-child", "--net", "--ipc", "--uts", "--mount", "--mount-proc",
        python_executable(), "-I", "-B", str(TEMPLATE), json.dumps(config),
    ]  # fmt: skip


def plain_command(config: dict) -> list[str]:
    return [python_executable(), "-I", "-B", str(TEMPLATE), json.dumps(config)]


def command(mode: str, config: dict, tmpfs_mb: int = 64, workspace_mb: int = 0) -> list[str]:
    """The command line that starts one template process in ``mode``."""
    if mode == "bwrap":
        return bwrap_command(config, tmpfs_mb, workspace_mb)
    if mode == "unshare":
        return unshare_command(config)
    if mode == "none":
        return plain_command(config)
    raise ValueError(f"unknown sandbox mode {mode!r}; choose one of {MODES}")


@functools.cache
def mode_works(mode: str) -> bool:
    """Whether ``mode`` can start an interpreter here (tried once per process)."""
    if mode == "bwrap" and shutil.which("bwrap") is None:
        return False
    if mode == "unshare" and shutil.which("unshare") is None:
        return False
    # The launch prefix without the template: [..., python, -I, -B, template, config] minus the tail.
    probe = {"bwrap": bwrap_command({}, 1)[:-5], "unshare": unshare_command({})[:-5]}.get(mode, [])
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

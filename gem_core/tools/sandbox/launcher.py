"""How a sandbox worker is started: the isolation mode and the command line that gives it.

Modes, strongest first (``detect_mode`` picks the first that works here):

``bwrap``    bubblewrap (Debian package ``bubblewrap``): fresh mount, PID, network, IPC, UTS and cgroup
             namespaces. The file system holds only read-only binds of ``/usr`` (and its ``/bin``,
             ``/lib`` links), ``/etc/alternatives`` (the targets of Debian's ``awk``, ``which``, ...
             links) and the Python installation, a private ``/proc`` and ``/dev``, small tmpfs at
             ``/tmp`` and ``/dev/shm`` (and, when the pool asks for one, a size-limited tmpfs at
             ``/workspace`` that outlives calls); no home, no project, nothing else of ``/etc``.
             The Python installation shows at neutral paths (``sandbox_layout``): the interpreter's
             at ``/opt/python``, a virtual environment's at ``/opt/venv``; the sandbox runs the real
             interpreter from there with the host's ``sys.path`` moved along, so no host path of the
             installation shows in ``sys``, in file names or in ``/proc/self/maps``, and the template
             remounts each of them as a read-only overlay whose layers it names by relative paths,
             so that ``/proc/self/mountinfo`` does not show where they come from either (a bind mount
             shows its source's path there). The environment is cleared; the sandbox dies with its
             parent. bwrap's options reach it through a memory file and the template is copied into
             the sandbox's own root, so neither the configuration nor a host path of the project
             shows inside. (Files of the installation are shown as they are: one that records
             where Python was built, e.g. its ``Makefile``, still says so.) Run as root,
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

import contextlib
import functools
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

MODES = ("bwrap", "unshare", "none")
TEMPLATE = Path(__file__).with_name("template.py")
SANDBOX_TEMPLATE = "/opt/gem-sandbox/template.py"  # where bwrap shows the template inside
MQUEUE_DIR = "/opt/gem-sandbox/ipc/mqueue"  # the template's (root-only) view of the worker's queues
OVERLAY_STAGE = "/opt/gem-sandbox/stage"  # where the template builds each overlay before moving it
OVERLAY_EMPTY = "/opt/gem-sandbox/empty"  # an overlay's second layer (overlayfs wants two or more)
OVERLAY_PATCHES = "/opt/gem-sandbox/patches"  # where the template keeps the files it shows instead
# Capabilities the template keeps inside bwrap (root only): switch uid, own and wipe the call's
# directory, signal the call's processes, give each call namespaces and mounts of its own, and empty
# the call's capability bounding set. Every call drops all of them before its code runs.
TEMPLATE_CAPS = (
    "CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_FOWNER", "CAP_DAC_OVERRIDE", "CAP_KILL",
    "CAP_SYS_ADMIN", "CAP_SETPCAP",
)  # fmt: skip
HOST_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def host_python() -> str:
    """The interpreter the sandbox runs, on the host: the real one (not a pyenv shim, not a virtual
    environment's link to it; the environment's site-packages reach it through ``sys.path``)."""
    return os.path.realpath(sys.executable)


def python_roots() -> list[str]:
    """Directories the interpreter, its standard library and site-packages (and the virtual
    environment's) live in."""
    exe_dir = os.path.dirname(os.path.dirname(host_python()))
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, exe_dir)}
    # Keep only top-most directories (a venv inside the base prefix needs no second bind).
    ordered = sorted(roots, key=len)
    kept: list[str] = []
    for root in ordered:
        if not any(root == k or root.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(root)
    return [r for r in kept if r not in ("/", "/usr") and not r.startswith("/usr/")]


SANDBOX_PYTHON = "/opt/python"  # where the interpreter's installation shows inside bubblewrap
SANDBOX_VENV = "/opt/venv"  # and a virtual environment's site-packages


@functools.cache
def sandbox_layout() -> dict[str, str]:
    """``{host directory: its path inside bubblewrap}``: the interpreter's installation at
    ``SANDBOX_PYTHON`` (another root of ``python_roots``, if any, beside it with a number) and, of a
    virtual environment, only the directories of ``sys.path`` (its site-packages), below
    ``SANDBOX_VENV``: not its scripts, whose first lines name the host's interpreter, nor its
    ``pyvenv.cfg``."""
    venv = os.path.realpath(sys.prefix) if sys.prefix != sys.base_prefix else None
    layout: dict[str, str] = {}
    for root in python_roots():
        if root == venv:
            entries = {os.path.realpath(e) for e in sys.path if e and os.path.isdir(e)}
            entries = {e for e in entries if e.startswith(root + "/")}
            for real in sorted(entries):  # one bind per top-most entry (ray puts its own folder on sys.path)
                if not any(real.startswith(outer + "/") for outer in entries):
                    layout[real] = SANDBOX_VENV + real[len(root) :]
        else:
            layout[root] = SANDBOX_PYTHON + (
                str(len(layout) + 1) if SANDBOX_PYTHON in layout.values() else ""
            )
    return layout


def to_sandbox(path: str) -> str | None:
    """``path`` (on the host) as bubblewrap shows it, or None where it is not inside."""
    real = os.path.realpath(path)
    if real == "/usr" or real.startswith("/usr/"):
        return real
    for root, inside in sandbox_layout().items():
        if real == root or real.startswith(root + "/"):
            return inside + real[len(root) :]
    return None


def python_executable(mode: str = "bwrap") -> str:
    """The interpreter the sandbox runs, as the sandbox's ``mode`` shows it."""
    return (to_sandbox(host_python()) or host_python()) if mode == "bwrap" else host_python()


def python_config(mode: str) -> dict[str, Any]:
    """What the template needs to know of its Python in ``mode`` (part of its configuration). Under
    bubblewrap: this process's ``sys.path`` as the sandbox shows it (nothing of the project), the
    site directories whose ``.pth`` files to run, the library path the interpreter needs
    (``child_env``: the calls' own processes get it too), and the bound directories to remount as
    overlays (``hide``) with files to show in place of theirs (``patches``, see ``patched_files``)."""
    if mode != "bwrap":
        return {}
    path = [inside for p in sys.path if p and os.path.isdir(p) and (inside := to_sandbox(p))]
    site_dirs = [to_sandbox(d) for d in sandbox_layout() if os.path.basename(d) == "site-packages"]
    return {
        "python_path": list(dict.fromkeys(path)),
        "site_dirs": [d for d in site_dirs if d],
        "child_env": {"LD_LIBRARY_PATH": library_path()} if library_path() else {},
        "hide": sorted(sandbox_layout().values()),
        "patches": patched_files(),
    }


def library_path() -> str | None:
    """Where a shared libpython lives inside bubblewrap when the interpreter finds it by an absolute
    host path (``LIBDIR`` in its run path), else None."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return None
    libdir = sysconfig.get_config_var("LIBDIR")
    inside = to_sandbox(libdir) if libdir else None
    return inside if inside and inside != os.path.realpath(libdir) else None


@functools.cache
def patched_files() -> dict[str, dict[str, str]]:
    """``{bound directory inside: {relative path: text}}``: files of the installation that name host
    paths, as the sandbox shows them. The interpreter's build configuration (``_sysconfigdata``, what
    ``sysconfig.get_config_vars()`` returns) with its host directories moved to the sandbox's; and, in
    site-packages, what points into the host's project (editable installs' ``.pth`` files and finders,
    ``*.egg-link``, ``direct_url.json`` with a ``file://`` URL) emptied: the project is not inside."""
    moves = sorted(
        {(host, inside) for real, inside in sandbox_layout().items() for host in {real, *_aliases(real)}},
        key=lambda move: -len(move[0]),
    )
    patches: dict[str, dict[str, str]] = {}

    def patch(path: str, text: str | None) -> None:
        real = os.path.realpath(path)
        for root, inside in sandbox_layout().items():
            if real.startswith(root + "/"):
                if text is None:
                    text = ""
                    with contextlib.suppress(OSError, UnicodeDecodeError), open(real, encoding="utf-8") as f:
                        text = f.read()
                    for host, there in moves:
                        text = text.replace(host, there)
                patches.setdefault(inside, {})[real[len(root) + 1 :]] = text
                return

    with contextlib.suppress(Exception):  # a Python without sysconfig data: nothing to patch
        spec = importlib.util.find_spec(sysconfig._get_sysconfigdata_name())
        if spec is not None and spec.origin:
            patch(spec.origin, None)
    for site in sandbox_layout():
        if os.path.basename(site) != "site-packages":
            continue
        with contextlib.suppress(OSError), os.scandir(site) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith("__editable__") or name.endswith(".egg-link"):
                    patch(entry.path, "")
                elif name.endswith(".dist-info"):
                    url = os.path.join(entry.path, "direct_url.json")
                    with contextlib.suppress(OSError), open(url, encoding="utf-8") as f:
                        if "file://" in f.read():
                            patch(url, "")
    return patches


def _aliases(real: str) -> set[str]:
    """The spellings of a host directory that ``sys`` and the build configuration may use for it."""
    return {p for p in (sys.prefix, sys.base_prefix, sys.exec_prefix) if p and os.path.realpath(p) == real}


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
    cmd += ["--size", str(tmpfs_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    cmd += ["--perms", "0755", "--dir", "/opt"]
    for directory in (OVERLAY_STAGE, OVERLAY_EMPTY, OVERLAY_PATCHES):
        cmd += ["--perms", "0755", "--dir", directory]
    made = {"/opt"}
    for root, inside in sandbox_layout().items():
        for parent in reversed(Path(inside).parents[:-1]):  # bwrap would make them private to root
            if str(parent) not in made:
                made.add(str(parent))
                cmd += ["--perms", "0755", "--dir", str(parent)]
        cmd += ["--ro-bind", root, inside]
    if library_path():
        cmd += ["--setenv", "LD_LIBRARY_PATH", library_path()]
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


def template_command(template: str, mode: str = "bwrap") -> list[str]:
    return [python_executable(mode), "-I", "-B", template]


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
        return subprocess.Popen([*prefix, *template_command(str(TEMPLATE), mode)], **popen)
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
            [*probe, python_executable(mode), "-I", "-S", "-c", "print('ok')"],
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

"""The template process: runs INSIDE the sandbox, forks one throw-away child per call.

This file is executed as a script by the sandbox's own interpreter (``python -I template.py``); it
uses the standard library only and never imports ``gem_core`` (the project is not visible in the
sandbox). It reads its configuration as the first frame on fd 0 (frames: 8-byte big-endian length +
JSON), imports the modules named in ``preload``, answers ``{"ready": ...}`` on fd 1 and then serves
calls.

Each call runs in a fresh ``fork()`` of this clean template. Where the template may mount (it has
``CAP_SYS_ADMIN`` in its sandbox: bubblewrap as root, or the weak modes as root), it first mounts
fresh tmpfs, size- and inode-limited, as the call's working directory (owned by the call's uid) and
at ``/dev/shm`` (POSIX shared memory and semaphores). The template itself lives in a mount namespace
of its own, under a ``/proc`` that shows each call only its own processes (not bubblewrap's nor the
template's). The child for the next call is forked in advance and, before it ever sees untrusted
code:

* becomes a session leader with stdout/stderr on pipes read by the template and every other
  descriptor closed, except the request pipe (below);
* gets an IPC namespace of its own (``call_ipc``, wherever the template may create one): System V
  shared memory, message queues and semaphores and POSIX message queues created by the call die
  with its last process. In it a detached System V segment is destroyed at once
  (``shm_rmid_forced``), so shared memory is always mapped by a process of the call and counts
  against its address-space limit; queues and semaphore sets are capped (``CALL_IPC_SYSCTLS``);
* switches to an unprivileged uid/gid of its own (so ``RLIMIT_NPROC`` is enforced and it cannot
  signal or ptrace the template, which runs as root inside the sandbox) and holds no capability,
  nor can it gain one (the template emptied the bounding set);
* installs a seccomp filter (x86-64) refusing namespace creation, mounts, ptrace, kernel keyrings,
  bpf, module loading and io_uring;
* then sleeps until the host's request arrives, takes it and closes the request pipe: when the
  code starts, it holds no descriptor of the harness but its own stdin, stdout and stderr.

The template enforces the wall-clock limit and the output cap and takes the call's exit status from
the kernel, never from anything the code could write: from ``waitpid``, or (``trace_exit``, for a
call limited to one process, hence one thread) from the kernel's report at the very start of the
process's exit (the template traces the child for that event only: ``PTRACE_EVENT_EXIT``), so that
the answer does not wait for the process's memory to be torn down. It answers the host, then kills
every process of the call (``kill(-1)`` from a helper running as the call's uid when the call could
fork), reaps them as a child subreaper, detaches the call's tmpfs (the kernel frees them: no
directory a call leaves is ever walked, so cleanup cannot fail, and it is bounded by the inode cap)
and forks the next child.

Where the template may not mount or create namespaces (bubblewrap without root, the weak modes as
another user), calls share the worker's: each gets a private directory under ``work_root``, and after
each call the template removes the System V and POSIX IPC objects of the call's uid and wipes the
directory with an iterative walk that no depth, mode, link or file name can break and that stops at
a deadline (what is left is wiped after later calls).

With a ``workspace`` in the config (opt-in, e.g. a terminal's working directory) every call starts
in that one directory instead, owned by the calls' uid: its files outlive the call (processes never
do). The template mounts it as a tmpfs of its own, size- and inode-limited, and the
``reset_workspace`` request replaces it with an empty one in constant time.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import linecache
import os
import resource
import select
import signal
import site
import stat
import struct
import sys
import time
import traceback

HEADER = struct.Struct(">Q")
CHILD_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
SOURCE_NAME = "<python>"
MQUEUE_DIR = "/opt/gem-sandbox/ipc/mqueue"  # bubblewrap mounts the worker's message queues there
OVERLAY_STAGE = "/opt/gem-sandbox/stage"  # where an overlay is built before it moves into place
OVERLAY_EMPTY = "/opt/gem-sandbox/empty"  # an overlay's second layer (overlayfs wants two or more)
OVERLAY_PATCHES = "/opt/gem-sandbox/patches"  # the layers of files shown in place of the installation's
EXIT_GRACE_S = 2.0  # past the wall-clock limit, for a process already exiting to be torn down
WIPE_BUDGET_S = 1.0  # per call, for the fallback's directory wipe (what is left waits for later calls)
# Caps of a call's own IPC namespace (per namespace in the kernel): no System V segment outlives its
# last attachment, at most 16 message queues (16 KB each by default) and 16 semaphore sets. (POSIX
# message queues are bounded by RLIMIT_MSGQUEUE: at most 1 MB.)
CALL_IPC_SYSCTLS = {
    "kernel/shm_rmid_forced": "1",
    "kernel/msgmni": "16",
    "kernel/sem": "250 4000 32 16",
}


# ---- framing ------------------------------------------------------------------------------------
def read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> dict:
    (size,) = HEADER.unpack(read_exact(fd, HEADER.size))
    return json.loads(read_exact(fd, size))


def write_frame(fd: int, message: dict) -> None:
    data = json.dumps(message).encode()
    data = HEADER.pack(len(data)) + data
    while data:
        data = data[os.write(fd, data) :]


# ---- the kernel, through libc -------------------------------------------------------------------
CLONE_NEWNS, CLONE_NEWIPC = 0x00020000, 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x2000, 0x4000, 0x40000
MNT_DETACH = 0x2
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
IPC_RMID = 0

try:
    LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - every Linux libc loads
    LIBC = None


def _check(result: int, what: str) -> int:
    if result == -1:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def sys_unshare(flags: int) -> None:
    _check(LIBC.unshare(flags), "unshare")


def sys_mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(
        LIBC.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}"
    )


def sys_umount(target: str, flags: int = 0) -> None:
    _check(LIBC.umount2(target.encode(), flags), f"umount {target}")


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_bounding_set(cap_last: int) -> None:
    """Empty the capability bounding set (needs CAP_SETPCAP; without it, left as it is)."""
    for cap in range(cap_last + 1):
        LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)


def drop_all_capabilities() -> None:
    """Empty the ambient, effective, permitted and inheritable sets."""
    LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header, data = CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (CapData * 2)()
    _check(LIBC.capset(ctypes.byref(header), data), "capset")


PTRACE_CONT, PTRACE_GETEVENTMSG, PTRACE_SEIZE = 7, 0x4201, 0x4206
PTRACE_O_TRACEEXIT, PTRACE_O_EXITKILL = 0x40, 0x100000
PTRACE_EVENT_EXIT = 6
STOP_SIGNALS = (signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
if LIBC is not None:
    LIBC.ptrace.restype = ctypes.c_long
    LIBC.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]


def sys_ptrace(request: int, pid: int, addr: int | None = None, data=None) -> None:
    _check(LIBC.ptrace(request, pid, addr, data), "ptrace")


def tmpfs_options(size_mb: int, inodes: int, mode: str, uid: int | None) -> str:
    owner = "" if uid is None else f",uid={uid},gid={uid}"
    return f"size={int(size_mb)}m,nr_inodes={int(inodes)},mode={mode}{owner}"


def make_mounts_private() -> None:
    """In a fresh mount namespace: nothing mounted here propagates anywhere else."""
    sys_mount(None, "/", None, MS_REC | MS_PRIVATE, None)


# ---- seccomp (x86-64) ---------------------------------------------------------------------------
AUDIT_ARCH_X86_64 = 0xC000003E
# ptrace mount umount2 pivot_root chroot unshare setns keyctl add_key request_key bpf perf_event_open
# userfaultfd process_vm_readv/writev kexec_load kexec_file_load init/finit/delete_module
# open_by_handle_at name_to_handle_at acct swapon swapoff reboot syslog io_uring_* new mount API
DENIED_X86_64 = (
    101, 165, 166, 155, 161, 272, 308, 250, 248, 249, 321, 298, 323, 310, 311, 246, 320, 175, 313, 176,
    304, 303, 163, 167, 168, 169, 103, 425, 426, 427, 428, 429, 430, 431, 432, 442,
)  # fmt: skip
CLONE_X86_64, CLONE3_X86_64 = 56, 435
CLONE_NAMESPACE_FLAGS = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
EPERM, ENOSYS = 1, 38


def seccomp_program() -> bytes:
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, kill = 0x7FFF0000, 0x80000000
    errno = lambda e: 0x00050000 | e  # noqa: E731
    insns = [
        (ld, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, AUDIT_ARCH_X86_64),
        (ret, 0, 0, kill),
        (ld, 0, 0, 0),  # seccomp_data.nr
        (jge, 0, 1, 0x40000000),  # the x32 ABI
        (ret, 0, 0, kill),
    ]
    for nr in DENIED_X86_64:
        insns += [(jeq, 0, 1, nr), (ret, 0, 0, errno(EPERM))]
    insns += [(jeq, 0, 1, CLONE3_X86_64), (ret, 0, 0, errno(ENOSYS))]  # libc falls back to clone
    insns += [
        (jeq, 0, 4, CLONE_X86_64),
        (ld, 0, 0, 16),  # low 32 bits of args[0], the clone flags
        (jset, 0, 1, CLONE_NAMESPACE_FLAGS),
        (ret, 0, 0, errno(EPERM)),
        (ret, 0, 0, allow),
        (ret, 0, 0, allow),
    ]
    return b"".join(struct.pack("=HBBI", *i) for i in insns)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def prepare_seccomp():
    """A function installing the filter in the calling process (built once, called in each child),
    or None where the filter is not supported."""
    if os.uname().machine != "x86_64" or LIBC is None:
        return None
    program = seccomp_program()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2

    def install() -> bool:
        if LIBC.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
            return False
        return LIBC.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) == 0

    install.keep_alive = (buffer, fprog)  # the kernel copies the program, but only at install time
    return install


def close_other_fds(keep: tuple[int, ...]) -> None:
    """Close every descriptor above 2 but ``keep`` (listing /proc/self/fd beats closing 64k)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = range(3, 65536)
    for fd in fds:
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor is already closed
                os.close(fd)


# ---- namespaces and mounts ---------------------------------------------------------------------
PROC_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC


def isolate_call_ipc() -> None:
    """Give the calling process (a call's child, still privileged) an IPC namespace of its own,
    capped (``CALL_IPC_SYSCTLS``). The kernel frees it, and every object in it, when the call's last
    process ends; its creation costs tens of microseconds and its teardown runs in the background."""
    sys_unshare(CLONE_NEWIPC)
    for name, value in CALL_IPC_SYSCTLS.items():
        fd = os.open(f"/proc/sys/{name}", os.O_WRONLY)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)


def read_only(path: str) -> None:
    sys_mount(path, path, None, MS_BIND | MS_REC, None)
    sys_mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | PROC_FLAGS, None)


def private_mount_namespace() -> bool:
    """Move the template into a mount namespace of its own (so that what it mounts stays in this
    sandbox, even in the weak modes) and mount there a /proc in which a call sees only its own
    processes (not bubblewrap's command line nor the template's); False where it may not."""
    global PROC_FD
    PROC_FD = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)  # this one shows every process
    if LIBC is None:
        return False
    try:
        sys_unshare(CLONE_NEWNS)
        make_mounts_private()
    except OSError:
        return False
    with contextlib.suppress(OSError):  # without it calls see the sandbox's processes, nothing more
        try:
            sys_mount("proc", "/proc", "proc", PROC_FLAGS, "hidepid=invisible")
        except OSError:  # kernels before 5.8 spell it as a number
            sys_mount("proc", "/proc", "proc", PROC_FLAGS, "hidepid=2")
        for name in ("sysrq-trigger", "irq", "bus"):  # read-only, as bubblewrap has them
            if os.path.exists(f"/proc/{name}"):
                read_only(f"/proc/{name}")
    return True


def hide_mount_sources(paths: list[str], patches: dict[str, dict[str, str]]) -> list[str]:
    """Remount each of ``paths`` (bubblewrap's bind mounts of the Python installation, whose host
    source ``/proc/self/mountinfo`` would show) as a read-only overlay of itself with its layers named
    relative to its parent (``lowerdir=python:gem-sandbox/empty``), then drop the bind: no host path is
    left in the mount table. A path's ``patches`` (``{relative path: text}``) lie in a layer above it,
    on a small tmpfs detached once the overlays hold it. Returns what could not be hidden and why
    (empty: every path is hidden; a path that fails keeps its bind)."""
    if any(patches.values()):
        size = sum(len(t.encode()) for files in patches.values() for t in files.values())
        sys_mount(
            "tmpfs", OVERLAY_PATCHES, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size + (1 << 20)},mode=0755"
        )
    failed: list[str] = []
    for number, path in enumerate(paths):
        parent, name = os.path.split(path)
        layers = [name, os.path.relpath(OVERLAY_EMPTY, parent)]
        if patches.get(path):
            top = os.path.join(OVERLAY_PATCHES, str(number))
            for relative, text in patches[path].items():
                file = os.path.join(top, relative)
                folder = os.path.dirname(file)
                os.makedirs(folder, exist_ok=True)
                while folder != OVERLAY_PATCHES:  # the top layer's modes are the merged directories'
                    os.chmod(
                        folder, os.stat(os.path.join(path, os.path.relpath(folder, top))).st_mode & 0o7777
                    )
                    folder = os.path.dirname(folder)
                with open(file, "w", encoding="utf-8") as f:
                    f.write(text)
                os.chmod(file, 0o644)
            layers = [os.path.relpath(top, parent), name]
        try:
            os.chdir(parent)
            options = f"lowerdir={':'.join(layers)}"
            sys_mount("overlay", OVERLAY_STAGE, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, options)
        except OSError as exc:
            failed.append(f"{path}: overlay ({options}): {exc}")
            continue
        finally:
            os.chdir("/")
        try:
            sys_umount(path, MNT_DETACH)
        except OSError as exc:
            sys_umount(OVERLAY_STAGE, MNT_DETACH)
            failed.append(f"{path}: unmounting its bind: {exc}")
            continue
        sys_mount(OVERLAY_STAGE, path, None, MS_MOVE, None)
    if any(patches.values()):
        sys_umount(OVERLAY_PATCHES, MNT_DETACH)
    return failed


class Scratch:
    """A call's private file space where the template may mount: a fresh tmpfs (size- and
    inode-limited, owned by the call's uid) as its working directory and another at /dev/shm, mounted
    before the call's child is forked and detached after the call. The kernel frees what they held,
    so no directory a call leaves is ever walked."""

    def __init__(self, config: dict):
        self.config = config
        self.path = os.path.join(config["work_root"], "call")
        os.makedirs(self.path, mode=0o700, exist_ok=True)
        self.shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.mounted: list[str] = []

    def fresh(self) -> str:
        config, flags = self.config, MS_NOSUID | MS_NODEV
        options = tmpfs_options(config["tmpfs_mb"], config["tmpfs_inodes"], "0700", config["drop_uid"])
        sys_mount("tmpfs", self.path, "tmpfs", flags, options)
        self.mounted.append(self.path)
        if self.shm is not None:
            options = tmpfs_options(config["shm_mb"], config["shm_inodes"], "1777", None)
            sys_mount("tmpfs", self.shm, "tmpfs", flags | MS_NOEXEC, options)
            self.mounted.append(self.shm)
        return self.path

    def release(self) -> None:
        while self.mounted:
            sys_umount(self.mounted.pop(), MNT_DETACH)


def mount_workspace(config: dict) -> None:
    options = tmpfs_options(config["workspace_mb"], config["workspace_inodes"], "0700", config["drop_uid"])
    sys_mount("tmpfs", config["workspace"], "tmpfs", MS_NOSUID | MS_NODEV, options)


# ---- the child ----------------------------------------------------------------------------------
def run_child(
    config: dict, workdir: str, host_r: int, start_w: int, out_w: int, err_w: int, traced_r: int | None
) -> None:
    """Runs in the forked child; never returns.

    Everything that does not depend on the request happens at once, while the template is idle;
    then the child sleeps until the host's next request arrives on ``host_r`` (the template's own
    request pipe, which the template leaves alone meanwhile). It reads that one request, closes the
    pipe before any untrusted code runs, and tells the template the call's limits on ``start_w``
    (also closed before the code runs). The code then holds no descriptor of the harness; its exit
    status is what the kernel reports to the template.
    (A process woken from sleep is scheduled promptly, a freshly forked one is not, and a request
    that goes straight to the child skips a hop: on a busy machine this halves a call's latency.)
    """
    status = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        close_other_fds(keep=(host_r, start_w) if traced_r is None else (host_r, start_w, traced_r))
        if config.get("call_ipc"):
            isolate_call_ipc()
        cwd = config.get("workspace") or workdir
        os.chdir(cwd)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        queues = min(1 << 20, resource.getrlimit(resource.RLIMIT_MSGQUEUE)[1])  # POSIX queues: 1 MB
        resource.setrlimit(resource.RLIMIT_MSGQUEUE, (queues, queues))
        if traced_r is not None:  # the template traces this process (or gave up) before it drops
            os.read(traced_r, 1)  # its uid (after that, the template could not)
            os.close(traced_r)
        if config["drop_uid"] is not None:
            uid = config["drop_uid"]
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        if LIBC is not None:
            drop_all_capabilities()
        if config["seccomp"] and not config["seccomp"]():
            raise RuntimeError("could not install the seccomp filter")
        os.environ.clear()
        os.environ.update(CHILD_ENV, **config.get("child_env", {}), HOME=cwd, TMPDIR=workdir, PWD=cwd)
        sys.argv = [SOURCE_NAME]
    except BaseException as exc:  # the sandbox could not be set up: never run any code
        os.write(2, f"sandbox setup failed: {exc!r}\n".encode())
        os._exit(125)
    try:
        request = read_frame(host_r)
    except BaseException:
        os._exit(0)  # the host is gone
    try:
        os.close(host_r)
        if "op" in request:  # a request for the template itself: hand it over, run nothing
            os.write(start_w, json.dumps({"op": request["op"]}).encode())
            os._exit(0)
        limits_for_template = {k: request[k] for k in ("timeout", "max_output", "max_processes")}
        os.write(start_w, json.dumps(limits_for_template).encode())
        os.close(start_w)
        limits = {
            resource.RLIMIT_CPU: max(1, int(request["timeout"]) + 1),
            resource.RLIMIT_AS: int(request["memory_mb"]) * 1024 * 1024,
            resource.RLIMIT_FSIZE: int(request["max_file_mb"]) * 1024 * 1024,
        }
        if config["drop_uid"] is not None:  # RLIMIT_NPROC binds only processes without privileges
            limits[resource.RLIMIT_NPROC] = int(request["max_processes"])
        for which, value in limits.items():
            resource.setrlimit(which, (value, value + 1 if which == resource.RLIMIT_CPU else value))
        stdin = os.memfd_create("stdin")
        os.write(stdin, request.get("stdin", "").encode("utf-8", "replace"))
        os.lseek(stdin, 0, os.SEEK_SET)
        os.dup2(stdin, 0)
        os.close(stdin)
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    except BaseException as exc:
        os.write(2, f"sandbox setup failed: {exc!r}\n".encode())
        os._exit(125)
    try:
        source = request["code"]
        linecache.cache[SOURCE_NAME] = (len(source), None, source.splitlines(True), SOURCE_NAME)
        code = compile(source, SOURCE_NAME, "exec", dont_inherit=True)
        exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
        status = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            status = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != SOURCE_NAME:
            tb = tb.tb_next  # hide this file's frames from the traceback
        try:
            traceback.print_exception(type(exc), exc, tb)
        except BaseException:
            os.write(2, f"{type(exc).__name__}\n".encode())
        status = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(status & 0xFF)


# ---- the template -------------------------------------------------------------------------------
class Call:
    """A pre-forked child waiting for its request, with its pipes and working directory."""

    def __init__(self, config: dict, workdir: str, host_r: int):
        self.workdir = workdir
        self.start_r, start_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        traced_r, traced_w = os.pipe() if config.get("trace_exit") else (None, None)
        self.pid = os.fork()
        if self.pid == 0:
            run_child(config, self.workdir, host_r, start_w, out_w, err_w, traced_r)
        for fd in (start_w, out_w, err_w):
            os.close(fd)
        self.pidfd = os.pidfd_open(self.pid)
        self.wait_status: int | None = None
        self.limited = config["drop_uid"] is not None  # RLIMIT_NPROC holds: 1 means one thread
        self.traced = False
        if traced_w is not None:
            os.close(traced_r)
            try:  # still root and the template's own copy: it may be traced (only for its exit)
                sys_ptrace(PTRACE_SEIZE, self.pid, None, PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL)
                self.traced = True
            except OSError:
                pass
            os.write(traced_w, b"x")
            os.close(traced_w)

    def wait(self) -> int:
        while self.wait_status is None:
            _, status = os.waitpid(self.pid, 0)
            if os.WIFSTOPPED(status):  # a trace stop on the way out: let it go on
                with contextlib.suppress(OSError):
                    sys_ptrace(PTRACE_CONT, self.pid, None, None)
                continue
            self.wait_status = status
        return self.wait_status

    def exit_event(self) -> int | None:
        """Handle the child's trace stops (resuming it, with its signal): the exit status it is ending
        with (wait status form) once the kernel reports its exit, else None. The kernel stops a
        traced process at the start of its exit, before tearing it down: the status is known
        milliseconds earlier on a busy machine, and it is the kernel's, as from ``waitpid``."""
        status = None
        while self.wait_status is None:
            try:
                pid, raw = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid == 0:
                return status
            if not os.WIFSTOPPED(raw):
                self.wait_status = raw  # gone without an exit stop (SIGKILL)
                return raw
            sig, event = os.WSTOPSIG(raw), raw >> 16
            if sig == signal.SIGTRAP and event == PTRACE_EVENT_EXIT and threads(self.pid) == 1:
                message = ctypes.c_ulong()
                with contextlib.suppress(OSError):
                    sys_ptrace(PTRACE_GETEVENTMSG, self.pid, None, ctypes.addressof(message))
                    status = int(message.value) & 0xFFFF
            inject = 0 if event or sig in STOP_SIGNALS else sig
            with contextlib.suppress(OSError):
                sys_ptrace(PTRACE_CONT, self.pid, None, inject)
        return self.wait_status

    def wait_start(self) -> dict | None:
        """Block until the child took a request: its limits (or op), or None if it died first."""
        watch = [self.start_r, self.pidfd] + ([CHLD_R] if self.traced and CHLD_R is not None else [])
        while True:
            ready, _, _ = select.select(watch, [], [])
            if self.start_r in ready:
                message = os.read(self.start_r, 4096)
                if message:
                    return json.loads(message)
                return None
            if self.pidfd in ready:
                return None
            with contextlib.suppress(OSError):
                os.read(CHLD_R, 4096)
            self.exit_event()  # a trace stop (a signal) on the way: resume the child

    def setup_error(self) -> str:
        self.wait()
        ready, _, _ = select.select([self.err_r], [], [], 0)
        text = os.read(self.err_r, 4096).decode("utf-8", "replace").strip() if ready else ""
        return text or f"the call's process ended with status {os.waitstatus_to_exitcode(self.wait())}"

    def close(self, leftover_uid: int | None) -> None:
        """Kill what is left of the call and reap it (its IPC namespace goes with its last process)."""
        kill_call(self.pid if self.wait_status is None else None, leftover_uid)  # a reaped pid is not ours
        self.wait()
        if leftover_uid is not None:
            reap_leftovers(leftover_uid)
        for fd in (self.start_r, self.out_r, self.err_r, self.pidfd):
            with contextlib.suppress(OSError):
                os.close(fd)


def kill_call(pid: int | None, uid: int | None) -> None:
    """SIGKILL the call's process group (led by ``pid``) and, given ``uid``, every process of that uid."""
    if pid is not None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    if uid is None:
        return
    reaper = os.fork()
    if reaper == 0:
        with contextlib.suppress(BaseException):
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)  # every process this uid may signal, except the reaper
        os._exit(0)
    os.waitpid(reaper, 0)


def reap_leftovers(uid: int) -> None:
    """Reap every process the call left behind (the template is a child subreaper, so the call's
    orphans are its children), killing again until none is left: the next call starts clean."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            while os.waitpid(-1, os.WNOHANG) != (0, 0):
                pass
        except ChildProcessError:
            return
        time.sleep(0.001)
        kill_call(None, uid)


PROC_FD: int | None = None  # a /proc in which the template sees its calls' processes
CHLD_R: int | None = None  # readable when a child changes state (SIGCHLD's wake-up descriptor)


def watch_children() -> None:
    global CHLD_R
    CHLD_R, chld_w = os.pipe()
    os.set_blocking(CHLD_R, False)
    os.set_blocking(chld_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(chld_w, warn_on_full_buffer=False)


PF_EXITING = 0x4


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (None if it cannot be read)."""
    try:
        fd = os.open(f"{pid}/stat", os.O_RDONLY, dir_fd=PROC_FD)
        try:
            data = os.read(fd, 4096).decode("ascii", "replace")
        finally:
            os.close(fd)
        return data.rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def threads(pid: int) -> int:
    """How many threads the process has (0 if it cannot be read)."""
    fields = stat_fields(pid)
    try:
        return int(fields[17]) if fields else 0
    except (IndexError, ValueError):
        return 0


def exiting(pid: int) -> bool:
    """Whether the process has entered its exit (the kernel sets PF_EXITING first thing in do_exit;
    nothing else does, so the code cannot pretend)."""
    fields = stat_fields(pid)
    try:
        return bool(fields) and (fields[0] in "ZX" or bool(int(fields[6]) & PF_EXITING))
    except (IndexError, ValueError):
        return False


def serve_one(request: dict, call: Call) -> dict:
    """Collect what the child does with the request it took, within the request's limits."""
    start = time.monotonic()
    deadline = start + float(request["timeout"])
    cap = int(request["max_output"])
    out_r, err_r = call.out_r, call.err_r
    buffers: dict[int, bytearray] = {out_r: bytearray(), err_r: bytearray()}
    open_fds = [out_r, err_r]
    exited = timed_out = truncated = extended = False
    # A call of one process (one thread: its process limit is 1) is over when the kernel reports its
    # exit: nothing else can write to its pipes, so what they hold is all its output.
    single = int(request.get("max_processes", 1)) == 1 and call.limited
    early: int | None = None  # that report's exit status (wait status form)
    exit_watch = [call.pidfd, CHLD_R] if call.traced and CHLD_R is not None else [call.pidfd]
    drain_until = None  # once the child has exited, leftovers holding the pipes get a short grace

    def take(fd: int) -> None:
        nonlocal truncated
        chunk = os.read(fd, 65536)
        if not chunk:
            open_fds.remove(fd)
            return
        buffers[fd] += chunk
        if len(buffers[out_r]) + len(buffers[err_r]) > cap:
            truncated = True

    while (open_fds or not exited) and not truncated:
        now = time.monotonic()
        if exited and drain_until is None:
            drain_until = now if early is not None else now + 0.2
        limit = deadline if drain_until is None else min(deadline, drain_until)
        if now >= limit:
            if early is not None:  # read what the pipes hold, without waiting for more
                ready, _, _ = select.select(open_fds, [], [], 0)
                for fd in ready:
                    take(fd)
                if ready:
                    continue
                break
            if not exited and not extended and exiting(call.pid):
                # The code ended in time and the kernel is tearing the process down (on a loaded
                # machine that can wait for a CPU): its exit status is decided, wait for it.
                deadline, extended = now + EXIT_GRACE_S, True
                continue
            timed_out = not exited
            break
        watch = open_fds if exited else [*open_fds, *exit_watch]
        ready, _, _ = select.select(watch, [], [], limit - now)
        for fd in ready:
            if fd == call.pidfd:
                exited = True
            elif fd == CHLD_R:
                with contextlib.suppress(OSError):
                    os.read(CHLD_R, 4096)
                status = call.exit_event()  # resumes the child from any trace stop
                if status is not None and single and call.wait_status is None:
                    early, exited = status, True
                elif call.wait_status is not None:  # reaped: the status is final
                    exited = True
            elif fd in open_fds:
                take(fd)
    if not exited:
        kill_call(call.pid, None)
    status = early if early is not None else call.wait()
    exit_code = os.waitstatus_to_exitcode(status)  # from the kernel: the code cannot forge it
    stdout = bytes(buffers[out_r][:cap])
    stderr = bytes(buffers[err_r][: cap - len(stdout)])
    return {
        "stdout": stdout.decode("utf-8", "replace"),
        "stderr": stderr.decode("utf-8", "replace"),
        "exit_code": exit_code,
        "signal": signal.Signals(-exit_code).name if exit_code < 0 else None,
        "timed_out": timed_out,
        "truncated": truncated,
        "duration_s": time.monotonic() - start,
    }


# ---- cleanup where calls share the worker's namespaces --------------------------------------------
def wipe_tree(top: str, deadline: float, keep_top: bool = False) -> bool:
    """Remove everything below ``top`` (and ``top`` itself unless ``keep_top``), whatever a call left:
    any depth (the walk is iterative and moves the working directory, so no path grows long), any
    modes (directories are opened up first), links (never followed), FIFOs, sockets, odd names.
    Returns False, with part of the tree left, if ``deadline`` (``time.monotonic()``) passes first.
    Runs only when the call's processes are gone, so nothing changes the tree meanwhile."""
    try:
        mode = os.lstat(top).st_mode
    except FileNotFoundError:
        return True
    if not stat.S_ISDIR(mode):
        os.unlink(top)
        return True
    home = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    names: list[str] = []  # the directories entered below ``top``, outermost first
    try:
        _enter(top, mode)
        while True:
            subdir = None
            with os.scandir(".") as entries:
                for count, entry in enumerate(entries):
                    if count % 1024 == 1023 and time.monotonic() > deadline:
                        return False
                    if entry.is_dir(follow_symlinks=False):
                        subdir = entry
                        break
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.name)
            if subdir is not None:
                _enter(subdir.name, subdir.stat(follow_symlinks=False).st_mode)
                names.append(subdir.name)
                continue
            if not names:
                break
            if time.monotonic() > deadline:
                return False
            os.chdir("..")
            os.rmdir(names.pop())
    finally:
        os.fchdir(home)
        os.close(home)
    if not keep_top:
        os.rmdir(top)
    return True


def _enter(path: str, mode: int) -> None:
    if stat.S_IMODE(mode) & 0o700 != 0o700:
        os.chmod(path, stat.S_IMODE(mode) | 0o700)  # a directory (lstat), and nothing runs to swap it
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchdir(fd)
    finally:
        os.close(fd)


def remove_ipc_objects(uid: int) -> None:
    """Remove the System V IPC objects and POSIX shared memory and queues the call's ``uid`` owns or
    created (the call's processes are gone). System V objects go from a helper running as ``uid``."""
    helper = os.fork()
    if helper == 0:
        try:
            os.setresuid(uid, uid, uid)
            for kind, remove in (
                ("shm", lambda i: LIBC.shmctl(i, IPC_RMID, None)),
                ("msg", lambda i: LIBC.msgctl(i, IPC_RMID, None)),
                ("sem", lambda i: LIBC.semctl(i, 0, IPC_RMID)),
            ):
                for ident in _sysv_ids(kind, uid):
                    remove(ident)
        finally:
            os._exit(0)
    os.waitpid(helper, 0)
    for directory in ("/dev/shm", MQUEUE_DIR):
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        if entry.is_dir(follow_symlinks=False):
                            wipe_tree(entry.path, time.monotonic() + WIPE_BUDGET_S)
                        else:
                            os.unlink(entry.path)


def _sysv_ids(kind: str, uid: int) -> list[int]:
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            header, *rows = f.read().splitlines()
    except OSError:
        return []
    columns = header.split()
    found = []
    for row in rows:
        fields = dict(zip(columns, row.split()))
        with contextlib.suppress(KeyError, ValueError):
            if int(fields["uid"]) == uid or int(fields["cuid"]) == uid:
                found.append(int(fields[{"shm": "shmid", "msg": "msqid", "sem": "semid"}[kind]]))
    return found


class CallSpace:
    """Where each call works, and the cleanup of what it leaves besides processes.

    Where the template may mount, a ``Scratch`` of fresh tmpfs per call. Elsewhere a new directory
    under ``work_root`` per call, wiped after the call (directories not wiped within the budget are
    finished after later calls). Where calls share the worker's IPC namespace, the IPC objects of
    the calls' uid are removed after each call."""

    def __init__(self, config: dict):
        self.config = config
        self.scratch = Scratch(config) if config["template_mounts"] else None
        self.pending: list[str] = []
        self.number = 0

    def fresh(self) -> str:
        if self.scratch is not None:
            return self.scratch.fresh()
        workdir = os.path.join(self.config["work_root"], f"call{self.number}")
        self.number += 1
        os.mkdir(workdir, 0o700)
        if self.config["drop_uid"] is not None:
            os.chown(workdir, self.config["drop_uid"], self.config["drop_uid"])
        return workdir

    def clean(self, workdir: str) -> None:
        if not self.config["call_ipc"] and self.config["drop_uid"] is not None:
            remove_ipc_objects(self.config["drop_uid"])
        if self.scratch is not None:
            self.scratch.release()
            return
        self.pending.append(workdir)
        deadline = time.monotonic() + WIPE_BUDGET_S
        while self.pending:
            try:
                done = wipe_tree(self.pending[0], deadline)
            except OSError:
                done = True  # cannot be removed at all (never seen): stop trying
            if not done:
                return
            self.pending.pop(0)


# ---- workspace ----------------------------------------------------------------------------------
def setup_workspace(config: dict) -> None:
    workspace = config["workspace"]
    os.makedirs(workspace, exist_ok=True)
    if config["template_mounts"]:
        mount_workspace(config)
    else:
        os.chmod(workspace, 0o700)
        if config["drop_uid"] is not None:
            os.chown(workspace, config["drop_uid"], config["drop_uid"])


def reset_workspace(config: dict) -> dict:
    """An empty workspace: a fresh tmpfs (the old one is freed by the kernel), or a wiped directory."""
    start = time.monotonic()
    if not config.get("workspace"):
        return {"error": "this sandbox has no workspace"}
    try:
        if config["template_mounts"]:
            sys_umount(config["workspace"], MNT_DETACH)
            mount_workspace(config)
        else:
            if not wipe_tree(config["workspace"], start + 30.0, keep_top=True):
                return {"error": "the workspace could not be emptied within 30 s"}
            setup_workspace(config)
    except OSError as exc:
        return {"error": f"the workspace could not be reset: {exc}"}
    return {"exit_code": 0, "duration_s": time.monotonic() - start}


def run_op(config: dict, op: str) -> dict:
    if op == "reset_workspace":
        return reset_workspace(config)
    return {"error": f"unknown request {op!r}"}


# ---- main ---------------------------------------------------------------------------------------
def main() -> None:
    with contextlib.suppress(BrokenPipeError, EOFError):  # the host went away: end quietly
        serve()


def serve() -> None:
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    config = read_frame(proto_in)
    config.setdefault("tmpfs_mb", 64)
    config.setdefault("tmpfs_inodes", 16_384)
    config.setdefault("shm_mb", 16)
    config.setdefault("shm_inodes", 1024)
    config.setdefault("workspace_mb", 16)
    config.setdefault("workspace_inodes", 4096)
    with contextlib.suppress(OSError, AttributeError):  # orphans of a call become our children
        pr_set_child_subreaper = 36
        LIBC.prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    if config["drop_uid"] is not None and (os.getuid() != 0 or not world_readable(sys.prefix)):
        # No privilege to switch uid, or another uid could not read the interpreter (a host Python
        # under /root in the weak modes): the calls keep the sandbox's own uid.
        config["drop_uid"] = None
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            config["cap_last"] = int(f.read())
    except (OSError, ValueError):
        config["cap_last"] = 40
    config["template_mounts"] = private_mount_namespace()
    config["paths_shown"] = ["no private mount namespace"] if not config["template_mounts"] else []
    if config["template_mounts"] and config.get("hide"):
        try:
            config["paths_shown"] = hide_mount_sources(config["hide"], config.get("patches", {}))
        except OSError as exc:  # e.g. no room for the patches: the binds stay as they were
            config["paths_shown"] = [f"the patches' tmpfs: {exc}"]
    if config.get("python_path"):  # the host's sys.path, as this sandbox shows it
        sys.path[:] = config["python_path"]
        for site_dir in config.get("site_dirs", []):  # its .pth files, as the host's site did
            site.addsitedir(site_dir)
    config.pop("patches", None)
    if LIBC is not None:  # no process of this sandbox ever gains a capability again (through exec)
        drop_bounding_set(config["cap_last"])
    os.makedirs(config["work_root"], mode=0o711, exist_ok=True)
    if config.get("workspace"):
        setup_workspace(config)
    preloaded = []
    for name in config["preload"]:
        try:
            __import__(name)
            preloaded.append(name)
        except Exception:
            pass
    if config["seccomp"]:
        install = prepare_seccomp()
        config["seccomp"] = install if install is not None and probe_seccomp(install) else False
    config["call_ipc"] = probe_call_ipc()
    if config.get("trace_exit"):
        watch_children()
    if not config["call_ipc"] and config.get("own_ipc_ns") and os.getuid() == 0:
        # Calls share the worker's IPC namespace: at least no System V segment outlives its last
        # attachment there (the namespace is the worker's own, never the host's).
        with contextlib.suppress(OSError), open("/proc/sys/kernel/shm_rmid_forced", "w") as f:
            f.write("1")
    space = CallSpace(config)
    write_frame(
        proto_out,
        {
            "ready": True,
            "seccomp": bool(config["seccomp"]),
            "drop_uid": config["drop_uid"],
            "preloaded": preloaded,
            "call_namespaces": {"ipc": config["call_ipc"], "tmpfs": config["template_mounts"]},
            "mount_sources_hidden": not config["paths_shown"],
            "mount_sources_shown": config["paths_shown"],  # why not, where they are not
        },
    )
    while True:
        workdir = space.fresh()
        call = Call(config, workdir, proto_in)
        message = call.wait_start()
        leftover_uid = None
        if message is None:  # the child could not set up: answer the request it did not take
            select.select([proto_in], [], [], 0.5)
            read_frame(proto_in)  # raises EOFError when the host is gone
            reply = {"error": f"sandbox setup failed: {call.setup_error()}"}
        elif "op" in message:  # the child handed the request over and exits: the template runs it
            call.close(None)
            reply = run_op(config, message["op"])
        else:
            try:
                reply = serve_one(message, call)
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            # With a process limit of 1 the call could not fork: its own process group was all there was.
            if message.get("max_processes", 1) > 1:
                leftover_uid = config["drop_uid"]
        write_frame(proto_out, reply)
        # After answering: clean up; the next turn of the loop forks the next child.
        try:
            call.close(leftover_uid)
            space.clean(workdir)
        except Exception as exc:  # never let a call's leftovers end the worker
            with contextlib.suppress(OSError):
                os.write(2, f"sandbox cleanup: {exc!r}\n".encode())


def world_readable(path: str) -> bool:
    """Whether any uid can reach ``path`` (every ancestor directory is world-searchable)."""
    path = os.path.realpath(path)
    while True:
        if not os.stat(path).st_mode & 0o001:
            return False
        if path == "/":
            return True
        path = os.path.dirname(path)


def probe_seccomp(install) -> bool:
    """Whether the filter installs here (tried in a throw-away child)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0 if install() else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def probe_call_ipc() -> bool:
    """Whether a call's child can get an IPC namespace of its own here (tried in a throw-away child)."""
    if LIBC is None:
        return False
    pid = os.fork()
    if pid == 0:
        try:
            isolate_call_ipc()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


if __name__ == "__main__":
    main()

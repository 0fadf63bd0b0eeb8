"""The template process: runs INSIDE the sandbox, forks one throw-away child per call.

This file is executed as a script by the sandbox's own interpreter (``python -I template.py CONFIG``);
it uses the standard library only and never imports ``gem_core`` (the project is not visible in the
sandbox). It starts once per pool worker, imports the modules named in ``preload``, answers
``{"ready": ...}`` on fd 1 and then serves calls (frames: 8-byte big-endian length + JSON).

Each call runs in a fresh ``fork()`` of this clean template, so no state leaks between calls. The
child for the next call is forked in advance and, before it ever sees untrusted code:

* becomes a session leader in a fresh, empty working directory (the only writable place);
* gets stdout/stderr on pipes read by the template, every other descriptor closed, and an
  environment holding only a few harmless variables;
* drops to an unprivileged uid/gid of its own (no capabilities, so ``RLIMIT_NPROC`` is enforced and
  it cannot signal or ptrace the template, which runs as root inside the sandbox);
* installs a seccomp filter (x86-64) refusing namespace creation, mounts, ptrace, kernel keyrings,
  bpf, module loading and io_uring;
* then sleeps until the host's request arrives, takes it (closing the request pipe), sets the
  request's limits (CPU seconds, address space, process count, file size), puts the request's
  input on stdin and runs the code.

The template enforces the wall-clock limit and the output cap, answers the host, then kills every
process of the call (``kill(-1)`` from a helper running as the call's uid when the call could
fork), reaps them as a child subreaper, wipes the working directory and forks the next child.

With a ``workspace`` in the config (opt-in, e.g. a terminal's working directory) every call starts
in that one directory instead, owned by the calls' uid: its files outlive the call (processes never
do), while each call still gets a private scratch directory as ``TMPDIR``.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import linecache
import os
import resource
import select
import shutil
import signal
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
    if os.uname().machine != "x86_64":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    program = seccomp_program()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2

    def install() -> bool:
        if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
            return False
        return libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) == 0

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


# ---- the child ----------------------------------------------------------------------------------
def run_child(
    config: dict, workdir: str, host_r: int, start_w: int, out_w: int, err_w: int, status_w: int
) -> None:
    """Runs in the forked child; never returns.

    Everything that does not depend on the request happens at once, while the template is idle;
    then the child sleeps until the host's next request arrives on ``host_r`` (the template's own
    request pipe, which the template leaves alone meanwhile). It reads that one request, closes the
    pipe before any untrusted code runs, and tells the template the call's limits on ``start_w``.
    (A process woken from sleep is scheduled promptly, a freshly forked one is not, and a request
    that goes straight to the child skips a hop: on a busy machine this halves a call's latency.)
    When the code is done the child closes its output and reports its exit status on ``status_w``,
    so the template can answer without waiting for the process to be torn down.
    """
    status = 1
    try:
        os.setsid()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        close_other_fds(keep=(host_r, start_w, status_w))
        cwd = config.get("workspace") or workdir
        os.chdir(cwd)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        if config["drop_uid"] is not None:
            uid = config["drop_uid"]
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        if config["seccomp"] and not config["seccomp"]():
            raise RuntimeError("could not install the seccomp filter")
        os.environ.clear()
        os.environ.update(CHILD_ENV, HOME=cwd, TMPDIR=workdir, PWD=cwd)
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
        with contextlib.suppress(BaseException):
            os.close(1)
            os.close(2)
            os.write(status_w, bytes([status & 0xFF]))
        os._exit(status & 0xFF)


# ---- the template -------------------------------------------------------------------------------
class Call:
    """A pre-forked child waiting for its request, with its pipes and working directory."""

    def __init__(self, config: dict, number: int, host_r: int):
        self.workdir = os.path.join(config["work_root"], f"call{number}")
        os.mkdir(self.workdir, 0o700)
        if config["drop_uid"] is not None:
            os.chown(self.workdir, config["drop_uid"], config["drop_uid"])
        self.start_r, start_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        self.status_r, status_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            run_child(config, self.workdir, host_r, start_w, out_w, err_w, status_w)
        for fd in (start_w, out_w, err_w, status_w):
            os.close(fd)
        self.pidfd = os.pidfd_open(self.pid)
        self.wait_status: int | None = None

    def wait(self) -> int:
        if self.wait_status is None:
            _, self.wait_status = os.waitpid(self.pid, 0)
        return self.wait_status

    def wait_start(self) -> dict | None:
        """Block until the child took a request: its limits, or None if it died first."""
        ready, _, _ = select.select([self.start_r, self.pidfd], [], [])
        if self.start_r in ready:
            message = os.read(self.start_r, 4096)
            if message:
                return json.loads(message)
        return None

    def setup_error(self) -> str:
        self.wait()
        ready, _, _ = select.select([self.err_r], [], [], 0)
        text = os.read(self.err_r, 4096).decode("utf-8", "replace").strip() if ready else ""
        return text or f"the call's process ended with status {os.waitstatus_to_exitcode(self.wait())}"

    def close(self, leftover_uid: int | None) -> None:
        """Kill what is left of the call, reap it, wipe its directory."""
        kill_call(self.pid, leftover_uid)
        self.wait()
        if leftover_uid is not None:
            reap_leftovers(leftover_uid)
        for fd in (self.start_r, self.out_r, self.err_r, self.status_r, self.pidfd):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.workdir, ignore_errors=True)


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


def serve_one(request: dict, call: Call) -> dict:
    """Collect what the child does with the request it took, within the request's limits."""
    start = time.monotonic()
    deadline = start + float(request["timeout"])
    cap = int(request["max_output"])
    out_r, err_r = call.out_r, call.err_r
    buffers: dict[int, bytearray] = {out_r: bytearray(), err_r: bytearray()}
    open_fds = [out_r, err_r]
    status: int | None = None  # the exit status the child reported
    watch = [call.status_r, call.pidfd]  # until the child reports or exits
    timed_out = truncated = False
    drain_until = None  # once the child is done, leftovers holding the pipes get a short grace
    while (open_fds or watch) and not truncated:
        now = time.monotonic()
        if not watch and drain_until is None:
            drain_until = now + 0.2
        limit = deadline if drain_until is None else min(deadline, drain_until)
        if now >= limit:
            timed_out = bool(watch)
            break
        ready, _, _ = select.select(open_fds + watch, [], [], limit - now)
        for fd in ready:
            if fd == call.pidfd:
                watch = []
            elif fd == call.status_r:
                report = os.read(fd, 16)
                if len(report) == 1:
                    status, watch = report[0], []
                else:  # closed (or garbled) by the code: wait for the exit instead
                    watch.remove(fd)
            else:
                chunk = os.read(fd, 65536)
                if not chunk:
                    open_fds.remove(fd)
                    continue
                buffers[fd] += chunk
                if len(buffers[out_r]) + len(buffers[err_r]) > cap:
                    truncated = True
    if status is None:
        if timed_out or truncated:
            kill_call(call.pid, None)
        exit_code = os.waitstatus_to_exitcode(call.wait())
    else:
        exit_code = status
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


def main() -> None:
    with contextlib.suppress(BrokenPipeError, EOFError):  # the host went away: end quietly
        serve()


def serve() -> None:
    config = json.loads(sys.argv[1])
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.makedirs(config["work_root"], mode=0o711, exist_ok=True)
    with contextlib.suppress(OSError, AttributeError):  # orphans of a call become our children
        pr_set_child_subreaper = 36
        ctypes.CDLL(None).prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    if config["drop_uid"] is not None and (os.getuid() != 0 or not world_readable(sys.prefix)):
        # No privilege to switch uid, or another uid could not read the interpreter (a host Python
        # under /root in the weak modes): the calls keep the sandbox's own uid.
        config["drop_uid"] = None
    if config.get("workspace"):
        os.makedirs(config["workspace"], exist_ok=True)
        os.chmod(config["workspace"], 0o700)
        if config["drop_uid"] is not None:
            os.chown(config["workspace"], config["drop_uid"], config["drop_uid"])
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
    write_frame(
        proto_out,
        {
            "ready": True,
            "seccomp": bool(config["seccomp"]),
            "drop_uid": config["drop_uid"],
            "preloaded": preloaded,
        },
    )
    number = 0
    while True:
        call = Call(config, number, proto_in)
        request = call.wait_start()
        if request is None:  # the child could not set up: answer the request it did not take
            select.select([proto_in], [], [], 0.5)
            read_frame(proto_in)  # raises EOFError when the host is gone
            reply = {"error": f"sandbox setup failed: {call.setup_error()}"}
            request = {}
        else:
            try:
                reply = serve_one(request, call)
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"}
        write_frame(proto_out, reply)
        # After answering: clean up (with a process limit of 1 the call could not fork, so its own
        # process group was all there was); the next turn of the loop forks the next child.
        call.close(config["drop_uid"] if request.get("max_processes", 1) > 1 else None)
        number += 1


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


if __name__ == "__main__":
    main()

"""The sandbox against what a call can leave behind or forge: IPC objects, shared memory, a forged exit
status, cleanup bombs (deep, wide, locked, looping, odd), and what /proc shows about the harness.

Every case: contained, bounded in time, the pool healthy after (no worker replaced), the next call
clean. Runs in the real sandbox (bubblewrap; CI installs it and runs as root).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

import gem_core
from gem_core.tools.python import PythonTool
from gem_core.tools.sandbox import SandboxLimits, SandboxPool, detect_mode, launcher
from gem_core.wrappers.tools import ToolEnvWrapper

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(detect_mode() != "bwrap", reason="the security suite needs bubblewrap"),
]

TIMEOUT = 3.0
CLEANUP = 3.0
BOUND = TIMEOUT + CLEANUP  # a contained call ends within its limit plus the cleanup
NEXT_CALL_BOUND = 1.0  # the call after an attack: what the attack left must not delay it
PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pool():
    limits = SandboxLimits(timeout=TIMEOUT, memory_mb=256, max_output=65_536, max_processes=1)
    with SandboxPool(size=2, limits=limits) as p:
        yield p
        assert p.run("print(6 * 7)").stdout == "42\n", "the pool must survive the whole suite"
        assert p.restarts == 0, "no attack may cost a worker"


def timed(pool: SandboxPool, code: str, **limits):
    start = time.monotonic()
    result = pool.run(code, **limits)
    elapsed = time.monotonic() - start
    assert elapsed < limits.get("timeout", TIMEOUT) + CLEANUP, f"the call took {elapsed:.1f} s"
    assert result.error is None, result.error
    return result


def every_worker(pool: SandboxPool, code: str, **limits) -> list:
    """Run ``code`` once on each worker: the calls overlap (each sleeps a little after its code), so
    each holds a worker of its own."""
    results: list = [None] * pool.size

    def one(i: int) -> None:
        results[i] = pool.run(code + "\nimport time\ntime.sleep(0.3)\n", **limits)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(pool.size)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.monotonic() - start < BOUND
    return results


def assert_healthy_and_clean(pool: SandboxPool) -> None:
    """The next calls (on every worker) are fast, see an empty working directory, no IPC object, an
    empty /dev/shm and only their own process."""
    check = (
        "import os\n"
        "ipc = [line for kind in ('shm', 'msg', 'sem') for line in open('/proc/sysvipc/' + kind)"
        ".read().splitlines()[1:]]\n"
        "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "print(os.listdir('.'), os.listdir('/dev/shm'), ipc, len(pids))\n"
    )
    start = time.monotonic()
    r = pool.run(check)  # the worker that ran the attack (the idle queue is last in, first out)
    elapsed = time.monotonic() - start
    assert r.ok, (r.error, r.stderr)
    assert r.stdout == "[] [] [] 1\n", r.stdout
    assert elapsed < NEXT_CALL_BOUND, f"the next call took {elapsed:.2f} s"
    for r in every_worker(pool, check):
        assert r.ok and r.stdout == "[] [] [] 1\n", (r.error, r.stdout)
    assert pool.restarts == 0


def test_every_layer_is_on(pool):
    iso = pool.isolation
    assert iso["mode"] == "bwrap" and iso["uid_drop"] and iso["seccomp"], iso
    assert iso["call_namespaces"] == {"ipc": True, "tmpfs": True}, iso


def test_calls_hold_no_capability_and_no_harness_descriptor(pool):
    code = (
        "import os\n"
        "status = dict(l.split(':\\t') for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
        "print([status[k].strip() for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb')])\n"
        "print(status['NoNewPrivs'].strip(), status['Seccomp'].strip())\n"
        "print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))\n"
    )
    r = timed(pool, code)
    caps, flags, fds = r.stdout.splitlines()
    assert caps == str(["0000000000000000"] * 5), caps
    assert flags == "1 2"
    assert fds == "[0, 1, 2, 3]", fds  # stdin, stdout, stderr and the listing's own descriptor


# ---- no state survives a call ------------------------------------------------------------------
SYSV = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
IPC_CREAT, IPC_EXCL = 0o1000, 0o2000
mode = sys.stdin.read().strip()
found = []
if mode == "create":
    sid = libc.shmget(0x41424344, 4096, IPC_CREAT | 0o666)
    addr = libc.shmat(sid, None, 0)
    ctypes.memmove(addr, b"secret-shm", 10)  # stays attached until the call ends
    mid = libc.msgget(0x41424345, IPC_CREAT | 0o666)
    class Msg(ctypes.Structure):
        _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 16)]
    assert libc.msgsnd(mid, ctypes.byref(Msg(1, b"secret-msg")), 16, 0) == 0
    sem = libc.semget(0x41424346, 1, IPC_CREAT | 0o666)
    print(sid >= 0, mid >= 0, sem >= 0, addr not in (None, 2**64 - 1))
else:
    for get, key in ((lambda k: libc.shmget(k, 0, 0), 0x41424344), (lambda k: libc.msgget(k, 0), 0x41424345),
                     (lambda k: libc.semget(k, 0, 0), 0x41424346)):
        found.append(get(key) >= 0)
    print(found)
"""

POSIX = """
import _posixshmem, ctypes, os, sys
rt = ctypes.CDLL("librt.so.1", use_errno=True)
O_CREAT, O_RDWR = 0o100, 0o2
if sys.stdin.read().strip() == "create":
    fd = _posixshmem.shm_open("/gem_secret", os.O_CREAT | os.O_RDWR, 0o600)
    os.write(fd, b"secret-shm")
    q = rt.mq_open(b"/gem_secret_queue", O_CREAT | O_RDWR, 0o600, None)
    print(q >= 0, rt.mq_send(q, b"secret-mq", 9, 0) == 0, os.listdir("/dev/shm"))
else:
    try:
        _posixshmem.shm_open("/gem_secret", os.O_RDWR, 0o600)
        shm_found = True
    except FileNotFoundError:
        shm_found = False
    print([shm_found, rt.mq_open(b"/gem_secret_queue", O_RDWR) >= 0, os.listdir("/dev/shm")])
"""


@pytest.mark.parametrize("script", [SYSV, POSIX], ids=["sysv-shm-msg-sem", "posix-shm-mqueue"])
def test_ipc_objects_do_not_survive_the_call(pool, script):
    r = timed(pool, script, stdin="create")
    assert r.ok, r.stderr
    assert r.stdout.startswith("True True"), r.stdout
    for later in every_worker(pool, script, stdin="look"):
        assert later.ok, later.stderr
        assert later.stdout.startswith("[False, False"), later.stdout
        if script is POSIX:
            assert later.stdout.strip().endswith("[]]"), later.stdout
    assert_healthy_and_clean(pool)


def test_sockets_and_leftover_processes_carry_nothing_to_the_next_call(pool):
    serve = (
        "import os, socket, time\n"
        "s = socket.socket(socket.AF_UNIX)\ns.bind('\\0gem-secret')\ns.listen(1)\n"
        "if os.fork() == 0:\n    time.sleep(60)\n"  # a leftover keeping the socket open
        "print('listening')\n"
    )
    r = timed(pool, serve, max_processes=4)
    assert r.stdout == "listening\n", (r.stdout, r.stderr)
    probe = (
        "import socket\ns = socket.socket(socket.AF_UNIX)\n"
        "try:\n    s.connect('\\0gem-secret')\n    print('connected')\n"
        "except OSError as exc:\n    print('refused', exc.errno)\n"
    )
    for later in every_worker(pool, probe):
        assert later.stdout.startswith("refused"), later.stdout
    assert_healthy_and_clean(pool)


def test_ipc_objects_do_not_reach_another_pool_or_tool_sharing_the_worker():
    tool_a = PythonTool(timeout=TIMEOUT, workers=1)
    tool_b = PythonTool(timeout=TIMEOUT, workers=1)
    assert tool_a.pool is tool_b.pool  # the process-wide shared pool
    assert tool_a.run(SYSV, stdin="create").stdout.startswith("True True")
    assert tool_b.run(SYSV, stdin="look").stdout == "[False, False, False]\n"
    assert tool_a.run(POSIX, stdin="create").stdout.startswith("True True")
    assert tool_b.run(POSIX, stdin="look").stdout.startswith("[False, False, []]")


def test_shared_memory_counts_against_the_call_and_dies_with_it(pool):
    """With a 256 MB limit: four 100 MB System V segments cannot be pinned (a detached segment is
    destroyed at once, attached ones count against the address space), and /dev/shm holds 16 MB."""
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
size, kept, attached = 100 * 1024 * 1024, [], []
for i in range(4):
    sid = libc.shmget(0x51000000 + i, size, 0o1000 | 0o600)
    addr = libc.shmat(sid, None, 0)
    if addr in (None, 2**64 - 1):
        print("attach refused", i, ctypes.get_errno())
        continue
    ctypes.memset(addr, 1, size)
    libc.shmdt(ctypes.c_void_p(addr))  # detached: gone at once
    kept.append(libc.shmget(0x51000000 + i, 0, 0) >= 0)
print("kept", kept)
for i in range(4):  # all attached at once: past the address-space limit
    sid = libc.shmget(0x52000000 + i, size, 0o1000 | 0o600)
    addr = libc.shmat(sid, None, 0)
    attached.append(addr not in (None, 2**64 - 1))
print("attached", attached)
try:
    for i in range(8):  # 8 MB files (a file may hold 16 MB): /dev/shm holds 16 MB in all
        with open(f"/dev/shm/big{i}", "wb") as f:
            f.write(b"x" * 8 * 1024 * 1024)
    print("wrote 64 MB to /dev/shm")
except OSError as exc:
    print("shm full", exc.errno)
"""
    before = _host_shmem_kb()
    r = timed(pool, code, timeout=15.0)  # it touches 400 MB: 3 s was too short beside a busy test worker
    assert r.ok, r.stderr
    assert "kept [False, False, False, False]" in r.stdout, r.stdout
    assert "attached [True, True, False, False]" in r.stdout, r.stdout
    assert "shm full 28" in r.stdout, r.stdout  # ENOSPC
    time.sleep(0.5)  # the call's IPC namespace is freed in the background
    assert _host_shmem_kb() - before < 150_000, "shared memory outlived the call"
    assert_healthy_and_clean(pool)


def _host_shmem_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1])
    raise AssertionError("no Shmem in /proc/meminfo")


# ---- the exit status cannot be forged ----------------------------------------------------------
FORGE = """
import os, time
for fd in range(3, 1024):
    for data in (b"\\x00", b"\\x00" * 16, b"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02{}", b"0"):
        try:
            os.write(fd, data)
        except OSError:
            pass
time.sleep(0.05)
"""
CRASHES = {
    "abort": "os.abort()",
    "sigkill": "import signal\nos.kill(os.getpid(), signal.SIGKILL)",
    "segfault": "import ctypes\nctypes.string_at(0)",
    "exit 1": "os._exit(1)",
    "sys.exit": "raise SystemExit(3)",
    "exception": "raise RuntimeError('crash')",
    "close and crash": "os.closerange(0, 1024)\nos.abort()",
}


@pytest.mark.parametrize("crash", CRASHES)
def test_a_forged_status_never_makes_a_crash_ok(pool, crash):
    r = timed(pool, FORGE + CRASHES[crash])
    assert not r.ok and r.exit_code != 0, r
    assert_healthy_and_clean(pool)


def test_a_forged_status_earns_no_tool_success_reward():
    tool = PythonTool(timeout=TIMEOUT, workers=1)
    env = ToolEnvWrapper(gem_core.make("game:GuessTheNumber-v1-easy"), [tool], tool_success_reward=0.25)
    try:
        env.reset(seed=0)
        for crash in ("os.abort()", "import ctypes\nctypes.string_at(0)"):
            _, reward, _, _, info = env.step(f"<python>{FORGE}{crash}</python>")
            assert reward <= 0.0 and not info["tool_ok"], (reward, info)
        _, reward, _, _, info = env.step("<python>print(1)</python>")
        assert info["tool_ok"] and info["tool_bonus_pending"] == 0.25  # paid if the game is won
    finally:
        env.close()


# ---- cleanup bombs: nothing a call leaves may fail or delay the next call -------------------------
BOMBS = {
    "1100 levels deep": "import os\nfor _ in range(1100):\n    os.mkdir('d')\n    os.chdir('d')\nprint('made')",
    "3000 levels deep (past PATH_MAX)": (
        "import os\nfor _ in range(3000):\n    os.mkdir('dd')\n    os.chdir('dd')\nprint('made')"
    ),
    "deep and locked": (
        "import os\nfor _ in range(1200):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "for _ in range(1200):\n    os.chdir('..')\n    os.chmod('d', 0)\nprint('made')"
    ),
    "as many files as it can": (
        "import os\nn = 0\ntry:\n    while True:\n        open(f'f{n}', 'w').close()\n        n += 1\n"
        "except OSError as exc:\n    print('stopped', n, exc.errno)"
    ),
    "as many directories as it can": (
        "import os\nn = 0\ntry:\n    while True:\n        os.mkdir(f'd{n}')\n        n += 1\n"
        "except OSError as exc:\n    print('stopped', n, exc.errno)"
    ),
    "locked modes": (
        "import os\nos.makedirs('a/b/c')\nopen('a/b/c/f', 'w').write('x')\n"
        "os.chmod('a/b/c', 0)\nos.chmod('a/b', 0)\nos.chmod('a', 0)\nos.chmod('.', 0o500)\nprint('made')"
    ),
    "links, loops, FIFOs, sockets": (
        "import os, socket\nos.symlink('loop', 'loop')\nos.symlink('.', 'self')\nos.symlink('/', 'root')\n"
        "os.mkdir('x')\nos.symlink('../x', 'x/up')\nos.mkfifo('fifo')\n"
        "s = socket.socket(socket.AF_UNIX)\ns.bind('sock')\nos.link('fifo', 'hard')\nprint('made')"
    ),
    "odd names": (
        "import os\nfor name in ['-rf', '\\n', ' ', '..\\n..', '*', '~', 'a' * 255, '\\udcff\\udcfe']:\n"
        "    open(name, 'w').close()\nos.mkdir('\\x01dir')\nprint('made')"
    ),
    "full tmpfs": "open('big', 'wb').write(b'x' * 200 * 1024 * 1024)",
    "in TMPDIR and /dev/shm": (
        "import os\nos.chdir(os.environ['TMPDIR'])\nfor _ in range(1100):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "os.chdir('/dev/shm')\nfor _ in range(1100):\n    os.mkdir('d')\n    os.chdir('d')\nprint('made')"
    ),
    "left open by a forked child": (
        "import os, time\nif os.fork() == 0:\n    os.chdir('.')\n    fd = os.open('.', os.O_RDONLY)\n    time.sleep(60)\n"
        "for _ in range(1100):\n    os.mkdir('d')\n    os.chdir('d')\nprint('made')"
    ),
}


@pytest.mark.parametrize("bomb", BOMBS)
def test_cleanup_bombs_are_contained(pool, bomb):
    max_processes = 4 if "forked" in bomb else 1
    r = timed(pool, BOMBS[bomb], max_processes=max_processes)
    assert r.error is None
    assert_healthy_and_clean(pool)


def test_the_inode_cap_stops_a_file_flood_early(pool):
    r = timed(pool, BOMBS["as many files as it can"])
    stopped, count, errno = r.stdout.split()
    assert stopped == "stopped" and int(count) < 20_000 and errno == "28", r.stdout  # ENOSPC
    assert_healthy_and_clean(pool)


def test_a_pool_without_call_namespaces_still_cleans_up(monkeypatch):
    """The fallback (no mounts, no IPC namespace per call, as where the template lacks privileges):
    the iterative wipe and the removal of the uid's IPC objects, same guarantees, same bombs."""
    monkeypatch.setattr(
        launcher, "TEMPLATE_CAPS", tuple(c for c in launcher.TEMPLATE_CAPS if c != "CAP_SYS_ADMIN")
    )
    limits = SandboxLimits(timeout=TIMEOUT, memory_mb=256, max_output=65_536)
    with SandboxPool(size=1, limits=limits) as p:
        assert p.isolation["call_namespaces"] == {"ipc": False, "tmpfs": False}
        for script in (SYSV, POSIX):
            assert p.run(script, stdin="create").stdout.startswith("True True")
            assert p.run(script, stdin="look").stdout.startswith("[False, False")
        for bomb in (
            "1100 levels deep",
            "3000 levels deep (past PATH_MAX)",
            "deep and locked",
            "locked modes",
            "links, loops, FIFOs, sockets",
            "odd names",
        ):
            r = timed(p, BOMBS[bomb])
            assert r.error is None, bomb
            start = time.monotonic()
            after = p.run("import os\nprint(os.listdir('.'))")
            assert after.stdout == "[]\n" and time.monotonic() - start < BOUND, (bomb, after)
        assert p.restarts == 0


# ---- what the sandbox shows of the harness --------------------------------------------------------
def test_proc_shows_only_the_call_and_no_host_path_or_configuration(pool):
    code = (
        "import os, glob\n"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()) == [str(os.getpid())])\n"
        "print(os.path.exists('/proc/1/cmdline'))\n"
        "text = open('/proc/self/mountinfo').read() + open('/proc/self/cmdline').read()\n"
        "for path in glob.glob('/proc/*/cmdline'):\n"
        "    text += open(path).read()\n"
        "print(text)\n"
    )
    r = timed(pool, code)
    own_only, pid1, text = r.stdout.split("\n", 2)
    assert own_only == "True" and pid1 == "False", r.stdout
    template = str(launcher.TEMPLATE)
    for secret in (template, "gem_core", "drop_uid", "--ro-bind", "--cap-add", "bwrap"):
        assert secret not in text, secret
    # The project is not there at all (the interpreter shows at /opt/python).
    r = timed(pool, f"import os\nos.listdir({str(PROJECT)!r})")
    assert not r.ok and "FileNotFoundError" in r.stderr


HOST_VIEWS = r"""
import importlib.metadata, json, os, sys, sysconfig
views = {}
for name in ("mountinfo", "mounts", "mountstats", "maps", "cmdline", "environ", "status", "cwd"):
    try:
        path = f"/proc/self/{name}"
        views[name] = os.readlink(path) if name == "cwd" else open(path, errors="replace").read()
    except OSError as exc:
        views[name] = repr(exc)
views["sys"] = repr([sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.path,
                     sys.orig_argv, getattr(sys, "_base_executable", ""), sys.meta_path, sys.path_hooks])
views["sysconfig"] = json.dumps([sysconfig.get_config_vars(), sysconfig.get_paths()], default=str)
views["modules"] = repr(sorted(str(getattr(m, "__file__", "")) for m in list(sys.modules.values())))
views["listing"] = repr([os.listdir(d) for d in ("/", "/opt", "/opt/venv")])
views["metadata"] = repr([(d.metadata["Name"], d.read_text("direct_url.json"))
                          for d in importlib.metadata.distributions()])
print(json.dumps(views))
"""


def test_no_host_path_shows_inside():
    """Issue 43: /proc/self/mountinfo showed the virtual environment's and the interpreter's host paths.
    Now no view a call has names a host directory of the installation or of the project: not the mount
    table, nor the process's maps, command line and environment, nor the interpreter's state
    (``sys``, its build configuration in ``sysconfig``, module files) nor the installed packages'
    records (an editable install's source directory)."""
    import json
    import sys

    host = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    host |= {str(PROJECT), sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    # a system interpreter (Debian's /usr/bin/python3) is seen where every process sees it: /usr is no secret
    host = {path for path in host if path != "/usr" and not path.startswith("/usr/")}
    with SandboxPool(size=1, limits=SandboxLimits(timeout=30, memory_mb=1024, max_output=1 << 22)) as p:
        isolation = p.isolation
        assert isolation["mount_sources_hidden"], isolation["mount_sources_shown"]
        r = p.run(HOST_VIEWS)
        assert r.ok, r
        assert p.run("import numpy\nprint(numpy.__file__)").stdout.startswith(launcher.SANDBOX_VENV)
    views = json.loads(r.stdout)
    interpreter_inside = launcher.to_sandbox(launcher.host_python())
    assert interpreter_inside.startswith((launcher.SANDBOX_PYTHON + "/", "/usr/"))
    assert "overlay" in views["mountinfo"] and views["sys"].startswith(repr([interpreter_inside])[:-1])
    for name, text in views.items():
        for path in host:
            assert path not in text, (name, path)


NESTED_PATH = r"""
import json, os, sys, sysconfig
from gem_core.tools.sandbox import SandboxLimits, SandboxPool
site = sysconfig.get_paths()["purelib"]
nested = os.path.join(site, "gem_core" if os.path.isdir(os.path.join(site, "gem_core")) else "pytest")
sys.path.insert(0, nested)  # as `import ray` does with ray/thirdparty_files
with SandboxPool(size=1, limits=SandboxLimits(timeout=30)) as pool:
    isolation = pool.isolation
    ran = pool.run("print(6 * 7)")
print(json.dumps([isolation["mount_sources_hidden"], isolation["mount_sources_shown"], ran.stdout]))
"""


def test_a_sys_path_entry_inside_site_packages_stays_hidden():
    """A folder inside site-packages on ``sys.path`` (``import ray`` adds ``ray/thirdparty_files``) is
    reached through site-packages' own mount, not bound again inside it (the nested bind could not
    be unmounted, and the installation's host paths showed)."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", NESTED_PATH], capture_output=True, text=True, timeout=120, cwd="/"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    hidden, shown, stdout = json.loads(done.stdout.strip().splitlines()[-1])
    assert hidden, shown
    assert stdout.strip().endswith("42")


def test_the_exit_grace_goes_only_to_a_process_the_kernel_is_ending():
    """At the wall-clock limit the template gives a process more time only if the kernel has marked it
    exiting (PF_EXITING, or a zombie): nothing the code does can set that and keep running."""
    from gem_core.tools.sandbox import template

    template.PROC_FD = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
    try:
        running = os.fork()
        if running == 0:
            time.sleep(30)
            os._exit(0)
        ended = os.fork()
        if ended == 0:
            os._exit(0)
        time.sleep(0.3)
        assert template.exiting(ended) and not template.exiting(running)
        assert not template.exiting(2**22 + 12345)  # no such process
        os.kill(running, 9)
        os.waitpid(running, 0)
        os.waitpid(ended, 0)
    finally:
        os.close(template.PROC_FD)
        template.PROC_FD = None


# ---- the exit report (single-process calls are answered at the start of their exit) ---------------
def test_exit_reports_carry_the_whole_output_and_the_real_status(pool):
    for size in (1, 4095, 65_536, 60_000, 200_000):
        code = f"import os, sys\nsys.stdout.write('x' * {size})\nsys.stdout.flush()\nos._exit(7)"
        r = timed(pool, code, max_output=300_000)
        assert (len(r.stdout), r.exit_code, r.truncated) == (size, 7, False), (size, len(r.stdout), r)
    r = timed(pool, "x = bytearray(200 * 1024 * 1024)\nprint('big')", memory_mb=512)
    assert r.ok and r.stdout == "big\n"
    r = timed(pool, "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)")
    assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 3)


def test_signals_of_a_traced_call_behave(pool):
    code = (
        "import os, signal\n"
        "signal.signal(signal.SIGUSR1, lambda *a: print('usr1', flush=True))\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\n"  # never leaves the call stopped until its time-out
        "print('after stop', flush=True)\n"
        "signal.signal(signal.SIGALRM, signal.SIG_IGN)\nsignal.alarm(1)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
    )
    r = timed(pool, code)
    assert r.stdout == "usr1\nafter stop\n" and r.signal == "SIGTERM" and not r.ok, r
    assert_healthy_and_clean(pool)


def test_a_thread_leader_exiting_early_does_not_end_the_call(pool):
    """With threads allowed, the main thread can exit (status 0) while another goes on and crashes:
    the call's status is the process's, not the leader's."""
    code = (
        "import ctypes, os, threading, time\n"
        "def later():\n    time.sleep(0.3)\n    os.write(1, b'thread\\n')\n    os.abort()\n"
        "threading.Thread(target=later).start()\n"
        "ctypes.CDLL(None).syscall(60, 0)\n"  # SYS_exit: the calling thread only
    )
    r = timed(pool, code, max_processes=4)
    assert not r.ok and r.signal == "SIGABRT" and r.stdout == "thread\n", r
    r = timed(pool, code)  # one process, one thread: the thread cannot start
    assert not r.ok and "RuntimeError" in r.stderr, r
    assert_healthy_and_clean(pool)

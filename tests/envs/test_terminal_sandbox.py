"""The terminal env's sandbox against what an episode can leave behind: IPC objects and shared memory
(across commands, episodes and the env instances that reuse a closed env's sandbox), cleanup bombs
in the workspace and in TMPDIR, a lost worker, and what /proc shows.

Every case: contained, bounded in time, the task files never vanish mid-episode, the next episode
(or env) starts clean.
"""

from __future__ import annotations

import time

import pytest

from gem_core.envs.terminal.backend import LOST, SandboxBackend
from gem_core.envs.terminal.env import TerminalEnv
from gem_core.tools.sandbox import SandboxLimits, detect_mode

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(detect_mode() != "bwrap", reason="the security suite needs bubblewrap"),
]

TIMEOUT = 5.0
BOUND = TIMEOUT + 3.0
TASK = "CreateFile"  # its workspace starts with a README


def bash(command: str) -> str:
    return f"```bash\n{command}\n```"


def stdout(obs: str) -> str:
    """The stdout section of a command's observation (the fenced block after its header)."""
    if "--- stdout ---\n" not in obs:
        return ""
    fence, rest = obs.split("--- stdout ---\n", 1)[1].split("\n", 1)
    return rest.split(f"\n{fence}\n", 1)[0] + "\n"


def timed(env: TerminalEnv, command: str) -> str:
    start = time.monotonic()
    obs, reward, terminated, truncated, _ = env.step(bash(command))
    assert time.monotonic() - start < BOUND, f"{command[:60]!r} took {time.monotonic() - start:.1f} s"
    assert not terminated and not truncated
    return obs


def new_env() -> TerminalEnv:
    return TerminalEnv(task=TASK, max_turns=1000, command_timeout=TIMEOUT)


@pytest.fixture
def env():
    e = new_env()
    e.reset(seed=0)
    yield e
    e.close()


IPC_CREATE = (
    "ipcmk -M 4096 >/dev/null && ipcmk -Q >/dev/null && ipcmk -S 1 >/dev/null && "
    'python3 -c "import _posixshmem, os, ctypes; '
    "os.write(_posixshmem.shm_open('/gem_term', os.O_CREAT | os.O_RDWR, 0o600), b'x'); "
    "rt = ctypes.CDLL('librt.so.1'); print('mq', rt.mq_open(b'/gem_term_q', 0o102, 0o600, None) >= 0)\"; "
    "ls /dev/shm; ipcs -m -q -s | grep -c '^0x'"
)
IPC_LOOK = (
    "ipcs -m -q -s | grep -c '^0x'; ls -A /dev/shm | wc -l; "
    "python3 -c \"import ctypes; rt = ctypes.CDLL('librt.so.1'); print('mq', rt.mq_open(b'/gem_term_q', 2) >= 0)\""
)


def test_ipc_objects_do_not_survive_a_command_an_episode_or_the_env(env):
    created = stdout(timed(env, IPC_CREATE))
    assert "mq True" in created and "gem_term" in created, created
    # ipcmk's System V objects: a segment nobody attached is already gone when ipcmk exits.
    assert stdout(timed(env, IPC_LOOK)).split() == ["0", "0", "mq", "False"]
    timed(env, IPC_CREATE)
    env.reset(seed=1)  # the next episode
    assert stdout(timed(env, IPC_LOOK)).split() == ["0", "0", "mq", "False"]
    timed(env, IPC_CREATE)
    pool = env.backend.pool
    env.close()  # the sandbox goes to the next env
    other = new_env()
    try:
        other.reset(seed=2)
        assert other.backend.pool is pool
        assert stdout(timed(other, IPC_LOOK)).split() == ["0", "0", "mq", "False"]
        assert stdout(timed(other, "ls -A")).split() == ["README"]
    finally:
        other.close()


def test_shared_memory_held_by_a_background_process_dies_with_the_command(env):
    code = (
        "import ctypes, time; libc = ctypes.CDLL(None); libc.shmat.restype = ctypes.c_void_p; "
        "i = libc.shmget(0x61000000, 100 << 20, 0o1600); a = libc.shmat(i, None, 0); "
        "ctypes.memset(a, 1, 100 << 20); print('pinned', flush=True); time.sleep(600)"
    )
    # Wait for the marker, not a fixed time: on a loaded machine the 100 MiB memset outlasts any sleep.
    wait = 'until grep -qs pinned "$TMPDIR/marker"; do sleep 0.05; done; cat "$TMPDIR/marker"'
    obs = timed(env, f'(python3 -c "{code}" > "$TMPDIR/marker" &) ; {wait}; ipcs -m | grep -c "^0x"')
    assert "pinned" in obs and stdout(obs).split()[-1] == "1", obs
    assert stdout(timed(env, "ipcs -m | grep -c '^0x'; ls /proc | grep -c '^[0-9]'")).split() == ["0", "3"]


DEEP = "python3 -c \"import os\nfor _ in range({n}): os.mkdir('d'); os.chdir('d')\nprint('made')\""


@pytest.mark.parametrize(
    "where",
    ["workspace", "TMPDIR", "/dev/shm"],
)
def test_a_deep_directory_costs_nothing_and_the_task_files_stay(env, where):
    cd = {"workspace": "", "TMPDIR": 'cd "$TMPDIR" && ', "/dev/shm": "cd /dev/shm && "}[where]
    timed(env, cd + DEEP.format(n=1100))
    obs = timed(env, "ls")
    assert "README" in obs and "exit code: 0" in obs, obs  # the sandbox, and its files, are still there
    assert env.backend.pool.restarts == 0
    if where == "workspace":
        state = env.get_state()  # the snapshot walks iteratively: any depth
        env.set_state(state)
        assert stdout(timed(env, "find d | wc -l")).strip() == "1100"
    start = time.monotonic()
    env.reset(seed=1)
    assert time.monotonic() - start < 2.0
    assert stdout(timed(env, "ls -A")).split() == ["README"]


def test_locked_looping_odd_and_many_files_are_reset_in_constant_time(env):
    timed(
        env,
        "mkdir -p a/b/c && touch a/b/c/f && chmod 000 a/b/c a/b a; ln -s loop loop; ln -s . self; "
        "mkfifo fifo; touch -- '-rf' $'new\\nline' \"$(printf 'a%.0s' $(seq 255))\"; "
        "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\"",
    )
    obs = timed(
        env,
        "python3 -c \"import os\nn = 0\ntry:\n  while True: open(f'f{n}', 'w').close(); n += 1\n"
        "except OSError as e: print('stopped', n, e.errno)\"",
    )
    stopped, count, errno = stdout(obs).split()
    assert int(count) < 10_000 and errno == "28", obs  # the workspace's inode cap: ENOSPC
    assert "README" in timed(env, "ls README")
    state = env.get_state()
    env.set_state(state)
    assert "README" in timed(env, "ls README")
    start = time.monotonic()
    env.reset(seed=1)
    assert time.monotonic() - start < 2.0
    assert stdout(timed(env, "ls -A")).split() == ["README"]


def test_a_lost_worker_is_reported_not_silently_replaced_by_an_empty_workspace(env):
    timed(env, "echo progress > work.txt")
    worker = env.backend.pool._workers[0]
    worker.proc.kill()  # the worker dies under the episode's feet (out of memory, say)
    worker.proc.wait()
    obs = env.step(bash("cat work.txt"))[0]
    assert "could not run" in obs
    obs = env.step(bash("ls"))[0]
    assert LOST in obs  # not an empty workspace passed off as the agent's
    _, reward, terminated, _, info = env.step("<done/>")
    assert terminated and reward == 0.0
    env.reset(seed=0)  # a new episode starts afresh
    assert stdout(timed(env, "ls -A")).split() == ["README"]


def test_proc_shows_only_the_command(env):
    obs = timed(
        env, "cat /proc/1/cmdline; echo; ls /proc | grep -c '^[0-9]'; cat /proc/*/cmdline | tr '\\0' ' '"
    )
    assert "No such file" in obs and "bwrap" not in obs and "drop_uid" not in obs, obs
    assert stdout(obs).splitlines()[1] == "3", obs  # bash, ls, grep (cat has exited)


def test_a_backend_of_its_own_cleans_up_the_same_way():
    backend = SandboxBackend(SandboxLimits(timeout=TIMEOUT, memory_mb=256, max_output=8192, max_processes=16))
    try:
        backend.start({"a.txt": "x"})
        assert backend.run(DEEP.format(n=1100)).ok
        assert backend.run("ls a.txt").stdout == "a.txt\n"
        backend.start({"b.txt": "y"})
        assert backend.run("ls -A").stdout == "b.txt\n"
    finally:
        backend.close()

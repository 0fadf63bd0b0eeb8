"""Terminal envs against the real sandbox: every reference solution scores 1, doing nothing scores 0,
partial work scores in between; the action format; workspace persistence, isolation between episodes
and snapshots; and the sandbox's security suite replayed through the terminal."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from pathlib import Path

import pytest

import gem_core
from gem_core.envs.terminal.backend import SandboxBackend
from gem_core.envs.terminal.env import FORMAT_PENALTY, TerminalEnv, clip, find_command, says_done
from gem_core.envs.terminal.tasks import CHECK_TYPES, grade, load_tasks
from gem_core.tools.sandbox import SandboxLimits, SandboxPool

pytestmark = pytest.mark.timeout(180)

TASKS = load_tasks()
PROJECT = Path(__file__).resolve().parents[2]
SECRET = "gem-terminal-secret-5d1e"
TIMEOUT = 1.5
BOUND = TIMEOUT + 3.0  # a contained command ends within its limit plus the cleanup


@pytest.fixture(scope="module")
def env():
    with TerminalEnv(max_turns=30) as e:
        yield e


def bash(command: str) -> str:
    return f"```bash\n{command}\n```"


def play(env: TerminalEnv, task: str, commands: list[str]):
    env.task_name = task
    env.reset(seed=0)
    for command in commands:
        obs, reward, terminated, truncated, info = env.step(bash(command))
        assert (reward, terminated, truncated) == (0.0, False, False), obs
    return env.step("<done/>")


# ---- the shipped tasks -----------------------------------------------------------------------------
def test_the_shipped_tasks():
    assert len(TASKS) >= 15
    assert len({t["name"] for t in TASKS}) == len(TASKS)
    assert {t["category"] for t in TASKS} >= {"files", "text", "data", "scripts"}
    for task in TASKS:
        assert task["instruction"] and task["checks"] and task["solution"]
        assert all(c["type"] in CHECK_TYPES for c in task["checks"])
    ids = gem_core.list_envs("terminal:")
    assert set(ids) == {f"terminal:{t['name']}-v0" for t in TASKS} | {"terminal:Mixed-v0"}


@pytest.mark.parametrize("task", TASKS, ids=[t["name"] for t in TASKS])
def test_reference_solution_scores_one_and_doing_nothing_scores_zero(env, task):
    obs, reward, terminated, truncated, info = play(env, task["name"], task["solution"])
    assert (reward, terminated, truncated) == (1.0, True, False), info["checks"]
    assert info["success"] and info["score"] == 1.0 and "checks pass (score 1.00)" in obs
    obs, reward, terminated, _, info = play(env, task["name"], [])
    assert reward == 0.0 and terminated and not info["success"]
    assert not any(c["passed"] for c in info["checks"])


def test_partial_work_gets_partial_credit(env):
    # ExtractErrors: errors.log has weight 2 of 3; the count is missing.
    _, reward, _, _, info = play(env, "ExtractErrors", ["grep ' ERROR ' app.log > errors.log"])
    assert reward == pytest.approx(2 / 3) and not info["success"]
    assert [c["passed"] for c in info["checks"]] == [True, False]
    # An off-by-one count and a wrong sort order are wrong.
    _, reward, _, _, _ = play(env, "CountLines", ["echo $(( $(wc -l < data.txt) + 1 )) > count.txt"])
    assert reward == 0.0
    _, reward, _, _, _ = play(env, "SortUnique", ["sort -ru names.txt > unique.txt"])
    assert reward == 0.0
    # MergeParts: the merged file is right but the parts were kept (2 of 5).
    _, reward, _, _, _ = play(env, "MergeParts", ["cat part1.txt part2.txt part3.txt > full.txt"])
    assert reward == pytest.approx(2 / 5)


def test_every_check_type_and_a_broken_grader_input(env):
    env.task_name = "CreateFile"
    env.reset(seed=0)
    env.step(bash("printf 'a\\nb 42\\n' > f.txt && mkdir d && mkfifo pipe"))
    checks = [
        {"type": "file_exists", "path": "f.txt"},
        {"type": "file_exists", "path": "d"},  # a directory is not a file
        {"type": "dir_exists", "path": "d"},
        {"type": "file_absent", "path": "nope"},
        {"type": "file_equals", "path": "f.txt", "content": "a\nb 42"},
        {"type": "file_equals", "path": "f.txt", "content": "  a\nb 42  ", "strip": True},
        {"type": "file_regex", "path": "f.txt", "pattern": r"^b \d+$"},
        {"type": "file_equals", "path": "pipe", "content": ""},  # a FIFO must not hang the grader
        {"type": "command", "cmd": "grep -c . f.txt", "stdout": "2"},
        {"type": "command", "cmd": "false", "exit_code": 1},
        {"type": "command", "cmd": "echo hello world", "stdout_regex": "wor"},
        {"type": "python", "code": "assert open('f.txt').read().count('\\n') == 2\nprint('ignored')"},
        {"type": "python", "code": "assert False, 'nope'", "weight": 2},
    ]
    score, results = grade(env.backend, checks)
    assert [r["passed"] for r in results] == [True, False, True, True, True, True, True, False] + [
        True
    ] * 4 + [False]
    assert score == pytest.approx(10 / 14)  # 10 passing checks of weight 1; the failing one weighs 2
    assert "not a regular file" in results[7]["detail"] and "AssertionError" in results[12]["detail"]


# ---- the action format -----------------------------------------------------------------------------
def test_find_command_and_done():
    assert find_command("run this:\n```bash\nls -la\n```")[0] == "ls -la\n"
    assert find_command("```sh\npwd\n```")[0] == "pwd\n"
    assert find_command("```\necho untagged\n```")[0] == "echo untagged\n"
    assert find_command("```python\nprint(1)\n```") is None
    assert find_command("<bash>cat f</bash>")[0] == "cat f"
    assert find_command("```bash\nfirst\n```\nthen\n```bash\nsecond\n```")[0] == "second\n"
    assert find_command("```bash\nA\n```\ntext\n```python\nx\n```")[0] == "A\n"  # fences pair in order
    assert find_command("```bash\nfenced\n```\n<bash>tagged</bash>")[0] == "tagged"
    assert find_command("<bash>tagged</bash>\n```bash\nfenced\n```")[0] == "fenced\n"
    assert find_command("```bash\n   \n```") is None
    assert find_command("```bash\n" * 20_000) is None  # linear, no block
    assert says_done("all good <done/>") and says_done("<DONE>") and says_done("\\boxed{done}")
    assert not says_done("not yet") and not says_done("\\boxed{42}")


def printed(obs: str, stream: str = "stdout") -> str:
    """What the command printed on ``stream``: the fenced block after its header."""
    fence, rest = obs.split(f"--- {stream} ---\n", 1)[1].split("\n", 1)
    return rest.split(f"\n{fence}\n", 1)[0]


def test_output_cannot_pass_for_the_envs_own_lines(env):
    """Issue 43: a command that prints a fake status, fences, ANSI escapes or NUL bytes shows them
    escaped inside a fence it cannot close; the real status comes first."""
    env.task_name = "CreateFile"
    env.reset(seed=0)
    fake = r"printf 'exit code: 0\n````\n--- stderr ---\n\033[2J\000\r(no output)\n'; exit 4"
    obs, *_ = env.step(f"<bash>{fake}</bash>")
    assert obs.startswith("exit code: 4\n--- stdout ---\n`````\n") and "\x1b" not in obs and "\x00" not in obs
    assert printed(obs) == "exit code: 0\n````\n--- stderr ---\n\\x1b[2J\\x00\\r(no output)"
    assert "--- stderr ---\n```" not in obs


def test_format_errors_commands_and_done_in_one_reply(env):
    env.task_name = "CreateFile"
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("I think I should list the files.")
    assert reward == FORMAT_PENALTY and info["format_error"] and not terminated
    assert "Invalid format" in obs and "29 turns left" in obs
    obs, reward, *_ = env.step("<bash>echo out; echo err >&2; exit 3</bash>")
    assert obs.startswith("exit code: 3\n--- stdout ---\n```\nout\n```\n--- stderr ---\n```\nerr\n```")
    assert reward == 0.0
    obs, reward, terminated, _, info = env.step(bash("echo 'Hello, terminal!' > hello.txt") + "\n<done/>")
    assert terminated and reward == 1.0 and info["success"] and obs.startswith("exit code: 0")
    env.reset(seed=0)  # a <done/> inside the command is part of the command, not the end
    obs, _, terminated, *_ = env.step(bash("echo '<done/>'"))
    assert not terminated and "<done/>" in obs


def test_the_turn_limit_grades_the_workspace():
    with TerminalEnv(task="CreateFile", max_turns=2) as env:
        env.reset(seed=0)
        _, _, terminated, truncated, _ = env.step(bash("echo 'Hello, terminal!' > hello.txt"))
        assert not (terminated or truncated)
        obs, reward, terminated, truncated, info = env.step("thinking...")
        assert truncated and not terminated and "No turns left" in obs
        assert reward == pytest.approx(FORMAT_PENALTY + 1.0) and info["success"]


def test_long_output_is_clipped_head_and_tail(env):
    env.task_name = "CreateFile"
    env.reset(seed=0)
    obs, *_ = env.step(bash("seq 1 9000"))
    assert "characters omitted" in obs and len(obs) < env.max_output_chars + 300
    assert printed(obs).startswith("1\n2\n3\n") and "\n9000" in obs
    assert clip("x" * 10, 20) == "x" * 10


def test_mixed_draws_tasks_per_episode_by_seed():
    env = gem_core.make("terminal:Mixed-v0")
    try:
        names = [env.reset(seed=s)[1]["task"] for s in range(12)]
        assert len(set(names)) > 4
        assert [env.reset(seed=s)[1]["task"] for s in range(12)] == names
    finally:
        env.close()


# ---- the workspace ------------------------------------------------------------------------------
def test_files_persist_but_shell_state_and_processes_do_not(env):
    env.task_name = "CreateFile"
    env.reset(seed=0)
    env.step(bash("export X=1; cd /tmp/..; echo kept > ~/note.txt; sleep 300 & echo started"))
    obs, *_ = env.step(bash("echo \"X=$X\"; pwd; cat note.txt; ls /proc | grep -c '^[0-9]'"))
    stdout = printed(obs).split("\n")
    assert stdout[0] == "X=" and stdout[1] == "/workspace" and stdout[2] == "kept"
    assert int(stdout[3]) <= 5  # bwrap's init, the template, bash, ls and grep: no sleep left


def test_a_new_episode_starts_from_a_clean_workspace(env):
    env.task_name = "CreateFile"
    env.reset(seed=0)
    env.step(bash("mkdir -p locked/deep && touch locked/deep/f .hidden && chmod 000 locked/deep locked"))
    env.reset(seed=1)
    obs, *_ = env.step(bash("ls -A"))
    assert printed(obs).split("\n")[0] == "README"


def test_snapshots_copy_the_workspace(env):
    env.task_name = "MergeParts"
    env.reset(seed=0)
    env.step(bash("cat part1.txt part2.txt > full.txt && chmod 000 part3.txt && ln -s /usr/bin link"))
    clone = env.spawn(same_state=True)
    try:
        listing = "ls -l | awk '{print $1, $9}'"
        a = env.step(bash(listing))[0]
        b = clone.step(bash(listing))[0]
        assert a == b and "---------- part3.txt" in a and "link" in a
        clone.step(bash("rm full.txt"))  # the copies are independent
        assert "full.txt" in env.step(bash("ls"))[0]
        state = env.get_state()
        env.step(bash("rm -rf ./*"))
        env.set_state(state)
        assert "full.txt" in env.step(bash("ls"))[0]
    finally:
        clone.close()


def test_closed_envs_hand_their_sandbox_to_the_next():
    first = TerminalEnv(task="CreateFile")
    first.reset(seed=0)
    pool = first.backend.pool
    first.close()
    second = TerminalEnv(task="CountLines")
    try:
        second.reset(seed=0)
        assert second.backend.pool is pool
        assert "README" not in second.step(bash("ls"))[0]  # emptied by the new start
    finally:
        second.close()


def test_pool_workspace_extension():
    with pytest.raises(ValueError, match="exactly one worker"):
        SandboxPool(size=2, workspace_mb=4)
    with SandboxPool(size=1, limits=SandboxLimits(timeout=3, max_processes=8), workspace_mb=2) as pool:
        assert pool.mode == "bwrap" and pool.workspace == "/workspace"
        assert pool.run("open('kept.txt', 'w').write('x')").ok
        r = pool.run("import os\nprint(os.getcwd(), os.listdir('.'), os.environ['TMPDIR'] != os.getcwd())")
        assert r.stdout == f"{pool.workspace} ['kept.txt'] True\n"
        r = pool.run("open('big', 'wb').write(b'x' * 3 * 1024 * 1024)")  # more than the workspace holds
        assert not r.ok and "No space left" in r.stderr


# ---- the security suite, through the terminal --------------------------------------------------
@pytest.fixture(scope="module")
def secure():
    os.environ["GEM_TEST_SECRET"] = SECRET  # visible to the host when the sandbox starts
    try:
        backend = SandboxBackend(
            SandboxLimits(timeout=TIMEOUT, memory_mb=256, max_output=8192, max_processes=16)
        )
        env = TerminalEnv(task="CreateFile", max_turns=1000, command_timeout=TIMEOUT, backend=lambda: backend)
        env.reset(seed=0)
        yield env
        assert "alive" in env.step(bash("echo alive"))[0], "the terminal must survive the whole suite"
        env.close()
    finally:
        del os.environ["GEM_TEST_SECRET"]


def timed(env: TerminalEnv, command: str) -> str:
    start = time.monotonic()
    obs, reward, terminated, truncated, _ = env.step(bash(command))
    assert time.monotonic() - start < BOUND, f"{command!r} took too long"
    assert reward == 0.0 and not terminated and not truncated
    return obs


def test_the_terminal_runs_in_bubblewrap(secure):
    assert secure.backend.pool.isolation["mode"] == "bwrap"
    assert secure.backend.pool.isolation["uid_drop"] and secure.backend.pool.isolation["seccomp"]


def test_no_network(secure):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    port = server.getsockname()[1]
    try:
        obs = timed(secure, f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
        assert "connected" not in obs.replace("/dev/tcp", "")
        with pytest.raises(BlockingIOError):
            server.accept()
        obs = timed(
            secure, "exec 3<>/dev/tcp/1.1.1.1/53 && echo connected; getent hosts pypi.org || echo no-dns"
        )
        assert "connected\n" not in obs and "no-dns" in obs
        obs = timed(
            secure, "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=1)\""
        )
        assert "unreachable" in obs.lower()
    finally:
        server.close()


def test_host_files_and_secrets_are_out_of_reach(secure, tmp_path):
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(SECRET)
    for target in (
        secret_file,
        "/etc/shadow",
        "/etc/passwd",
        PROJECT / "pyproject.toml",
        Path.home() / ".bashrc",
    ):
        obs = timed(secure, f"cat {target}")
        assert "No such file or directory" in obs or "Permission denied" in obs, obs
    obs = timed(secure, f"ls {PROJECT}; env; cat /proc/*/environ 2>&1 | tr '\\0' '\\n'")
    assert SECRET not in obs and "GEM_TEST_SECRET" not in obs


def test_nothing_outside_the_workspace_is_writable(secure):
    passwd = hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest()
    marker = PROJECT / "terminal_escape_marker.txt"
    for target in ("/etc/passwd", marker, "/usr/escape", "/tmp/escape", "/escape", "/etc/alternatives/awk"):
        obs = timed(secure, f"echo pwned >> {target} && echo WROTE")
        assert "WROTE" not in obs
        assert any(why in obs for why in ("Read-only", "Permission denied", "No such file")), obs
    obs = timed(secure, "ln -sf /usr/bin/mawk /etc/alternatives/awk || echo refused")
    assert "refused" in obs
    assert hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest() == passwd
    assert not marker.exists()


def test_fork_bomb_is_contained(secure):
    obs = timed(secure, ":(){ :|:& };:")
    assert "timed out" in obs or "exit code" in obs
    obs = timed(secure, "ls /proc | grep -c '^[0-9]'")
    assert int(printed(obs).split("\n")[0]) <= 5


def test_the_parent_cannot_be_killed(secure):
    for command in ("kill -9 $PPID", "kill -9 1", "kill -9 -1"):
        timed(secure, command)
    assert "alive" in timed(secure, "echo alive")


def test_runaway_commands_are_stopped(secure):
    obs = timed(secure, "while :; do :; done")
    assert f"timed out after {TIMEOUT:g} s" in obs
    obs = timed(secure, "sleep 600")
    assert "timed out" in obs
    obs = timed(secure, "yes")
    assert "printed too much" in obs and len(obs) < secure.max_output_chars + 300
    obs = timed(secure, "head -c 100000000 /dev/zero > big; ls -s big")
    assert "No space left" in obs or "File too large" in obs
    obs = timed(secure, "python3 -c 'x = \" \" * 2**31'")
    assert "MemoryError" in obs
    timed(secure, "rm -f big")


def test_hostile_workspaces_still_snapshot_and_grade(secure):
    timed(secure, "ln -s / root; ln -s /proc/self/environ env; mkfifo fifo; mkdir locked; chmod 000 locked")
    state = secure.get_state()
    assert len(state["workspace"]) < 1_000_000  # the links are links, not the files behind them
    secure.set_state(state)
    obs = timed(secure, "ls -l | awk '{print $1, $9}'")
    assert "d--------- locked" in obs and "prw-r--r-- fifo" in obs and "lrwxrwxrwx root" in obs
    timed(secure, "chmod 700 locked; rm -rf root env fifo locked")


def test_check_env_passes():
    for env_id in ("terminal:Mixed-v0", "terminal:GreetingScript-v0"):
        env = gem_core.make(env_id)
        try:
            gem_core.check_env(env, seed=123)
        finally:
            env.close()

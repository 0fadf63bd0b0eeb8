"""Terminal tasks and their checks: what must hold in the workspace when the agent says it is done.

Tasks ship in ``gem_core/data/terminal/tasks.json``, made offline by ``gem_core.envs.terminal.generator``
(``python -m gem_core.envs.terminal.generator``). Each has an ``instruction``, the ``files`` written into
the empty workspace, weighted ``checks`` and a reference ``solution`` (shell commands). Check types (paths are relative to the workspace):

| type          | fields                                       | passes when                                       |
|---------------|----------------------------------------------|---------------------------------------------------|
| file_exists   | path                                         | a regular file is there                           |
| dir_exists    | path                                         | a directory is there                              |
| file_absent   | path                                         | nothing is there                                  |
| file_equals   | path, content, strip (default false)         | the text equals content, up to trailing newlines  |
|               |                                              | (``strip``: up to surrounding whitespace)         |
| file_regex    | path, pattern                                | ``re.search(pattern, text, re.MULTILINE)``        |
| command       | cmd, exit_code (0), stdout, stdout_regex     | ``bash -c cmd`` exits so and prints that          |
| python        | code                                         | the code runs without an exception (``assert``)   |

Every check has a ``weight`` (default 1); the score is the weighted fraction of checks that pass,
except that *guards* earn nothing on their own. A guard (``"guard": true``, marked by the generator)
is a check that a degenerate workspace already passes: the untouched one (the agent did nothing), an
emptied one (``rm -rf ./* .[!.]*``), one with every input truncated, or one where every file the
checks read or run exists but is an empty executable (a stub: ``touch greet.sh; chmod +x greet.sh``);
e.g. "part1.txt is gone" in a task that asks to merge the parts and delete them, or "greet.sh is
executable" in a task that asks for a script that greets. Guards say what must be kept, cleaned up or
in place, not progress, so the score is 0 unless at least one check that is not a guard passes: doing
nothing, destroying the inputs or leaving stubs (however they behave when run) scores 0 in every task.

All checks of a task run in one script inside the task's backend (``TerminalBackend.run_python``),
so the host never opens a file the agent made. Each check has a deadline of its own
(``CHECK_TIMEOUT_S``; a ``command`` check's process group is killed, a ``python`` check is interrupted)
and fails when it passes it, and all of them together get ``GRADER_BUDGET_S``: a solution that loops or
sleeps when run costs its grading a few seconds, never more.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from gem_core.envs.terminal.backend import TerminalBackend

TASKS_FILE = Path(__file__).resolve().parents[2] / "data" / "terminal" / "tasks.json"
CHECK_TYPES = ("file_exists", "dir_exists", "file_absent", "file_equals", "file_regex", "command", "python")
RESULT_MARKER = "__gem_terminal_checks__"
CHECK_TIMEOUT_S = 3.0  # per check; the checks of the shipped tasks take milliseconds
GRADER_BUDGET_S = 15.0  # all the checks of a task together
GRADER_TIMEOUT_S = GRADER_BUDGET_S + 5.0  # the grader's sandbox call (its start and its report included)


@functools.cache
def _load(path: str) -> tuple[dict[str, Any], ...]:
    tasks = json.loads(Path(path).read_text(encoding="utf-8"))
    for task in tasks:
        for check in task["checks"]:
            if check.get("type") not in CHECK_TYPES:
                raise ValueError(f"task {task['name']}: unknown check type {check.get('type')!r}")
    return tuple(tasks)


def load_tasks(path: str | Path = TASKS_FILE) -> list[dict[str, Any]]:
    """The tasks of a JSON file in this module's format (read once per path, shared read-only)."""
    return list(_load(str(path)))


# Runs inside the workspace (stdlib only); the checks arrive on stdin, the results leave as JSON.
GRADER = (
    """
import contextlib, io, json, os, re, signal, stat, subprocess, sys, time
MAX_BYTES = 1 << 20
CHECK_TIMEOUT_S, BUDGET_S = @CHECK_TIMEOUT@, @BUDGET@

class CheckTimeout(Exception):
    pass

def interrupt(signum, frame):
    raise CheckTimeout()

def read(path):
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the grader
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        data = b""
        while len(data) <= MAX_BYTES:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
        return data.decode("utf-8", "replace")
    finally:
        os.close(fd)

def run(check, timeout):
    kind, path = check["type"], check.get("path", "")
    if kind == "file_exists":
        return os.path.isfile(path), "no such file"
    if kind == "dir_exists":
        return os.path.isdir(path), "no such directory"
    if kind == "file_absent":
        return not os.path.lexists(path), "still there"
    if kind == "file_equals":
        text, want = read(path), check["content"]
        if check.get("strip"):
            return text.strip() == want.strip(), "content differs"
        return text.rstrip("\\n") == want.rstrip("\\n"), "content differs"
    if kind == "file_regex":
        return re.search(check["pattern"], read(path), re.MULTILINE) is not None, "pattern not found"
    if kind == "command":
        proc = subprocess.Popen(
            ["bash", "-c", check["cmd"]], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        try:
            out = proc.communicate(timeout=timeout)[0].decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            return False, f"timed out after {timeout:.3g} s"
        finally:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, 9)
        if proc.wait() != check.get("exit_code", 0):
            return False, f"exit code {proc.returncode}"
        if "stdout" in check and out.rstrip("\\n") != check["stdout"].rstrip("\\n"):
            return False, "output differs"
        if "stdout_regex" in check and not re.search(check["stdout_regex"], out, re.MULTILINE):
            return False, "output does not match"
        return True, ""
    if kind == "python":
        signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                exec(compile(check["code"], "<check>", "exec"), {"__name__": "__check__"})
        except CheckTimeout:
            return False, f"timed out after {timeout:.3g} s"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return True, ""
    return False, f"unknown check type {kind!r}"

results, end = [], time.monotonic() + BUDGET_S
for check in json.load(sys.stdin):
    timeout = min(CHECK_TIMEOUT_S, end - time.monotonic())
    try:
        passed, why = run(check, timeout) if timeout > 0 else (False, "no time left to run it")
    except BaseException as exc:
        passed, why = False, f"{type(exc).__name__}: {exc}"[:200]
    results.append({"passed": bool(passed), "detail": "" if passed else why})
sys.stdout.write("\\n@MARKER@" + json.dumps(results) + "\\n")
""".replace("@MARKER@", RESULT_MARKER)
    .replace("@CHECK_TIMEOUT@", repr(CHECK_TIMEOUT_S))
    .replace("@BUDGET@", repr(GRADER_BUDGET_S))
)


def grade(backend: TerminalBackend, checks: list[dict[str, Any]]) -> tuple[float, list[dict[str, Any]]]:
    """``(score, results)``: the weighted fraction of ``checks`` that pass in ``backend``'s workspace
    (0 when only guards pass), and per check ``{"check", "weight", "guard", "passed", "detail"}``.
    A grader that cannot run fails all."""
    result = backend.run_python(GRADER, stdin=json.dumps(checks), timeout=GRADER_TIMEOUT_S)
    found = None
    if result.error is None and RESULT_MARKER in result.stdout:
        try:
            found = json.loads(result.stdout.rsplit(RESULT_MARKER, 1)[1])
        except ValueError:
            found = None
    if not isinstance(found, list) or len(found) != len(checks):
        why = (
            result.error or ("timed out" if result.timed_out else result.stderr.strip()[-200:]) or "no result"
        )
        found = [{"passed": False, "detail": f"the checks could not run: {why}"}] * len(checks)
    results = [
        {
            "check": describe(check),
            "weight": float(check.get("weight", 1.0)),
            "guard": bool(check.get("guard", False)),
            **outcome,
        }
        for check, outcome in zip(checks, found)
    ]
    total = sum(r["weight"] for r in results)
    progress = any(r["passed"] and not r["guard"] for r in results)
    score = sum(r["weight"] for r in results if r["passed"]) / total if total and progress else 0.0
    return score, results


def describe(check: dict[str, Any]) -> str:
    """A short name for a check, e.g. ``file_equals count.txt``."""
    subject = check.get("path") or check.get("cmd") or "python"
    return f"{check['type']} {subject}"

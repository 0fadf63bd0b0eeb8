"""No terminal task pays for doing nothing, for destroying its inputs (issue: MergeParts paid 0.6 for
``rm -f part*.txt``) or for stubs of what the checks run (issue 43: any executable greet.sh scored
0.33, and a looping one made grading take 20 s): every task id against the real sandbox, the guard
rule of the grader, and its per-check deadline."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

import gem_core
from gem_core.envs.terminal import generator
from gem_core.envs.terminal.env import TerminalEnv
from gem_core.envs.terminal.generator.guards import mark_guards, named_files
from gem_core.envs.terminal.tasks import CHECK_TIMEOUT_S, TASKS_FILE, load_tasks

pytestmark = pytest.mark.timeout(300)

TASKS = load_tasks()


def bash(command: str) -> str:
    return f"```bash\n{command}\n```"


def stubs(task: dict, body: str) -> str:
    """A command leaving every file the checks read or run (but the inputs) as an executable ``body``."""
    commands = ["true"]
    for path in named_files(task["checks"]):
        if path not in task["files"]:
            quoted = shlex.quote(path)
            commands.append(f'mkdir -p "$(dirname {quoted})" && printf %s {shlex.quote(body)} > {quoted}')
            commands.append(f"chmod +x {quoted}")
    return " && ".join(commands)


def hacks(task: dict) -> dict[str, list[str]]:
    """Empty, destructive or pretending episodes: (a) done at once, (b) everything removed, (c) other
    ways of destroying or emptying the inputs (and then pretending with empty outputs), (d) stubs of
    every file the checks read or run: empty, looping or sleeping executables."""
    inputs = " ".join(shlex.quote(path) for path in task["files"]) or "nothing-here"
    dirs = sorted({str(Path(p).parent) for p in task["files"]} - {"."})
    return {
        "empty executable stubs": [stubs(task, "")],
        "looping stubs": [stubs(task, "#!/bin/sh\nwhile :; do :; done\n")],
        "sleeping stubs": [stubs(task, "#!/bin/sh\nsleep 100\n")],
        "stubs in an emptied workspace": ["rm -rf ./* .[!.]*", stubs(task, "")],
        "done at once": [],
        "rm -rf everything": ["rm -rf ./* .[!.]*"],
        "rm -rf * only": ["rm -rf *"],
        "remove the inputs": [f"rm -f {inputs}"],
        "truncate the inputs": [f'for f in {inputs}; do [ -f "$f" ] && : > "$f"; done; true'],
        "remove the input directories": [f"rm -rf {' '.join(dirs) or 'nothing-here'}"],
        "find -delete": ["find . -mindepth 1 -delete"],
        "remove, then touch the inputs": ["rm -rf ./* .[!.]*", f"touch {inputs} 2>/dev/null; true"],
        "chmod everything away": ["chmod -R 000 . 2>/dev/null; true"],
    }


@pytest.fixture(scope="module")
def env():
    with TerminalEnv(max_turns=30) as e:
        yield e


@pytest.mark.parametrize("task", TASKS, ids=[t["name"] for t in TASKS])
def test_empty_and_destructive_episodes_score_zero(env, task):
    env.task_name = task["name"]
    for name, commands in hacks(task).items():
        env.reset(seed=0)
        for command in commands:
            env.step(bash(command))
        _, reward, terminated, _, info = env.step("<done/>")
        assert terminated and reward == 0.0, (name, info["checks"])
    env.reset(seed=0)  # and the real solution still scores 1
    for command in task["solution"]:
        env.step(bash(command))
    assert env.step("<done/>")[1] == 1.0


def test_every_registered_terminal_id_pays_nothing_for_done_at_once():
    for env_id in gem_core.list_envs("terminal:*"):
        with gem_core.make(env_id) as env:
            env.reset(seed=3)
            assert env.step("<done/>")[1] == 0.0, env_id


def test_guards_earn_nothing_alone(env):
    env.task_name = "MergeParts"
    task = next(t for t in TASKS if t["name"] == "MergeParts")
    assert [c.get("guard", False) for c in task["checks"]] == [False, True, True, True]
    env.reset(seed=0)
    env.step(bash("cat part1.txt part2.txt part3.txt > full.txt"))  # merged, parts kept: partial credit
    _, reward, _, _, info = env.step("<done/>")
    assert reward == pytest.approx(2 / 5) and [c["guard"] for c in info["checks"]] == [
        False,
        True,
        True,
        True,
    ]


def test_a_hostile_script_is_worth_nothing_and_stopped_at_each_checks_deadline(env):
    """GreetingScript: an executable greet.sh that sleeps passes only the guard ``test -x`` (0), and
    each check that runs it is stopped at its own deadline instead of 10 s each."""
    env.task_name = "GreetingScript"
    env.reset(seed=0)
    env.step(bash("printf '#!/bin/sh\\nsleep 100\\n' > greet.sh && chmod +x greet.sh"))
    _, reward, terminated, _, info = env.step("<done/>")
    assert terminated and reward == 0.0
    guard, *runs = info["checks"]
    assert guard["passed"] and guard["guard"]
    assert [c["detail"] for c in runs] == [f"timed out after {CHECK_TIMEOUT_S:g} s"] * 2, runs


def test_tasks_json_is_what_the_generator_makes(tmp_path):
    """The shipped tasks (with their guards) are the generator's output, byte for byte: run
    ``python -m gem_core.envs.terminal.generator`` after a change."""
    written = tmp_path / "tasks.json"
    generator.write(written)
    assert written.read_bytes() == TASKS_FILE.read_bytes()
    assert json.loads(written.read_text(encoding="utf-8")) == TASKS


def test_a_task_that_pays_without_being_done_is_refused():
    task = {
        "name": "Nothing",
        "files": {"a.txt": "x\n"},
        "checks": [{"type": "file_exists", "path": "a.txt"}, {"type": "file_absent", "path": "b.txt"}],
    }
    with pytest.raises(ValueError, match="task Nothing: every check passes without doing the task"):
        mark_guards(task)
    stubbed = {
        "name": "Stubbed",
        "files": {},
        "checks": [{"type": "command", "cmd": "test -x run.sh"}, {"type": "file_exists", "path": "out.txt"}],
    }
    with pytest.raises(ValueError, match="task Stubbed: every check passes"):
        mark_guards(stubbed)

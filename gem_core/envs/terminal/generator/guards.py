"""Guards: the checks of a task that a degenerate workspace already passes, found by running the real
grader (``gem_core.envs.terminal.tasks.GRADER``) on those workspaces in temporary directories.

Degenerate workspaces: what doing nothing or destroying things leaves (the task's files untouched,
everything removed, every input truncated), and the same with *stubs*: every file that a check reads
or runs (``named_files``) present as an empty executable, as a solution that only pretends leaves it
(``touch greet.sh; chmod +x greet.sh``). A check such a workspace passes says what must be kept or in
place, not that the task was done: it is a guard, worth nothing on its own."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from gem_core.envs.terminal.tasks import GRADER, RESULT_MARKER

# A relative path with a file extension (``greet.sh``, ``./count.sh``, ``project/lib/util.py``).
_FILE_NAME = re.compile(r"(?<![\w./-])(?:\./)?((?:[\w-]+/)*[\w-]*\.?[\w-]+\.[A-Za-z0-9]+)(?![\w/])")
_STRING = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")


def named_files(checks: list[dict[str, Any]]) -> list[str]:
    """The files the checks read or run: the ``path`` of the file checks, and the relative file names
    (with an extension) in the commands and Python code of the others. Sorted; no path is a parent
    directory of another."""
    names: set[str] = set()
    for check in checks:
        if check["type"] in ("file_exists", "file_equals", "file_regex"):
            names.add(check["path"])
        elif check["type"] == "command":
            try:
                words = shlex.split(check["cmd"])
            except ValueError:
                words = check["cmd"].split()
            names.update(m.group(1) for word in words for m in _FILE_NAME.finditer(word))
        elif check["type"] == "python":  # the names in its string literals
            for literal in _STRING.findall(check["code"]):
                names.update(m.group(1) for m in _FILE_NAME.finditer(literal[1:-1]))
    names = {os.path.normpath(n) for n in names if not os.path.isabs(n) and ".." not in n.split("/")}
    return sorted(n for n in names if not any(other.startswith(n + "/") for other in names))


def degenerate_workspaces(files: dict[str, str], checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The workspaces that doing nothing, destroying things or leaving stubs leaves:
    ``{name: {path: text, or None for an empty executable stub}}``."""
    workspaces: dict[str, dict[str, Any]] = {
        "untouched": dict(files),
        "emptied": {},
        "inputs truncated": dict.fromkeys(files, ""),
    }
    for name, base in list(workspaces.items()):
        stubs = {path: None for path in named_files(checks) if not _taken(path, base)}
        workspaces[f"{name}, with stubs"] = {**base, **stubs}
    return workspaces


def _taken(path: str, files: dict[str, Any]) -> bool:
    """Whether ``path`` is a file of ``files`` or a directory above one (no stub goes there)."""
    return path in files or any(other.startswith(path + "/") for other in files)


def passing_checks(files: dict[str, Any], checks: list[dict[str, Any]]) -> set[int]:
    """The indices of ``checks`` that pass in a workspace holding ``files`` (the env's own grader);
    a file whose text is None is an empty executable stub."""
    with tempfile.TemporaryDirectory() as workspace:
        for path, text in files.items():
            full = Path(workspace, path)
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_text(text or "", encoding="utf-8")
            if text is None:
                full.chmod(0o755)
        run = subprocess.run(
            [sys.executable, "-c", GRADER],
            input=json.dumps(checks),
            capture_output=True,
            text=True,
            cwd=workspace,
            timeout=120,
        )
    results = json.loads(run.stdout.rsplit(RESULT_MARKER, 1)[1])
    return {i for i, result in enumerate(results) if result["passed"]}


def mark_guards(task: dict[str, Any]) -> None:
    """Set ``"guard": true`` on exactly the checks of ``task`` that a degenerate workspace passes;
    ``ValueError`` when every check does (the task would pay nothing for doing it)."""
    checks = [{k: v for k, v in c.items() if k != "guard"} for c in task["checks"]]
    guards = set()
    for files in degenerate_workspaces(task["files"], checks).values():
        guards |= passing_checks(files, checks)
    if len(guards) == len(checks):
        raise ValueError(f"task {task['name']}: every check passes without doing the task")
    for i, check in enumerate(task["checks"]):
        check.pop("guard", None)
        if i in guards:
            check["guard"] = True

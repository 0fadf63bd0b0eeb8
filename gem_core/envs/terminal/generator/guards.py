"""Guards: the checks of a task that a degenerate workspace already passes, found by running the real
grader (``gem_core.envs.terminal.tasks.GRADER``) on those workspaces in temporary directories."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from gem_core.envs.terminal.tasks import GRADER, RESULT_MARKER


def degenerate_workspaces(files: dict[str, str]) -> dict[str, dict[str, str]]:
    """The workspaces that doing nothing or destroying things leaves: ``{name: {path: text}}``."""
    return {"untouched": dict(files), "emptied": {}, "inputs truncated": dict.fromkeys(files, "")}


def passing_checks(files: dict[str, str], checks: list[dict[str, Any]]) -> set[int]:
    """The indices of ``checks`` that pass in a workspace holding ``files`` (the env's own grader)."""
    with tempfile.TemporaryDirectory() as workspace:
        for path, text in files.items():
            full = Path(workspace, path)
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_text(text, encoding="utf-8")
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
    for files in degenerate_workspaces(task["files"]).values():
        guards |= passing_checks(files, checks)
    if len(guards) == len(checks):
        raise ValueError(f"task {task['name']}: every check passes without doing the task")
    for i, check in enumerate(task["checks"]):
        check.pop("guard", None)
        if i in guards:
            check["guard"] = True

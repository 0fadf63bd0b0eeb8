"""Terminal tasks: an agent runs shell commands in a sandboxed workspace (``env.TerminalEnv``).

Registered as ``terminal:<Task>-v0`` for each task of ``gem_core/data/terminal/tasks.json`` and
``terminal:Mixed-v0`` (a task drawn per episode). ``backend.TerminalBackend`` is the seam for other
isolation (a container backend); ``tasks`` holds the check types and the grader; ``generator`` makes
the shipped tasks (offline).
"""

from __future__ import annotations

from gem_core.envs.terminal.tasks import load_tasks
from gem_core.registry import register

for _task in load_tasks():
    register(
        f"terminal:{_task['name']}-v0",
        "gem_core.envs.terminal.env:TerminalEnv",
        description=f"shell task ({_task['category']}): {_task['instruction'][:60]}",
        task=_task["name"],
    )
register(
    "terminal:Mixed-v0",
    "gem_core.envs.terminal.env:TerminalEnv",
    description="a shell task drawn per episode from the shipped terminal tasks",
)

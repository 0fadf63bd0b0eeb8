"""The generator of the shipped terminal tasks (``gem_core/data/terminal/tasks.json``), run offline:
``python -m gem_core.envs.terminal.generator`` rewrites the file, deterministically.

Each task is made by one function (in ``files``, ``text``, ``data`` and ``scripts``, by category) as
``{"name", "category", "instruction", "files", "checks", "solution"}``:

  files     ``{relative path: text}`` written into the empty workspace at the start of an episode
  checks    what must hold at the end, each ``{"type", ..., "weight"}`` (see ``gem_core.envs.terminal.tasks``)
  solution  a reference list of shell commands; the tests run it and expect every check to pass

The expected contents in the checks are computed here in Python from the generated files, so a
reference solution written in shell is tested against an independent computation.

Guards (``guards``): a check that already passes in a workspace where nothing was done (the task's
files as given), where everything was destroyed (empty), or where the inputs were emptied (each file
truncated) is marked ``"guard": true``: it is something to keep, not progress, and a task's score is 0
unless a check that is not a guard passes. A task whose every check is a guard is an error.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from gem_core.envs.terminal.generator import data, files, scripts, text
from gem_core.envs.terminal.generator.guards import mark_guards
from gem_core.envs.terminal.tasks import TASKS_FILE

SEED = 20241121


def build(rng: random.Random) -> list[dict[str, Any]]:
    """The tasks in their shipped order, without guards. The makers draw from ``rng`` one after
    another, so this order is part of the data."""
    tasks = [
        files.create_file(),
        text.count_lines(rng),
        files.rename_extensions(),
        text.sort_unique(rng),
        text.extract_errors(rng),
        text.edit_config(),
    ]
    sales = data.draw_sales(rng)
    return [
        *tasks,
        data.sum_column(sales),
        data.group_by_sum(sales),
        text.top_words(rng),
        files.find_large_files(),
        files.archive_directory(),
        scripts.greeting_script(),
        files.merge_parts(),
        files.count_extensions(),
        files.make_executable(),
        text.dedupe_in_place(rng),
        files.make_layout(),
        data.join_tables(rng),
        text.extract_range(rng),
        scripts.numbered_script(),
        data.hottest_city(rng),
    ]


def generate() -> list[dict[str, Any]]:
    """The shipped tasks: ``build`` from ``SEED``, with their guards marked."""
    tasks = build(random.Random(SEED))
    names = [t["name"] for t in tasks]
    if len(set(names)) != len(names):
        raise ValueError(f"task names must be unique, got {names}")
    for task in tasks:
        mark_guards(task)
    return tasks


def write(path: Path = TASKS_FILE) -> None:
    """Write the generated tasks to ``path`` (the shipped file by default)."""
    tasks = generate()
    path.write_text(json.dumps(tasks, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(tasks)} tasks to {path}")

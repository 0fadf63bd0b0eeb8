"""Tasks into verl's dataset rows: the parquet verl's trainer reads, one row per GEM ``Task``.

verl's ``RLHFDataset`` needs a chat ``prompt`` column and passes every column of a row to the agent
loop named by its ``agent_name``. A row here::

    data_source   the env id (verl groups validation metrics by it)
    agent_name    "gem_agent" (``GemAgentLoop``)
    prompt        [system?, user: the env's first observation for this seed]
    reward_model  {"style": "gem_env", "ground_truth": ""} (rewards come from the env, not from verl)
    extra_info    {"index": i, "task": the whole task as JSON text (``Task.to_json``),
                   "env_id": ..., "seed": ..., "env_kwargs": JSON text (readable copies)}

The agent loop plays the env itself from ``extra_info["task"]`` (env kwargs, turn limit, system prompt
and chat-template kwargs included; JSON text, so parquet sees one column type whatever the kwargs); ``prompt`` holds the real first
observation so that verl's prompt-length filter (``data.filter_overlong_prompts``) measures what the
model will see, and the system message, if any, is the one the agent loop renders. The
``rollout.n`` samples of a row share env id and seed, hence the initial state: a GRPO group.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gem_adapters.episodes.tasks import Task, with_first_observations

AGENT_NAME = "gem_agent"


def task_rows(tasks: Iterable[Task], *, agent_name: str = AGENT_NAME) -> list[dict[str, Any]]:
    """One row per task, in order (``gem_adapters.episodes.tasks.make_tasks`` makes the usual ones)."""
    rows = []
    for i, (task, observation) in enumerate(with_first_observations(tasks)):
        head = [] if task.system_prompt is None else [{"role": "system", "content": task.system_prompt}]
        rows.append(
            {
                "data_source": task.env_id,
                "agent_name": agent_name,
                "prompt": [*head, {"role": "user", "content": str(observation)}],
                "reward_model": {"style": "gem_env", "ground_truth": ""},
                "extra_info": {
                    "index": i,
                    "task": task.to_json(),
                    "env_id": task.env_id,
                    "seed": task.seed,
                    "env_kwargs": json.dumps(task.env_kwargs, sort_keys=True),
                },
            }
        )
    return rows


def write_dataset(path: str | Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Write ``rows`` as the parquet file verl's ``data.train_files`` / ``data.val_files`` read."""
    import pandas as pd

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(list(rows)).to_parquet(path)
    return path


def task_from_row(extra_info: Any) -> Task:
    """The task of a row's ``extra_info`` (as verl hands it to the agent loop): its ``task`` JSON, or,
    in a row written before tasks travelled whole, ``env_id``, ``seed`` and ``env_kwargs`` (the system
    prompt of such a row is in its ``prompt``: ``system_prompt_of``)."""
    try:
        if extra_info.get("task") is not None:
            return Task.from_json(extra_info["task"])
        kwargs = extra_info.get("env_kwargs") or "{}"
        kwargs = json.loads(kwargs) if isinstance(kwargs, str) else dict(kwargs)
        return Task.from_json(
            {"env_id": extra_info["env_id"], "seed": extra_info["seed"], "env_kwargs": kwargs}
        )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"a GEM row's extra_info holds the task (or env_id, seed and env_kwargs; see task_rows), got {extra_info!r}"
        ) from exc


def system_prompt_of(messages: Any) -> str | None:
    """The content of a leading system message in a row's prompt, else None."""
    messages = list(messages) if messages is not None else []
    if messages and messages[0].get("role") == "system":
        return str(messages[0]["content"])
    return None

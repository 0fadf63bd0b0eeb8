"""The parquet dataset verl's trainer reads: one row per GEM task (env id + seed).

verl's ``RLHFDataset`` needs a chat ``prompt`` column and passes every column of a row to the agent
loop named by its ``agent_name``. A row here::

    data_source   the env id (verl groups validation metrics by it)
    agent_name    "gem_agent" (``GemAgentLoop``)
    prompt        [system?, user: the env's first observation for this seed]
    reward_model  {"style": "gem_env", "ground_truth": ""} (rewards come from the env, not from verl)
    extra_info    {"index": i, "env_id": ..., "seed": ..., "env_kwargs": JSON text}

The agent loop plays the env itself from ``extra_info``; ``prompt`` holds the real first
observation so that verl's prompt-length filter (``data.filter_overlong_prompts``) measures what the
model will see, and the system message, if any, is the one the agent loop renders. The
``rollout.n`` samples of a row share env id and seed, hence the initial state: a GRPO group.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AGENT_NAME = "gem_agent"


@dataclass(frozen=True)
class Task:
    env_id: str
    seed: int
    env_kwargs: dict[str, Any] = field(default_factory=dict)


def task_rows(
    env_ids: str | Sequence[str],
    num_tasks: int,
    *,
    first_seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    system_prompt: str | None = None,
    agent_name: str = AGENT_NAME,
) -> list[dict[str, Any]]:
    """``num_tasks`` rows; seeds ``first_seed, first_seed + 1, ...``, env ids taken in turn."""
    import gem_core

    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    if not ids or num_tasks < 0:
        raise ValueError("need at least one env id and a non-negative number of tasks")
    kwargs = dict(env_kwargs or {})
    envs = {env_id: gem_core.make(env_id, **kwargs) for env_id in ids}
    head = [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
    rows = []
    try:
        for i in range(num_tasks):
            env_id, seed = ids[i % len(ids)], first_seed + i
            observation, _ = envs[env_id].reset(seed=seed)
            rows.append(
                {
                    "data_source": env_id,
                    "agent_name": agent_name,
                    "prompt": [*head, {"role": "user", "content": str(observation)}],
                    "reward_model": {"style": "gem_env", "ground_truth": ""},
                    "extra_info": {
                        "index": i,
                        "env_id": env_id,
                        "seed": seed,
                        "env_kwargs": json.dumps(kwargs, sort_keys=True),
                    },
                }
            )
    finally:
        for env in envs.values():
            env.close()
    return rows


def write_dataset(path: str | Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Write ``rows`` as the parquet file verl's ``data.train_files`` / ``data.val_files`` read."""
    import pandas as pd

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(list(rows)).to_parquet(path)
    return path


def task_from_row(extra_info: Any) -> Task:
    """The task of a row's ``extra_info`` (as verl hands it to the agent loop)."""
    try:
        kwargs = extra_info.get("env_kwargs") or "{}"
        return Task(
            env_id=str(extra_info["env_id"]),
            seed=int(extra_info["seed"]),
            env_kwargs=json.loads(kwargs) if isinstance(kwargs, str) else dict(kwargs),
        )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"a GEM row's extra_info holds env_id, seed and env_kwargs (see task_rows), got {extra_info!r}"
        ) from exc


def system_prompt_of(messages: Any) -> str | None:
    """The content of a leading system message in a row's prompt, else None."""
    messages = list(messages) if messages is not None else []
    if messages and messages[0].get("role") == "system":
        return str(messages[0]["content"])
    return None

"""The prompt dataset OpenRLHF reads (``--data.prompt_dataset``): one JSONL row per GEM task.

A row::

    prompt       the env's first observation for this seed (shown in OpenRLHF's logs; the agent
                 renders the conversation itself, so do not pass ``--data.apply_chat_template``)
    label        the task as JSON text: {"env_id", "seed", "env_kwargs", "system_prompt",
                 "max_turns", "template_kwargs"} (``Task``)
    datasource   the env id (OpenRLHF groups evaluation metrics by it)

Launch with ``--data.input_key prompt --data.label_key label``. OpenRLHF hands each row's prompt and
label to the agent executor (``gem_adapters.openrlhf.agent``), which makes the env from the label and
plays it; the ``--rollout.n_samples_per_prompt`` episodes of a row share env id and seed, hence the
initial state: a GRPO group. The label is plain text so that OpenRLHF's ``datasets`` loader sees
one column type whatever the env kwargs are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

INPUT_KEY = "prompt"
LABEL_KEY = "label"


@dataclass(frozen=True)
class Task:
    """What one episode plays: env id and seed, plus how to present it to the model."""

    env_id: str
    seed: int
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None
    max_turns: int | None = None  # actions per episode (None: the env's own limit)
    template_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. {"enable_thinking": False}

    def to_label(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_label(cls, label: Any) -> Task:
        """The task of a row's label (JSON text, or the dict itself)."""
        try:
            data = json.loads(label) if isinstance(label, (str, bytes)) else dict(label)
            max_turns = data.get("max_turns")
            return cls(
                env_id=str(data["env_id"]),
                seed=int(data["seed"]),
                env_kwargs=dict(data.get("env_kwargs") or {}),
                system_prompt=data.get("system_prompt"),
                max_turns=None if max_turns is None else int(max_turns),
                template_kwargs=dict(data.get("template_kwargs") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"a GEM row's label is JSON with env_id and seed (see gem_adapters.openrlhf.dataset), got {label!r}"
            ) from exc


def task_rows(
    env_ids: str | Sequence[str],
    num_tasks: int,
    *,
    first_seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    system_prompt: str | None = None,
    max_turns: int | None = None,
    template_kwargs: dict[str, Any] | None = None,
) -> list[dict[str, str]]:
    """``num_tasks`` rows; seeds ``first_seed, first_seed + 1, ...``, env ids taken in turn."""
    import gem_core

    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    if not ids or num_tasks < 0:
        raise ValueError("need at least one env id and a non-negative number of tasks")
    if max_turns is not None and max_turns < 1:
        raise ValueError("max_turns must be at least 1")
    kwargs = dict(env_kwargs or {})
    envs = {env_id: gem_core.make(env_id, **kwargs) for env_id in ids}
    rows = []
    try:
        for i in range(num_tasks):
            env_id, seed = ids[i % len(ids)], first_seed + i
            observation, _ = envs[env_id].reset(seed=seed)
            task = Task(env_id, seed, kwargs, system_prompt, max_turns, dict(template_kwargs or {}))
            rows.append({INPUT_KEY: str(observation), LABEL_KEY: task.to_label(), "datasource": env_id})
    finally:
        for env in envs.values():
            env.close()
    return rows


def write_prompts(path: str | Path, rows: Iterable[dict[str, str]]) -> Path:
    """Write ``rows`` as the JSONL file ``--data.prompt_dataset`` (and ``--eval.dataset``) read."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path

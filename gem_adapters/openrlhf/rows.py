"""Tasks into OpenRLHF's dataset rows: the prompt JSONL (``--data.prompt_dataset``), one row per GEM ``Task``.

A row::

    prompt       the env's first observation for this seed (shown in OpenRLHF's logs; the agent
                 renders the conversation itself, so do not pass ``--data.apply_chat_template``)
    label        the task as JSON text: {"env_id", "seed", "env_kwargs", "system_prompt",
                 "max_turns", "template_kwargs"} (``Task``)
    datasource   the env id (OpenRLHF groups evaluation metrics by it)

Launch with ``--data.input_key prompt --data.label_key label``. OpenRLHF hands each row's prompt and
label to the agent executor (``gem_adapters.openrlhf.rollout``), which makes the env from the label and
plays it; the ``--rollout.n_samples_per_prompt`` episodes of a row share env id and seed, hence the
initial state: a GRPO group. The label is plain text so that OpenRLHF's ``datasets`` loader sees
one column type whatever the env kwargs are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gem_adapters.episodes import tasks as shared

INPUT_KEY = "prompt"
LABEL_KEY = "label"


class Task(shared.Task):
    """A ``gem_adapters.episodes.tasks.Task`` as a row's label: JSON text."""

    def to_label(self) -> str:
        return self.to_json()

    @classmethod
    def from_label(cls, label: Any) -> Task:
        """The task of a row's label (JSON text, or the dict itself)."""
        return cls.from_json(label)


def task_rows(tasks: Iterable[shared.Task]) -> list[dict[str, str]]:
    """One row per task, in order (``gem_adapters.episodes.tasks.make_tasks`` makes the usual ones)."""
    return [
        {INPUT_KEY: str(observation), LABEL_KEY: task.to_json(), "datasource": task.env_id}
        for task, observation in shared.with_first_observations(tasks)
    ]


def write_prompts(path: str | Path, rows: Iterable[dict[str, str]]) -> Path:
    """Write ``rows`` as the JSONL file ``--data.prompt_dataset`` (and ``--eval.dataset``) read."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path

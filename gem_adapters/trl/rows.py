"""Tasks into TRL's dataset rows: each row's ``prompt`` is the whole ``Task`` as JSON text.

TRL's ``GRPOTrainer`` hands its ``rollout_func`` the dataset's prompts, already repeated
``num_generations`` times. Here a prompt is ``Task.to_json()`` (env id, seed, env kwargs, system
prompt, turn limit, chat-template kwargs), and ``gem_adapters.trl.rollout`` plays that task: the
``num_generations`` copies of a row share env id and seed, hence the initial state: one GRPO group.

Vision-language models: TRL builds the image tensors of its forward pass from the row's ``images``
column, not from the rollout, so ``task_rows`` can put each task's first-observation images there,
with a conversational ``prompt`` (``[{"role": "user", "content": <task JSON>}]``) as TRL requires.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gem_adapters.episodes.tasks import Task, make_tasks, mixed_tasks


def task_rows(tasks: Iterable[Task], *, images: bool | None = None):
    """A ``datasets.Dataset`` with one row per task, in order (columns ``prompt``, ``env_id``,
    ``seed``; ``gem_adapters.episodes.tasks.make_tasks`` makes the usual tasks).

    With ``images`` (``None``: when some env id's first observation has images) each row also holds
    the images of its task's first observation (``images``, empty for a text env) and its ``prompt``
    is conversational: what TRL needs to give a vision-language model's forward pass the images the
    episode showed."""
    from datasets import Dataset

    from gem_adapters.policies.multimodal import first_observation_images

    tasks = list(tasks)
    if images is None:
        last = {task.env_id: task for task in tasks}
        images = any(first_observation_images(t.env_id, t.seed, **t.env_kwargs) for t in last.values())
    columns: dict[str, list[Any]] = {
        "prompt": [task.to_json() for task in tasks],
        "env_id": [task.env_id for task in tasks],
        "seed": [task.seed for task in tasks],
    }
    if images:
        columns["prompt"] = [[{"role": "user", "content": prompt}] for prompt in columns["prompt"]]
        columns["images"] = [first_observation_images(t.env_id, t.seed, **t.env_kwargs) for t in tasks]
    return Dataset.from_dict(columns)


def tasks_dataset(
    env_ids: str | Sequence[str], num_tasks: int, first_seed: int = 0, images: bool | None = None
):
    """``task_rows(make_tasks(env_ids, num_tasks, first_seed=first_seed), images=images)``: seeds
    ``first_seed, first_seed + 1, ...``, env ids taken in turn."""
    return task_rows(make_tasks(env_ids, num_tasks, first_seed=first_seed), images=images)


def mixed_tasks_dataset(
    env_ids: Sequence[str], tasks_per_env: int, first_seed: int = 0, images: bool | None = None
):
    """One dataset over several envs in equal shares: ``task_rows(mixed_tasks(env_ids, tasks_per_env,
    first_seed=first_seed))``. Rows go round-robin over the envs and env ``k``'s ``j``-th row has seed
    ``first_seed + j`` (``gem_adapters.episodes.tasks.mixed_tasks``); a row is one task, so each GRPO
    group (its ``num_generations`` copies) stays within one env and seed. With
    ``GEMGRPOConfig(shuffle_dataset=False)`` and a generation batch of a multiple of ``len(env_ids)``
    tasks, every step trains on equal shares of the envs; TRL's default shuffle mixes them at random."""
    return task_rows(mixed_tasks(env_ids, tasks_per_env, first_seed=first_seed), images=images)


def task_prompt(env_id: str, seed: int, **fields: Any) -> str:
    """The prompt of one task: ``Task(env_id, seed, **fields).to_json()``."""
    return Task(env_id, int(seed), **fields).to_json()


def prompt_task(prompt: Any) -> Task:
    """The ``Task`` of a row's prompt: the JSON text, or the conversational prompt of an image task as
    TRL hands it to the ``rollout_func`` (its last user message, a string or a content list
    ``[{"type": "image", ...}, {"type": "text", "text": ...}]``)."""
    try:
        if not isinstance(prompt, str):
            content = [m for m in prompt if m["role"] == "user"][-1]["content"]
            if not isinstance(content, str):
                content = "".join(part["text"] for part in content if part["type"] == "text")
            prompt = content
        return Task.from_json(prompt)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise ValueError(
            f"a GEM task prompt is the JSON of a task: an env id and a seed, and optionally env_kwargs, "
            f"system_prompt, max_turns and template_kwargs (see task_rows), got {prompt!r}"
        ) from exc


def parse_task_prompt(prompt: Any) -> tuple[str, int]:
    """``(env_id, seed)`` of a row's prompt (see ``prompt_task``)."""
    task = prompt_task(prompt)
    return task.env_id, task.seed

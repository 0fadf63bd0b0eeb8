"""A task: what one training episode plays, as a trainer's prompt dataset stores it.

A task is an env id and a seed (hence the initial state) plus how to present the episode to the
model: env kwargs, system prompt, turn limit and chat-template kwargs. The episodes a trainer samples
from one dataset row share the task, hence the initial state: a GRPO group.

``make_tasks`` makes the tasks of a dataset (seeds ``first_seed, first_seed + 1, ...``, env ids taken
in turn), ``mixed_tasks`` those of one dataset over several envs in equal shares (each env's seeds
``first_seed, first_seed + 1, ...``, as its own dataset would have them), ``with_first_observations`` gives each task its first observation. This ``Task`` is the one
every adapter plays, and it travels whole: each adapter's ``rows`` module turns an iterable of tasks
into its framework's dataset rows, the task as ``Task.to_json()`` text, and its rollout reads it back
with ``Task.from_json``: ``gem_adapters.trl.rows`` (the prompt), ``gem_adapters.verl.rows``
(``extra_info["task"]``), ``gem_adapters.openrlhf.rows`` (the label).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Task:
    """What one episode plays: env id and seed, plus how to present it to the model."""

    env_id: str
    seed: int
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None
    max_turns: int | None = None  # actions per episode (None: the env's own limit)
    template_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. {"enable_thinking": False}

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, data: str | bytes | Mapping[str, Any]) -> Task:
        """The task of JSON text (``to_json``) or of the mapping itself; unknown keys are ignored."""
        try:
            fields = json.loads(data) if isinstance(data, (str, bytes)) else dict(data)
            max_turns = fields.get("max_turns")
            return cls(
                env_id=str(fields["env_id"]),
                seed=int(fields["seed"]),
                env_kwargs=dict(fields.get("env_kwargs") or {}),
                system_prompt=fields.get("system_prompt"),
                max_turns=None if max_turns is None else int(max_turns),
                template_kwargs=dict(fields.get("template_kwargs") or {}),
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"a GEM task is JSON with env_id and seed (see gem_adapters.episodes.tasks), got {data!r}"
            ) from exc


def make_tasks(
    env_ids: str | Sequence[str],
    num_tasks: int,
    *,
    first_seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    system_prompt: str | None = None,
    max_turns: int | None = None,
    template_kwargs: dict[str, Any] | None = None,
) -> list[Task]:
    """``num_tasks`` tasks; seeds ``first_seed, first_seed + 1, ...``, env ids taken in turn."""
    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    if not ids or num_tasks < 0:
        raise ValueError("need at least one env id and a non-negative number of tasks")
    if max_turns is not None and max_turns < 1:
        raise ValueError("max_turns must be at least 1")
    kwargs, template = dict(env_kwargs or {}), dict(template_kwargs or {})
    return [
        Task(ids[i % len(ids)], first_seed + i, kwargs, system_prompt, max_turns, template)
        for i in range(num_tasks)
    ]


def mixed_tasks(
    env_ids: Sequence[str], tasks_per_env: int, *, first_seed: int = 0, **fields: Any
) -> list[Task]:
    """``tasks_per_env`` tasks of each of ``env_ids``, interleaved round-robin (env 0's first task, env
    1's first, ..., env 0's second, ...): every run of ``len(env_ids)`` consecutive tasks holds one of
    each env, so a batch of a multiple of that many tasks taken in order holds equal shares. Env ``k``'s
    ``j``-th task has seed ``first_seed + j``: the seeds ``make_tasks(env_ids[k], tasks_per_env,
    first_seed=first_seed)`` gives, so each env of a mixture plays the tasks its single-env run plays.
    ``fields`` (env kwargs, system prompt, ...) are ``make_tasks``'s, the same for every env."""
    ids = list(env_ids)
    if not ids or len(set(ids)) != len(ids):
        raise ValueError(f"a mixture needs distinct env ids, got {ids}")
    per_env = [make_tasks(env_id, tasks_per_env, first_seed=first_seed, **fields) for env_id in ids]
    return [tasks[j] for j in range(tasks_per_env) for tasks in per_env]


def iter_tasks(env_ids: str | Sequence[str], num_tasks: int, **fields: Any) -> Iterator[tuple[Task, Any]]:
    """``with_first_observations(make_tasks(env_ids, num_tasks, **fields))``: the arguments are checked
    at once."""
    return with_first_observations(make_tasks(env_ids, num_tasks, **fields))


def with_first_observations(tasks: Iterable[Task]) -> Iterator[tuple[Task, Any]]:
    """Each task with its first observation (the env made with its kwargs, reset with its seed); one
    env per env id and kwargs, closed when the iterator ends."""
    import gem_core

    envs: dict[tuple[str, str], Any] = {}
    try:
        for task in tasks:
            key = (task.env_id, json.dumps(task.env_kwargs, sort_keys=True, default=repr))
            if key not in envs:
                envs[key] = gem_core.make(task.env_id, **task.env_kwargs)
            observation, _ = envs[key].reset(seed=task.seed)
            yield task, observation
    finally:
        for env in envs.values():
            env.close()

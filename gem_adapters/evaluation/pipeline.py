"""The whole evaluation: resolve the ids, load the agent, play, measure, write the report."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gem_adapters.evaluation.agents import Agent, has_solver, load_agent
from gem_adapters.evaluation.config import EvalConfig, EvalResult
from gem_adapters.evaluation.episodes import run_episodes
from gem_adapters.evaluation.errors import EvalError, one_line
from gem_adapters.evaluation.metrics import compute_metrics
from gem_adapters.evaluation.report import write_report
from gem_core import list_envs, make, spec
from gem_core.registry import EnvNotFoundError

log = logging.getLogger("gem_adapters.evaluation")


def resolve_env_ids(names: Sequence[str]) -> list[str]:
    """Registered ids for ``names`` (ids or globs such as ``game:*-easy``), in order, without repeats."""
    ids: list[str] = []
    for name in names:
        name = name.strip()
        if not name:
            continue
        if any(c in name for c in "*?["):
            matched = list_envs(name)
            if not matched:
                raise EvalError(f"no registered env matches {name!r} (see `gem list`)")
        else:
            try:
                matched = [spec(name).id]
            except EnvNotFoundError as exc:
                raise EvalError(str(exc)) from None
        ids.extend(i for i in matched if i not in ids)
    if not ids:
        raise EvalError("no env given")
    return ids


def evaluate(
    model: str,
    config: EvalConfig,
    out_dir: str | Path | None = None,
    *,
    progress: bool = True,
    command: str | None = None,
    agent: Agent | None = None,
    **agent_kwargs: Any,
) -> EvalResult:
    """Load the agent, play every job, compute metrics and (with ``out_dir``) write the outputs."""
    env_ids = resolve_env_ids(config.env_ids)  # before loading a model: a typo fails fast
    for env_id in env_ids:
        check_env_builds(env_id)
    agent = agent or load_agent(model, config, **agent_kwargs)
    skipped = unplayable_envs(agent, env_ids, config.seed)
    for env_id, why in skipped.items():
        log.warning("gem eval: skipping %s: %s", env_id, why)
    env_ids = [env_id for env_id in env_ids if env_id not in skipped]
    if not env_ids:
        raise EvalError(f"no env to play: {'; '.join(f'{i}: {why}' for i, why in skipped.items())}")
    started = time.perf_counter()
    episodes = run_episodes(agent, dataclasses.replace(config, env_ids=env_ids), env_ids, progress=progress)
    metrics = {
        "model": model,
        "config": {**dataclasses.asdict(config), "env_ids": env_ids},
        **compute_metrics(episodes, config.k, agent.uses_tokens),
        "skipped": skipped,
    }
    result = EvalResult(model, config, episodes, metrics, time.perf_counter() - started)
    if out_dir is not None:
        result.files = write_report(result, Path(out_dir), command=command)
    return result


def unplayable_envs(agent: Agent, env_ids: Sequence[str], seed: int) -> dict[str, str]:
    """The envs this agent cannot play, and why: for the solver agent, those without a scripted solver."""
    if agent.name != "solver":
        return {}
    skipped = {}
    for env_id in env_ids:
        with make(env_id) as env:
            env.reset(seed=seed)
            if not has_solver(env):
                skipped[env_id] = (
                    "it has no scripted solver (Env.solve_action; the games and TicTacToe have one)"
                )
    return skipped


def check_env_builds(env_id: str) -> None:
    try:
        make(env_id).close()
    except Exception as exc:  # e.g. a hub-data env without its optional dependency
        raise EvalError(f"cannot build {env_id}: {one_line(exc)}") from None

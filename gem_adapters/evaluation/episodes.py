"""Playing the episodes: one job per (env, seed, sample), text agents one by one, models in batches."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gem_adapters.episodes.episode import Episode, Turn
from gem_adapters.evaluation.agents import Agent
from gem_adapters.evaluation.config import EvalConfig
from gem_adapters.evaluation.errors import EvalError, one_line
from gem_adapters.policies.base import SamplingParams
from gem_core import Env, Wrapper, make


def build_tools(config: EvalConfig) -> list[Any]:
    tools = []
    for name in config.tools:
        try:
            if name == "python":
                from gem_core.tools.python import PythonTool

                tools.append(PythonTool())
            else:
                from gem_core.tools.search import SearchTool

                tools.append(SearchTool(url=config.search_url) if config.search_url else SearchTool())
        except Exception as exc:
            raise EvalError(f"cannot start the {name} tool: {one_line(exc)}") from None
    return tools


@dataclass(frozen=True)
class Job:
    env_id: str
    seed: int
    sample: int


def jobs_for(config: EvalConfig, env_ids: Sequence[str]) -> list[Job]:
    return [
        Job(env_id, config.seed + i, j)
        for env_id in env_ids
        for i in range(config.episodes)
        for j in range(config.k)
    ]


class _ReportEnds(Wrapper):
    """Calls ``on_end()`` when the env ends an episode (drives the progress bar while a batch plays)."""

    def __init__(self, env: Env, on_end: Callable[[], None]):
        super().__init__(env)
        self.on_end = on_end

    def step(self, action: str):
        result = self.env.step(action)
        if result[2] or result[3]:
            self.on_end()
        return result


def run_episodes(
    agent: Agent, config: EvalConfig, env_ids: Sequence[str], *, progress: bool = True
) -> list[Episode]:
    """Every job's episode, in job order (env, then seed, then sample)."""
    from tqdm.auto import tqdm

    jobs = jobs_for(config, env_ids)
    tools = build_tools(config)
    bar = tqdm(total=len(jobs), unit="ep", desc=agent.name, disable=not progress, file=sys.stderr)
    try:
        if agent.uses_tokens:
            return _run_model(agent, config, jobs, tools, bar)
        return [_run_text(agent, config, job, tools, bar) for job in jobs]
    finally:
        bar.close()
        for tool in tools:
            tool.close()


def _wrap(env: Env, tools: list[Any]) -> Env:
    if tools:
        from gem_core.wrappers.tools import ToolEnvWrapper

        env = ToolEnvWrapper(env, tools)
    return env


def _run_text(agent: Agent, config: EvalConfig, job: Job, tools: list[Any], bar: Any) -> Episode:
    env = _wrap(make(job.env_id), tools)
    try:
        obs, _ = env.reset(seed=job.seed)
        if agent.start is not None:
            agent.start(env, job.seed, job.sample)
        episode = Episode(env_id=job.env_id, seed=job.seed, info={"sample": job.sample})
        limit = config.max_turns or 100_000
        while True:
            action = agent.act(env)  # type: ignore[misc]
            next_obs, reward, terminated, truncated, info = env.step(action)
            episode.turns.append(
                Turn(
                    observation=str(obs),
                    action=action,
                    prompt_ids=[],
                    action_ids=[],
                    reward=float(reward),
                    terminated=bool(terminated),
                    truncated=bool(truncated),
                    info=dict(info),
                )
            )
            obs = next_obs
            if terminated or truncated:
                break
            if len(episode.turns) >= limit:
                episode.info["stopped_by"] = "max_turns"
                episode.turns[-1].truncated = True
                break
        episode.final_observation = str(obs)
        return episode
    except NotImplementedError:
        raise EvalError(f"{job.env_id} cannot sample random actions") from None
    finally:
        env.close()
        bar.update(1)


def _run_model(
    agent: Agent, config: EvalConfig, jobs: list[Job], tools: list[Any], bar: Any
) -> list[Episode]:
    from gem_adapters.runtime.rollout import rollout
    from gem_core.vector import AsyncVectorEnv, SyncVectorEnv

    params = SamplingParams(
        max_new_tokens=config.max_new_tokens, temperature=config.sampling_temperature, top_p=config.top_p
    )
    episodes: list[Episode] = []
    for start in range(0, len(jobs), config.concurrency):
        chunk = jobs[start : start + config.concurrency]
        ended = [0]

        def on_end(ended: list[int] = ended) -> None:
            ended[0] += 1
            bar.update(1)

        def env_fn(env_id: str) -> Callable[[], Env]:
            return lambda: _ReportEnds(_wrap(make(env_id), tools), on_end)

        vector_cls = AsyncVectorEnv if tools else SyncVectorEnv  # tool calls overlap in threads
        vec = vector_cls([env_fn(job.env_id) for job in chunk], autoreset_mode="disabled")
        try:
            played = rollout(
                vec,
                agent.policy,  # type: ignore[arg-type]
                agent.renderer,  # type: ignore[arg-type]
                seeds=[job.seed for job in chunk],
                max_turns=config.max_turns,
                max_new_tokens=config.max_new_tokens,
                max_context_tokens=config.max_context_tokens,
                sampling=params,
            )
        finally:
            vec.close()
        bar.update(len(chunk) - ended[0])  # episodes the driver stopped (turn or context limits)
        for job, episode in zip(chunk, played):
            episode.env_id, episode.seed = job.env_id, job.seed
            episode.info["sample"] = job.sample
            episodes.append(episode)
    return episodes

"""The rollout driver: plays N envs against a policy and returns token-exact episodes.

Every env runs its own episode; episodes finish independently (an env that finishes simply leaves the
batch). Each round, the contexts of all envs still playing go to the policy as one batch, and the
actions go to the vector env as one subset step (``{index: action}``). ``arollout`` is the asyncio
variant: each env is a coroutine that plays at its own pace; generation requests and env steps
issued at the same time are merged into one batched ``generate`` call and one vector step.

Limits:
  ``max_turns``           actions per episode; an episode stopped here has its last turn flagged
                          truncated and ``episode.info["stopped_by"] = "max_turns"``.
  ``max_new_tokens``      per turn.
  ``max_context_tokens``  the whole sequence (``episode.to_sequence()``, end-of-turn ids included). A
                          turn generates at most what still fits; when not one token fits the
                          episode ends with ``info["stopped_by"] = "max_context_tokens"``.

Envs come as a vector env (``gem_core.make_vec(..., autoreset_mode="disabled")`` is the natural fit;
finished envs are never stepped again, so ``next_step`` works too), or as env ids, from which a vector
env is built and closed here. Chat history is the renderer's job (``gem_adapters.trajectory``): envs
need no history wrapper.

Seeds: ``seeds=s`` gives env ``i`` the seed ``s + i``; a list gives one per env. Repeat a seed to put
several episodes in a GRPO group (same env id and seed = same initial state).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from gem_adapters.policies.base import Coalescer, Generation, Policy, SamplingParams, as_policy
from gem_adapters.trajectory import ChatRenderer, Episode, EpisodeBuilder


def rollout(
    envs: Any,
    policy: Policy | Callable[..., Any],
    renderer: ChatRenderer,
    *,
    seeds: int | Sequence[int | None] | None = None,
    num_envs: int | None = None,
    max_turns: int | None = None,
    max_new_tokens: int = 256,
    max_context_tokens: int | None = None,
    sampling: SamplingParams | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> list[Episode]:
    """Play one episode in every env; returns the episodes in env order.

    ``envs``: a gem_core vector env, an env id (``num_envs`` copies) or a list of env ids.
    ``sampling`` sets temperature/top-p/top-k/seed; its stop tokens default to the renderer's.
    """
    driver = _Driver(
        envs,
        as_policy(policy),
        renderer,
        num_envs,
        env_kwargs,
        max_turns,
        max_new_tokens,
        max_context_tokens,
        sampling,
    )
    with driver:
        obs, _ = driver.vec.reset(seed=driver.seed_list(seeds))
        driver.start(obs)
        while driver.active:
            for params, indices in driver.next_requests().items():
                generations = driver.policy.generate([driver.builders[i].context() for i in indices], params)
                if len(generations) != len(indices):
                    raise RuntimeError(
                        f"the policy returned {len(generations)} generations for {len(indices)} prompts"
                    )
                actions = {i: driver.act(i, g) for i, g in zip(indices, generations)}
                results = driver.vec.step(actions)
                for i in actions:
                    driver.feedback(i, *(field[i] for field in results))
        return driver.episodes()


async def arollout(
    envs: Any,
    policy: Policy | Callable[..., Any],
    renderer: ChatRenderer,
    *,
    seeds: int | Sequence[int | None] | None = None,
    num_envs: int | None = None,
    max_turns: int | None = None,
    max_new_tokens: int = 256,
    max_context_tokens: int | None = None,
    sampling: SamplingParams | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> list[Episode]:
    """``rollout`` for asyncio: each env plays as its own coroutine (see the module docstring)."""
    driver = _Driver(
        envs,
        as_policy(policy),
        renderer,
        num_envs,
        env_kwargs,
        max_turns,
        max_new_tokens,
        max_context_tokens,
        sampling,
    )
    with driver:
        obs, _ = await asyncio.to_thread(driver.vec.reset, seed=driver.seed_list(seeds))
        driver.start(obs)
        stepper = Coalescer(lambda _, items: _step_subset(driver.vec, items))

        async def play(i: int) -> None:
            while i in driver.active:
                params = driver.params_for(i)
                if params is None:
                    continue  # params_for finished the episode (no room left in the context)
                (generation,) = await driver.policy.agenerate([driver.builders[i].context()], params)
                action = driver.act(i, generation)
                (result,) = await stepper.submit(None, [(i, action)])
                driver.feedback(i, *result)

        await asyncio.gather(*(play(i) for i in range(driver.vec.num_envs)))
        return driver.episodes()


def rollout_stats(episodes: Sequence[Episode]) -> dict[str, float]:
    """Means over episodes: return, success, turns, generated tokens; and how many hit each limit."""
    n = max(len(episodes), 1)
    return {
        "episodes": float(len(episodes)),
        "mean_return": sum(e.total_reward for e in episodes) / n,
        "success_rate": sum(e.success for e in episodes) / n,
        "mean_turns": sum(e.num_turns for e in episodes) / n,
        "mean_generated_tokens": sum(e.num_generated_tokens for e in episodes) / n,
        "truncated_by_max_turns": float(sum(e.info.get("stopped_by") == "max_turns" for e in episodes)),
        "truncated_by_context": float(
            sum(e.info.get("stopped_by") == "max_context_tokens" for e in episodes)
        ),
        "template_rewrites_history": float(sum(e.template_rewrites_history for e in episodes)),
    }


class _Driver:
    """State shared by the sync and async loops: the vector env, one builder per env, the limits."""

    def __init__(
        self,
        envs: Any,
        policy: Policy,
        renderer: ChatRenderer,
        num_envs: int | None,
        env_kwargs: dict[str, Any] | None,
        max_turns: int | None,
        max_new_tokens: int,
        max_context_tokens: int | None,
        sampling: SamplingParams | None,
    ):
        if hasattr(envs, "step") and hasattr(envs, "num_envs"):
            self.vec, self.owns_vec = envs, False
        else:
            from gem_core import make_vec

            self.vec = make_vec(
                envs, num_envs, asynchronous=False, autoreset_mode="disabled", env_kwargs=env_kwargs
            )
            self.owns_vec = True
        if max_turns is not None and max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.policy, self.renderer = policy, renderer
        self.max_turns, self.max_new_tokens, self.max_context_tokens = (
            max_turns,
            max_new_tokens,
            max_context_tokens,
        )
        base = sampling or SamplingParams(max_new_tokens=max_new_tokens)
        stops = base.stop_token_ids if base.stop_token_ids is not None else renderer.stop_token_ids
        self.sampling = dataclasses.replace(base, max_new_tokens=max_new_tokens, stop_token_ids=stops)
        self.builders: list[EpisodeBuilder] = []
        self.finished: dict[int, Episode] = {}
        self.active: set[int] = set()

    def __enter__(self) -> _Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.owns_vec:
            self.vec.close()

    def seed_list(self, seeds: int | Sequence[int | None] | None) -> list[int | None]:
        n = self.vec.num_envs
        if seeds is None or isinstance(seeds, int):
            return [None if seeds is None else seeds + i for i in range(n)]
        if len(seeds) != n:
            raise ValueError(f"{len(seeds)} seeds for {n} envs")
        return list(seeds)

    def start(self, observations: Sequence[Any]) -> None:
        # get_attr reaches the envs wherever they live (threads, worker processes or Ray actors).
        specs, seeds = self.vec.get_attr("spec"), self.vec.get_attr("seed")
        self.builders = [
            self.renderer.start(str(obs), env_id=getattr(spec, "id", None), seed=seed)
            for obs, spec, seed in zip(observations, specs, seeds)
        ]
        self.active = set(range(len(observations)))

    def params_for(self, i: int) -> SamplingParams | None:
        """This turn's sampling params (capped by the context budget), or None after ending the episode."""
        budget = self.max_new_tokens
        if self.max_context_tokens is not None:
            # Leave room for the end-of-turn ids the renderer appends after a cut-off action.
            room = self.max_context_tokens - len(self.builders[i].context()) - len(self.renderer.closing_ids)
            budget = min(budget, room)
        if budget < 1:
            self.finish(i, "max_context_tokens")
            return None
        return (
            self.sampling
            if budget == self.max_new_tokens
            else dataclasses.replace(self.sampling, max_new_tokens=budget)
        )

    def next_requests(self) -> dict[SamplingParams, list[int]]:
        """The active envs grouped by sampling params (they differ only near the context limit)."""
        requests: dict[SamplingParams, list[int]] = {}
        for i in sorted(self.active):
            params = self.params_for(i)
            if params is not None:
                requests.setdefault(params, []).append(i)
        return requests

    def act(self, i: int, generation: Generation) -> str:
        return self.builders[i].add_action(
            generation.token_ids, generation.logprobs, generation.finish_reason
        )

    def feedback(
        self, i: int, obs: Any, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
    ) -> None:
        info = dict(info)
        info.pop("stepped", None)
        if "final_obs" in info:  # a vector env in same_step autoreset mode already started the next episode
            obs, info = info["final_obs"], dict(info.get("final_info", {}))
        builder = self.builders[i]
        builder.add_feedback(str(obs), float(reward), bool(terminated), bool(truncated), info)
        if builder.done:
            self.finish(i, None)
        elif self.max_turns is not None and len(builder.episode.turns) >= self.max_turns:
            self.finish(i, "max_turns")

    def finish(self, i: int, reason: str | None) -> None:
        self.finished[i] = self.builders[i].finish(reason)
        self.active.discard(i)

    def episodes(self) -> list[Episode]:
        return [self.finished[i] for i in range(len(self.builders))]


def _step_subset(
    vec: Any, items: list[tuple[int, str]]
) -> list[tuple[Any, float, bool, bool, dict[str, Any]]]:
    obs, rewards, terminated, truncated, infos = vec.step(dict(items))
    return [(obs[i], rewards[i], terminated[i], truncated[i], infos[i]) for i, _ in items]

"""The rollout drivers: play envs against a policy and return token-exact episodes.

``rollout`` plays N envs in rounds: every env runs its own episode and episodes finish independently
(an env that finishes simply leaves the batch); each round, the contexts of all envs still playing go
to the policy as one batch, and the actions go to the vector env as one subset step
(``{index: action}``). ``arollout`` is the asyncio variant: each env is a coroutine that plays at its
own pace; generation requests and env steps issued at the same time are merged into one batched
``generate`` call and one vector step.

``aplay_episode`` plays one env with an async ``generate(prompt_ids, params) -> Generation``
callback: the driver for trainers whose rollout engines serve one request at a time (verl's agent
loops, OpenRLHF's agent executors); each env of ``arollout`` is played by it too. All three drivers
share one turn step (``_Player``): the next action's token budget, the action, the env's answer,
the stop; a framework adapter adds only its engine call and its output format.

Limits: a ``RolloutLimits`` (``gem_adapters.runtime.rollout_limits``) as ``limits=``, or its four fields
(``max_turns``, ``max_new_tokens``, ``max_context_tokens``, ``max_response_tokens``) as keywords.
``rollout`` and ``arollout`` hold ``max_context_tokens`` within the policy's own context
(``policy.max_context_tokens``, e.g. ``TransformersPolicy``'s): an episode that fills the model's
context ends there (``stopped_by="max_context_tokens"``).

Envs come as a vector env (``gem_core.make_vec(..., autoreset_mode="disabled")`` is the natural fit;
finished envs are never stepped again, so ``next_step`` works too), or as env ids, from which a vector
env is built and closed here. ``aplay_episode`` takes one env: a gem_core env (its ``reset`` and
``step`` run in a worker thread, so concurrent episodes overlap) or any object with coroutine
``reset(seed=...)`` and ``step(action)`` of the same results (e.g. an adapter around a framework's
own env object). Chat history is the renderer's job (``gem_adapters.episodes.chat_renderer``): envs need no
history wrapper.

Seeds: ``seeds=s`` gives env ``i`` the seed ``s + i``; a list gives one per env. Repeat a seed to put
several episodes in a GRPO group (same env id and seed = same initial state).

State keys: each turn records the env's state key before its action (``Turn.state_key``, what GiGPO
groups turns by): ``info["state_key"]`` of the reset or step that showed the observation when the env
reports one there (an env that is not a gem_core env, or one in a worker process), else the env's own
``state_key()`` (gem_core envs, in this process or a thread of it). The process and Ray vector
backends keep their envs elsewhere: there only ``info["state_key"]`` is seen.

Rewards: an env may answer a turn with reward ``None`` (no reward signal for it); the episode stores
0.0, what every estimator makes of None (``gem_adapters.algorithms.advantages``).

Sampling seeds: with a policy that takes per-prompt seeds (``TransformersPolicy``), turn ``k`` of env
``i`` samples from the random stream ``stream_seed(base, i, k)``; ``base`` is ``sampling.seed`` if
set, else drawn once per rollout from the policy. What an episode samples therefore does not depend
on which other episodes share its batches: ``rollout`` and ``arollout`` play the same episodes, with
or without the policy's key/value cache.

Key/value caches: with a policy that has a generation engine (``TransformersPolicy``'s default
``cache="kv"``, see ``policies.kv_engine``), ``rollout`` and ``arollout`` play continuously: an
episode's next turn is submitted as soon as its env has answered and joins the decoding batch at the
next model step (no waiting for the round's slowest sequence), its prompt's cached prefix is reused
(only the env's answer and the template's markers are prefilled), and its cache is released when the
episode ends. Env steps run in a worker thread: a slow one (a tool call, a SQL query) goes on beside
the other episodes' decoding. ``aplay_episode`` releases through ``release`` (or ``generate.release``)
when given.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode, as_observation
from gem_adapters.episodes.episode_builder import EpisodeBuilder
from gem_adapters.policies.base import Coalescer, Generation, Policy, SamplingParams, as_policy, stream_seed
from gem_adapters.runtime.rollout_limits import RolloutLimits

Generate = Callable[[list[int], SamplingParams], Awaitable[Generation]]
ENV_STEP_WAIT_S = 0.005  # how long the driver waits for an env's answer before decoding on without it
StepResult = tuple[Any, float | None, bool, bool, dict[str, Any], Any]  # ..., info, state key


def rollout(
    envs: Any,
    policy: Policy | Callable[..., Any],
    renderer: ChatRenderer,
    *,
    seeds: int | Sequence[int | None] | None = None,
    num_envs: int | None = None,
    limits: RolloutLimits | None = None,
    sampling: SamplingParams | None = None,
    env_kwargs: dict[str, Any] | None = None,
    **limit_keywords: Any,
) -> list[Episode]:
    """Play one episode in every env; returns the episodes in env order.

    ``envs``: a gem_core vector env, an env id (``num_envs`` copies) or a list of env ids.
    ``limits``: a ``RolloutLimits``, or its fields as keywords (``max_new_tokens=256`` by default).
    ``sampling`` sets temperature/top-p/top-k/seed; its stop tokens default to the renderer's (its
    ``max_new_tokens`` is replaced by each turn's budget).
    """
    policy = as_policy(policy)
    limits = _within_context(RolloutLimits.of(limits, limit_keywords), policy)
    turn = _TurnSettings.make(renderer, limits, sampling)
    engine, base = _engine_of(policy), _base_seed(policy, turn)
    with _VectorEnv(envs, num_envs, env_kwargs) as vec:
        observations, infos = vec.reset(seed=_seed_list(seeds, vec.num_envs))
        players = _start_players(vec, observations, infos, renderer, turn)
        if engine is not None:
            _play_continuously(vec, players, engine, base or 0)
            return [player.episode for player in players]  # type: ignore[misc]
        active = list(range(len(players)))
        while active:
            requests: dict[SamplingParams, list[int]] = {}  # params differ only near a budget's end
            for i in active:
                params = players[i].next_params()
                if params is not None:
                    requests.setdefault(params, []).append(i)
            for params, indices in requests.items():
                contexts = [players[i].builder.context() for i in indices]
                if base is None:
                    generations = policy.generate(contexts, params)
                else:
                    turn_seeds = [stream_seed(base, i, players[i].builder.episode.num_turns) for i in indices]
                    generations = policy.generate(contexts, params, seeds=turn_seeds)  # type: ignore[call-arg]
                if len(generations) != len(indices):
                    raise RuntimeError(
                        f"the policy returned {len(generations)} generations for {len(indices)} prompts"
                    )
                actions = {}
                for i, generation in zip(indices, generations):
                    action = players[i].act(generation)
                    if action is not None:
                        actions[i] = action
                if actions:
                    for i, result in zip(actions, _step_subset(vec, list(actions.items()))):
                        players[i].feedback(*result)
            active = [i for i in active if players[i].episode is None]
        return [player.episode for player in players]  # type: ignore[misc]


def _play_continuously(vec: Any, players: list[_Player], engine: Any, base: int) -> None:
    """``rollout`` through a generation engine: every episode's turn is a request, and every model step
    decodes all the requests in flight. When some finish, their actions go to the vector env as one
    subset step and each episode's next turn is submitted as soon as its env has answered, joining the
    requests still decoding. Env steps run in one worker thread (the only one that steps the vector
    env): the driver waits ``ENV_STEP_WAIT_S`` for their answer, and a slower step (a tool call, a SQL
    query) goes on beside the next model steps instead of holding up the other episodes' decoding.
    Which requests share a step never changes what is sampled (per-request random streams)."""
    pending: dict[Any, int] = {}  # request -> env index
    last: dict[int, Any] = {}  # env index -> its latest finished request (holding its cache)
    stepping: dict[concurrent.futures.Future, list[int]] = {}  # env steps in the worker -> env indices

    def submit(i: int) -> None:
        player = players[i]
        params = player.next_params()
        if params is None:  # the episode ended on a budget
            if i in last:
                engine.release(last.pop(i))
            return
        seed = stream_seed(base, i, player.builder.episode.num_turns)
        request = engine.request(player.builder.context(), params, seed)
        engine.submit([request])
        pending[request] = i

    def answered(indices: list[int], results: list[StepResult]) -> None:
        for i, result in zip(indices, results):
            players[i].feedback(*result)
            if players[i].episode is None:
                submit(i)
            else:
                engine.release(last.pop(i))

    worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gem-rollout-env")
    try:
        with engine.autocast():
            for i in range(len(players)):
                submit(i)
            while pending or stepping:
                for future in [f for f in stepping if f.done()]:
                    answered(stepping.pop(future), future.result())
                if not pending:
                    concurrent.futures.wait(stepping, return_when=concurrent.futures.FIRST_COMPLETED)
                    continue
                actions = {}
                for request in engine.poll(list(pending)):
                    i = pending.pop(request)
                    last[i] = request
                    action = players[i].act(request.generation)
                    if action is None:
                        engine.release(last.pop(i))
                    else:
                        actions[i] = action
                if not actions:
                    continue
                future = worker.submit(_step_subset, vec, list(actions.items()))
                if concurrent.futures.wait([future], timeout=ENV_STEP_WAIT_S).done:
                    answered(list(actions), future.result())
                else:
                    stepping[future] = list(actions)
    finally:
        worker.shutdown(wait=True, cancel_futures=True)
        if pending:
            engine.cancel(list(pending))
        for request in last.values():
            engine.release(request)
        engine.flush()


async def arollout(
    envs: Any,
    policy: Policy | Callable[..., Any],
    renderer: ChatRenderer,
    *,
    seeds: int | Sequence[int | None] | None = None,
    num_envs: int | None = None,
    limits: RolloutLimits | None = None,
    sampling: SamplingParams | None = None,
    env_kwargs: dict[str, Any] | None = None,
    **limit_keywords: Any,
) -> list[Episode]:
    """``rollout`` for asyncio: each env plays as its own coroutine (see the module docstring)."""
    policy = as_policy(policy)
    limits = _within_context(RolloutLimits.of(limits, limit_keywords), policy)
    turn = _TurnSettings.make(renderer, limits, sampling)
    engine, base = _engine_of(policy), _base_seed(policy, turn)
    with _VectorEnv(envs, num_envs, env_kwargs) as vec:
        observations, infos = await asyncio.to_thread(vec.reset, seed=_seed_list(seeds, vec.num_envs))
        players = _start_players(vec, observations, infos, renderer, turn)
        stepper = Coalescer(lambda _, items: _step_subset(vec, items))

        def generate_of(i: int) -> tuple[Generate, Callable[[list[int]], None]]:
            last: list[Any] = []  # the engine request holding env i's cache

            async def generate(prompt_ids: list[int], params: SamplingParams) -> Generation:
                if base is None:
                    (generation,) = await policy.agenerate([prompt_ids], params)
                    return generation
                seed = stream_seed(base, i, players[i].builder.episode.num_turns)
                if engine is None:
                    (generation,) = await policy.agenerate([prompt_ids], params, seeds=[seed])  # type: ignore[call-arg]
                    return generation
                (request,) = await engine.agenerate([prompt_ids], params, [seed])
                last[:] = [request]
                return request.generation

            def release(prompt_ids: list[int]) -> None:
                if engine is None:
                    _release(policy, prompt_ids)
                elif last:
                    engine.release(last.pop())

            return generate, release

        def step_of(i: int) -> Callable[[str], Awaitable[StepResult]]:
            async def step(action: str) -> StepResult:
                (result,) = await stepper.submit(None, [(i, action)])
                return result

            return step

        return list(
            await asyncio.gather(
                *(_play(player, *generate_of(i), step_of(i)) for i, player in enumerate(players))
            )
        )


async def aplay_episode(
    env: Any,
    generate: Generate,
    renderer: ChatRenderer,
    *,
    seed: int | None = None,
    env_id: str | None = None,
    limits: RolloutLimits | None = None,
    sampling: SamplingParams | None = None,
    release: Callable[[list[int]], Any] | None = None,
    **limit_keywords: Any,
) -> Episode:
    """Reset ``env`` with ``seed`` and play one episode, awaiting ``generate(prompt_ids, params)`` for
    every action: ``prompt_ids`` is the context to continue (a copy; a ``PromptIds``, whose
    ``.images`` hold an image observation's images), ``params`` is ``sampling`` with this turn's
    budget as ``max_new_tokens`` and the renderer's stop tokens unless ``sampling`` names its own.
    ``env_id`` defaults to ``env.spec.id`` and the episode's seed to the env's own after the reset.
    ``release(prompt_ids)`` (default: ``generate.release`` if it has one, e.g. ``policy.release``
    of a ``TransformersPolicy`` to drop its key/value cache) is called with the last prompt when the
    episode ends. ``limits`` (or its fields as keywords) and the ``stopped_by`` labels are those of
    ``rollout`` (see ``gem_adapters.runtime.rollout_limits``)."""
    turn = _TurnSettings.make(renderer, RolloutLimits.of(limits, limit_keywords), sampling)
    observation, info = await _call(env.reset, seed=seed)
    if env_id is None:
        env_id = getattr(getattr(env, "spec", None), "id", None)
    own_seed = getattr(getattr(env, "unwrapped", env), "seed", None)  # the innermost env's, below wrappers
    if seed is None and isinstance(own_seed, int):
        seed = own_seed
    builder = EpisodeBuilder(
        renderer, as_observation(observation), env_id=env_id, seed=seed, state_key=_state_key(env, info)
    )
    player = _Player(builder, turn)
    if release is None:
        release = getattr(generate, "release", None)

    async def step(action: str) -> StepResult:
        observation, reward, terminated, truncated, info = await _call(env.step, action)
        key = None if terminated or truncated else _state_key(env, info)
        return observation, reward, terminated, truncated, info, key

    return await _play(player, generate, release, step)


# ---- the turn step ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _TurnSettings:
    """A rollout's limits with what a turn needs beside them."""

    limits: RolloutLimits
    closing: int  # the end-of-turn ids the renderer appends after a cut-off action
    sampling: SamplingParams  # stop tokens filled in; max_new_tokens is the per-turn cap if there is one

    @classmethod
    def make(
        cls, renderer: ChatRenderer, limits: RolloutLimits, sampling: SamplingParams | None
    ) -> _TurnSettings:
        cap = limits.max_new_tokens
        base = sampling or SamplingParams(max_new_tokens=cap or 1)
        stops = base.stop_token_ids if base.stop_token_ids is not None else renderer.stop_token_ids
        sampling = dataclasses.replace(base, max_new_tokens=cap or base.max_new_tokens, stop_token_ids=stops)
        return cls(limits, len(renderer.closing_ids), sampling)

    def budget(self, context_len: int, prompt_len: int) -> int:
        """How many ids the next action may generate, from a context of ``context_len`` ids."""
        return self.limits.turn_budget(context_len, prompt_len, self.closing)

    def params(self, budget: int) -> SamplingParams:
        if budget == self.sampling.max_new_tokens:
            return self.sampling
        return dataclasses.replace(self.sampling, max_new_tokens=budget)


class _Player:
    """One episode's turn step, the single implementation behind every driver here: the next
    action's sampling params (its budget), the action, the env's answer, the stop."""

    def __init__(self, builder: EpisodeBuilder, turn: _TurnSettings):
        self.builder, self.turn = builder, turn
        self.episode: Episode | None = None  # set when the episode ends
        self._prompt_len: int | None = None  # the first prompt's length (the response budget's origin)
        self._budget = 0

    def next_params(self) -> SamplingParams | None:
        """The next action's sampling params; None once the episode has ended (here too, when not one
        token fits a budget)."""
        if self.episode is not None:
            return None
        context_len = len(self.builder.context())
        if self._prompt_len is None:
            self._prompt_len = context_len
        self._budget = self.turn.budget(context_len, self._prompt_len)
        if self._budget < 1:
            self.finish("max_context_tokens")
            return None
        return self.turn.params(self._budget)

    def act(self, generation: Generation) -> str | None:
        """Record the generated action; returns its text for the env (None: the generation was empty,
        and the episode has ended)."""
        ids, logprobs, finish_reason = (
            list(generation.token_ids),
            generation.logprobs,
            generation.finish_reason,
        )
        if len(ids) > self._budget:  # the backend overran the budget: keep what fits
            ids, finish_reason = ids[: self._budget], "length"
            logprobs = None if logprobs is None else list(logprobs)[: self._budget]
        if not ids:
            self.finish("empty_generation")
            return None
        return self.builder.add_action(ids, logprobs, finish_reason)

    def feedback(
        self,
        observation: Any,
        reward: float | None,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any] | None,
        state_key: Any = None,
    ) -> None:
        """Record the env's answer to the action; ends the episode when the env or ``max_turns`` does."""
        builder = self.builder
        builder.add_feedback(
            as_observation(observation),
            None if reward is None else float(reward),
            bool(terminated),
            bool(truncated),
            dict(info or {}),
            state_key,
        )
        if builder.done:
            self.finish(None)
        elif (max_turns := self.turn.limits.max_turns) is not None and builder.episode.num_turns >= max_turns:
            self.finish("max_turns")

    def finish(self, reason: str | None) -> None:
        self.episode = self.builder.finish(reason)


async def _play(
    player: _Player,
    generate: Generate,
    release: Callable[[list[int]], Any] | None,
    step: Callable[[str], Awaitable[StepResult]],
) -> Episode:
    """The asyncio turn loop of one episode (``aplay_episode``, and each env of ``arollout``);
    ``release(last prompt)`` when it ends."""
    prompt = None
    try:
        while (params := player.next_params()) is not None:
            # A copy (a server may keep it), still carrying the images of an image observation.
            prompt = copy.copy(player.builder.context())
            generation = await generate(prompt, params)
            action = player.act(generation)
            if action is None:
                break
            player.feedback(*await step(action))
    finally:
        if release is not None and prompt is not None:
            release(prompt)
    return player.episode  # type: ignore[return-value]


def _engine_of(policy: Policy) -> Any:
    """The policy's generation engine (``rollout_engine()``), or None to play in rounds."""
    get = getattr(policy, "rollout_engine", None)
    return get() if callable(get) else None


def _within_context(limits: RolloutLimits, policy: Policy) -> RolloutLimits:
    """``limits`` with the context budget no larger than the policy's model context
    (``policy.max_context_tokens`` where it has one): an episode that fills the model's context ends
    (``stopped_by="max_context_tokens"``) instead of sending the model a prompt it cannot extend."""
    context = getattr(policy, "max_context_tokens", None)
    if context is None or (limits.max_context_tokens is not None and limits.max_context_tokens <= context):
        return limits
    return dataclasses.replace(limits, max_context_tokens=context)


def _base_seed(policy: Policy, turn: _TurnSettings) -> int | None:
    """The rollout's base sampling seed, for policies that take per-prompt seeds (else None)."""
    if not getattr(policy, "accepts_seeds", False):
        return None
    return turn.sampling.seed if turn.sampling.seed is not None else policy.draw_seed()  # type: ignore[attr-defined]


def _release(policy: Policy, prompt_ids: list[int]) -> None:
    release = getattr(policy, "release", None)
    if callable(release):
        release(prompt_ids)


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """An env method: awaited if it is a coroutine function, else run in a worker thread."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


# ---- vector envs --------------------------------------------------------------------------------
class _VectorEnv:
    """``envs`` as a vector env for one rollout: a given one, or one built from env ids (closed on exit)."""

    def __init__(self, envs: Any, num_envs: int | None, env_kwargs: dict[str, Any] | None):
        if hasattr(envs, "step") and hasattr(envs, "num_envs"):
            self.vec, self.owned = envs, False
        else:
            from gem_core import make_vec

            self.vec = make_vec(
                envs, num_envs, backend="sync", autoreset_mode="disabled", env_kwargs=env_kwargs
            )
            self.owned = True

    def __enter__(self) -> Any:
        return self.vec

    def __exit__(self, *exc: object) -> None:
        if self.owned:
            self.vec.close()


def _seed_list(seeds: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    if seeds is None or isinstance(seeds, int):
        return [None if seeds is None else seeds + i for i in range(n)]
    if len(seeds) != n:
        raise ValueError(f"{len(seeds)} seeds for {n} envs")
    return list(seeds)


def _start_players(
    vec: Any,
    observations: Sequence[Any],
    infos: Sequence[dict[str, Any]],
    renderer: ChatRenderer,
    turn: _TurnSettings,
) -> list[_Player]:
    # get_attr reaches the envs wherever they live (threads, worker processes or Ray actors).
    specs, seeds = vec.get_attr("spec"), vec.get_attr("seed")
    return [
        _Player(
            EpisodeBuilder(
                renderer,
                as_observation(obs),
                env_id=getattr(spec, "id", None),
                seed=seed,
                state_key=_state_key(_local_env(vec, i), info),
            ),
            turn,
        )
        for i, (obs, info, spec, seed) in enumerate(zip(observations, infos, specs, seeds))
    ]


def _step_subset(vec: Any, items: list[tuple[int, str]]) -> list[StepResult]:
    """Step the envs named in ``items`` (``(index, action)``); one env's result per item."""
    obs, rewards, terminated, truncated, infos = vec.step(dict(items))
    results = []
    for i, _ in items:
        observation, info = obs[i], dict(infos[i])
        info.pop("stepped", None)
        if "final_obs" in info:  # a vector env in same_step autoreset mode already started the next episode
            observation, info = info["final_obs"], dict(info.get("final_info", {}))
        ended = terminated[i] or truncated[i]
        key = None if ended else _state_key(_local_env(vec, i), info)
        results.append((observation, rewards[i], terminated[i], truncated[i], info, key))
    return results


def _local_env(vec: Any, i: int) -> Any:
    """Env ``i`` of a vector env that keeps its envs in this process (sync, threads), else None."""
    envs = getattr(vec, "envs", None)
    return envs[i] if isinstance(envs, list) and i < len(envs) else None


def _state_key(env: Any, info: Any) -> Any:
    """The state key of the env's current state (see "State keys" above): ``info["state_key"]``,
    else ``env.state_key()`` when the env has one, else None."""
    if isinstance(info, dict) and "state_key" in info:
        return info["state_key"]
    state_key = getattr(env, "state_key", None)
    return state_key() if callable(state_key) else None

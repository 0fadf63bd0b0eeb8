"""GemAgentLoop: a verl 0.9 agent loop that plays one GEM episode per dataset row.

verl builds one agent loop per sample and awaits ``run(sampling_params, **row)``. Here the row's
``extra_info`` holds the whole task (``gem_adapters.verl.rows``): env id, env kwargs and seed, and
its system prompt, chat-template kwargs and ``max_turns``, which win over the loop's; the loop
makes the env and plays it with ``gem_adapters.runtime.rollout.aplay_episode`` (observations rendered by
``gem_adapters.episodes.chat_renderer.ChatRenderer``, token-exact and incremental), generating every action
through verl's ``server_manager`` (its vLLM/SGLang replicas), and returns the episode as one sample::

    prompt_ids       system? + first observation + generation prompt
    response_ids     action 1 | env/template ids | action 2 | ... | last action | end of turn
    response_mask        1 1 |       0 0 0       |   1 1    | ... |    1 1 1    |  0
    response_logprobs    the server's logprob of each generated id, 0.0 elsewhere
    rm_scores        each turn's env reward on the last id of that turn's action
    gem_state_keys   each turn's env state key before its action, as JSON (``gem_adapters.verl.state_keys``)

The sample is ``Episode.to_prompt_response()``. Per-turn rewards: verl's ``AgentLoopOutput`` carries
one scalar (``reward_score``, written on the last token), and when a loop returns one output per turn
the v1 trainer copies the final score over the others. ``GemAgentLoopOutput`` therefore writes the
per-turn rewards into ``rm_scores`` itself (``as_dict``, which verl's v1 worker calls to store a
sample), placed as ``gem_adapters.verl.token_rewards`` says, where the estimators of
``gem_adapters.verl.advantages`` read them back; ``reward_score`` is the episode's total reward, so
verl's reward loop leaves the sample alone and its score metrics show the return. This needs the v1 trainer (``trainer.use_v1=True``, verl 0.9's default): the
legacy one rebuilds ``rm_scores`` from the scalar.

Budgets: everything after the first prompt fits ``rollout.response_length`` (``aplay_episode``'s
``max_response_tokens``: each turn generates at most what is left, keeping room for the closing
end-of-turn ids); ``max_turns`` (agent-loop YAML, else ``rollout.multi_turn.max_assistant_turns``,
else the env's own limit) caps the actions and ``max_new_tokens`` (YAML) each action. An episode
stopped by a budget has ``info["stopped_by"]`` set and its last turn flagged truncated, as in
``gem_adapters.runtime.rollout``. A first prompt longer than ``rollout.prompt_length`` is an error (verl's
dataset filter should have dropped the row).

Registration: the agent-loop YAML (``examples/verl/gem_agent_loop.yaml``) given as
``actor_rollout_ref.rollout.agent.agent_loop_config_path`` for verl's workers (its keys besides
``name`` and ``_target_`` are this class's keyword arguments), else ``register("gem_agent")`` when
this module is imported. verl's worker reads the YAML into its registry before it imports this module
at the first episode, so the import never replaces a configured entry (that would drop the YAML's
``max_turns`` and ``max_new_tokens`` from every later episode).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any
from uuid import uuid4

import torch
from pydantic import Field
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopOutput,
    _agent_loop_registry,
    register,
)
from verl.experimental.agent_loop.tool_agent_loop import SPEC_DECODE_EXTRA_KEYS

from gem_adapters.episodes.chat_renderer import ChatRenderer, shared_renderer
from gem_adapters.episodes.episode import Episode
from gem_adapters.episodes.tasks import Task
from gem_adapters.policies.base import Generation, SamplingParams
from gem_adapters.runtime.rollout import aplay_episode
from gem_adapters.runtime.rollout_limits import RolloutLimits
from gem_adapters.verl.rows import AGENT_NAME, system_prompt_of, task_from_row
from gem_adapters.verl.state_keys import FIELD as STATE_KEYS_FIELD
from gem_adapters.verl.state_keys import state_keys_field
from gem_adapters.verl.token_rewards import rewards_on_tokens


class GemAgentLoopOutput(AgentLoopOutput):
    """An episode as a verl sample, with per-turn rewards in ``rm_scores`` and per-turn state keys in
    ``gem_state_keys`` (see the module docstring)."""

    token_rewards: list[float] = Field(default_factory=list, exclude=True)
    state_keys: str = Field(default="[]", exclude=True)  # JSON, gem_adapters.verl.state_keys
    episode: Any = Field(default=None, exclude=True)  # the gem_adapters Episode (not sent to the trainer)

    def as_dict(self) -> dict[str, Any]:
        output = super().as_dict()
        output["rm_scores"] = torch.tensor(self.token_rewards, dtype=torch.float32)
        output[STATE_KEYS_FIELD] = self.state_keys
        return output


class GemAgentLoop(AgentLoopBase):
    def __init__(self, *args: Any, max_turns: int | None = None, max_new_tokens: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.config.trainer.get("use_v1", True):
            raise ValueError(
                "GemAgentLoop needs verl's v1 trainer (trainer.use_v1=True): the legacy trainer keeps "
                "only one reward per episode, on its last token"
            )
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        if max_turns is None:
            max_turns = self.rollout_config.get("multi_turn", {}).get("max_assistant_turns")
        self.max_turns = None if max_turns is None else int(max_turns)
        self.max_new_tokens = None if max_new_tokens is None else int(max_new_tokens)
        _ = self.limits  # RolloutLimits rejects bad values now, not at the first episode

    @property
    def limits(self) -> RolloutLimits:
        """The episode limits: ``max_turns``, ``max_new_tokens`` and ``rollout.response_length``."""
        return RolloutLimits(self.max_turns, self.max_new_tokens, max_response_tokens=self.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> GemAgentLoopOutput:
        import gem_core

        task = task_from_row(kwargs.get("extra_info"))
        template_kwargs = {**(_plain(self.apply_chat_template_kwargs) or {}), **task.template_kwargs}
        system_prompt = task.system_prompt
        if system_prompt is None:  # a row written before tasks travelled whole
            system_prompt = system_prompt_of(kwargs.get("raw_prompt"))
        renderer = shared_renderer(self.tokenizer, system_prompt, template_kwargs)
        env = gem_core.make(task.env_id, **task.env_kwargs)
        try:
            episode, metrics, server_fields = await self._play(
                env, task, renderer, sampling_params, int(kwargs.get("priority", 0))
            )
        finally:
            env.close()
        return self._output(episode, metrics, server_fields)

    async def _play(
        self, env: Any, task: Task, renderer: ChatRenderer, sampling_params: dict[str, Any], priority: int
    ) -> tuple[Episode, dict[str, Any], dict[str, Any]]:
        """Play the episode; also returns verl's metrics and the server's fields merged over turns."""
        metrics: dict[str, Any] = {"generate_sequences": 0.0, "tool_calls": 0.0}
        server_fields: dict[str, Any] = {}
        request_id = uuid4().hex  # one id per episode: the server keeps its prefix cache

        async def generate(prompt_ids: list[int], params: SamplingParams) -> Generation:
            started = time.perf_counter()
            generated = await self.server_manager.generate(
                request_id,
                prompt_ids=prompt_ids,
                sampling_params={
                    **sampling_params,
                    "stop_token_ids": list(params.stop_token_ids or ()),
                    "max_tokens": params.max_new_tokens,
                },
                priority=priority,
            )
            metrics["generate_sequences"] += time.perf_counter() - started
            _merge_server_fields(server_fields, metrics, generated)
            ids = [int(t) for t in generated.token_ids]
            logprobs = list(generated.log_probs[: len(ids)]) if generated.log_probs else None
            if logprobs is not None and len(logprobs) != len(ids):
                logprobs = None
            stopped = bool(ids) and ids[-1] in renderer.stop_token_ids
            return Generation(ids, logprobs, "stop" if stopped else "length")

        episode = await aplay_episode(
            _TimedEnv(env, metrics),
            generate,
            renderer,
            seed=task.seed,
            env_id=task.env_id,
            limits=self.limits if task.max_turns is None else replace(self.limits, max_turns=task.max_turns),
        )
        if episode.turns:
            prompt_len = len(episode.turns[0].prompt_ids)
        else:  # no action fitted the response budget
            prompt_len = len(renderer.first_prompt(episode.final_observation or ""))
        if prompt_len > self.prompt_length:
            raise ValueError(
                f"{task.env_id} (seed {task.seed}): the first prompt has {prompt_len} tokens, more than "
                f"rollout.prompt_length={self.prompt_length}; raise data.max_prompt_length or keep "
                "data.filter_overlong_prompts on"
            )
        return episode, metrics, server_fields

    def _output(
        self, episode: Episode, metrics: dict[str, Any], server_fields: dict[str, Any]
    ) -> GemAgentLoopOutput:
        if not episode.turns:
            raise ValueError(
                f"{episode.env_id} (seed {episode.seed}): no room for a single action; raise "
                "rollout.response_length"
            )
        sample = episode.to_prompt_response()
        rewards = [turn.reward for turn in episode.turns]
        return GemAgentLoopOutput(
            prompt_ids=sample.prompt_ids,
            response_ids=sample.response_ids,
            response_mask=sample.response_mask,
            response_logprobs=sample.response_logprobs,
            reward_score=episode.total_reward,
            num_turns=2 * episode.num_turns,  # verl counts messages: observations + actions
            metrics=metrics,
            extra_fields={
                **server_fields,
                "turn_scores": rewards,
                "reward_extra_info": {"success": float(episode.success), "turns": episode.num_turns},
            },
            token_rewards=rewards_on_tokens(rewards, sample.turn_spans, len(sample.response_ids)),
            state_keys=state_keys_field([turn.state_key for turn in episode.turns]),
            episode=episode,
        )


class _TimedEnv:
    """The env for ``aplay_episode``: reset and step in a worker thread, timed as verl's ``tool_calls``."""

    def __init__(self, env: Any, metrics: dict[str, Any]):
        self.env, self.metrics = env, metrics

    async def reset(self, **kwargs: Any) -> Any:
        return await self._timed(self.env.reset, **kwargs)

    async def step(self, action: str) -> Any:
        return await self._timed(self.env.step, action)

    def state_key(self) -> Any:
        """The env's state key (``gem_adapters.runtime.rollout`` records it before each action)."""
        return self.env.state_key()

    async def _timed(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = await asyncio.to_thread(fn, *args, **kwargs)
        self.metrics["tool_calls"] += time.perf_counter() - started
        return result


def _merge_server_fields(merged: dict[str, Any], metrics: dict[str, Any], generated: Any) -> None:
    """Carry the server's per-request fields over turns as verl's ToolAgentLoop does: the weight
    versions (``min_global_steps`` of the first turn, ``max_global_steps`` of the last; the v1 trainer
    tags samples with them), summed speculative-decoding counts and preemptions."""
    fields = dict(generated.extra_fields or {})
    if not merged:
        merged.update(fields)
    else:
        if fields.get("max_global_steps") is not None:
            merged["max_global_steps"] = fields["max_global_steps"]
        for key in SPEC_DECODE_EXTRA_KEYS:
            if key in fields and key in merged:
                merged[key] = int(merged[key]) + int(fields[key])
    if generated.num_preempted is not None:
        metrics["num_preempted"] = metrics.get("num_preempted", 0) + generated.num_preempted


def _plain(config: Any) -> Any:
    """An OmegaConf node as plain Python containers (anything else as it is)."""
    try:
        from omegaconf import OmegaConf

        return OmegaConf.to_container(config, resolve=True) if OmegaConf.is_config(config) else config
    except ImportError:
        return config


def register_gem_agent_loop() -> None:
    """Register ``GemAgentLoop`` as ``gem_agent`` unless verl's registry already has that name
    (from the agent-loop YAML, with its keyword arguments)."""
    if AGENT_NAME not in _agent_loop_registry:
        register(AGENT_NAME)(GemAgentLoop)


register_gem_agent_loop()

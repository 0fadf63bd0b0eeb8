"""GEM envs as OpenRLHF 0.11 agents: ``GemEnvInstance`` plays one env, ``GemAgentExecutor`` one episode.

OpenRLHF loads ``--train.agent_func_path`` (``gem_adapters/openrlhf/agent_func.py``) in each vLLM
engine actor and awaits, for every sample of every prompt row::

    executor.execute(prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine)

Here the row's label names the task (env id, seed, env kwargs, system prompt, turn limit; see
``gem_adapters.openrlhf.rows``). ``GemEnvInstance`` (an ``AgentInstanceBase``) makes the env and
resets it with that seed; the executor plays the episode with ``gem_adapters.runtime.rollout.aplay_episode``
(observations rendered by ``gem_adapters.episodes.chat_renderer.ChatRenderer``, token-exact and incremental),
generating each action through ``llm_engine.generate`` (token ids in and out) and passing the action
text to the instance's ``step``, and returns the episode in the form OpenRLHF's ``SamplesGenerator``
turns into an ``Experience``::

    observation_tokens   system? + first observation | action 1 | env/template ids | action 2 | ... | end
    action_ranges        (start, end) of each action's generated ids in observation_tokens
    rollout_log_probs    the engine's logprob of each generated id, 0.0 elsewhere (if requested)
    reward, scores       the episode's total reward
    truncated            the last action was cut by its token budget
    extra_logs           gem_num_turns, gem_success, and gem_turn_rewards and gem_state_keys (the
                         per-turn rewards and state-key codes, for the per-turn estimators of
                         ``gem_adapters.openrlhf.advantages``)

Why ``execute`` is not the inherited ``MultiTurnAgentExecutor.execute``: that loop tokenises the
first prompt and every env feedback text on its own and passes only the action *text* to the
instance, so the instance cannot know whether the model generated the end-of-turn token (the
template text after an action differs by that token: duplicated or missing end-of-turn ids); it
gives every turn the whole remaining context as its budget (``--rollout.max_new_tokens`` is
ignored) and keeps only the sum of the step rewards and the last step's ``extra_logs``. The executor
here keeps the contract (constructor taking the instance class, ``reset``/``step`` of the instance,
the output keys) and renders with the shared ChatRenderer instead.

Budgets: the whole episode fits ``max_length`` (OpenRLHF's ``--data.max_len``, the same length at
which it truncates samples; ``aplay_episode``'s ``max_context_tokens``): each action generates at
most what is left, keeping room for the closing end-of-turn ids, and at most
``sampling_params.max_tokens`` (``--rollout.max_new_tokens``) when that is set. ``max_turns``
(label) caps the actions. An episode stopped by a budget has ``info["stopped_by"]`` set and its last
turn flagged truncated, as in ``gem_adapters.runtime.rollout``.

State keys: ``GemEnvInstance`` reports the env's ``state_key()`` in the ``info`` of its ``reset`` and
``step`` (as ``info["state_key"]``, the key ``gem_adapters.runtime.rollout`` reads), so each turn of the
episode records the state before its action (``Turn.state_key``, GiGPO's anchor). Another instance
class that reports none gives turns without a key.

Per-turn rewards (and state keys) travel in ``extra_logs["gem_turn_rewards"]`` (and
``extra_logs["gem_state_keys"]``) only when the executor is asked to
(``turn_rewards=True``, or the ``GEM_OPENRLHF_ESTIMATOR`` variable that ``gem_adapters.openrlhf.hook``
sets for every Ray worker): OpenRLHF turns each ``extra_logs`` entry into a per-sample tensor, and a
list becomes a row of a 2-D tensor that only the GEM estimator consumes (and removes); left in place,
OpenRLHF's metric logging would fail on it.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from gem_adapters.algorithms.advantages import state_key_code
from gem_adapters.episodes.chat_renderer import ChatRenderer, shared_renderer
from gem_adapters.episodes.episode import Episode
from gem_adapters.openrlhf.advantages import NUM_TURNS, STATE_KEYS, SUCCESS, TURN_REWARDS
from gem_adapters.openrlhf.config import GemOpenRLHFConfig
from gem_adapters.openrlhf.rows import Task
from gem_adapters.policies.base import Generation, SamplingParams
from gem_adapters.runtime.rollout import aplay_episode
from gem_adapters.runtime.rollout_limits import RolloutLimits


class GemEnvInstance(AgentInstanceBase):
    """One GEM env for one episode, with OpenRLHF's instance interface.

    OpenRLHF 0.11 builds an instance per episode with ``agent_instance_cls()``, synchronously and
    without arguments, so ``__init__`` is a plain method (an ``async def __init__``, as in the reference
    GEM example, makes that call raise ``TypeError``); the env is made in ``reset``.

    ``reset(states)`` reads the task from ``states["label"]`` and returns ``{"observation": first
    observation, "info": ...}``; ``step(states)`` plays ``states["action_text"]`` and returns
    ``rewards``, ``scores`` (tensors), ``environment_feedback`` (the env's next observation, raw
    text: the executor renders it), ``done``, ``terminated``, ``truncated`` and ``info``. Both
    ``info`` dicts carry the env's ``state_key()`` of the state they leave the agent in.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        self.env: Any = None

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        task = Task.from_label(states["label"])
        observation, info = await asyncio.to_thread(self._make_and_reset, task)
        return {**states, "observation": str(observation), "info": self._with_state_key(info)}

    async def step(self, states: dict, **kwargs: Any) -> dict:
        import torch

        observation, reward, terminated, truncated, info = await asyncio.to_thread(
            self.env.step, states["action_text"]
        )
        return {
            "rewards": torch.tensor(float(reward), dtype=torch.float64),
            "scores": torch.tensor(float(reward), dtype=torch.float64),
            "environment_feedback": str(observation),
            "done": bool(terminated or truncated),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "info": self._with_state_key(info),
        }

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None

    def _with_state_key(self, info: Any) -> dict[str, Any]:
        info = dict(info or {})
        info.setdefault("state_key", self.env.state_key())
        return info

    def _make_and_reset(self, task: Task) -> tuple[Any, dict]:
        import gem_core

        self.env = gem_core.make(task.env_id, **task.env_kwargs)
        return self.env.reset(seed=task.seed)


class GemAgentExecutor(MultiTurnAgentExecutor):
    """Plays one GEM episode per ``execute`` (see the module docstring).

    ``turn_rewards``: put the per-turn rewards in ``extra_logs`` (None: when ``GEM_OPENRLHF_ESTIMATOR``
    is set). ``return_episode``: add the ``gem_adapters`` ``Episode`` to the output as ``"episode"``
    (for recording; OpenRLHF ignores the key, but ships it from the engine actor to the trainer).
    """

    def __init__(
        self,
        agent_instance_cls: type[AgentInstanceBase] = GemEnvInstance,
        *,
        turn_rewards: bool | None = None,
        return_episode: bool = False,
    ):
        super().__init__(agent_instance_cls)
        self.turn_rewards = turn_rewards
        self.return_episode = return_episode

    async def execute(
        self,
        prompt: str,
        label: Any,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> dict[str, Any]:
        if images:
            raise ValueError("GEM envs are text-only: the prompt row must carry no images")
        task = Task.from_label(label)
        # OpenRLHF sends a fresh copy of the tokenizer with every request: the cache keys on its content.
        renderer = shared_renderer(hf_tokenizer, task.system_prompt, task.template_kwargs)
        instance = self.agent_instance_cls()
        try:
            episode, extra_logs = await self._play(
                instance, task, prompt, label, renderer, sampling_params, int(max_length), llm_engine
            )
        finally:
            close = getattr(instance, "close", None)
            if close is not None:
                close()
        return self._output(
            episode, extra_logs, prompt, label, want_logprobs=sampling_params.logprobs is not None
        )

    async def _play(
        self,
        instance: AgentInstanceBase,
        task: Task,
        prompt: str,
        label: Any,
        renderer: ChatRenderer,
        sampling_params: Any,
        max_length: int,
        llm_engine: Any,
    ) -> tuple[Episode, dict[str, Any]]:
        # OpenRLHF hands one params object to all samples of a prompt: work on a copy.
        params = copy.deepcopy(sampling_params)
        params.stop_token_ids = sorted({*(params.stop_token_ids or ()), *renderer.stop_token_ids})
        want_logprobs = params.logprobs is not None
        env = _InstanceEnv(instance, prompt, label)

        async def generate(prompt_ids: list[int], turn: SamplingParams) -> Generation:
            params.max_tokens = turn.max_new_tokens
            request = await llm_engine.generate(prompt_ids, copy.deepcopy(params), multi_modal_data=None)
            output = request.outputs[0]
            ids = [int(t) for t in output.token_ids][: turn.max_new_tokens]
            logprobs = None
            if want_logprobs:
                if output.logprobs is None:
                    raise ValueError(
                        "the engine returned no logprobs although sampling_params.logprobs is set"
                    )
                logprobs = [float(entry[t].logprob) for entry, t in zip(output.logprobs, ids)]
            finish = "stop" if output.finish_reason == "stop" else "length"
            env.turn = {"action_ids": ids, "finish_reason": finish, "sampling_params": params}
            return Generation(ids, logprobs, finish)

        episode = await aplay_episode(
            env,
            generate,
            renderer,
            seed=task.seed,
            env_id=task.env_id,
            limits=RolloutLimits(
                max_turns=task.max_turns,
                max_new_tokens=sampling_params.max_tokens,  # --rollout.max_new_tokens (None: no cap per turn)
                max_context_tokens=max_length,
            ),
        )
        if not episode.turns and episode.info.get("stopped_by") == "max_context_tokens":
            first = len(renderer.first_prompt(episode.final_observation or ""))
            raise ValueError(
                f"{task.env_id} (seed {task.seed}): the first prompt has {first} tokens, "
                f"no room for an action within max_length={max_length}; raise --data.max_len"
            )
        return episode, env.extra_logs

    def _output(
        self, episode: Episode, extra_logs: dict[str, Any], prompt: str, label: Any, want_logprobs: bool
    ) -> dict[str, Any]:
        sample = episode.to_prompt_response()
        rewards = [float(turn.reward) for turn in episode.turns]
        extra_logs = {**extra_logs, NUM_TURNS: episode.num_turns, SUCCESS: float(episode.success)}
        if (
            self.turn_rewards
            if self.turn_rewards is not None
            else GemOpenRLHFConfig.from_environment().estimator
        ):
            extra_logs[TURN_REWARDS] = rewards
            extra_logs[STATE_KEYS] = [state_key_code(turn.state_key) for turn in episode.turns]
        output = {
            "prompt": prompt,
            "label": label,
            "images": None,
            "mm_train_inputs": None,
            "reward": episode.total_reward,
            "scores": episode.total_reward,
            "observation_tokens": sample.token_ids,
            "action_ranges": sample.sequence_spans,
            "rollout_log_probs": sample.logprobs if want_logprobs else None,
            "truncated": episode.turns[-1].finish_reason == "length",
            "extra_logs": extra_logs,
        }
        if self.return_episode:
            output["episode"] = episode
        return output


class _InstanceEnv:
    """An OpenRLHF agent instance as the env ``aplay_episode`` plays: its ``reset``/``step`` states in
    and out. The states of a step carry the action's ids, finish reason and engine params (``turn``,
    set by the executor's generate callback) as OpenRLHF's executor passes them."""

    def __init__(self, instance: AgentInstanceBase, prompt: str, label: Any):
        self.instance, self.label = instance, label
        self.observation = prompt
        self.turn: dict[str, Any] = {}
        self.extra_logs: dict[str, Any] = {}  # the last step's

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        reset = await self.instance.reset({"observation": self.observation, "label": self.label})
        self.observation = str(reset["observation"])
        return self.observation, dict(reset.get("info") or {})

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any] | None]:
        states = {"observation": self.observation, "action_text": action, **self.turn, "label": self.label}
        result = await self.instance.step(states)
        done = bool(result["done"])
        self.observation = str(result["environment_feedback"])
        self.extra_logs = dict(result.get("extra_logs") or {})
        terminated = bool(result.get("terminated", done))
        return (
            self.observation,
            float(result["rewards"]),
            terminated,
            bool(result.get("truncated", False)),
            result.get("info"),
        )

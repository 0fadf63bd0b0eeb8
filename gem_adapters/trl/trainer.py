"""GEMGRPOTrainer: TRL's GRPOTrainer training on whole multi-turn GEM episodes.

Two changes to ``GRPOTrainer``, both through the hooks TRL offers:

* generation is ``make_rollout_func`` (see ``gem_adapters.trl.rollout``): every sample is one
  episode, env and template tokens carry ``env_mask = 0`` and get no loss;
* scoring: ``_generate_and_score_completions`` runs TRL's own version, then replaces its advantages
  (one number per sample, from group-normalised rewards) by the shared estimator's per-turn
  advantages (``gem_adapters.advantages``) placed on each turn's tokens: a (B, T) tensor, which
  TRL's loss accepts as is. ``advantage_estimator="rebn"`` (the default) normalises the discounted
  per-turn returns over every turn of the batch; ``"grpo"``, ``"dr_grpo"`` and ``"rloo"`` give
  every turn its episode's group-relative advantage, for comparison.

The estimator sees the whole generation batch: with several processes, per-turn rewards and group
ids are gathered first (a GRPO group may span processes) and each process keeps its own rows.

Each generation logs, besides TRL's metrics, every ``gem_adapters.episode_stats`` number of its
episodes as ``env/<name>`` (``env/return``, ``env/success_rate``, ``env/turns``,
``env/format_error_rate``, ``env/invalid_move_rate``, ``env/generated_tokens``, ...), plus
``env/rollout_seconds`` and ``env/tokens_per_second``. ``last_episodes`` holds the episodes of the
latest generation batch (e.g. to record them with ``gem_adapters.jsonl.write_jsonl``) and
``last_advantages`` the (B, T) tensor it trained on.

After every optimizer step the trainer calls ``mark_weights_updated(model)``, so a generation
engine never reuses key/value caches of the previous weights (``TransformersPolicy(cache="kv")``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from accelerate.utils import gather_object
from transformers import TrainerCallback
from trl import GRPOTrainer

from gem_adapters.advantages import compute_advantages, turn_values_to_tokens
from gem_adapters.chat_renderer import ChatRenderer
from gem_adapters.episode import Episode
from gem_adapters.episode_stats import episode_stats
from gem_adapters.policies.base import mark_weights_updated
from gem_adapters.trl.config import GEMGRPOConfig
from gem_adapters.trl.rollout import episode_to_sample, make_rollout_func
from gem_adapters.trl.vllm_sync import use_reload_weights_sync


def episode_return(completions: list[Any], episode: list[Episode], **_: Any) -> list[float]:
    """TRL reward function: the undiscounted return of each episode (what TRL logs as ``reward``)."""
    return [e.total_reward for e in episode]


class WeightsVersionCallback(TrainerCallback):
    """Bumps the model's weights version after each optimizer step (stale KV caches are dropped)."""

    def on_optimizer_step(
        self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any
    ) -> None:
        if model is not None:
            mark_weights_updated(model)


class GEMGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` over GEM episodes. ``train_dataset`` holds task prompts
    (``gem_adapters.trl.tasks_dataset``); ``renderer`` defaults to ``processing_class``'s chat
    template with ``args.system_prompt``. ``processing_class``: a tokenizer, or a vision-language
    model's processor to train on image observations (see ``gem_adapters.trl.rollout``); by default
    ``AutoProcessor`` of the model's name (a tokenizer for a text model)."""

    def __init__(
        self,
        model: Any,
        args: GEMGRPOConfig,
        train_dataset: Any,
        processing_class: Any = None,
        *,
        renderer: ChatRenderer | None = None,
        reward_funcs: Any = None,
        **kwargs: Any,
    ):
        if not isinstance(args, GEMGRPOConfig):
            raise TypeError(f"GEMGRPOTrainer needs a GEMGRPOConfig, got {type(args).__name__}")
        if args.repetition_penalty != 1.0 or args.min_p is not None:
            raise ValueError("repetition_penalty and min_p are not supported by the GEM rollout")
        if processing_class is None:
            from transformers import AutoProcessor

            name = model if isinstance(model, str) else model.config._name_or_path
            processing_class = AutoProcessor.from_pretrained(name)
        self.renderer = renderer or ChatRenderer(processing_class, args.system_prompt)
        rollout_func = kwargs.pop("rollout_func", None) or make_rollout_func(
            self.renderer,
            max_turns=args.max_turns,
            max_turn_tokens=args.max_turn_tokens,
            max_context_tokens=args.max_context_tokens,
        )
        super().__init__(
            model=model,
            reward_funcs=reward_funcs or episode_return,
            args=args,
            train_dataset=train_dataset,
            processing_class=processing_class,
            rollout_func=rollout_func,
            **kwargs,
        )
        self.last_episodes: list[Episode] = []
        self.last_advantages: torch.Tensor | None = None
        self.add_callback(WeightsVersionCallback())
        if self.use_vllm:  # TRL's colocated sync cannot load into vLLM's CPU backend (see vllm_sync)
            use_reload_weights_sync(self.vllm_generation)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        # TRL merged the rollout's extra fields into ``inputs``: each row now holds its episode.
        episodes = [row["episode"] for row in inputs]
        width = output["completion_ids"].size(1)
        advantages = self.token_advantages(episodes, width).to(output["completion_ids"].device)
        output["advantages"] = advantages
        self.last_episodes, self.last_advantages = episodes, advantages
        self._log_episodes(episodes, float(inputs[0].get("rollout_seconds", float("nan"))))
        return output

    def token_advantages(self, episodes: Sequence[Episode], width: int) -> torch.Tensor:
        """(len(episodes), width) float32: each turn's advantage on that turn's completion tokens."""
        rows = [
            turn_values_to_tokens(values, episode_to_sample(episode).turn_spans, width)
            for values, episode in zip(self.turn_advantages(episodes), episodes)
        ]
        return torch.from_numpy(np.stack(rows)).float()

    def turn_advantages(self, episodes: Sequence[Episode]) -> list[np.ndarray]:
        """One advantage per turn of each of this process's episodes, the estimator seeing the
        episodes of every process."""
        rewards = [[t.reward for t in e.turns] for e in episodes]
        groups = [e.group_id for e in episodes]
        state_keys = [[getattr(t, "state_key", None) for t in e.turns] for e in episodes]  # GiGPO's anchors
        if self.accelerator.num_processes > 1:
            rewards, groups = gather_object(rewards), gather_object(groups)
            state_keys = gather_object(state_keys)
        per_turn = compute_advantages(
            self.args.advantage_estimator,
            rewards,
            gamma=self.args.gamma,
            group_ids=groups,
            state_keys=state_keys,
            eps=self.args.advantage_eps,
        )
        first = self.accelerator.process_index * len(episodes)
        return per_turn[first : first + len(episodes)]

    def _log_episodes(self, episodes: Sequence[Episode], rollout_seconds: float) -> None:
        mode = "train" if self.model.training else "eval"
        metrics = {f"env/{name}": value for name, value in episode_stats(episodes).items()}
        tokens = metrics["env/generated_tokens"]
        metrics["env/rollout_seconds"] = rollout_seconds
        metrics["env/tokens_per_second"] = tokens / rollout_seconds if rollout_seconds > 0 else float("nan")
        for name, value in metrics.items():
            self._metrics[mode][name].append(value)

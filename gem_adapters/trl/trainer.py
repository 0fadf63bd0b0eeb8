"""GEMGRPOTrainer: TRL's GRPOTrainer training on whole multi-turn GEM episodes.

Two changes to ``GRPOTrainer``, both through the hooks TRL offers:

* generation is ``make_rollout_func`` (see ``gem_adapters.trl.rollout``): every sample is one
  episode, env and template tokens carry ``env_mask = 0`` and get no loss;
* scoring: ``_generate_and_score_completions`` runs TRL's own version, then replaces its advantages
  (one number per sample, from group-normalised rewards) by the shared estimator's per-turn
  advantages placed on each turn's tokens (``gem_adapters.trl.advantages``): a (B, T) tensor, which
  TRL's loss accepts as is. ``advantage_estimator="rebn"`` (the default) normalises the discounted
  per-turn returns over every turn of the batch; ``"grpo"``, ``"dr_grpo"`` and ``"rloo"`` give
  every turn its episode's group-relative advantage, for comparison.

The estimator sees the whole generation batch: with several processes, per-turn rewards and group
ids are gathered first (a GRPO group may span processes) and each process keeps its own rows.
Subclasses change the per-turn advantages by overriding ``turn_advantages`` (``GEMPPOTrainer``).

Each generation logs, besides TRL's metrics, every ``gem_adapters.episode_stats`` number of its
episodes as ``env/<name>`` (``env/return``, ``env/success_rate``, ``env/turns``,
``env/format_error_rate``, ``env/invalid_move_rate``, ``env/generated_tokens``, ...), plus
``env/rollout_seconds`` and ``env/tokens_per_second``. ``last_episodes`` holds the episodes of the
latest generation batch (e.g. to record them with ``gem_adapters.jsonl.write_jsonl``) and
``last_advantages`` the (B, T) tensor it trained on.

After every optimizer step the trainer calls ``mark_weights_updated(model)``, so a generation
engine never reuses key/value caches of the previous weights (``TransformersPolicy(cache="kv")``).

Where a step's time goes is logged with it (``gem_adapters.timing.PhaseClock``), in seconds:
``timing/rollout_s`` (playing the episodes), ``timing/scoring_s`` (the rest of TRL's generation batch:
rewards, any extra logprob passes, advantages), ``timing/forward_s`` (the loss's forward passes),
``timing/backward_s``, ``timing/optimizer_s``, and ``timing/step_s`` (all of it, from the first
micro-batch to the optimizer step's end); ``timing/faults_k`` counts the minor page faults of the step
in thousands.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from gem_adapters import prefix_tree
from gem_adapters.chat_renderer import ChatRenderer
from gem_adapters.episode import Episode
from gem_adapters.episode_stats import episode_stats
from gem_adapters.policies.base import mark_weights_updated
from gem_adapters.timing import PhaseClock, minor_faults
from gem_adapters.trl import advantages
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


class StepTimingCallback(TrainerCallback):
    """Logs ``trainer.clock``'s phases of each optimizer step as ``timing/*`` metrics (module docstring)."""

    def __init__(self, trainer: GEMGRPOTrainer):
        self.trainer = trainer
        self._step_started: tuple[float, int] | None = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._step_started = (time.perf_counter(), minor_faults())

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._optimizer_started = time.perf_counter()

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.trainer.clock.add("optimizer", time.perf_counter() - self._optimizer_started)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._step_started is None:
            return
        started, faults = self._step_started
        taken = self.trainer.clock.take()
        phases = taken.seconds
        generation = phases.get("generation_batch", 0.0)
        timings = {
            "rollout_s": phases.get("rollout", 0.0),
            "scoring_s": generation - phases.get("rollout", 0.0),
            "forward_s": phases.get("forward", 0.0),
            "backward_s": phases.get("training_step", 0.0) - generation - phases.get("forward", 0.0),
            "optimizer_s": phases.get("optimizer", 0.0),
            "step_s": time.perf_counter() - started,
            "faults_k": (minor_faults() - faults) / 1000,
            # tokens through the learner's forward passes; tokens of the generation batch's prefix tree
            "learner_tokens": taken.counts.get("learner_tokens", 0),
            "unique_tokens": taken.counts.get("unique_tokens", 0),
        }
        for name, value in timings.items():
            self.trainer._metrics["train"][f"timing/{name}"].append(value)


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
        self.clock = PhaseClock()
        super().__init__(
            model=model,
            reward_funcs=reward_funcs or episode_return,
            args=args,
            train_dataset=train_dataset,
            processing_class=processing_class,
            rollout_func=self._timed_rollout(rollout_func),
            **kwargs,
        )
        self.last_episodes: list[Episode] = []
        self.last_advantages: torch.Tensor | None = None
        self._learner_logprobs: torch.Tensor | None = None  # the latest forward's, for gem/logprob_gap
        self.add_callback(WeightsVersionCallback())
        self.add_callback(StepTimingCallback(self))
        if self.use_vllm:  # TRL's colocated sync cannot load into vLLM's CPU backend (see vllm_sync)
            use_reload_weights_sync(self.vllm_generation)

    def _timed_rollout(self, rollout_func: Any) -> Any:
        def timed(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            with self.clock.phase("rollout"):
                return rollout_func(prompts, trainer)

        return timed

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        with self.clock.phase("training_step"):
            return super().training_step(model, inputs, num_items_in_batch)

    def compute_loss(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        with self.clock.phase("forward"):
            loss = super().compute_loss(model, inputs, *args, **kwargs)
        self._log_logprob_gap(inputs)
        return loss

    def _log_logprob_gap(self, inputs: dict[str, Any]) -> None:
        """``gem/logprob_gap``: the mean |sampled logprob - learner logprob| over the micro-batch's generated
        tokens. Every micro-batch of a step runs on the weights that sampled it, so the gap is the rollout's
        numerics against the learner's (e.g. bf16 generation against a bf16-autocast learner)."""
        sampled, learner = inputs.get("sampling_per_token_logps"), self._learner_logprobs
        if sampled is None or learner is None or learner.shape != sampled.shape or not self.model.training:
            return
        mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
        gap = ((learner - sampled).abs() * mask).sum() / mask.sum().clamp(min=1)
        self._metrics["train"]["gem/logprob_gap"].append(gap.item())

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **multimodal: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """TRL's log probabilities of the completion tokens (and entropies), from one forward over the
        batch's prefix tree (``gem_adapters.prefix_tree``) where the model allows it; otherwise TRL's own
        padded forward."""
        why_not = self._why_not_shared(model, compute_aux_loss, multimodal, attention_mask)
        if why_not is not None:
            prefix_tree.warn_once(
                f"GEMGRPOTrainer: TRL's padded forward instead of the prefix tree: {why_not}"
            )
            self.clock.count("learner_tokens", input_ids.numel())
            logprobs, entropy, aux = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy,
                compute_aux_loss, **multimodal,
            )  # fmt: skip
            self._learner_logprobs = logprobs.detach()
            return logprobs, entropy, aux
        scored = torch.zeros_like(attention_mask)
        scored[:, -logits_to_keep:] = 1
        with self.accelerator.autocast():
            out = prefix_tree.token_logprobs(
                model,
                input_ids,
                attention_mask,
                scored,
                self.temperature,
                compute_entropy=compute_entropy,
                max_tree_tokens=self.args.max_tree_tokens,
            )
        self.clock.count("learner_tokens", out.tokens)
        self._learner_logprobs = out.logprobs[:, -logits_to_keep:].detach()
        entropy = None if out.entropy is None else out.entropy[:, -logits_to_keep:]
        return out.logprobs[:, -logits_to_keep:], entropy, None

    def _why_not_shared(
        self, model: Any, compute_aux_loss: bool, multimodal: dict[str, Any], attention_mask: torch.Tensor
    ) -> str | None:
        """None if the learner's forward can run over the batch's prefix tree, else why not."""
        if not self.args.share_prefixes:
            return "share_prefixes=False"
        if compute_aux_loss or any(value is not None for value in multimodal.values()):
            return "images or a mixture-of-experts auxiliary loss"
        if self.accelerator.unwrap_model(model) is not model:
            return "the model is wrapped for distributed training (its wrapper owns the forward)"
        if not prefix_tree.contiguous_rows(attention_mask):
            return "a row's attention mask has holes"
        return prefix_tree.supports_model(model)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        with self.clock.phase("generation_batch"):
            return self._score_episodes(inputs)

    def _score_episodes(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        # TRL merged the rollout's extra fields into ``inputs``: each row now holds its episode.
        episodes = [row["episode"] for row in inputs]
        width = output["completion_ids"].size(1)
        advantages = self.token_advantages(episodes, width).to(output["completion_ids"].device)
        output["advantages"] = advantages
        self.last_episodes, self.last_advantages = episodes, advantages
        samples = [episode_to_sample(e) for e in episodes]
        self.clock.count(
            "unique_tokens", len(prefix_tree.PrefixTree([s.prompt_ids + s.completion_ids for s in samples]))
        )
        self._log_episodes(episodes, float(inputs[0].get("rollout_seconds", float("nan"))))
        return output

    def token_advantages(self, episodes: Sequence[Episode], width: int) -> torch.Tensor:
        """(len(episodes), width) float32: each turn's advantage on that turn's completion tokens."""
        return advantages.token_advantages(self.turn_advantages(episodes), episodes, width)

    def turn_advantages(self, episodes: Sequence[Episode]) -> list[np.ndarray]:
        """One advantage per turn of each of this process's episodes, the estimator seeing the
        episodes of every process (``gem_adapters.trl.advantages``)."""
        return advantages.turn_advantages(episodes, self.args, self.accelerator)

    def _log_episodes(self, episodes: Sequence[Episode], rollout_seconds: float) -> None:
        mode = "train" if self.model.training else "eval"
        metrics = {f"env/{name}": value for name, value in episode_stats(episodes).items()}
        tokens = metrics["env/generated_tokens"]
        metrics["env/rollout_seconds"] = rollout_seconds
        metrics["env/tokens_per_second"] = tokens / rollout_seconds if rollout_seconds > 0 else float("nan")
        for name, value in metrics.items():
            self._metrics[mode][name].append(value)

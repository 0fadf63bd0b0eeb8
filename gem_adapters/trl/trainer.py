"""GEMGRPOTrainer: TRL's GRPOTrainer training on whole multi-turn GEM episodes.

Two changes to ``GRPOTrainer``, both through the hooks TRL offers:

* generation is ``make_rollout_func`` (see ``gem_adapters.trl.rollout``): every sample is one
  episode, env and template tokens carry ``env_mask = 0`` and get no loss;
* scoring: ``_generate_and_score_completions`` runs TRL's own version, then replaces its advantages
  (one number per sample, from group-normalised rewards) by the shared estimator's per-turn
  advantages placed on each turn's tokens: a (B, T) tensor, which TRL's loss accepts as is.
  ``advantage_estimator="rebn"`` (the default) normalises the discounted per-turn returns over every
  turn of the batch; ``"grpo"``, ``"dr_grpo"`` and ``"rloo"`` give every turn its episode's
  group-relative advantage, for comparison; ``"rebn_per_env"`` is ReBN within each env of a batch
  that mixes several (``gem_adapters.trl.mixed_tasks_dataset``): each episode's stratum is the env
  id of its row's task.

One reward, one path: the env's per-turn rewards (``Turn.reward``) -> ``turn_advantages`` (the one
hook a subclass overrides: ``GEMPPOTrainer``) -> ``gem_adapters.algorithms.advantages.turn_values_on_tokens``
on the turn spans the rollout carried in each row (computed once per episode, in
``gem_adapters.trl.rollout``). The estimator sees the whole generation batch: with several
processes, per-turn rewards, group ids, state keys and strata are gathered first (a GRPO group may span
processes) and each process keeps its own rows.

TRL's ``reward_funcs`` are not an input: the one reward function is ``episode_return`` (TRL logs
it as ``reward``: the undiscounted return of the rewards training used). A ``reward_funcs``
argument is refused with a message rather than called, logged and ignored.

Each generation logs, besides TRL's metrics, every ``gem_adapters.episodes.episode_stats`` number of its
episodes as ``env/<name>`` (``env/return``, ``env/success_rate``, ``env/turns``,
``env/format_error_rate``, ``env/invalid_move_rate``, ``env/generated_tokens``, ...), plus
``env/rollout_seconds`` and ``env/tokens_per_second``. ``last_episodes`` holds the episodes of the
latest generation batch (e.g. to record them with ``gem_adapters.episodes.jsonl.write_jsonl``) and
``last_advantages`` the (B, T) tensor it trained on.

After every optimizer step the trainer calls ``mark_weights_updated(model)``, so a generation
engine never reuses key/value caches of the previous weights (``TransformersPolicy(cache="kv")``).

Where a step's time goes is logged with it (``gem_adapters.runtime.timing.PhaseClock``), in seconds:
``timing/rollout_s`` (playing the episodes), ``timing/scoring_s`` (the rest of TRL's generation batch:
rewards, any extra logprob passes, advantages), ``timing/forward_s`` (the loss's forward passes),
``timing/backward_s``, ``timing/optimizer_s``, and ``timing/step_s`` (all of it, from the first
micro-batch to the optimizer step's end); ``timing/faults_k`` counts the minor page faults of the step
in thousands.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from accelerate.utils import gather_object
from transformers import TrainerCallback
from trl import GRPOTrainer

from gem_adapters.algorithms import prefix_tree
from gem_adapters.algorithms.advantages import compute_advantages, turn_values_on_tokens
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode
from gem_adapters.episodes.episode_stats import episode_stats
from gem_adapters.policies.base import mark_weights_updated
from gem_adapters.runtime.allocator import trim_above
from gem_adapters.runtime.timing import PhaseClock, minor_faults
from gem_adapters.trl.config import GEMGRPOConfig
from gem_adapters.trl.rollout import make_rollout_func
from gem_adapters.trl.vllm_sync import use_reload_weights_sync


def episode_return(completions: list[Any], episode: list[Episode], **_: Any) -> list[float]:
    """The trainer's one TRL reward function: the undiscounted return of each episode (what TRL logs
    as ``reward``)."""
    return [e.total_reward for e in episode]


class WeightsVersionCallback(TrainerCallback):
    """Bumps the model's weights version after each optimizer step (stale KV caches are dropped)."""

    def on_optimizer_step(
        self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any
    ) -> None:
        if model is not None:
            mark_weights_updated(model)


class EpisodeBatchCallback(TrainerCallback):
    """Calls ``on_batch(state, episodes, logs, step_seconds)`` once per logged training step of
    ``trainer`` (a ``GEMGRPOTrainer``, logging every step): TRL's ``TrainerState``, the step's
    episodes (``trainer.last_episodes``), the numbers TRL logged for it and the seconds since the
    previous call returned. How a script records its own row per step and evaluates between steps
    (``examples/train_trl.py``, ``benchmarks/baselines/train_run.py``)."""

    def __init__(self, trainer: GEMGRPOTrainer, on_batch: Callable[[Any, list[Episode], dict, float], None]):
        self.trainer, self.on_batch = trainer, on_batch
        self._last = time.perf_counter()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if not logs or "env/return" not in logs:
            return  # TRL's end-of-training summary
        self.on_batch(state, self.trainer.last_episodes, logs, time.perf_counter() - self._last)
        self._last = time.perf_counter()  # what on_batch did (an evaluation) is no step's time


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
    ``AutoProcessor`` of the model's name (a tokenizer for a text model). ``args.mask_truncated_completions``
    works per turn: each action cut off by ``max_turn_tokens`` gets no loss, the episode's other actions do."""

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
        if reward_funcs is not None:
            raise ValueError(
                "GEMGRPOTrainer does not take reward_funcs: it trains on the env's per-turn rewards "
                "(each step's reward, through args.advantage_estimator), and TRL logs their episode "
                "return as `reward`. A reward function here would be called and logged but not trained "
                "on. Put extra reward into the env (a gem_core.Wrapper whose step adds it to the "
                "turn's reward), or see docs/per-turn-rewards.md for rewards from outside an env."
            )
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
        with _reference_is_the_policy_as_passed(model, args.beta):
            super().__init__(
                model=model,
                reward_funcs=episode_return,
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
            loss = super().training_step(model, inputs, num_items_in_batch)
        trim_above()  # a never-trimmed heap (reuse_freed_memory) fragments over a long run: bound it
        return loss

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
        batch's prefix tree (``gem_adapters.algorithms.prefix_tree``) where the model allows it; otherwise TRL's own
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
                compile_layers=self.args.compile_learner,
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
        # ``mask_truncated_completions`` per turn: TRL's own test drops a whole episode when its last action
        # was cut off; here every action cut off by ``max_turn_tokens`` loses its loss, and only it.
        per_turn, self.mask_truncated_completions = self.mask_truncated_completions, False
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self.mask_truncated_completions = per_turn
        # TRL merged the rollout's extra fields into ``inputs``: each row holds its episode and turn spans.
        episodes = [row["episode"] for row in inputs]
        spans = [row["turn_spans"] for row in inputs]
        if per_turn:  # on the loss's own mask: ``completion_mask`` is also the attention's
            loss_mask = output["tool_mask"]
            for row, (episode, row_spans) in enumerate(zip(episodes, spans)):
                for turn, (start, end) in zip(episode.turns, row_spans):
                    if turn.finish_reason == "length":
                        loss_mask[row, start:end] = 0
        width = output["completion_ids"].size(1)
        on_tokens = turn_values_on_tokens(self.turn_advantages(episodes), width, turn_spans=spans)
        advantages = torch.from_numpy(on_tokens).float().to(output["completion_ids"].device)
        output["advantages"] = advantages
        self.last_episodes, self.last_advantages = episodes, advantages
        self.clock.count("unique_tokens", len(prefix_tree.PrefixTree(_sequences(output, spans))))
        self._log_episodes(episodes, float(inputs[0].get("rollout_seconds", float("nan"))))
        return output

    def turn_advantages(self, episodes: Sequence[Episode]) -> list[np.ndarray]:
        """One advantage per turn of each of this process's ``episodes``: ``args.advantage_estimator``
        on their per-turn rewards, the estimator seeing the episodes of every process. The hook a
        subclass overrides to compute advantages otherwise (``GEMPPOTrainer``: from a critic)."""
        rewards = [[t.reward for t in e.turns] for e in episodes]
        groups = [e.group_id for e in episodes]
        state_keys = [[getattr(t, "state_key", None) for t in e.turns] for e in episodes]  # GiGPO's anchors
        strata = [getattr(e, "env_id", None) for e in episodes]  # rebn_per_env: each task's env
        if self.accelerator.num_processes > 1:
            rewards, groups = gather_object(rewards), gather_object(groups)
            state_keys, strata = gather_object(state_keys), gather_object(strata)
        per_turn = compute_advantages(
            self.args.advantage_estimator,
            rewards,
            gamma=self.args.gamma,
            group_ids=groups,
            state_keys=state_keys,
            strata=strata,
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


@contextlib.contextmanager
def _reference_is_the_policy_as_passed(model: Any, beta: float) -> Iterator[None]:
    """With ``beta != 0`` TRL loads its KL reference again from ``model.config._name_or_path``: for a model
    passed as an instance (e.g. warmed up by SFT in this process) those are the weights it was loaded
    from, or nothing at all. The reference is a copy of the policy as passed: the policy RL starts from."""
    if beta == 0.0 or isinstance(model, str) or hasattr(model, "peft_config"):  # PEFT: the adapter disabled
        yield
        return
    import trl.trainer.grpo_trainer as grpo_module

    load = grpo_module.create_model_from_path
    grpo_module.create_model_from_path = lambda *_, **__: copy.deepcopy(model).eval()
    try:
        yield
    finally:
        grpo_module.create_model_from_path = load


def _sequences(output: dict[str, Any], turn_spans: Sequence[Sequence[tuple[int, int]]]) -> list[list[int]]:
    """Each row's token ids as the learner sees them: its unpadded prompt, then its completion (which
    ends at the last turn's last id)."""
    rows = zip(output["prompt_ids"], output["prompt_mask"], output["completion_ids"], turn_spans)
    return [p[m.bool()].tolist() + c[: s[-1][1] if s else 0].tolist() for p, m, c, s in rows]

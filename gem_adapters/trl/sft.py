"""A supervised warm-up with TRL: ``GEMSFTTrainer`` (``SFTTrainer`` over each micro-batch's prefix tree) and
``sft_warm_up`` (fine-tune on episodes a scripted player plays).

A supervised warm-up on scripted episodes (``gem_adapters.algorithms.warmup``) trains on sequences that mostly
repeat each other: the same system prompt, worked game and rules, and a solver that plays the same
moves from the same states. ``compute_loss`` computes the same loss as ``SFTTrainer`` (the mean negative
log likelihood of the labelled tokens, over ``num_items_in_batch`` when TRL passes it) from one forward
over the micro-batch's prefix tree (``gem_adapters.algorithms.prefix_tree``) and logs the same ``entropy`` and
``mean_token_accuracy``; it falls back to ``SFTTrainer``'s own forward where the tree cannot serve
(a wrapped or unsupported model, padding-free or packed batches, images, another loss type).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from trl import SFTConfig, SFTTrainer

from gem_adapters.algorithms import prefix_tree
from gem_adapters.algorithms.warmup import Player, scripted_episodes, sft_rows, solver
from gem_adapters.episodes.chat_renderer import ChatRenderer


class GEMSFTTrainer(SFTTrainer):
    """``SFTTrainer`` (same arguments) plus ``max_tree_tokens``: see ``GEMGRPOConfig.max_tree_tokens``."""

    def __init__(self, *args: Any, max_tree_tokens: int | None = 1024, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.max_tree_tokens = max_tree_tokens

    def compute_loss(
        self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        why_not = (
            "the caller asked for the outputs" if return_outputs else self._why_not_shared(model, inputs)
        )
        if why_not is not None:
            prefix_tree.warn_once(
                f"GEMSFTTrainer: SFTTrainer's padded forward instead of the prefix tree: {why_not}"
            )
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        mode = "train" if self.model.training else "eval"
        out = prefix_tree.token_logprobs(
            model,
            inputs["input_ids"],
            inputs["attention_mask"],
            inputs["labels"] != -100,
            compute_entropy=True,
            max_tree_tokens=self.max_tree_tokens,
        )
        count = out.scored.sum()
        loss = -out.logprobs.sum() / torch.as_tensor(
            count if num_items_in_batch is None else num_items_in_batch
        ).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * self.accelerator.num_processes
        if count > 0:
            self._metrics[mode]["entropy"].append((out.entropy.detach().sum() / count).item())
            self._metrics[mode]["mean_token_accuracy"].append((out.is_top1.sum() / count).item())
        if mode == "train":
            self._total_train_tokens += int(inputs["attention_mask"].sum())
        self._metrics[mode]["num_tokens"] = [self._total_train_tokens]
        return loss

    def _why_not_shared(self, model: Any, inputs: dict[str, Any]) -> str | None:
        """None if the loss can run over the micro-batch's prefix tree, else why not."""
        if (
            self.args.loss_type != "nll"
            or self.label_smoother is not None
            or self.compute_loss_func is not None
        ):
            return "a loss other than the mean negative log likelihood"
        if self.aux_loss_enabled or not set(inputs) <= {"input_ids", "attention_mask", "labels", "use_cache"}:
            return f"inputs beyond ids, attention mask and labels ({sorted(inputs)})"
        if "attention_mask" not in inputs or not prefix_tree.contiguous_rows(inputs["attention_mask"]):
            return "padding-free or packed rows"
        if self.accelerator.unwrap_model(model) is not model:
            return "the model is wrapped for distributed training (its wrapper owns the forward)"
        return prefix_tree.supports_model(model)


def sft_warm_up(
    model: Any,
    tokenizer: Any,
    renderer: ChatRenderer,
    env_id: str,
    seeds: Sequence[int],
    config: SFTConfig,
    *,
    player: Player = solver,
    max_turns: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> GEMSFTTrainer:
    """Fine-tune ``model`` (in place) on one episode of ``env_id`` (made with ``env_kwargs``) per seed
    played by ``player`` (the env's solver by default), the loss on the player's moves only; returns the
    trainer after training (``trainer.state`` holds the losses). The model leaves with gradient
    checkpointing as it came (``SFTConfig`` turns it on by default, and the RL trainer after the warm-up
    would inherit it)."""
    from datasets import Dataset

    checkpointing = getattr(model, "is_gradient_checkpointing", False)
    episodes = scripted_episodes(env_id, seeds, renderer, player, max_turns=max_turns, env_kwargs=env_kwargs)
    trainer = GEMSFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(sft_rows(episodes)),
        processing_class=tokenizer,
    )
    trainer.train()
    if getattr(model, "is_gradient_checkpointing", False) and not checkpointing:
        model.gradient_checkpointing_disable()
    return trainer

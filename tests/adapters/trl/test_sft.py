"""GEMSFTTrainer: SFTTrainer's loss, gradients and metrics, from one forward over the batch's prefix tree."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("trl")

from datasets import Dataset
from trl import SFTConfig, SFTTrainer

from gem_adapters.algorithms.warmup import scripted_episodes, sft_rows
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.runtime.models import tiny_causal_lm
from gem_adapters.trl import GEMSFTTrainer
from tests.adapters.algorithms.test_prefix_tree import assert_same_gradient


@pytest.fixture(scope="module")
def solver_rows(tokenizer):
    renderer = ChatRenderer(tokenizer, "Play well.")
    episodes = scripted_episodes(
        "game:GuessTheNumber-v1-easy", range(6), renderer, lambda env: env.solve_action()
    )
    return sft_rows(episodes)


def make(trainer_class, model, rows, tokenizer, tmp_path, **overrides):
    config = SFTConfig(
        output_dir=str(tmp_path / trainer_class.__name__),
        per_device_train_batch_size=6,
        max_length=None,
        gradient_checkpointing=False,
        bf16=False,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        logging_steps=1,
        **overrides,
    )
    return trainer_class(
        model=model, args=config, train_dataset=Dataset.from_list(rows), processing_class=tokenizer
    )


def test_loss_and_gradients_equal_sft_trainers(tokenizer, solver_rows, tmp_path):
    model = tiny_causal_lm(tokenizer, seed=3)
    reference = make(SFTTrainer, copy.deepcopy(model), solver_rows, tokenizer, tmp_path)
    tree = make(GEMSFTTrainer, model, solver_rows, tokenizer, tmp_path)
    batch = next(iter(reference.get_train_dataloader()))
    assert (batch["labels"] != -100).sum() < batch["attention_mask"].sum()  # only the moves are labelled
    items = (batch["labels"][:, 1:] != -100).sum()
    losses = {}
    for name, trainer in (("reference", reference), ("tree", tree)):
        trainer.model.train()
        trainer.model.zero_grad()
        loss = trainer.compute_loss(trainer.model, dict(batch), num_items_in_batch=items)
        loss.backward()
        losses[name] = loss.detach()
    torch.testing.assert_close(losses["tree"], losses["reference"], atol=1e-5, rtol=1e-5)
    grads = dict(reference.model.named_parameters())
    for name, p in tree.model.named_parameters():
        assert_same_gradient(p.grad, grads[name].grad, name)
    for metric in ("entropy", "mean_token_accuracy"):
        assert tree._metrics["train"][metric][-1] == pytest.approx(
            reference._metrics["train"][metric][-1], abs=1e-4
        )


def test_a_warm_up_step_trains_over_the_tree(tokenizer, solver_rows, tmp_path):
    trainer = make(
        GEMSFTTrainer, tiny_causal_lm(tokenizer, seed=4), solver_rows, tokenizer, tmp_path, max_steps=2
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    calls = []
    original = trainer._why_not_shared
    trainer._why_not_shared = lambda *a: calls.append(original(*a)) or calls[-1]
    result = trainer.train()
    assert calls == [None, None]  # both steps went through the prefix tree
    assert torch.isfinite(torch.tensor(result.training_loss))
    assert all(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    logged = trainer.state.log_history[0]
    assert logged["entropy"] > 0 and 0 <= logged["mean_token_accuracy"] <= 1


def test_gradient_checkpointing_falls_back_to_sft_trainers_forward_with_a_warning(
    tokenizer, solver_rows, tmp_path
):
    trainer = make(
        GEMSFTTrainer, tiny_causal_lm(tokenizer, seed=5), solver_rows, tokenizer, tmp_path, max_steps=1
    )
    trainer.args.gradient_checkpointing = True
    trainer.model.gradient_checkpointing_enable()
    assert "gradient checkpointing" in trainer._why_not_shared(
        trainer.model, {"input_ids": None, "attention_mask": torch.ones(1, 2), "labels": None}
    )
    with pytest.warns(UserWarning, match="padded forward instead of the prefix tree: gradient checkpointing"):
        result = trainer.train()
    assert torch.isfinite(torch.tensor(result.training_loss))


def test_sft_warm_up_leaves_gradient_checkpointing_as_it_found_it(tokenizer, tmp_path):
    """SFTConfig turns checkpointing on by default; the RL trainer after the warm-up must not inherit it."""
    from gem_adapters.trl import sft_warm_up

    model = tiny_causal_lm(tokenizer, seed=6)
    config = SFTConfig(
        output_dir=str(tmp_path / "warm-up"), per_device_train_batch_size=4, max_length=None, bf16=False,
        report_to=[], save_strategy="no", disable_tqdm=True, max_steps=1,
    )  # fmt: skip
    assert config.gradient_checkpointing and not model.is_gradient_checkpointing
    renderer = ChatRenderer(tokenizer, "Play well.")
    trainer = sft_warm_up(model, tokenizer, renderer, "game:GuessTheNumber-v1-easy", range(4), config)
    assert trainer.state.global_step == 1 and not model.is_gradient_checkpointing

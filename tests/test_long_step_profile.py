"""The long-step profile's learner replay (``benchmarks.long_step_profile --ops``): it replays the learner's
real last training forward and counts the matrix products' FLOPs from their shapes."""

from __future__ import annotations

import pytest
import torch

from benchmarks.long_step_profile import LearnerCallProbe, _matmul_flops, learner_ops
from gem_adapters.algorithms import prefix_tree


def test_matmul_flops_come_from_the_operands_shapes():
    assert _matmul_flops("aten::mm", [[4, 8], [8, 16]]) == 2 * 4 * 8 * 16
    assert _matmul_flops("aten::addmm_", [[4, 16], [4, 8], [8, 16], []]) == 2 * 4 * 8 * 16
    assert _matmul_flops("aten::bmm", [[3, 4, 8], [3, 8, 5]]) == 2 * 3 * 4 * 8 * 5
    assert _matmul_flops("aten::baddbmm", [[3, 4, 5], [3, 4, 8], [3, 8, 5], [], []]) == 2 * 3 * 4 * 8 * 5


def test_the_replay_is_the_learners_last_training_forward(monkeypatch):
    from gem_adapters.runtime.models import load_tokenizer, tiny_causal_lm

    monkeypatch.setattr(prefix_tree, "token_logprobs", prefix_tree.token_logprobs)  # undone after the test
    model = tiny_causal_lm(load_tokenizer("smollm2"), seed=0)
    probe = LearnerCallProbe()
    ids = torch.randint(10, 1000, (2, 24), generator=torch.Generator().manual_seed(0))
    ids[1, :10] = ids[0, :10]  # a shared prompt: a tree of 24 + 14 tokens
    scored = torch.zeros_like(ids)
    scored[:, 10:] = 1
    prefix_tree.token_logprobs(model, ids, torch.ones_like(ids), scored)
    with torch.no_grad():  # a scoring forward (no gradients) is not the learner's pass
        prefix_tree.token_logprobs(model, ids[:1], torch.ones_like(ids[:1]), scored[:1])
    assert probe.last is not None and probe.last[0][1].shape == (2, 24)

    ops = learner_ops(model, probe, bf16=False, peak=100.0, backbone=10**6)
    assert ops["tokens"] == 38
    assert ops["matmul_s"] > 0 and ops["matmul_gflops"] > 0 and ops["other_s"] >= 0
    assert ops["matmul_s"] + ops["attention_s"] <= ops["wall_s"] * 1.5
    assert ops["ceiling_share"] >= ops["achieved_share"]  # the matrix products are part of the pass
    assert all(p.grad is None for p in model.parameters())  # the replay leaves no gradients behind


def test_no_replay_without_a_training_forward(monkeypatch):
    monkeypatch.setattr(prefix_tree, "token_logprobs", prefix_tree.token_logprobs)
    probe = LearnerCallProbe()
    with pytest.raises(RuntimeError, match="no learner forward"):
        learner_ops(None, probe, bf16=False, peak=1.0, backbone=1)

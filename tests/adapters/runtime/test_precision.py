"""bf16 where the CPU computes it natively, fp32 elsewhere (``gem_adapters.runtime.precision``): the decision, and
bf16 generation and learning against fp32 within stated tolerances."""

from __future__ import annotations

import pytest
import torch

from gem_adapters.algorithms import prefix_tree
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.policies import SamplingParams, TransformersPolicy
from gem_adapters.runtime import precision
from gem_adapters.runtime.rollout import rollout

ENV_ID = "game:GuessTheNumber-v1-easy"


@pytest.fixture
def cpu(monkeypatch):
    """Simulates a CPU with the given flags (``GEM_PRECISION`` unset: the automatic choice)."""
    monkeypatch.delenv(precision.PRECISION_VARIABLE, raising=False)

    def with_flags(*flags):
        monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset(flags))

    return with_flags


def test_bf16_only_where_the_cpu_computes_it(cpu):
    cpu("avx2", "fma")  # an AVX2-only machine
    assert not precision.native_bf16("cpu")
    assert precision.describe("cpu") == "fp32 (no native bf16 on this CPU)"
    cpu("avx2", "avx512f")  # AVX-512 without its bf16 instructions
    assert not precision.native_bf16("cpu")
    cpu("avx512f", "avx512_bf16")
    assert precision.native_bf16("cpu")
    cpu("amx_bf16", "amx_tile")
    assert precision.native_bf16("cpu")
    assert "amx_bf16" in precision.describe("cpu")


def test_the_environment_variable_decides_for_every_run(cpu, monkeypatch):
    cpu("avx512_bf16")
    monkeypatch.setenv(precision.PRECISION_VARIABLE, "fp32")
    assert not precision.native_bf16("cpu")
    cpu("avx2")
    monkeypatch.setenv(precision.PRECISION_VARIABLE, "bf16")
    assert precision.native_bf16("cpu")
    monkeypatch.setenv(precision.PRECISION_VARIABLE, "half")
    with pytest.raises(ValueError, match="GEM_PRECISION must be auto, fp32 or bf16"):
        precision.native_bf16("cpu")


def test_trl_config_follows_the_cpu_and_bf16_false_forces_fp32(cpu, tmp_path):
    pytest.importorskip("trl")
    from gem_adapters.trl import GEMGRPOConfig

    settings = dict(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=2)
    cpu("avx2")
    assert GEMGRPOConfig(**settings).bf16 is False
    cpu("avx512_bf16", "amx_bf16")
    config = GEMGRPOConfig(**settings)
    assert config.bf16 is True and (config.use_cpu or torch.cuda.is_available())
    assert GEMGRPOConfig(**settings, bf16=False).bf16 is False  # the one switch, `--bf16 false`


def test_trl_config_takes_an_explicit_bf16_on_a_machine_without_an_accelerator(tmp_path, monkeypatch):
    pytest.importorskip("trl")
    from gem_adapters.trl import GEMGRPOConfig

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    config = GEMGRPOConfig(
        output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=2, bf16=True
    )
    assert config.bf16 is True and config.use_cpu is True  # transformers refuses bf16 here without use_cpu


def episodes(model, tokenizer, bf16, temperature=0.0):
    renderer = ChatRenderer(tokenizer)
    policy = TransformersPolicy(model, tokenizer, seed=0, bf16=bf16)
    params = SamplingParams(max_new_tokens=6, temperature=temperature)
    return rollout(ENV_ID, policy, renderer, num_envs=4, seeds=0, max_new_tokens=6, sampling=params)


def learner_logprobs(model, episode, bf16):
    """The learner's logprobs of the episode's generated ids (the prefix-tree forward a trainer runs)."""
    seq = episode.to_sequence()
    ids = torch.tensor([seq.token_ids])
    scored = torch.zeros_like(ids)
    for start, end in seq.turn_spans:
        scored[0, start:end] = 1
    with torch.no_grad(), precision.autocast(bf16):
        out = prefix_tree.token_logprobs(model, ids, torch.ones_like(ids), scored)
    return out.logprobs[0][scored[0].bool()], torch.tensor(
        [lp for s, e in seq.turn_spans for lp in seq.logprobs[s:e]]
    )


def test_bf16_generation_has_the_learners_numerics(tokenizer):
    """A rollout in bf16 samples with logprobs the bf16 learner recomputes within 0.02 (per token, mean),
    as close as fp32 generation is to the fp32 learner's up to bf16 rounding; against fp32 numbers the
    bf16 ones differ by more, within 0.1 on average."""
    from gem_adapters.runtime.models import tiny_causal_lm

    model = tiny_causal_lm(tokenizer, seed=3).eval()
    for bf16, tolerance in ((False, 1e-4), (True, 0.02)):
        for episode in episodes(model, tokenizer, bf16):
            learner, sampled = learner_logprobs(model, episode, bf16)
            assert (learner - sampled).abs().mean().item() < tolerance
            if bf16:
                fp32_learner, _ = learner_logprobs(model, episode, False)
                assert (fp32_learner - sampled).abs().mean().item() < 0.1


def test_bf16_pool_holds_bf16_keys_and_values(tokenizer):
    """Under bf16 the engine stores keys and values as attention reads them (no cast of the history at
    every step), and its weights' bf16 copies are dropped when the weights change."""
    from gem_adapters.runtime.models import tiny_causal_lm

    model = tiny_causal_lm(tokenizer, seed=4).eval()
    policy = TransformersPolicy(model, tokenizer, seed=0, bf16=True)
    policy.generate([[1, 5, 9, 14]], SamplingParams(max_new_tokens=4, temperature=0))
    engine = policy.rollout_engine()
    assert {t.dtype for t in (*engine._pool.keys, *engine._pool.values)} == {torch.bfloat16}
    fp32 = TransformersPolicy(model, tokenizer, seed=0)
    fp32.generate([[1, 5, 9, 14]], SamplingParams(max_new_tokens=4, temperature=0))
    assert {t.dtype for t in fp32.rollout_engine()._pool.keys} == {torch.float32}


def test_a_bf16_trainer_step_logs_a_small_logprob_gap(tokenizer, tmp_path):
    """One real GEMGRPOTrainer step in bf16 (fp32 master weights): the rollout's logprobs and the learner's
    agree within bf16 rounding, and the parameters stay fp32."""
    pytest.importorskip("trl")
    from tests.adapters.trl.test_trl_adapter import make_trainer

    trainer = make_trainer(tokenizer, tmp_path, env_id=ENV_ID, bf16=True, use_cpu=True)
    trainer.train()
    gaps = [h["gem/logprob_gap"] for h in trainer.state.log_history if "gem/logprob_gap" in h]
    assert gaps and max(gaps) < 0.05
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in trainer.model.parameters())


@pytest.mark.parametrize("rows", [600, 64])  # several weight-gradient products with a partial last one; one
def test_bf16_head_gradients_are_autocasts_linear_backward(monkeypatch, rows):
    """Under bf16 autocast the chunked head's gradients are what autocast's own linear layer gives: its
    weight gradient from bf16 operands, stashed over several logit chunks, within bf16 rounding."""
    monkeypatch.setattr(prefix_tree, "LOGPROB_CHUNK_ROWS", 64)
    monkeypatch.setattr(prefix_tree, "WEIGHT_GRAD_ROWS", 256)
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(rows, 32, generator=generator, requires_grad=True)
    weight = (torch.randn(500, 32, generator=generator) * 0.3).requires_grad_()
    targets = torch.randint(0, 500, (rows,), generator=generator)
    scale = torch.randn(rows, generator=generator)

    def grads(chunked):
        hidden.grad = weight.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if chunked:
                logprobs, entropy, _ = prefix_tree.ChunkedLogProbs.apply(
                    hidden, weight, None, targets, 1.0, True
                )
            else:
                log_p = torch.nn.functional.linear(hidden, weight).float().log_softmax(-1)
                logprobs = log_p.gather(1, targets[:, None])[:, 0]
                entropy = -(log_p.exp() * log_p).sum(-1)
        (logprobs * scale).sum().add((entropy * scale).sum() * 0.5).backward()
        return hidden.grad.clone(), weight.grad.clone()

    for name, got, want in zip(("hidden", "weight"), grads(True), grads(False)):
        error = (got - want).abs().max().item()
        assert error <= 1e-2 * want.abs().max().item(), f"{name}: off by {error}"
        assert got.dtype == torch.float32

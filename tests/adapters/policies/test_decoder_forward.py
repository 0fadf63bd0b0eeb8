"""The KV engine's fused forward (``policies.decoder_forward``) computes what the model's own forward
computes: the same greedy ids and logprobs through the engine, for each architecture it accepts, in
fp32 and under bf16; every other model runs through its own modules."""

from __future__ import annotations

import pytest
import torch

from gem_adapters.policies import SamplingParams, TransformersPolicy, decoder_forward
from gem_adapters.policies.decoder_forward import supports
from gem_adapters.runtime.models import tiny_llama_config

PROMPTS = [[1, 5, 9, 14, 3, 8, 8], [1, 5, 9, 20], [7, 7], [1, 5, 9, 14, 3, 8, 8, 2, 40]]
GREEDY = SamplingParams(max_new_tokens=8, temperature=0.0, stop_token_ids=())


def tiny_model(tokenizer, architecture: str, seed: int = 0, head_bias: bool = False):
    """A random two-layer decoder of ``architecture`` with grouped-query attention (4 heads, 2 kv heads)."""
    import transformers

    fields = tiny_llama_config(tokenizer).to_dict()
    for key in ("model_type", "architectures", "transformers_version"):
        fields.pop(key, None)
    fields["num_key_value_heads"] = 2
    config_class, model_class = {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
        "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
    }[architecture]
    if architecture in ("mistral", "qwen2"):
        fields["sliding_window"] = None
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = model_class(config_class(**fields)).eval()
        with torch.no_grad():
            for p in model.parameters():  # biases and norms away from their initial 0 and 1
                p.add_(torch.randn_like(p) * 0.05)
            if head_bias:
                head = torch.nn.Linear(model.config.hidden_size, model.config.vocab_size, bias=True)
                head.weight.copy_(model.lm_head.weight)
                head.bias.copy_(torch.randn(model.config.vocab_size))
                model.lm_head = head
    return model


def through_engine(model, tokenizer, fused: bool, bf16: bool = False):
    policy = TransformersPolicy(model, tokenizer, seed=0, cache="kv", bf16=bf16)
    engine = policy.rollout_engine()
    engine.fused_forward = fused
    generations = policy.generate(PROMPTS, GREEDY)
    return generations, engine


@pytest.mark.parametrize(
    "architecture,head_bias", [("llama", False), ("llama", True), ("mistral", False), ("qwen2", False)]
)
def test_the_fused_forward_generates_what_the_models_forward_does(tokenizer, architecture, head_bias):
    model = tiny_model(tokenizer, architecture, head_bias=head_bias)
    assert supports(model) is None
    if architecture == "qwen2":
        assert model.model.layers[0].self_attn.q_proj.bias is not None  # the fused bias is exercised
    fused, engine = through_engine(model, tokenizer, fused=True)
    assert engine._fused is not None  # the fused forward ran
    modules, _ = through_engine(model, tokenizer, fused=False)
    assert [g.token_ids for g in fused] == [g.token_ids for g in modules]
    for a, b in zip(fused, modules):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    for prompt, generation in zip(PROMPTS, fused):  # and what one plain forward pass gives
        with torch.no_grad():
            logits = model(torch.tensor([prompt + generation.token_ids])).logits[0]
        logp = torch.log_softmax(logits.float(), dim=-1)
        expected = [logp[len(prompt) - 1 + k, t].item() for k, t in enumerate(generation.token_ids)]
        assert generation.logprobs == pytest.approx(expected, abs=1e-4)


def test_under_bf16_the_fused_forward_rounds_as_the_models_forward(tokenizer):
    """Under the engine's bf16 both paths cast at the same places (the residual stream and norms in
    fp32, products in bf16): the same ids, logprobs within bf16's rounding of a few products."""
    model = tiny_model(tokenizer, "llama", seed=3)
    fused, engine = through_engine(model, tokenizer, fused=True, bf16=True)
    assert engine._fused.dtype == torch.bfloat16 and engine._fused.head.dtype == torch.bfloat16
    modules, _ = through_engine(model, tokenizer, fused=False, bf16=True)
    assert [g.token_ids for g in fused] == [g.token_ids for g in modules]
    for a, b in zip(fused, modules):
        assert a.logprobs == pytest.approx(b.logprobs, abs=2e-2)


@pytest.mark.skipif(
    not decoder_forward._can_pack(torch.zeros(1, 1, dtype=torch.bfloat16)),
    reason="this torch build has no oneDNN bf16 weight layout",
)
def test_the_blocked_weight_layout_changes_no_number(tokenizer, monkeypatch):
    model = tiny_model(tokenizer, "qwen2", seed=5)  # q/k/v biases through the blocked products too
    blocked, engine = through_engine(model, tokenizer, fused=True, bf16=True)
    assert engine._fused.packed and engine._fused.head.is_mkldnn
    monkeypatch.setattr(decoder_forward, "PACK_WEIGHTS", False)
    plain, engine = through_engine(model, tokenizer, fused=True, bf16=True)
    assert not engine._fused.packed and not engine._fused.head.is_mkldnn
    assert [g.token_ids for g in blocked] == [g.token_ids for g in plain]
    assert [g.logprobs for g in blocked] == [g.logprobs for g in plain]


def test_other_models_run_through_their_own_modules(tokenizer):
    model = tiny_model(tokenizer, "qwen3")  # query/key norms: not what the fused forward computes
    assert "qwen3" in supports(model)
    model.config.model_type = "qwen2"  # the modules are checked too, not only the config's name
    assert "norms" in supports(model)
    policy = TransformersPolicy(model, tokenizer, seed=0, cache="kv")
    engine = policy.rollout_engine()
    assert engine.fused_forward is False
    kv = policy.generate(PROMPTS, GREEDY)
    plain = TransformersPolicy(model, tokenizer, seed=0, cache="none").generate(PROMPTS, GREEDY)
    assert [g.token_ids for g in kv] == [g.token_ids for g in plain]
    assert engine._fused is None


def test_adapters_and_hooks_send_the_engine_to_the_models_forward(tokenizer):
    """What the fused forward would skip (an adapter around a projection, a forward hook on a layer) must
    run: such a model goes through its own modules, also when the change comes after the engine started."""

    class Scaled(torch.nn.Module):  # a LoRA-like wrapper: the base layer and a parameter of its own
        def __init__(self, base):
            super().__init__()
            self.base_layer, self.scale = base, torch.nn.Parameter(torch.tensor(1.5))

        def forward(self, x):
            return self.base_layer(x) * self.scale

    model = tiny_model(tokenizer, "llama", seed=6)
    policy = TransformersPolicy(model, tokenizer, seed=0, cache="kv")
    policy.rollout_engine().fused_forward = True  # in fp32 only when asked (see the next test)
    policy.generate(PROMPTS, GREEDY)
    assert policy.rollout_engine()._fused is not None
    attention = model.model.layers[1].self_attn
    attention.v_proj = Scaled(attention.v_proj)
    assert "plain torch.nn.Linear" in supports(model)
    got = policy.generate(PROMPTS, GREEDY)
    assert policy.rollout_engine().fused_forward is False
    plain = TransformersPolicy(model, tokenizer, seed=0, cache="none").generate(PROMPTS, GREEDY)
    assert [g.token_ids for g in got] == [g.token_ids for g in plain]
    for a, b in zip(got, plain):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)

    hooked = tiny_model(tokenizer, "llama", seed=6)
    hooked.model.layers[0].mlp.register_forward_hook(lambda module, args, out: out * 0.5)
    assert "hooks" in supports(hooked)
    engine = TransformersPolicy(hooked, tokenizer, seed=0, cache="kv").rollout_engine()
    assert engine.fused_forward is False


def test_the_engine_fuses_where_it_computes_in_bf16(tokenizer):
    model = tiny_model(tokenizer, "llama", seed=4)
    assert TransformersPolicy(model, tokenizer, seed=0, cache="kv", bf16=True).rollout_engine().fused_forward
    assert not TransformersPolicy(model, tokenizer, seed=0, cache="kv").rollout_engine().fused_forward


def test_new_weights_give_new_fused_weights(tokenizer):
    model = tiny_model(tokenizer, "llama", seed=4)
    policy = TransformersPolicy(model, tokenizer, seed=0, cache="kv")
    policy.rollout_engine().fused_forward = True
    before = policy.generate(PROMPTS, GREEDY)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)  # in place: the parameters' version counters move
    after = policy.generate(PROMPTS, GREEDY)
    fresh = TransformersPolicy(model, tokenizer, seed=0, cache="none").generate(PROMPTS, GREEDY)
    assert [g.token_ids for g in after] == [g.token_ids for g in fresh]
    for a, b in zip(after, fresh):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    assert [g.logprobs for g in after] != [g.logprobs for g in before]

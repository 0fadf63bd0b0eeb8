"""The prefix-tree forward gives the loss and gradients of the unshared forward (to fp32 rounding)."""

from __future__ import annotations

import functools

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from gem_adapters.algorithms.prefix_tree import (
    PrefixTree,
    contiguous_rows,
    group_rows,
    supports_model,
    token_logprobs,
    why_not_compile,
)
from gem_adapters.algorithms.warmup import scripted_episodes
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.runtime.models import load_tokenizer
from tests.adapters.chat_templates import QWEN3_TEMPLATE

DEMONSTRATION = [
    {"role": "user", "content": "Guess my number between 1 and 10. Reply inside \\boxed{}."},
    {"role": "assistant", "content": "\\boxed{5}"},
]


def gqa_model(tokenizer, seed=0):
    """A tiny Llama with grouped-query attention (4 query heads over 2 key/value heads), fp32."""
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def assert_same_gradient(grad, reference, name=""):
    """Equal to fp32 rounding: every entry within 1e-5 of the tensor's largest magnitude."""
    error = (grad - reference).abs().max().item()
    assert error <= 1e-5 * reference.abs().max().item(), f"{name}: off by {error}"


def padded_batch(episodes):
    """TRL's layout: prompts left-padded, completions right-padded; the completion columns are scored."""
    samples = [e.to_prompt_response(include_closing=False) for e in episodes]
    prompt = max(len(s.prompt_ids) for s in samples)
    width = prompt + max(len(s.response_ids) for s in samples)
    ids = torch.zeros(len(samples), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for b, s in enumerate(samples):
        start = prompt - len(s.prompt_ids)
        ids[b, start : start + len(s.prompt_ids) + len(s.response_ids)] = torch.tensor(
            s.prompt_ids + s.response_ids
        )
        mask[b, start : start + len(s.prompt_ids) + len(s.response_ids)] = 1
    scored = torch.zeros_like(mask)
    scored[:, prompt:] = 1
    return ids, mask, scored


def unshared(model, ids, mask, scored, temperature):
    """Each row alone, unpadded: log probabilities and entropies at its scored columns."""
    logprobs, entropy = torch.zeros(ids.shape), torch.zeros(ids.shape)
    for b in range(ids.shape[0]):
        columns = mask[b].nonzero()[:, 0]
        row = ids[b, columns]
        log_p = (model(input_ids=row[None]).logits[0].float() / temperature).log_softmax(-1)[:-1]
        lp = log_p.gather(1, row[1:, None])[:, 0]
        h = -(log_p.exp() * log_p).sum(-1)
        for i, c in enumerate(columns[1:].tolist()):
            if scored[b, c]:
                logprobs[b, c], entropy[b, c] = lp[i], h[i]
    return logprobs, entropy


def episodes_for(tokenizer, template):
    """Two games (groups whose prompts differ), solver episodes of different lengths, some repeated."""
    if template is not None:
        tokenizer.chat_template = template
    renderer = ChatRenderer(tokenizer, None, prefix_messages=DEMONSTRATION)
    guess = scripted_episodes(
        "game:GuessTheNumber-v1-easy", [0, 0, 1, 2, 3], renderer, lambda e: e.solve_action()
    )
    hanoi = scripted_episodes("game:TowerOfHanoi-v1-easy", [0, 1], renderer, lambda e: e.solve_action())
    return guess + hanoi


COMPILER = pytest.mark.skipif(why_not_compile() is not None, reason=str(why_not_compile()))


@pytest.mark.parametrize(
    ("template", "max_tree_tokens", "compile_layers"),
    [
        (None, None, False),
        (QWEN3_TEMPLATE, None, False),
        (None, 300, False),
        pytest.param(None, None, True, marks=COMPILER),
        pytest.param(None, 300, True, marks=COMPILER),
    ],
    ids=["smollm2", "qwen3", "smollm2-groups-recomputed", "compiled", "compiled-groups-recomputed"],
)
def test_logprobs_and_gradients_equal_the_unshared_forward(template, max_tree_tokens, compile_layers):
    tokenizer = load_tokenizer("smollm2")  # its own copy: the template changes here
    episodes = episodes_for(tokenizer, template)
    ids, mask, scored = padded_batch(episodes)
    assert len({len(e.to_sequence().token_ids) for e in episodes}) >= 3  # different lengths
    model = gqa_model(tokenizer)
    weights = torch.randn(ids.shape, generator=torch.Generator().manual_seed(1))

    reference_lp, reference_h = unshared(model, ids, mask, scored, temperature=0.7)
    (reference_lp * weights).sum().add((reference_h * weights).sum() * 0.3).backward()
    reference_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()

    hooked = model.model.layers[1]  # a layer whose forward a hook wraps (as accelerate's do)
    hook = hooked.forward = functools.partial(type(hooked).forward, hooked)
    out = token_logprobs(
        model, ids, mask, scored, temperature=0.7, compute_entropy=True, max_tree_tokens=max_tree_tokens,
        compile_layers=compile_layers,
    )  # fmt: skip
    (out.logprobs * weights).sum().add((out.entropy * weights).sum() * 0.3).backward()
    # the compiled layers served the tree's forward only: generation runs the layers as they were
    assert "forward" not in vars(model.model.layers[0]) and hooked.forward is hook
    assert all(("_gem_compiled_forward" in vars(layer)) == compile_layers for layer in model.model.layers)

    torch.testing.assert_close(out.logprobs, reference_lp, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(out.entropy, reference_h, atol=5e-5, rtol=1e-5)
    for name, p in model.named_parameters():
        assert_same_gradient(p.grad, reference_grads[name], name)
    # Every scored column of every row got its value; the first token of a row has no context.
    assert torch.equal(out.scored, scored.bool() & mask.bool())
    # The tree computed each shared prefix once: far fewer tokens than the rows hold.
    if max_tree_tokens is None:
        assert out.tokens < 0.6 * int(mask.sum()) and len(out.trees) == 1
    else:  # several groups, each within the budget unless a single row is longer
        assert len(out.trees) > 1
        assert all(len(t) <= max_tree_tokens or len(t.row_nodes) == 1 for t in out.trees)
    greedy = out.is_top1[out.scored]
    assert greedy.dtype == torch.bool and greedy.numel() == int(out.scored.sum())


def test_tree_nodes_runs_and_rows():
    tree = PrefixTree([[1, 2, 3], [1, 2, 4, 5], [1, 6], [7], [1, 2, 3]])
    assert tree.tokens.tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert tree.positions.tolist() == [0, 1, 2, 2, 3, 1, 0]
    assert tree.parents == [-1, 0, 1, 1, 3, 0, -1]
    assert tree.row_nodes == [[0, 1, 2], [0, 1, 3, 4], [0, 5], [6], [0, 1, 2]]
    assert len(tree) == 7 and tree.num_row_tokens == 13
    runs = [(r.start, r.end, None if r.keys is None else r.keys.tolist()) for r in tree.runs]
    assert runs == [(0, 3, None), (3, 5, [0, 1, 3, 4]), (5, 6, [0, 5]), (6, 7, None)]
    mask = tree.runs[1].mask
    assert mask.tolist() == [[True, True, True, False], [True, True, True, True]]


def test_unsupported_layouts_and_models_are_refused(tokenizer):
    assert contiguous_rows(torch.tensor([[0, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 1]]))
    holes = torch.tensor([[1, 0, 1, 1]])
    assert not contiguous_rows(holes)
    with pytest.raises(ValueError, match="contiguous"):
        token_logprobs(gqa_model(tokenizer), torch.ones(1, 4, dtype=torch.long), holes, holes)
    windowed = gqa_model(tokenizer)
    windowed.config.layer_types = ["sliding_attention", "full_attention"]
    assert "sliding" in supports_model(windowed)
    assert supports_model(gqa_model(tokenizer)) is None


def test_a_batch_without_scored_tokens_gives_zeros(tokenizer):
    model = gqa_model(tokenizer)
    ids = torch.tensor([[5, 6, 7], [5, 6, 8]])
    mask = torch.ones_like(ids)
    out = token_logprobs(model, ids, mask, torch.zeros_like(ids))
    assert torch.equal(out.logprobs, torch.zeros(2, 3)) and not out.scored.any()
    first_only = torch.tensor([[1, 0, 0], [1, 0, 0]])  # a row's first token has no context: not scored
    assert not token_logprobs(model, ids, mask, first_only).scored.any()


def test_rows_are_grouped_under_the_token_budget_with_shared_prefixes_together():
    rows = [[1, 2, 3, 4], [9, 9, 9], [1, 2, 3, 5], [1, 2, 6], [9, 9, 8], [7] * 10]
    assert group_rows(rows, None) == [[0, 1, 2, 3, 4, 5]]
    groups = group_rows(rows, 6)
    assert sorted(b for g in groups for b in g) == list(range(6))
    for group in groups:
        size = len(PrefixTree([rows[b] for b in group]))
        assert size <= 6 or len(group) == 1  # the 10-token row alone
    assert [0, 2, 3] in groups  # the rows that share 1, 2 fill one tree of 6 nodes

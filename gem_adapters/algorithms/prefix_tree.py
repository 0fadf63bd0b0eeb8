"""The learner's forward over a batch's prefix tree: every distinct prefix is computed once.

A batch of episodes repeats itself: the same system prompt, worked game and rules open every episode,
the episodes of a GRPO group start from the same state, and a policy that has learned a game opens the
same way in most of them. The usual training forward pads the batch into a rectangle and runs every row
whole. Here the rows' tokens are merged into a tree (a trie: one node per distinct prefix) and the
model runs once over the tree's nodes, packed into one sequence with no padding, each node at its own
position (its depth) and attending to its ancestors only (``tree_attention``, registered with
transformers' ``AttentionInterface``). A node's hidden state depends on its prefix alone, so it is the
same number the padded forward computes for that position of every row that holds it; the log
probability of a node's token is computed once and shared by those rows, and gradients from all of
them accumulate on it. Loss and gradients equal the padded computation's up to float rounding
(``tests/adapters/algorithms/test_prefix_tree.py``); the work is the tree's size instead of the rectangle's.

The packed sequence lists the nodes in the order the rows create them, so each row adds one *run* of
consecutive nodes, each the child of the one before; a run attends to its ancestors' path (gathered
once per layer) and causally to itself.

With ``compile_layers`` the decoder layers run through ``torch.compile`` (inductor; the tree's attention,
a loop over runs, stays eager between the compiled pieces): norms, rotary embeddings, residual adds and the
MLP's activation fuse into a few kernels instead of one pass over memory each. The compiled layers replace
the eager ones only inside the tree's forward (and its recomputation), never in generation.

The language-model head runs only where a log probability is asked for (``ChunkedLogProbs``), in
chunks of rows, never materialising the ``(tokens, vocabulary)`` logits of the batch, and recomputes
each chunk in the backward pass.

Supported: decoder-only transformers models whose attention layers call the configured attention
function with rotary or no position embeddings (Llama, Qwen2/3, Mistral, SmolLM, ...; the same as
``policies.kv_engine.supports_model``), without gradient checkpointing (the tree's activations are the
batch's distinct tokens, usually a fraction of the padded batch's); ``supports_model(model)`` says why
not otherwise, and callers fall back to their framework's own forward.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from transformers import AttentionInterface

from gem_adapters.policies import kv_engine

ATTENTION = "gem_prefix_tree"
LOGPROB_CHUNK_ROWS = 128  # rows of logits computed at once: 128 x 49,152 fp32 = 25 MB for SmolLM2
# Under autocast, rows of the head's weight gradient per bf16 matrix product (grads kept transposed):
# 1024 x 49,152 bf16 = 100 MB for SmolLM2 (benchmarks/logprob_chunk_rows.py); 0: an fp32 product per chunk.
WEIGHT_GRAD_ROWS = 1024


@dataclass
class Run:
    """Nodes ``start:end`` of the packed sequence, each the child of the one before. ``keys``: the
    packed indices the run attends to, its ancestors (root first) then its own nodes, with ``mask``
    ``(end - start, len(keys))`` (every ancestor, causal over the run); both None for a run that starts
    at a root (it attends causally to itself)."""

    start: int
    end: int
    keys: torch.Tensor | None
    mask: torch.Tensor | None


class PrefixTree:
    """The trie of ``rows`` (token id lists), packed.

    ``tokens[n]``, ``positions[n]`` (depth, from 0) and ``parents[n]`` (-1 for a root) per node;
    ``row_nodes[b][i]`` is the node of row ``b``'s ``i``-th token; ``runs`` cover the packed sequence
    in order."""

    def __init__(self, rows: Sequence[Sequence[int]], device: Any = None):
        tokens: list[int] = []
        positions: list[int] = []
        parents: list[int] = []
        children: list[dict[int, int]] = []
        roots: dict[int, int] = {}
        row_nodes: list[list[int]] = []
        for row in rows:
            nodes = []
            node, level = -1, roots
            for depth, token in enumerate(row):
                token = int(token)
                child = level.get(token)
                if child is None:
                    child = len(tokens)
                    level[token] = child
                    tokens.append(token)
                    positions.append(depth)
                    parents.append(node)
                    children.append({})
                nodes.append(child)
                node, level = child, children[child]
            row_nodes.append(nodes)
        self.tokens = torch.tensor(tokens, dtype=torch.long, device=device)
        self.positions = torch.tensor(positions, dtype=torch.long, device=device)
        self.parents = parents
        self.row_nodes = row_nodes
        self.num_row_tokens = sum(len(nodes) for nodes in row_nodes)
        self.runs = self._runs(device)

    def __len__(self) -> int:
        return len(self.parents)

    def _runs(self, device: Any) -> list[Run]:
        runs: list[Run] = []
        paths: dict[int, list[int]] = {}  # run start -> the packed indices of the run's ancestors
        start = 0
        for n in range(1, len(self.parents) + 1):
            if n < len(self.parents) and self.parents[n] == n - 1:
                continue
            parent = self.parents[start]
            if parent < 0:
                ancestors: list[int] = []
            else:
                owner = max(s for s in paths if s <= parent)  # the run that holds the parent
                ancestors = paths[owner] + list(range(owner, parent + 1))
            paths[start] = ancestors
            length = n - start
            if ancestors:
                keys = torch.tensor(ancestors + list(range(start, n)), dtype=torch.long, device=device)
                mask = torch.ones(length, len(keys), dtype=torch.bool, device=device).tril(len(ancestors))
                runs.append(Run(start, n, keys, mask))
            else:
                runs.append(Run(start, n, None, None))
            start = n
        return runs


@torch.compiler.disable  # a Python loop over the tree's runs: the compiled layers call it eagerly
def tree_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention over a packed ``PrefixTree`` (``kwargs["gem_tree"]``): query/key/value are
    ``(1, heads, nodes, dim)``; returns ``(1, nodes, heads, dim)``."""
    tree = kwargs.get("gem_tree")
    if tree is None:
        raise RuntimeError(f"the {ATTENTION!r} attention only runs inside a prefix-tree forward")
    for name in ("sliding_window", "softcap", "s_aux", "sinks"):
        if kwargs.get(name) is not None:
            raise NotImplementedError(f"prefix-tree attention does not support {name}")
    outputs = []
    for run in tree.runs:
        q = query[:, :, run.start : run.end]
        if run.keys is None:
            k, v = key[:, :, run.start : run.end], value[:, :, run.start : run.end]
        else:
            k, v = key.index_select(2, run.keys), value.index_select(2, run.keys)
        outputs.append(
            F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=run.mask,
                is_causal=run.mask is None,
                dropout_p=dropout,
                scale=scaling,
                enable_gqa=q.shape[1] != k.shape[1],
            )
        )
    return torch.cat(outputs, dim=2).transpose(1, 2), None


AttentionInterface.register(ATTENTION, tree_attention)


def supports_model(model: Any) -> str | None:
    """None if ``model`` can run over a prefix tree, else why not."""
    why = kv_engine.supports_model(model)
    if why is not None:
        return why
    if not hasattr(model, "get_output_embeddings") or model.get_output_embeddings() is None:
        return "the model has no output embeddings (a causal LM head)"
    if getattr(model, "base_model", model) is model:
        return "the model exposes no backbone (base_model) apart from its head"
    if getattr(model, "is_gradient_checkpointing", False):
        return "gradient checkpointing is on (its recomputation would run outside the tree's attention)"
    return None


@functools.cache
def warn_once(message: str) -> None:
    """Say once per process why a trainer does not use the prefix tree (it falls back, slower)."""
    warnings.warn(message, stacklevel=3)


def why_not_compile(device: Any = "cpu") -> str | None:
    """None if ``torch.compile`` can build the kernels of ``compile_layers`` for ``device`` here, else why
    not (on a CPU, inductor compiles C++)."""
    from torch._inductor import config as inductor_config

    if torch.device(device).type != "cpu":
        return None
    cxx = inductor_config.cpp.cxx
    compiler = (cxx[-1] if isinstance(cxx, (list, tuple)) else cxx) or "g++"
    if shutil.which(compiler) is None:
        return f"torch.compile needs a C++ compiler for CPU kernels and {compiler!r} is not on PATH"
    return None


def _decoder_layers(model: Any) -> Sequence[Any]:
    layers = getattr(model.base_model, "layers", None)
    if layers is None:
        raise ValueError(f"compile_layers: {type(model.base_model).__name__} has no decoder .layers")
    return layers


@contextlib.contextmanager
def _compiled(layers: Sequence[Any]):
    """Each layer's ``forward`` replaced by its compiled version (built once, kept on the layer)."""
    previous = [vars(layer).get("forward") for layer in layers]  # a hook's wrapper, or None: the class's
    for layer in layers:
        compiled = vars(layer).get("_gem_compiled_forward")
        if compiled is None:
            compiled = torch.compile(layer.forward, dynamic=True)
            layer._gem_compiled_forward = compiled
        layer.forward = compiled
    try:
        yield
    finally:
        for layer, forward in zip(layers, previous):
            if forward is None:
                del layer.forward
            else:
                layer.forward = forward


def tree_hidden_states(model: Any, tree: PrefixTree, compile_layers: bool = False) -> torch.Tensor:
    """The backbone's last hidden state at every node, ``(len(tree), hidden)``."""
    config = model.config
    previous = config._attn_implementation
    config._attn_implementation = ATTENTION
    layers = _compiled(_decoder_layers(model)) if compile_layers else contextlib.nullcontext()
    try:
        with layers:
            out = model.base_model(
                input_ids=tree.tokens[None],
                position_ids=tree.positions[None],
                use_cache=False,
                gem_tree=tree,
            )
    finally:
        config._attn_implementation = previous
    return out.last_hidden_state[0]


class ChunkedLogProbs(torch.autograd.Function):
    """``log_softmax(hidden @ weight.T + bias) / temperature`` at ``targets``, the distribution's entropy
    (if asked) and whether the target is its most likely token, ``LOGPROB_CHUNK_ROWS`` rows at a time;
    the backward pass recomputes each chunk's logits instead of keeping them."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, compute_entropy):  # type: ignore[override]
        ctx.set_materialize_grads(False)
        rows = hidden.shape[0]
        logprobs = torch.empty(rows, dtype=torch.float32, device=hidden.device)
        log_z = torch.empty_like(logprobs)
        entropy = torch.empty_like(logprobs) if compute_entropy else None
        is_top1 = torch.empty(rows, dtype=torch.bool, device=hidden.device)
        for start in range(0, rows, LOGPROB_CHUNK_ROWS):
            end = min(start + LOGPROB_CHUNK_ROWS, rows)
            z = _logits(hidden[start:end], weight, bias, temperature)
            target = z.gather(1, targets[start:end, None])[:, 0]
            is_top1[start:end] = target >= z.amax(dim=1)
            lse = torch.logsumexp(z, dim=1)
            log_z[start:end] = lse
            logprobs[start:end] = target - lse
            if entropy is not None:
                log_p = z.sub_(lse[:, None])
                entropy[start:end] = -(log_p.exp() * log_p).sum(dim=1)
        ctx.save_for_backward(hidden, weight, bias, targets, log_z, entropy)
        ctx.temperature = temperature
        device = hidden.device.type  # the backward recomputes the logits under the same autocast
        ctx.autocast = (device, torch.get_autocast_dtype(device), torch.is_autocast_enabled(device))
        ctx.mark_non_differentiable(is_top1)
        return logprobs, entropy, is_top1

    @staticmethod
    def backward(ctx, grad_logprobs, grad_entropy, _grad_top1):  # type: ignore[override]
        device, dtype, enabled = ctx.autocast
        with torch.autocast(device, dtype=dtype, enabled=enabled):
            return ChunkedLogProbs._backward(ctx, grad_logprobs, grad_entropy)

    @staticmethod
    def _backward(ctx, grad_logprobs, grad_entropy):
        hidden, weight, bias, targets, log_z, entropy = ctx.saved_tensors
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        grad_hidden = torch.zeros_like(hidden, dtype=torch.float32) if need_hidden else None
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if need_weight else None
        grad_bias = torch.zeros_like(bias, dtype=torch.float32) if need_bias and bias is not None else None
        rows = hidden.shape[0]
        low = ctx.autocast[1] if ctx.autocast[2] else None
        # Under autocast the weight gradient is computed as autocast's linear backward does (bf16 operands,
        # fp32 accumulation), over up to WEIGHT_GRAD_ROWS rows at a time from chunk gradients kept transposed.
        stash = None
        if grad_weight is not None and low is not None and WEIGHT_GRAD_ROWS > 0:
            stash = torch.empty(weight.shape[0], min(WEIGHT_GRAD_ROWS, rows), dtype=low, device=weight.device)
        stashed = 0
        for start in range(0, rows, LOGPROB_CHUNK_ROWS):
            end = min(start + LOGPROB_CHUNK_ROWS, rows)
            h = hidden[start:end]
            log_p = _logits(h, weight, bias, ctx.temperature).sub_(log_z[start:end, None])
            p = log_p.exp()
            # dL/dz_k = -p_k * (g_lp + g_H * (log p_k + H)) + g_lp * [k == target]:
            # d log p_t / dz_k = [k == t] - p_k and dH / dz_k = -p_k (log p_k + H)
            if grad_entropy is None:
                weight_k = torch.zeros_like(log_z[start:end, None])
            else:
                weight_k = log_p.add_(entropy[start:end, None]).mul_(grad_entropy[start:end, None])
            if grad_logprobs is not None:
                weight_k = weight_k + grad_logprobs[start:end, None]
            grad = p.mul_(weight_k).neg_()
            if grad_logprobs is not None:
                grad.scatter_add_(1, targets[start:end, None], grad_logprobs[start:end, None])
            if ctx.temperature != 1.0:
                grad.div_(ctx.temperature)
            if grad_hidden is not None:
                grad_hidden[start:end] = grad.to(weight.dtype) @ weight
            if stash is not None:
                stash[:, stashed : stashed + end - start] = grad.t()
                stashed += end - start
                if end == rows or stashed + LOGPROB_CHUNK_ROWS > stash.shape[1]:
                    grad_weight.add_(stash[:, :stashed] @ hidden[end - stashed : end].to(low))
                    stashed = 0
            elif grad_weight is not None:
                grad_weight.addmm_(grad.t(), h.float())
            if grad_bias is not None:
                grad_bias.add_(grad.sum(dim=0))
        return (
            None if grad_hidden is None else grad_hidden.to(hidden.dtype),
            None if grad_weight is None else grad_weight.to(weight.dtype),
            None if grad_bias is None else grad_bias.to(bias.dtype),
            None,
            None,
            None,
        )


def _logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float):
    z = F.linear(hidden, weight, bias).float()
    return z.div_(temperature) if temperature != 1.0 else z


def contiguous_rows(attention_mask: torch.Tensor) -> bool:
    """Whether every row's attended positions are one contiguous block (left and/or right padding)."""
    mask = attention_mask.bool()
    length = mask.sum(dim=1)
    first = mask.int().argmax(dim=1)
    columns = torch.arange(mask.shape[1], device=mask.device)
    block = (columns[None] >= first[:, None]) & (columns[None] < (first + length)[:, None])
    return bool((block == mask).all())


@dataclass
class TokenLogProbs:
    """Per column of a ``(B, L)`` batch: ``logprobs``, ``entropy`` (None unless asked) and ``is_top1``,
    zero (False) outside ``scored``, the columns that got them; ``trees``: the prefix trees they came
    from (one per group of rows, see ``token_logprobs``)."""

    logprobs: torch.Tensor
    entropy: torch.Tensor | None
    is_top1: torch.Tensor
    scored: torch.Tensor
    trees: list[PrefixTree]

    @property
    def tokens(self) -> int:
        """Tokens through the model: the trees' nodes."""
        return sum(len(tree) for tree in self.trees)


def group_rows(rows: Sequence[Sequence[int]], max_tree_tokens: int | None) -> list[list[int]]:
    """Row indices in groups whose prefix tree holds at most ``max_tree_tokens`` nodes (a longer row
    is a group of its own; None: one group). Rows that share prefixes go together (sorted order)."""
    if max_tree_tokens is None:
        return [list(range(len(rows)))]
    groups: list[list[int]] = []
    size, trie = 0, {}
    for b in sorted(range(len(rows)), key=lambda b: rows[b]):
        new, level = 0, trie
        for token in rows[b]:  # count the nodes this row would add
            if token not in level:
                new += 1
                level = {}
            else:
                level = level[token]
        if groups and size + new > max_tree_tokens:
            size, trie = 0, {}
            new = len(rows[b])
        if not groups or size == 0:
            groups.append([])
        level = trie
        for token in rows[b]:
            level = level.setdefault(token, {})
        groups[-1].append(b)
        size += new
    return groups


def _tree_logprobs(model, tree, nodes, temperature, compute_entropy, compile_layers):
    parents = torch.tensor([tree.parents[n] for n in nodes.tolist()], dtype=torch.long, device=nodes.device)
    hidden = tree_hidden_states(model, tree, compile_layers)
    head = model.get_output_embeddings()
    return ChunkedLogProbs.apply(
        hidden.index_select(0, parents),
        head.weight,
        head.bias,
        tree.tokens.index_select(0, nodes),
        temperature,
        compute_entropy,
    )


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    scored: torch.Tensor,
    temperature: float = 1.0,
    compute_entropy: bool = False,
    max_tree_tokens: int | None = None,
    compile_layers: bool = False,
) -> TokenLogProbs:
    """What a padded forward gives a loss, from forwards over the batch's prefix tree.

    ``input_ids``, ``attention_mask`` and ``scored`` are ``(B, L)``; each row's attended columns must be
    one contiguous block (``contiguous_rows``). For every scored, attended column that is not its row's
    first attended one: the log probability of its token given the row's attended tokens before it
    (at ``temperature``), the entropy of that distribution and whether the token is its argmax.

    ``max_tree_tokens`` bounds the activations kept for the backward pass: rows are split into groups
    whose trees hold at most that many tokens (``group_rows``), and with more than one group each
    group's forward is recomputed in the backward pass (activation checkpointing), one group at a
    time; a prefix that groups share is then computed once per group.

    ``compile_layers``: run the decoder layers compiled (see the module docstring; ``why_not_compile``
    says where that cannot work). The first call compiles (~17 s for SmolLM2 on a CPU core)."""
    if not contiguous_rows(attention_mask):
        raise ValueError("token_logprobs: each row's attended positions must be one contiguous block")
    batch, width = input_ids.shape
    device = input_ids.device
    rows, where = [], []
    scored = scored.bool() & attention_mask.bool()
    for b, (ids, mask, keep) in enumerate(
        zip(input_ids.tolist(), attention_mask.bool().tolist(), scored.tolist())
    ):
        columns = [c for c, m in enumerate(mask) if m]
        rows.append([ids[c] for c in columns])
        where.append([(i, b * width + c) for i, c in enumerate(columns) if i > 0 and keep[c]])
    logprobs = torch.zeros(batch * width, dtype=torch.float32, device=device)
    entropy = torch.zeros_like(logprobs) if compute_entropy else None
    is_top1 = torch.zeros(batch * width, dtype=torch.bool, device=device)
    computed = torch.zeros(batch * width, dtype=torch.bool, device=device)
    groups = group_rows(rows, max_tree_tokens)
    trees = []
    for group in groups:
        tree = PrefixTree([rows[b] for b in group], device=device)
        trees.append(tree)
        wanted = [tree.row_nodes[k][i] for k, b in enumerate(group) for i, _ in where[b]]
        if not wanted:
            continue
        nodes, inverse = torch.tensor(wanted, device=device).unique(return_inverse=True)
        if len(groups) > 1 and torch.is_grad_enabled():
            node_lp, node_entropy, node_top1 = torch.utils.checkpoint.checkpoint(
                _tree_logprobs,
                model,
                tree,
                nodes,
                temperature,
                compute_entropy,
                compile_layers,
                use_reentrant=False,
            )
        else:
            node_lp, node_entropy, node_top1 = _tree_logprobs(
                model, tree, nodes, temperature, compute_entropy, compile_layers
            )
        flat = torch.tensor([f for b in group for _, f in where[b]], device=device)
        logprobs = logprobs.index_copy(0, flat, node_lp.index_select(0, inverse))
        if entropy is not None:
            entropy = entropy.index_copy(0, flat, node_entropy.index_select(0, inverse))
        is_top1[flat] = node_top1.index_select(0, inverse)
        computed[flat] = True
    shape = (batch, width)
    return TokenLogProbs(
        logprobs.view(shape),
        None if entropy is None else entropy.view(shape),
        is_top1.view(shape),
        computed.view(shape),
        trees,
    )

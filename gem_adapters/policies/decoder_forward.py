"""The KV engine's own forward pass for Llama-style decoders (Llama, SmolLM, Mistral, Qwen2).

Transformers' modules cost ~40 operator calls a decoder layer (plus autocast's casts); at one token a
sequence, many of them cost more in dispatch than in arithmetic. This forward runs the same computation
on the engine's packed row with the projections fused (q, k and v in one matrix product, gate and up in
another) and the weights cast once per weights version to the compute dtype, so a layer is about
fifteen calls. The numerics follow transformers' forward under the engine's precision: the residual
stream and the norms in fp32, the matrix products in the compute dtype, rotary embeddings from the
model's own ``rotary_emb`` applied as transformers' ``apply_rotary_pos_emb`` applies them (queries and
keys in one pass; in fp32 under bf16), keys, values and queries stored and attended in the compute
dtype. In bf16 on a CPU the weights are also reordered once into oneDNN's blocked layout
(``PACK_WEIGHTS``): at decode and short prefill sizes (1-256 rows) the products then run 1.3-1.5x faster
than ``F.linear`` on the same weights, with the same numbers.

``supports(model)`` says which models qualify; the engine falls back to the model's own forward for
every other one, and uses this one by default only where it computes in bf16 (in fp32, where nothing is
cast, it measured no faster: ``benchmarks/results/engine_forward_ab.txt``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

ARCHITECTURES = ("llama", "mistral", "qwen2")
# bf16 weights on a CPU in oneDNN's blocked layout, laid out for products of about PACK_ROWS rows (a decode
# batch); within 10% of F.linear at 512-2,048 rows: benchmarks/results/engine_forward_ab.txt.
PACK_WEIGHTS = True
PACK_ROWS = 32


def supports(model: Any) -> str | None:
    """None if ``DecoderForward`` computes what ``model``'s forward computes, else why not."""
    config = model.config
    if getattr(config, "model_type", None) not in ARCHITECTURES:
        return f"model type {getattr(config, 'model_type', None)!r} is not one of {ARCHITECTURES}"
    if getattr(config, "hidden_act", None) != "silu":
        return f"activation {getattr(config, 'hidden_act', None)!r} is not silu"
    if getattr(config, "mlp_bias", False):
        return "MLP biases are not supported"
    decoder = getattr(model, "model", None)
    if decoder is None or not hasattr(decoder, "layers") or not hasattr(decoder, "rotary_emb"):
        return "no decoder with layers and rotary_emb"
    # The modules whose forward this one replaces; the norms, embeddings and rotary embeddings it
    # calls as modules, hooks included.
    linears = [getattr(model, "lm_head", None)]
    bypassed = [model, decoder]
    for layer in decoder.layers:
        attention, mlp = layer.self_attn, layer.mlp
        if hasattr(attention, "q_norm") or attention.o_proj.bias is not None:
            return "query/key norms or output-projection biases are not supported"
        linears += [getattr(attention, f"{n}_proj", None) for n in "qkvo"]
        linears += [getattr(mlp, f"{n}_proj", None) for n in ("gate", "up", "down")]
        bypassed += [layer, attention, mlp]
    if any(type(m) is not torch.nn.Linear for m in linears):  # adapters (LoRA) and quantized layers
        return "a projection is not a plain torch.nn.Linear"
    if any(m._forward_hooks or m._forward_pre_hooks for m in bypassed + linears):
        return "forward hooks on its layers would not run"
    return None


class DecoderForward:
    """Fused, cast weights of one weights version, and the forward pass that uses them."""

    def __init__(self, model: Any, dtype: torch.dtype):
        decoder = model.model
        config = model.config
        self.dtype = dtype
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads or self.heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.scaling = self.head_dim**-0.5
        self.layers = []
        with torch.no_grad():
            for layer in decoder.layers:
                a, m = layer.self_attn, layer.mlp
                qkv_bias = None
                if a.q_proj.bias is not None:
                    qkv_bias = torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]).to(dtype)
                self.layers.append((
                    layer.input_layernorm,
                    torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).to(dtype),
                    qkv_bias,
                    a.o_proj.weight.to(dtype),
                    layer.post_attention_layernorm,
                    torch.cat([m.gate_proj.weight, m.up_proj.weight]).to(dtype),
                    m.down_proj.weight.to(dtype),
                ))  # fmt: skip
            head = model.lm_head
            self.head = head.weight.to(dtype)
            self.head_bias = None if head.bias is None else head.bias.to(dtype)
            self.packed = False
            if _can_pack(self.head):
                try:
                    packed_head = _pack(self.head)
                    layers = [tuple(_pack(t) for t in layer) for layer in self.layers]
                except RuntimeError:  # a oneDNN without bf16 kernels for this CPU: torch's layout
                    pass
                else:
                    self.layers, self.head, self.packed = layers, packed_head, True
        self.embed = model.get_input_embeddings()
        self.norm = decoder.norm
        self.rotary = decoder.rotary_emb

    def _linear(self, x: Any, weight: Any, bias: Any = None) -> Any:
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [None], "")
        return F.linear(x, weight, bias)

    def __call__(self, input_ids: Any, plan: Any, keep: Any) -> Any:
        """Logits (len(keep), vocab) at the packed ``keep`` indices of ``input_ids`` (T,), None when
        ``keep`` is None; ``plan`` is the engine's ``_Plan`` of this forward (the ids' positions; it
        stores the keys and values and attends)."""
        dtype, total, dim = self.dtype, input_ids.shape[0], self.head_dim
        heads, kv_heads, rotated = self.heads, self.kv_heads, self.heads + self.kv_heads
        hidden = self.embed(input_ids)  # (T, hidden), the parameters' dtype (the residual stream)
        cos, sin = self.rotary(hidden, plan.positions[None])  # (1, T, head_dim)
        # transformers' q * cos + rotate_half(q) * sin, for queries and keys at once: rotate_half(x) is
        # x with its halves swapped and the first negated, so the sign moves into sin (exactly).
        half = dim // 2
        cos, sin = cos[0, :, None], torch.cat((-sin[0, :, None, :half], sin[0, :, None, half:]), dim=-1)
        for index, (norm1, qkv_w, qkv_b, o_w, norm2, gate_up_w, down_w) in enumerate(self.layers):
            qkv = self._linear(norm1(hidden).to(dtype), qkv_w, qkv_b)  # (T, (heads + 2 kv_heads) dim)
            qk = qkv[:, : rotated * dim].view(total, rotated, dim)
            qk = (qk * cos + qk.roll(half, dims=-1) * sin).to(dtype)
            v = qkv[:, rotated * dim :].view(total, kv_heads, dim)
            keys, values = plan.store(index, qk[:, heads:], v)
            attended = plan.attend(qk[:, :heads], keys, values, self.scaling)  # (T, heads, dim)
            hidden = hidden + self._linear(attended.reshape(total, -1), o_w)
            gate, up = self._linear(norm2(hidden).to(dtype), gate_up_w).chunk(2, dim=-1)
            hidden = hidden + self._linear(F.silu(gate) * up, down_w)
        if keep is None:
            return None
        return self._linear(self.norm(hidden[keep]).to(dtype), self.head, self.head_bias)


def _can_pack(weight: torch.Tensor) -> bool:
    """Whether ``weight``'s products can use oneDNN's blocked layout (bf16 on a CPU, ``PACK_WEIGHTS``)."""
    return (
        PACK_WEIGHTS
        and weight.device.type == "cpu"
        and weight.dtype == torch.bfloat16
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


def _pack(tensor: Any) -> Any:
    """A 2-d weight in oneDNN's blocked layout (``torch.ops.mkldnn._linear_pointwise`` reads it); biases,
    norms and None as they are."""
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != 2:
        return tensor
    return torch.ops.mkldnn._reorder_linear_weight(tensor, PACK_ROWS)

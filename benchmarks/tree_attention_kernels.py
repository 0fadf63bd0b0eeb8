"""The learner's attention over a prefix tree, one run of it: PyTorch's SDPA with the run's mask (what
``gem_adapters/algorithms/prefix_tree.py`` calls) against the other ways to compute the same thing on a CPU,
forward + backward in bf16, SmolLM2's heads (9 query heads, 3 key/value heads, head size 64).

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.tree_attention_kernels [--label L] [--threads 1]

A run is ``m`` new tokens attending to ``n - m`` ancestors and causally to themselves (a lower-right
causal mask). The ways, taking turns so that load beside the run slows all alike (best of ``--repeats``):

* ``flash, mask``: ``F.scaled_dot_product_attention(attn_mask=mask)`` (PyTorch's CPU flash kernel);
* ``math, mask``: the same under ``sdpa_kernel(SDPBackend.MATH)``;
* ``padded causal``: the queries padded to ``n`` with zeros, ``is_causal=True``, the last ``m`` rows kept;
* ``matmuls``: scores, masked softmax (fp32) and values as bf16 matrix products, query heads grouped per
  key/value head.

The section named ``--label`` goes into ``benchmarks/results/tree_attention_kernels.txt``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from benchmarks.train_step_profile import cpu_name, timing_flags, write_section

RESULTS = Path(__file__).resolve().parent / "results" / "tree_attention_kernels.txt"
HEADER = (
    "One prefix-tree run's attention, forward + backward in bf16 (benchmarks/tree_attention_kernels.py).\n\n"
)
HEADS, KV_HEADS, HEAD_SIZE = 9, 3, 64
SHAPES = [(500, 720), (200, 1200), (1000, 1200)]  # (m new tokens, n keys): turns of a Mastermind episode


def flash(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def math_kernel(q, k, v, mask):
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def padded_causal(q, k, v, mask):
    pad = k.shape[2] - q.shape[2]
    padded = torch.cat([q.new_zeros(q.shape[0], q.shape[1], pad, q.shape[3]), q], dim=2)
    return F.scaled_dot_product_attention(padded, k, v, is_causal=True, enable_gqa=True)[:, :, pad:]


def matmuls(q, k, v, mask):
    batch, heads, m, size = q.shape
    groups = heads // k.shape[1]
    scores = torch.matmul(q.reshape(batch, k.shape[1], groups * m, size), k.transpose(-1, -2)) * size**-0.5
    scores = scores.view(batch, k.shape[1], groups, m, -1).masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores.float(), dim=-1).to(q.dtype).view(batch, k.shape[1], groups * m, -1)
    return torch.matmul(weights, v).view(batch, k.shape[1], groups, m, size).reshape(batch, heads, m, size)


WAYS: dict[str, Callable] = {
    "flash, mask": flash,
    "math, mask": math_kernel,
    "padded causal": padded_causal,
    "matmuls": matmuls,
}


def best_seconds(m: int, n: int, repeats: int) -> tuple[dict[str, float], float]:
    """Best forward + backward seconds per way, and the largest difference of a way's output from flash's."""
    q = torch.randn(1, HEADS, m, HEAD_SIZE, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, KV_HEADS, n, HEAD_SIZE, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, KV_HEADS, n, HEAD_SIZE, dtype=torch.bfloat16, requires_grad=True)
    mask = torch.ones(m, n, dtype=torch.bool).tril(n - m)
    with torch.no_grad():
        reference = flash(q, k, v, mask).float()
        error = max((way(q, k, v, mask).float() - reference).abs().max().item() for way in WAYS.values())

    def one(way: Callable) -> float:
        started = time.perf_counter()
        way(q, k, v, mask).float().square().sum().backward()
        q.grad = k.grad = v.grad = None
        return time.perf_counter() - started

    best = dict.fromkeys(WAYS, float("inf"))
    for way in WAYS.values():
        one(way)  # warm-up
    for _ in range(repeats):
        for name, way in WAYS.items():
            best[name] = min(best[name], one(way))
    return best, error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="run")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    lines = [
        f"== {args.label} ==",
        f"CPU: {cpu_name()}, flags: {timing_flags()}, torch {torch.__version__}, threads {args.threads}, "
        f"load average at start {os.getloadavg()[0]:.1f}",
    ]
    for m, n in SHAPES:
        best, error = best_seconds(m, n, args.repeats)
        base = best["flash, mask"]
        ways = ", ".join(f"{name} {s * 1e3:.1f} ms ({base / s:.2f}x)" for name, s in best.items())
        lines.append(f"m={m} n={n}: {ways}; largest output difference from flash {error:.3g}")
    text = "\n".join(lines)
    print(text)
    write_section(args.label, text, RESULTS, HEADER)


if __name__ == "__main__":
    main()

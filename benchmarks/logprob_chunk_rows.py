"""How many rows the learner's head works on at once: rows of logits (``prefix_tree.LOGPROB_CHUNK_ROWS``)
and, under autocast, rows of its weight gradient per matrix product (``prefix_tree.WEIGHT_GRAD_ROWS``). One
SmolLM2 learner pass (forward and backward of ``token_logprobs`` over a prefix tree shaped like a micro-batch
of the Mastermind baselines row: 4 episodes of 760 tokens sharing a 260-token prompt) per setting.

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.logprob_chunk_rows [--label L] [--rows 128 256 512 1024]
        [--weight-grad-rows 0 1024]

The head's logits, ``rows x vocabulary`` in fp32 (128 x 49,152 = 25 MB), are computed a chunk at a time in
the forward pass and again in the backward pass. Each chunk's gradient goes into the head's fp32 weight
gradient (49,152 x 576 = 113 MB): with ``WEIGHT_GRAD_ROWS`` 0 by an fp32 product per chunk, else from bf16
operands over that many rows at once (the chunks' gradients kept transposed), as autocast's own linear
backward computes it. The settings (every pair of the two lists) take turns (``--repeats`` rounds) so that
load beside the run slows all alike; per setting the median and best pass and the ratio of medians against
the first. Precision: bf16 autocast where the CPU computes it natively (``gem_adapters.runtime.precision``),
as the trainer does. The section named ``--label`` goes into ``benchmarks/results/logprob_chunk_rows.txt``
(replacing an older one of that name).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from benchmarks.train_step_profile import cpu_name, timing_flags, write_section
from gem_adapters.algorithms import prefix_tree
from gem_adapters.runtime.models import load_model
from gem_adapters.runtime.precision import native_bf16

RESULTS = Path(__file__).resolve().parent / "results" / "logprob_chunk_rows.txt"
HEADER = "Rows of logits computed at once by the learner, one SmolLM2 learner pass per size, interleaved.\n\n"
EPISODES, TOKENS, PROMPT = 4, 760, 260


def learner_pass(
    model, ids: torch.Tensor, scored: torch.Tensor, bf16: bool, setting: tuple[int, int]
) -> float:
    """Seconds of one forward + backward of the tree's logprobs with ``setting``: (rows of logits at once,
    rows of the weight gradient per product)."""
    prefix_tree.LOGPROB_CHUNK_ROWS, prefix_tree.WEIGHT_GRAD_ROWS = setting
    started = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = prefix_tree.token_logprobs(model, ids, torch.ones_like(ids), scored, max_tree_tokens=4096)
    out.logprobs.sum().backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="run")
    parser.add_argument("--rows", type=int, nargs="+", default=[prefix_tree.LOGPROB_CHUNK_ROWS])
    parser.add_argument("--weight-grad-rows", type=int, nargs="+", default=[0, prefix_tree.WEIGHT_GRAD_ROWS])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--beside", default="nothing (the CPU lock held)")
    args = parser.parse_args()
    default = prefix_tree.LOGPROB_CHUNK_ROWS, prefix_tree.WEIGHT_GRAD_ROWS
    settings = [(rows, grad_rows) for rows in args.rows for grad_rows in args.weight_grad_rows]
    model = load_model()
    model.train()
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(100, model.config.vocab_size, (PROMPT,), generator=generator)
    ids = torch.stack(
        [
            torch.cat(
                [prompt, torch.randint(100, model.config.vocab_size, (TOKENS - PROMPT,), generator=generator)]
            )
            for _ in range(EPISODES)
        ]
    )
    scored = torch.zeros_like(ids)
    scored[:, PROMPT:] = 1
    bf16 = native_bf16("cpu")
    learner_pass(model, ids, scored, bf16, settings[0])  # warm-up
    seconds: dict[tuple[int, int], list[float]] = {setting: [] for setting in settings}
    for _ in range(args.repeats):
        for setting in settings:
            seconds[setting].append(learner_pass(model, ids, scored, bf16, setting))
    prefix_tree.LOGPROB_CHUNK_ROWS, prefix_tree.WEIGHT_GRAD_ROWS = default
    base = statistics.median(seconds[settings[0]])
    vocab = model.config.vocab_size
    lines = [
        f"== {args.label} ==",
        f"command: PYTHONPATH=$PWD .venv/bin/python -m benchmarks.logprob_chunk_rows --label {args.label!r} "
        f"--rows {' '.join(map(str, args.rows))} --weight-grad-rows {' '.join(map(str, args.weight_grad_rows))} "
        f"--repeats {args.repeats}",
        f"date: {time.strftime('%Y-%m-%d %H:%M')}, CPU: {cpu_name()}, flags: {timing_flags()}, torch threads "
        f"{torch.get_num_threads()}, precision: {'bf16 autocast' if bf16 else 'fp32'}, beside: {args.beside}",
        f"tree: {EPISODES} episodes of {TOKENS} tokens sharing a {PROMPT}-token prompt "
        f"({PROMPT + EPISODES * (TOKENS - PROMPT)} tokens, {EPISODES * (TOKENS - PROMPT)} scored)",
    ]
    for rows, grad_rows in settings:
        median = statistics.median(seconds[rows, grad_rows])
        gradient = (
            "an fp32 product a chunk" if grad_rows == 0 or not bf16 else f"bf16 products of {grad_rows} rows"
        )
        lines.append(
            f"  {rows:5d} rows ({rows * vocab * 4 / 2**20:4.0f} MB of fp32 logits a chunk), weight gradient by "
            f"{gradient}: median {median:.2f} s, best {min(seconds[rows, grad_rows]):.2f} s, "
            f"{base / median:.2f}x the first setting"
        )
    text = "\n".join([*lines, ""])
    print(text)
    write_section(args.label, text, RESULTS, header=HEADER)


if __name__ == "__main__":
    main()

"""How many rows of logits the learner computes at once (``prefix_tree.LOGPROB_CHUNK_ROWS``): one SmolLM2
learner pass (forward and backward of ``token_logprobs`` over a prefix tree shaped like a micro-batch of the
Mastermind baselines row: 4 episodes of 760 tokens sharing a 260-token prompt), at several chunk sizes.

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.logprob_chunk_rows [--label L] [--rows 128 256 512 1024]

The head's logits, ``rows x vocabulary`` in fp32 (128 x 49,152 = 25 MB), are computed a chunk at a time in
the forward pass and again in the backward pass, whose every chunk also adds its product into the head's
fp32 weight gradient (49,152 x 576 = 113 MB): fewer, larger chunks pass over that gradient fewer times.
The sizes take turns (``--repeats`` rounds) so that load beside the run slows all alike; per size the
median and best pass and the ratio of medians against the first size. Precision: bf16 autocast where the
CPU computes it natively (``gem_adapters.runtime.precision``), as the trainer does. The section named
``--label`` goes into ``benchmarks/results/logprob_chunk_rows.txt`` (replacing an older one of that name).
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


def learner_pass(model, ids: torch.Tensor, scored: torch.Tensor, bf16: bool, chunk_rows: int) -> float:
    """Seconds of one forward + backward of the tree's logprobs with ``chunk_rows`` rows of logits at once."""
    prefix_tree.LOGPROB_CHUNK_ROWS = chunk_rows
    started = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = prefix_tree.token_logprobs(model, ids, torch.ones_like(ids), scored, max_tree_tokens=4096)
    out.logprobs.sum().backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="run")
    parser.add_argument("--rows", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--beside", default="nothing (the CPU lock held)")
    args = parser.parse_args()
    default = prefix_tree.LOGPROB_CHUNK_ROWS
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
    learner_pass(model, ids, scored, bf16, args.rows[0])  # warm-up
    seconds: dict[int, list[float]] = {rows: [] for rows in args.rows}
    for _ in range(args.repeats):
        for rows in args.rows:
            seconds[rows].append(learner_pass(model, ids, scored, bf16, rows))
    prefix_tree.LOGPROB_CHUNK_ROWS = default
    base = statistics.median(seconds[args.rows[0]])
    vocab = model.config.vocab_size
    lines = [
        f"== {args.label} ==",
        f"command: PYTHONPATH=$PWD .venv/bin/python -m benchmarks.logprob_chunk_rows --label {args.label!r} "
        f"--rows {' '.join(map(str, args.rows))} --repeats {args.repeats}",
        f"date: {time.strftime('%Y-%m-%d %H:%M')}, CPU: {cpu_name()}, flags: {timing_flags()}, torch threads "
        f"{torch.get_num_threads()}, precision: {'bf16 autocast' if bf16 else 'fp32'}, beside: {args.beside}",
        f"tree: {EPISODES} episodes of {TOKENS} tokens sharing a {PROMPT}-token prompt "
        f"({PROMPT + EPISODES * (TOKENS - PROMPT)} tokens, {EPISODES * (TOKENS - PROMPT)} scored)",
    ]
    for rows in args.rows:
        median = statistics.median(seconds[rows])
        lines.append(
            f"  {rows:5d} rows ({rows * vocab * 4 / 2**20:4.0f} MB of fp32 logits a chunk): median "
            f"{median:.2f} s, best {min(seconds[rows]):.2f} s, {base / median:.2f}x the {args.rows[0]}-row pass"
        )
    text = "\n".join([*lines, ""])
    print(text)
    write_section(args.label, text, RESULTS, header=HEADER)


if __name__ == "__main__":
    main()

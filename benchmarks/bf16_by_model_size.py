"""Does bf16 autocast pay for this model? fp32 against bf16 autocast on one learner pass (forward and
backward of a batch), interleaved in one process, for the learning experiments' small policy (hidden size
128) and SmolLM2-135M (576): the ratio says which precision ``benchmarks/baselines`` trains each in.

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.bf16_by_model_size [--label L] [--threads 2]

Each pass runs ``--repeats`` times per precision, the two precisions taking turns, so load beside it
slows both alike; the best pass of each is kept. The section named ``--label`` goes into
``benchmarks/results/bf16_by_model_size.txt`` (replacing an older one of that name).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from benchmarks.learning.common import PolicySpec, warmed_up_policy
from benchmarks.train_step_profile import cpu_name, timing_flags, write_section
from gem_adapters.runtime.models import load_model

RESULTS = Path(__file__).resolve().parent / "results" / "bf16_by_model_size.txt"
HEADER = (
    "fp32 against bf16 autocast, one learner pass (forward + backward), interleaved in one process "
    "(benchmarks/bf16_by_model_size.py).\n\n"
)
# (name, batch rows, tokens a row): about one micro-batch of each policy's runs
SHAPES = {"small policy": (32, 180), "SmolLM2-135M": (4, 512)}


def learner_pass_seconds(model, rows: int, tokens: int, repeats: int) -> dict[bool, float]:
    """Best seconds of a forward + backward per precision (False: fp32, True: bf16 autocast)."""
    ids = torch.randint(0, model.config.vocab_size, (rows, tokens))

    def one(bf16: bool) -> float:
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - started

    one(False), one(True)  # warm-up
    best = {False: float("inf"), True: float("inf")}
    for _ in range(repeats):
        for bf16 in (False, True):
            best[bf16] = min(best[bf16], one(bf16))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="run")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    small = AutoModelForCausalLM.from_pretrained(warmed_up_policy(PolicySpec(task="guess_range")))
    models = {"small policy": small, "SmolLM2-135M": load_model()}
    lines = [
        f"== {args.label} ==",
        f"CPU: {cpu_name()}, flags: {timing_flags()}, torch threads {args.threads}, "
        f"load average at start {os.getloadavg()[0]:.1f}",
    ]
    for name, model in models.items():
        model.train()
        rows, tokens = SHAPES[name]
        best = learner_pass_seconds(model, rows, tokens, args.repeats)
        lines.append(
            f"{name} (hidden {model.config.hidden_size}, {model.config.num_hidden_layers} layers, vocabulary "
            f"{model.config.vocab_size}), {rows} x {tokens} tokens: fp32 {best[False] * 1e3:.0f} ms, bf16 "
            f"{best[True] * 1e3:.0f} ms, fp32 / bf16 = {best[False] / best[True]:.2f}x"
        )
    text = "\n".join(lines)
    print(text)
    write_section(args.label, text, RESULTS, HEADER)


if __name__ == "__main__":
    main()

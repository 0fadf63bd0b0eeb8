"""The KV engine's fused forward (``policies.decoder_forward``) against the same engine through
transformers' modules (or, with ``--against plain-weights``, against the fused forward with its bf16
weights left in torch's layout instead of oneDNN's blocked one), in one process, taking turns (A, B, A,
B, ...) so that both see the same machine: SmolLM2-135M-Instruct in bf16 autocast where the CPU computes
it (else fp32).

* in the loop: the default ``examples/train_trl.py`` batch (16 GuessTheNumber episodes in GRPO pairs,
  the worked game, 12 new tokens a turn, temperature 1), and 16 Mastermind episodes (the baselines
  row's 2,048-token context, 16 tokens a turn, 4 per task); each round plays the same seeds with a
  fresh policy (the same seeds and sampling streams; under bf16 the arms' logits differ by rounding, so
  a sampled turn may differ and with it the episode's length);
* the decode ceiling of ``generation_engines.py``: B=32 prompts of 256 random ids, greedy.

    .venv/bin/python -m benchmarks.engine_forward_ab --rounds 5
    GEM_PRECISION=fp32 .venv/bin/python -m benchmarks.engine_forward_ab --rounds 5   # what fp32 CPUs run
    .venv/bin/python -m benchmarks.engine_forward_ab --rounds 5 --against plain-weights

Prints per-arm medians and the ratio of each round's pair (fused over the other arm); run it alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from benchmarks.train_step_profile import cpu_name, timing_flags
from gem_adapters.algorithms.warmup import GUESS_THE_NUMBER_WORKED_GAME
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.policies import SamplingParams, TransformersPolicy, decoder_forward
from gem_adapters.runtime import precision
from gem_adapters.runtime.models import load_model, load_tokenizer
from gem_adapters.runtime.rollout import rollout

LOOPS = {
    "GuessTheNumber loop": ("game:GuessTheNumber-v1-easy", 12, 1024, 2),
    "Mastermind loop": ("game:Mastermind-v1-easy", 16, 2048, 4),
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--against", choices=["modules", "plain-weights"], default="modules",
        help="the other arm: transformers' modules, or the fused forward without oneDNN's weight layout",
    )  # fmt: skip
    parser.add_argument(
        "--beside", default="nothing else", help="what else ran on the machine (for the record)"
    )
    args = parser.parse_args()
    bf16 = precision.native_bf16()
    tokenizer, model = load_tokenizer("smollm2"), load_model("smollm2").eval()
    renderer = ChatRenderer(tokenizer, prefix_messages=GUESS_THE_NUMBER_WORKED_GAME)
    prompts = torch.randint(100, 49_000, (32, 256), generator=torch.Generator().manual_seed(0)).tolist()

    def policy(fused: bool) -> TransformersPolicy:
        """``fused`` False: the other arm (``--against``)."""
        p = TransformersPolicy(model, tokenizer, seed=0, cache="kv", bf16=bf16)
        p.rollout_engine().fused_forward = fused or args.against == "plain-weights"
        decoder_forward.PACK_WEIGHTS = fused or args.against == "modules"
        return p

    def loop(name: str, fused: bool, round_: int) -> float:
        env_id, tokens, context, group = LOOPS[name]
        seeds = [1000 + 100 * round_ + k // group for k in range(16)]
        sampling = SamplingParams(max_new_tokens=tokens, temperature=1.0)
        p, started = policy(fused), time.perf_counter()
        episodes = rollout([env_id] * 16, p, renderer if "Guess" in name else ChatRenderer(tokenizer),
                           seeds=seeds, max_new_tokens=tokens, max_context_tokens=context, sampling=sampling)  # fmt: skip
        return sum(e.num_generated_tokens for e in episodes) / (time.perf_counter() - started)

    def decode(fused: bool) -> float:
        p = policy(fused)

        def timed(n: int) -> float:
            started = time.perf_counter()
            p.generate(prompts, SamplingParams(max_new_tokens=n, temperature=0, stop_token_ids=()))
            p.clear_cache()
            return time.perf_counter() - started

        return 32 * 32 / (timed(33) - timed(1))

    results: dict[str, dict[bool, list[float]]] = {}
    decode(True), decode(False)  # warm both arms' code paths
    for r in range(args.rounds):
        for name in LOOPS:
            for fused in (True, False) if r % 2 == 0 else (False, True):
                results.setdefault(name, {}).setdefault(fused, []).append(loop(name, fused, r))
        for fused in (True, False) if r % 2 == 0 else (False, True):
            results.setdefault("decode B=32", {}).setdefault(fused, []).append(decode(fused))
        print(
            f"round {r + 1}: "
            + ", ".join(f"{k} {v[True][-1]:.0f}/{v[False][-1]:.0f}" for k, v in results.items()),
            flush=True,
        )
    forced = (
        f"{precision.PRECISION_VARIABLE}={os.environ[precision.PRECISION_VARIABLE]} "
        if precision.PRECISION_VARIABLE in os.environ
        else ""
    )
    against = "" if args.against == "modules" else f" --against {args.against}"
    print(f"# {forced}.venv/bin/python -m benchmarks.engine_forward_ab --rounds {args.rounds}{against}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, CPU: {cpu_name()}, flags: {timing_flags()}, torch threads {torch.get_num_threads()}, "
          f"{'bf16 autocast' if bf16 else 'fp32'}, beside: {args.beside}")  # fmt: skip
    print(
        f"{'generated tok/s':<22} {'fused (median)':>15} {args.against + ' (median)':>17} {'ratio per round (min-max)':>28}"
    )
    for name, arms in results.items():
        ratios = [a / b for a, b in zip(arms[True], arms[False])]
        print(f"{name:<22} {statistics.median(arms[True]):15.1f} {statistics.median(arms[False]):17.1f} "
              f"{statistics.median(ratios):10.2f} ({min(ratios):.2f}-{max(ratios):.2f})")  # fmt: skip


if __name__ == "__main__":
    main()

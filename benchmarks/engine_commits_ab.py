"""The KV engine of this checkout against the same engine at another commit (``--against REF``), for
changes a runtime switch cannot toggle: each round runs one process per tree, the order alternating (A B,
B A, ...), alone. Each process loads SmolLM2-135M-Instruct in bf16 autocast where the CPU computes it
(else fp32) and measures what ``engine_forward_ab.py`` measures:

* in the loop: 16 Mastermind episodes (the baselines row's 2,048-token context, 16 tokens a turn, 4 per
  task, temperature 1), the same seeds in both trees, generated tokens per second of the rollout;
* the decode ceiling: B=32 prompts of 256 random ids, greedy, 32 x 32 / (t(33 new tokens) - t(1)), best
  of 2.

    .venv/bin/python -m benchmarks.engine_commits_ab --against 3227c7a --rounds 3

The other tree is a ``git worktree`` of REF under the system's temporary directory (removed at the end).
Prints both trees' medians and the ratio of each round's pair (this checkout over REF).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(round_: int) -> dict:
    """Runs in the tree on ``PYTHONPATH``: only APIs both trees have."""
    import torch

    from gem_adapters.episodes.chat_renderer import ChatRenderer
    from gem_adapters.policies import SamplingParams, TransformersPolicy
    from gem_adapters.runtime import precision
    from gem_adapters.runtime.models import load_model, load_tokenizer
    from gem_adapters.runtime.rollout import rollout

    tokenizer, model = load_tokenizer("smollm2"), load_model("smollm2").eval()
    policy = TransformersPolicy(model, tokenizer, seed=0, cache="kv", bf16=precision.native_bf16())
    started = time.perf_counter()
    episodes = rollout(
        ["game:Mastermind-v1-easy"] * 16, policy, ChatRenderer(tokenizer),
        seeds=[1000 + 100 * round_ + k // 4 for k in range(16)], max_new_tokens=16, max_context_tokens=2048,
        sampling=SamplingParams(max_new_tokens=16, temperature=1.0),
    )  # fmt: skip
    loop = sum(e.num_generated_tokens for e in episodes) / (time.perf_counter() - started)
    policy.clear_cache()
    prompts = torch.randint(100, 49_000, (32, 256), generator=torch.Generator().manual_seed(0)).tolist()

    def timed(n: int) -> float:
        begun = time.perf_counter()
        policy.generate(prompts, SamplingParams(max_new_tokens=n, temperature=0, stop_token_ids=()))
        policy.clear_cache()
        return time.perf_counter() - begun

    timed(33)
    decode = max(32 * 32 / (timed(33) - timed(1)) for _ in range(2))
    return {"Mastermind loop": loop, "decode B=32": decode}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", help="the commit (or any git ref) to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # the round, inside a tree
    parser.add_argument(
        "--beside", default="nothing else", help="what else ran on the machine (for the record)"
    )
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.worker)), flush=True)
        return
    if not args.against:
        parser.error("--against REF is required")
    from benchmarks.train_step_profile import cpu_name, timing_flags

    other = Path(tempfile.mkdtemp(prefix="gem-ab-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(other), args.against], cwd=ROOT, check=True,
                   capture_output=True)  # fmt: skip
    trees = {"this checkout": ROOT, args.against: other}
    results: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    try:
        for r in range(args.rounds):
            for name in list(trees) if r % 2 == 0 else list(trees)[::-1]:
                done = subprocess.run(
                    [sys.executable, __file__, "--worker", str(r)], capture_output=True, text=True, check=True,
                    cwd=trees[name], env={**os.environ, "PYTHONPATH": str(trees[name])},
                )  # fmt: skip
                row = json.loads(done.stdout.strip().splitlines()[-1])
                for key, value in row.items():
                    results[name].setdefault(key, []).append(value)
            print(f"round {r + 1}: " + ", ".join(
                f"{key} {results['this checkout'][key][-1]:.0f}/{results[args.against][key][-1]:.0f}"
                for key in results["this checkout"]
            ), flush=True)  # fmt: skip
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, capture_output=True)
    import torch

    print(
        f"# .venv/bin/python -m benchmarks.engine_commits_ab --against {args.against} --rounds {args.rounds}"
    )
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, CPU: {cpu_name()}, flags: {timing_flags()}, torch threads "
          f"{torch.get_num_threads()}, beside: {args.beside}")  # fmt: skip
    print(
        f"{'generated tok/s':<22} {'this (median)':>14} {args.against + ' (median)':>18} {'ratio per round (min-max)':>28}"
    )
    for key, mine in results["this checkout"].items():
        ratios = [a / b for a, b in zip(mine, results[args.against][key])]
        print(f"{key:<22} {statistics.median(mine):14.1f} {statistics.median(results[args.against][key]):18.1f} "
              f"{statistics.median(ratios):10.2f} ({min(ratios):.2f}-{max(ratios):.2f})")  # fmt: skip


if __name__ == "__main__":
    main()

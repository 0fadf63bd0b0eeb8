"""Train an LLM agent on a GEM env with Oat's multi-turn PPO and ReBN advantages.

Oat (oat-llm 0.2.4) runs actors (vLLM engines) and learners (DeepSpeed) as one Launchpad program.
``GEMActor`` plays GEM episodes with its actor's vLLM engine, one ``oat.types.Transition`` per turn;
``GEMLearner`` scores every turn with ReBN (per-turn discounted returns, normalised over all turns
collected by all learners) and trains with Oat's PPO step (see ``gem_adapters/oat/``).

Needs Python 3.10 (oat-llm requires < 3.11) and NVIDIA GPUs (two with the settings below: one for the
actor, one for the learner)::

    python3.10 -m venv .venv-oat && . .venv-oat/bin/activate
    pip install oat-llm==0.2.4          # brings vLLM 0.8.4, DeepSpeed, Launchpad, transformers 4.51.3
    pip install -e . --no-deps          # gem_core + gem_adapters; numpy is their only import-time need
    python examples/train_oat.py --env_id game:GuessTheNumber-v1-easy --gpus 2

Every setting is a field of ``Args`` (``--help`` lists them); ``HfArgumentParser`` turns each into a
flag, Oat's own fields too (``--learning_rate``, ``--gpus``, ``--collocate``, ``--use_wb`` ...; a bool
that defaults to true is switched off with ``--no_<name>``). Oat's dataclasses carry their help in
``field(metadata={"help": ...})``, the form HfArgumentParser reads. This file cannot run on the
project's CPU machines (no GPU, Python 3.11); its pure parts are tested in tests/adapters/oat.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from oat.interface import get_program, lp
from transformers import HfArgumentParser

from gem_adapters.oat.program import GEMActor, GEMArgs, GEMLearner, validate_args


@dataclass
class Args(GEMArgs):
    # the task
    env_id: str = field(default="game:GuessTheNumber-v1-easy", metadata={"help": "A gem_core env id."})
    max_turns: int | None = field(
        default=None, metadata={"help": "Actions per episode (None: the env's own limit)."}
    )
    system_prompt: str | None = None
    num_envs: int = field(default=16, metadata={"help": "Episodes each actor plays at once."})
    # the model and its budgets
    pretrain: str = "Qwen/Qwen2.5-1.5B-Instruct"
    max_model_len: int | None = field(
        default=4096, metadata={"help": "Tokens per episode, prompts and all turns included."}
    )
    generate_max_length: int = field(default=512, metadata={"help": "New tokens per turn."})
    eval_generate_max_length: int = 512
    temperature: float = 1.0
    eval_temperature: float = field(default=0.0, metadata={"help": "0: greedy evaluation."})
    # ReBN advantages
    gamma: float = field(default=0.9, metadata={"help": "Discount of per-turn rewards."})
    rebn_eps: float = 1e-6
    whiten_adv: bool = field(
        default=False, metadata={"help": "Must stay off: ReBN already normalised the advantages."}
    )
    critic_type: Literal["ppo", "grpo", "drgrpo"] = field(
        default="drgrpo",
        metadata={"help": "No critic; drgrpo: Oat's Dr. GRPO loss aggregation (sum / generate_max_length)."},
    )
    beta: float = field(default=0.0, metadata={"help": "No KL penalty, hence no reference model."})
    # batches, counted in turns: each learner keeps rollout_batch_size_per_device turns per step
    rollout_batch_size: int = 128
    rollout_batch_size_per_device: int = 128
    pi_buffer_maxlen_per_device: int = 128
    train_batch_size: int = field(
        default=128, metadata={"help": "One optimiser step per 128 turns (gradient accumulation)."}
    )
    train_batch_size_per_device: int = field(
        default=1, metadata={"help": "Oat's multi-turn learner requires 1."}
    )
    max_train: int = field(default=100_000, metadata={"help": "Training turns in the whole run."})
    # optimisation
    learning_rate: float = 1e-6
    lr_scheduler: Literal["cosine_with_min_lr", "polynomial", "constant"] = "constant"
    num_ppo_epochs: int = 1
    # resources: one actor GPU and one learner GPU
    gpus: int = 2
    collocate: bool = False
    vllm_gpu_ratio: float = 0.7
    zero_stage: int = 2
    gradient_checkpointing: bool = True
    # evaluation and logging
    eval_steps: int = 16
    eval_episodes: int = 32
    save_path: str = "./oat-output"
    wb_run_name: str = "gem-oat-rebn"


def main() -> None:
    (args,) = HfArgumentParser(Args, description=__doc__.split("\n\n")[0]).parse_args_into_dataclasses()
    args = validate_args(args)
    program, local_resources = get_program(args, learner_cls=GEMLearner, actor_cls=GEMActor)
    lp.launch(
        program, launch_type=args.launch_type, local_resources=local_resources, terminal="current_terminal"
    )


if __name__ == "__main__":
    main()

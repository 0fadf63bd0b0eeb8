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

Every setting is a field of ``Args``; tyro turns each into a flag (Oat's own fields too:
``--learning_rate``, ``--gpus``, ``--collocate``, ``--use_wb`` ...). This file cannot run on the
project's CPU machines (no GPU, Python 3.11); its pure parts are tested in tests/adapters/oat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from oat.args import get_default_args
from oat.interface import get_program, lp

from gem_adapters.oat.program import GEMActor, GEMArgs, GEMLearner, validate_args


@dataclass
class Args(GEMArgs):
    # The task.
    env_id: str = "game:GuessTheNumber-v1-easy"
    max_turns: int | None = None  # actions per episode; None: the env's own limit
    system_prompt: str | None = None
    num_envs: int = 16  # episodes each actor plays at once
    # The model and its budgets.
    pretrain: str = "Qwen/Qwen2.5-1.5B-Instruct"
    max_model_len: int | None = 4096  # tokens per episode, prompts and all turns included
    generate_max_length: int = 512  # new tokens per turn
    eval_generate_max_length: int = 512
    temperature: float = 1.0
    eval_temperature: float = 0.0  # greedy evaluation
    # ReBN advantages.
    gamma: float = 0.9
    rebn_eps: float = 1e-6
    whiten_adv: bool = False  # must stay off: ReBN already normalised the advantages
    critic_type: Literal["ppo", "grpo", "drgrpo"] = (
        "drgrpo"  # no critic; Oat's Dr. GRPO loss aggregation (sum / generate_max_length)
    )
    beta: float = 0.0  # no KL penalty, hence no reference model
    # Batches, counted in turns: each learner keeps rollout_batch_size_per_device turns per step.
    rollout_batch_size: int = 128
    rollout_batch_size_per_device: int = 128
    pi_buffer_maxlen_per_device: int = 128
    train_batch_size: int = 128  # one optimiser step per 128 turns (gradient accumulation)
    train_batch_size_per_device: int = 1  # Oat's multi-turn learner requires 1
    max_train: int = 100_000  # training turns in the whole run
    # Optimisation.
    learning_rate: float = 1e-6
    lr_scheduler: Literal["cosine_with_min_lr", "polynomial", "constant"] = "constant"
    num_ppo_epochs: int = 1
    # Resources: one actor GPU and one learner GPU.
    gpus: int = 2
    collocate: bool = False
    vllm_gpu_ratio: float = 0.7
    zero_stage: int = 2
    gradient_checkpointing: bool = True
    # Evaluation and logging.
    eval_steps: int = 16
    eval_episodes: int = 32
    save_path: str = "./oat-output"
    wb_run_name: str = "gem-oat-rebn"


def main() -> None:
    args = validate_args(get_default_args(Args))
    program, local_resources = get_program(args, learner_cls=GEMLearner, actor_cls=GEMActor)
    lp.launch(
        program, launch_type=args.launch_type, local_resources=local_resources, terminal="current_terminal"
    )


if __name__ == "__main__":
    main()

r"""Train an LLM agent on a GEM env with Oat's multi-turn PPO and ReBN advantages.

Oat (oat-llm 0.2.4) runs actors (vLLM engines) and learners (DeepSpeed) as one Launchpad program.
``GEMActor`` plays GEM episodes with its actor's vLLM engine, one ``oat.types.Transition`` per turn;
``GEMLearner`` scores every turn with ReBN (per-turn discounted returns, normalised over all turns
collected by all learners) and trains with Oat's PPO step (see ``gem_adapters/oat/``).

Needs Python 3.10 (oat-llm requires < 3.11) and NVIDIA GPUs (two here: one actor, one learner)::

    python3.10 -m venv .venv-oat && . .venv-oat/bin/activate
    pip install oat-llm==0.2.4          # brings vLLM 0.8.4, DeepSpeed, Launchpad, tyro, transformers 4.51.3
    pip install -e . --no-deps          # gem_core + gem_adapters; numpy is their only import-time need
    python examples/train_oat.py --env-id game:GuessTheNumber-v1-easy --gpus 2 --vllm-gpu-ratio 0.7 \
        --max-model-len 4096 --beta 0 --learning-rate 1e-6 --lr-scheduler constant --gradient-checkpointing \
        --rollout-batch-size-per-device 128 --pi-buffer-maxlen-per-device 128 --max-train 100000 \
        --eval-steps 16 --wb-run-name gem-oat-rebn

The command line is Oat's own: ``GEMArgs`` (``gem_adapters/oat/program.py``) is Oat's ``PPOArgs`` plus
GEM's fields (``--env-id``, ``--num-envs``, ``--max-turns``, ``--system-prompt``,
``--advantage-estimator``, ``--rebn-eps``, ``--eval-episodes``, ``--eval-seed``, ``--dump-episodes``) and
the few Oat defaults GEM changes (``--algo PPO``, ``--pretrain``, ``--gamma``, ``--num-samples``,
``--oracle``, ``--prompt-data``, each with its reason there). It is parsed as Oat's scripts
(``oat/experiment/run_ppo.py``) parse theirs: ``oat.args.get_default_args`` (tyro), then Oat's
``default_args_validation``, then GEM's ``validate_args``. tyro spells each field with dashes
(``--learning-rate``; ``--learning_rate`` is accepted too), a bool as ``--name`` / ``--no-name``, an
optional value as ``None`` (``--max-turns None``); ``--help`` lists every flag with its help and default.
Everything else in the command above is an Oat setting at a value other than Oat's default.

This file cannot run on the project's CPU machines (no GPU, Python 3.11); its parsing is tested in
tests/adapters/oat/test_train_oat_example.py, with stand-ins for Oat's GPU-only imports.
"""

from __future__ import annotations

from oat.args import default_args_validation, get_default_args
from oat.interface import get_program, lp

from gem_adapters.oat.program import GEMActor, GEMArgs, GEMLearner, validate_args


def parse_args() -> GEMArgs:
    """The command line (``sys.argv``), parsed and validated as Oat's own scripts do, then checked by GEM."""
    args = get_default_args(GEMArgs)
    args = default_args_validation(args)
    return validate_args(args)


def main() -> None:
    args = parse_args()
    program, local_resources = get_program(args, learner_cls=GEMLearner, actor_cls=GEMActor)
    lp.launch(
        program, launch_type=args.launch_type, local_resources=local_resources, terminal="current_terminal"
    )


if __name__ == "__main__":
    main()

"""GEMGRPOConfig: TRL's ``GRPOConfig`` plus what it takes to play GEM episodes inside the trainer.

The fields added here describe the episodes (turn limits, prompt) and the advantage estimator; every
other field is TRL's and means what TRL says, with four points to know:

* one TRL sample is one whole episode, so ``per_device_train_batch_size`` and
  ``generation_batch_size`` count episodes and ``num_generations`` is the number of episodes that
  share an initial state (a GRPO group: same env id and seed);
* ``max_completion_length`` is not the per-turn budget (that is ``max_turn_tokens``); TRL still uses
  it as the length normaliser of ``loss_type="dr_grpo"``;
* ``bf16`` left unset means bf16 autocast (fp32 master weights and optimizer state) where the device
  computes bf16 natively: a GPU that supports it, or a CPU with AVX-512-BF16 or AMX
  (``gem_adapters.runtime.precision``); fp32 elsewhere. Generation then runs under the same autocast, so the
  rollout's logprobs are the learner's numerics. ``bf16=False`` (``--bf16 false``) forces fp32;
* ``gradient_checkpointing`` defaults to False (TRL's to True): the learner computes each distinct
  prefix of a micro-batch once (``share_prefixes``), which needs no recomputation to fit in memory and
  does not run under it (the trainer then warns and uses TRL's padded forward).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig, TrlParser


@dataclass
class GEMGRPOConfig(GRPOConfig):
    advantage_estimator: str = field(
        default="rebn",
        metadata={
            "help": "A name from gem_adapters.algorithms.advantages.ESTIMATORS: 'rebn' (return batch normalisation, per turn), "
            "'grpo', 'dr_grpo', 'rloo' (per episode, over its group), 'reinforce'."
        },
    )
    gamma: float = field(default=0.9, metadata={"help": "Discount of per-turn rewards within an episode."})
    advantage_eps: float = field(
        default=1e-6, metadata={"help": "Added to the std when advantages are normalised."}
    )
    max_turns: int | None = field(
        default=None, metadata={"help": "Actions per episode (None: the env's own limit)."}
    )
    max_turn_tokens: int = field(default=24, metadata={"help": "New tokens per turn."})
    max_context_tokens: int | None = field(
        default=2048, metadata={"help": "Tokens per episode, prompt included; an episode that fills it ends."}
    )
    system_prompt: str | None = field(
        default=None, metadata={"help": "System message before each episode's first observation."}
    )
    gradient_checkpointing: bool = field(
        default=False,
        metadata={
            "help": "Recompute activations in the backward pass (TRL's default is True). Off here: the learner's "
            "prefix tree keeps only the batch's distinct tokens' activations, and runs only without it."
        },
    )
    share_prefixes: bool = field(
        default=True,
        metadata={
            "help": "Compute each distinct prefix of a micro-batch's episodes once in the learner's forward "
            "(gem_adapters.algorithms.prefix_tree; TRL's padded forward where the model does not allow it)."
        },
    )

    max_tree_tokens: int | None = field(
        default=4096,
        metadata={
            "help": "The most tokens one prefix-tree forward keeps activations for: a micro-batch whose tree is "
            "larger is split into groups recomputed in the backward pass (memory bounded; None: one tree)."
        },
    )

    compile_learner: bool = field(
        default=False,
        metadata={
            "help": "Run the decoder layers of the learner's prefix-tree forward through torch.compile "
            "(attention stays eager; generation is untouched): fused elementwise work, 0.96x the learner's "
            "time on a long Mastermind step on a CPU for ~17 s of compilation at the first step "
            "(benchmarks/results/long_step_profile.txt)."
        },
    )

    def __post_init__(self) -> None:
        import torch

        if self.bf16 is None and not self.fp16:
            from gem_adapters.runtime.precision import native_bf16

            on_gpu = not self.use_cpu and torch.cuda.is_available()
            self.bf16 = native_bf16("cuda" if on_gpu else "cpu")
        # transformers allows bf16 without an accelerator only when told that the CPU trains (`--bf16 true` too)
        self.use_cpu = self.use_cpu or bool(self.bf16 and not torch.accelerator.is_available())
        super().__post_init__()
        if self.max_turn_tokens < 1:
            raise ValueError("max_turn_tokens must be at least 1")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if self.max_tree_tokens is not None and self.max_tree_tokens < 1:
            raise ValueError("max_tree_tokens must be at least 1 (or None)")
        if self.compile_learner:
            from gem_adapters.algorithms.prefix_tree import why_not_compile

            why = why_not_compile("cpu" if self.use_cpu or not torch.cuda.is_available() else "cuda")
            if why is not None:
                raise ValueError(f"compile_learner: {why}")
        from gem_adapters.algorithms.advantages import require_estimator

        trainer = (
            "GEMPPOTrainer"
            if self.trains_critic
            else "GEMGRPOTrainer (a critic: GEMPPOConfig, GEMPPOTrainer)"
        )
        estimator = require_estimator(
            self.advantage_estimator, values=self.trains_critic, state_keys=True, strata=True, trainer=trainer
        )
        if self.trains_critic and not estimator.needs_values:
            raise ValueError(
                "GEMPPOTrainer's advantages come from its critic's values: advantage_estimator must be a "
                f"registered estimator with needs_values=True, one of {value_estimator_names()}, not {estimator.name!r}"
            )

    trains_critic = False  # a class attribute, not a field: GEMPPOConfig says True


def value_estimator_names() -> list[str]:
    """The registered estimators that read a critic's values (``needs_values``): what ``GEMPPOConfig``
    accepts (``"gae"`` and any a plugin registers)."""
    from gem_adapters.algorithms.advantages import estimator_names, get_estimator

    return [name for name in estimator_names(values=True) if get_estimator(name).needs_values]


@dataclass
class GEMPPOConfig(GEMGRPOConfig):
    """``GEMGRPOConfig`` for ``GEMPPOTrainer``: advantages from a critic trained beside the policy, by a
    value estimator (``needs_values``; turn-level GAE by default)."""

    trains_critic = True
    advantage_estimator: str = field(
        default="gae",
        metadata={
            "help": "A registered estimator that reads the critic's values (needs_values=True): 'gae' "
            "(turn-level GAE), or one another package registers (value_estimator_names())."
        },
    )
    lam: float = field(default=1.0, metadata={"help": "GAE lambda over turns."})
    critic_learning_rate: float = field(default=1e-3, metadata={"help": "Adam step size of the critic."})
    critic_epochs: int = field(default=4, metadata={"help": "Critic passes over each generation batch."})
    critic_micro_batch_size: int = field(
        default=16,
        metadata={
            "help": "Episodes per critic forward/backward pass (grouped by length; gradients accumulate)."
        },
    )
    whiten_advantages: bool = field(
        default=True, metadata={"help": "Normalise the GAE advantages over the batch's turns (as PPO does)."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.critic_epochs < 1 or self.critic_micro_batch_size < 1:
            raise ValueError("critic_epochs and critic_micro_batch_size must be at least 1")


def parse_command_line(
    dataclass_types: Sequence[type], argv: Sequence[str], defaults: Mapping[str, Any]
) -> tuple[Any, ...]:
    """``TrlParser(dataclass_types)`` over ``argv``, an example's ``defaults`` under the user's flags and a
    ``--config`` file's values: one instance per type. ``--help_all`` lists every field (``--help`` is an
    example's light first pass, ``gem_adapters.runtime.command_line``); a config its class refuses is a
    usage error (exit status 2), not a traceback."""
    parser = TrlParser(tuple(dataclass_types))
    parser.set_defaults(**defaults)
    argv = ["--help" if arg == "--help_all" else arg for arg in argv]
    try:
        return parser.parse_args_and_config(argv)
    except ValueError as exc:
        parser.error(str(exc))

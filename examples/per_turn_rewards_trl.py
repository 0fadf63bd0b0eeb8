"""Per-turn rewards from a scorer that is not a GEM env, trained with TRL's GRPOTrainer (GEMGRPOTrainer).

The scorer (here a plain function; in practice a verifier, a rubric, an LLM judge, an OpenEnv server's
per-step scores) reads a played episode and answers one ``float | None`` per assistant turn: the
``turn_rewards`` contract of ``docs/per-turn-rewards.md``. ``None`` is a turn it has nothing to say
about: no reward there, and the turn still gets credit, through its return, for the rewards that
follow it. The rollout function plays the episodes exactly as GEMGRPOTrainer's own does, then puts
the scorer's turn rewards on them (``rescore``); the trainer's estimator turns them into per-turn
advantages on each turn's tokens.

    python examples/per_turn_rewards_trl.py --model smollm2 --max_steps 10
    python examples/per_turn_rewards_trl.py --model tiny --max_steps 1     # a random tiny model: seconds

The command line is TRL's (``TrlParser``): ``Args`` below (the model, the env) and every field of
``GEMGRPOConfig``, with ``DEFAULTS`` as this example's defaults (``--max_steps``, episodes per step
``--per_device_train_batch_size``, ``--num_generations``, ``--advantage_estimator``, ``--max_turn_tokens``,
``--output_dir`` ...); ``--help`` lists them at once, ``--help_all`` every field (it loads TRL and torch).

The scorer below judges GuessTheNumber moves from what the episode shows: a guess that could still be
the number given the hints so far earns 0.1, the winning turn 1.0, and every other turn (an illegal
or uninformative guess) gets None.
"""

from __future__ import annotations

# The light imports first, enough for --help and a bad setting of this script; torch and TRL after them.
import os
import sys
from dataclasses import dataclass, field

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is flagged experimental in TRL 1.16
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode, rescore
from gem_adapters.runtime.command_line import light_parser, parse_light


@dataclass
class Args:
    model: str = field(
        default="smollm2", metadata={"help": "smollm2, tiny (random), or a local model folder"}
    )
    env_id: str = "game:GuessTheNumber-v1-easy"


# This example's settings of GEMGRPOConfig fields (the command line overrides any of them).
DEFAULTS = dict(
    output_dir="outputs/per_turn_rewards_trl",
    advantage_estimator="rebn",  # any estimator of gem_adapters.algorithms.advantages
    gamma=0.9,
    max_turn_tokens=24,
    max_steps=10,
    per_device_train_batch_size=8,  # episodes per step
    num_generations=4,
    learning_rate=1e-5,
    use_cpu=True,
    report_to="none",
    save_strategy="no",
    logging_steps=1,
    disable_tqdm=True,
)


def check_command_line(argv: list[str]) -> None:
    """``--help`` and a bad value of ``Args``' or ``DEFAULTS``' flags, before torch and TRL load."""
    description = __doc__.split("\n\n")[0]
    parser = light_parser(
        Args, DEFAULTS, prog="per_turn_rewards_trl.py", description=description, config_name="GEMGRPOConfig"
    )
    parse_light(parser, argv)


if __name__ == "__main__":
    check_command_line(sys.argv[1:])

from gem_adapters.runtime.models import load_model, load_tokenizer, tiny_causal_lm  # noqa: E402  (see the imports' comment above)
from gem_adapters.trl import (  # noqa: E402
    GEMGRPOConfig,
    GEMGRPOTrainer,
    make_rollout_func,
    parse_command_line,
    tasks_dataset,
)


def parse_args(argv: list[str] | None = None) -> tuple[Args, GEMGRPOConfig]:
    """``(Args, GEMGRPOConfig)`` from the command line, by TRL's parser."""
    argv = sys.argv[1:] if argv is None else argv
    check_command_line(argv)
    return parse_command_line((Args, GEMGRPOConfig), argv, DEFAULTS)


def judge(episode: Episode) -> list[float | None]:
    """The scorer: one ``float | None`` per assistant turn of ``episode``."""
    scores: list[float | None] = []
    for turn in episode.turns:
        if turn.info.get("success"):
            scores.append(1.0)
        elif turn.info.get("consistent_with_hints"):
            scores.append(0.1)
        else:
            scores.append(None)
    return scores


def judged_rollout_func(renderer: ChatRenderer, **limits):
    """GEMGRPOTrainer's rollout function, with ``judge``'s turn rewards in place of the env's."""
    play = make_rollout_func(renderer, **limits)

    def rollout_func(prompts, trainer):
        output = play(prompts, trainer)
        output["episode"] = rescore(output["episode"], judge)
        return output

    return rollout_func


def main(args: Args, config: GEMGRPOConfig) -> GEMGRPOTrainer:
    tokenizer = load_tokenizer("smollm2" if args.model == "tiny" else args.model)
    model = tiny_causal_lm(tokenizer, seed=0) if args.model == "tiny" else load_model(args.model)
    renderer = ChatRenderer(tokenizer)
    num_tasks = config.max_steps * config.generation_batch_size // config.num_generations
    trainer = GEMGRPOTrainer(
        model,
        config,
        tasks_dataset(args.env_id, num_tasks),
        processing_class=tokenizer,
        renderer=renderer,
        rollout_func=judged_rollout_func(renderer, max_turn_tokens=config.max_turn_tokens),
    )
    trainer.train()
    return trainer


if __name__ == "__main__":
    main(*parse_args())

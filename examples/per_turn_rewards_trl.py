"""Per-turn rewards from a scorer that is not a GEM env, trained with TRL's GRPOTrainer (GEMGRPOTrainer).

The scorer (here a plain function; in practice a verifier, a rubric, an LLM judge, an OpenEnv server's
per-step scores) reads a played episode and answers one ``float | None`` per assistant turn: the
``turn_rewards`` contract of ``docs/per-turn-rewards.md``. ``None`` is a turn it has nothing to say
about: no reward there, and the turn still gets credit, through its return, for the rewards that
follow it. The rollout function plays the episodes exactly as GEMGRPOTrainer's own does, then puts
the scorer's turn rewards on them (``rescore``); the trainer's estimator turns them into per-turn
advantages on each turn's tokens.

    python examples/per_turn_rewards_trl.py --model smollm2 --steps 10
    python examples/per_turn_rewards_trl.py --model tiny --steps 1     # a random tiny model: seconds

The scorer below judges GuessTheNumber moves from what the episode shows: a guess that could still be
the number given the hints so far earns 0.1, the winning turn 1.0, and every other turn (an illegal
or uninformative guess) gets None.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is flagged experimental in TRL 1.16
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from transformers import HfArgumentParser

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode, rescore
from gem_adapters.runtime.models import load_model, load_tokenizer, tiny_causal_lm
from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer, make_rollout_func, tasks_dataset


@dataclass
class Args:
    model: str = field(
        default="smollm2", metadata={"help": "smollm2, tiny (random), or a local model folder"}
    )
    env_id: str = "game:GuessTheNumber-v1-easy"
    advantage_estimator: str = field(
        default="rebn", metadata={"help": "any estimator of gem_adapters.algorithms.advantages"}
    )
    steps: int = 10
    episodes_per_step: int = 8
    num_generations: int = 4
    max_turn_tokens: int = 24
    output_dir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="gem-per-turn-trl-"))


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


def main(args: Args) -> GEMGRPOTrainer:
    tokenizer = load_tokenizer("smollm2" if args.model == "tiny" else args.model)
    model = tiny_causal_lm(tokenizer, seed=0) if args.model == "tiny" else load_model(args.model)
    renderer = ChatRenderer(tokenizer)
    config = GEMGRPOConfig(
        output_dir=args.output_dir,
        advantage_estimator=args.advantage_estimator,
        gamma=0.9,
        max_turn_tokens=args.max_turn_tokens,
        per_device_train_batch_size=args.episodes_per_step,
        num_generations=args.num_generations,
        max_steps=args.steps,
        learning_rate=1e-5,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = GEMGRPOTrainer(
        model,
        config,
        tasks_dataset(args.env_id, args.steps * args.episodes_per_step),
        processing_class=tokenizer,
        renderer=renderer,
        rollout_func=judged_rollout_func(renderer, max_turn_tokens=args.max_turn_tokens),
    )
    trainer.train()
    return trainer


if __name__ == "__main__":
    main(HfArgumentParser(Args).parse_args_into_dataclasses()[0])

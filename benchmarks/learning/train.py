"""One training run of the learning experiments through the TRL adapter (``GEMGRPOTrainer``).

    python -m benchmarks.learning.train --task guess --estimator rebn --gamma 0.9 --seed 0 --out run.csv

Every step plays ``episodes_per_step`` episodes (``num_generations`` per task seed) with the current
policy at temperature 1 and takes one optimizer step; the CSV gets one row per step with the
batch's success rate, return, turns per episode, turns of the solved episodes and invalid-move rate.
``--estimator gae`` trains a turn-level critic beside the policy (``GEMPPOTrainer``);
``--estimator shuffled_rebn`` is the no-signal control: ReBN's advantages permuted over the batch's
turns (same magnitudes, unrelated to what each turn did). ``--beta`` adds TRL's KL penalty to the
warmed-up policy.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

from benchmarks.learning.common import LEARNING_ENVS, TASKS, PolicySpec, warmed_up_policy
from gem_adapters.algorithms.advantages import ESTIMATORS, TurnBatch, rebn, register_estimator
from gem_adapters.runtime.run_log import RunLog
from gem_core.parsing import extract_boxed

_shuffle = np.random.default_rng(0)  # reseeded with the run's seed by build_trainer()


def shuffled_rebn(batch: TurnBatch, **kwargs: Any) -> np.ndarray:
    return _shuffle.permutation(rebn(batch, **kwargs))


def register_shuffled_rebn() -> None:
    """Register the control under ``shuffled_rebn`` when a run asks for it, not on import: it is this
    script's, and the library's registry of a process that merely imports the script stays the library's."""
    if "shuffled_rebn" not in ESTIMATORS:
        register_estimator("shuffled_rebn")(shuffled_rebn)


@dataclass
class RunConfig:
    task: str = field(default="guess", metadata={"help": "guess | hangman | sum (see common.py)"})
    estimator: str = field(
        default="rebn", metadata={"help": "rebn | grpo | reinforce | rloo | gae (PPO critic)"}
    )
    policy: str | None = field(
        default=None, metadata={"help": "Start from the warmed-up policy of this task (default: --task's)."}
    )
    policy_seed: int = field(
        default=0,
        metadata={"help": "Build seed of the warmed-up policy (its SFT games, tokenizer and init)."},
    )
    gamma: float = 0.9
    lam: float = field(default=1.0, metadata={"help": "GAE lambda (gae only)."})
    seed: int = 0
    steps: int = 100
    episodes_per_step: int = 32
    num_generations: int = 8
    learning_rate: float = 5e-4
    beta: float = field(default=0.0, metadata={"help": "Per-token KL penalty to the warmed-up policy."})
    warmup_steps: int = field(default=5, metadata={"help": "Linear learning-rate warm-up."})
    lr_schedule: Literal["constant", "cosine"] = field(
        default="constant",
        metadata={"help": "After the warm-up: constant, or cosine down to 0 at the last step."},
    )
    critic_learning_rate: float = 1e-3
    critic_epochs: int = field(default=4, metadata={"help": "Critic passes over each batch (gae only)."})
    temperature: float = 1.0
    bf16: bool = field(
        default=False,
        metadata={
            "help": "bf16 autocast (GEMGRPOConfig's default where the CPU computes bf16 natively); the "
            "experiments compare in fp32 unless an arm asks for it"
        },
    )
    out: str = "run.csv"

    def policy_spec(self) -> PolicySpec:
        return PolicySpec(self.policy or self.task, seed=self.policy_seed)


# Run seed k trains on task seeds from k * TASK_SEEDS_PER_RUN on, whatever the run's length.
TASK_SEEDS_PER_RUN = 1_000_000
MAX_CONTEXT_TOKENS = 1024


def check_verl_run(run: RunConfig) -> None:
    """Refuse what the verl runs (``verl_cpu.py``, ``verl_main_ppo.py``) would otherwise silently ignore."""
    if run.estimator == "gae":
        raise SystemExit("gae needs a critic; the gem_* verl estimators are the critic-free ones")
    if run.beta:
        raise SystemExit("--beta: the verl runs have no KL term (actor.use_kl_loss is off)")


# lr: the rate after the step's scheduler step (what the next step uses), as verl logs it
COLUMNS = [
    "step", "wall_s", "success_rate", "return", "turns", "turns_to_solve", "invalid_rate",
    "first_guess_distance", "first_guess_midpoint", "loss", "entropy", "kl", "critic_loss", "lr",
]  # fmt: skip


def batch_metrics(episodes) -> dict[str, float]:
    turns = [t for e in episodes for t in e.turns]
    solved = [e.num_turns for e in episodes if e.success]
    return {
        "success_rate": sum(e.success for e in episodes) / len(episodes),
        "return": statistics.mean(e.total_reward for e in episodes),
        "turns": len(turns) / len(episodes),
        "turns_to_solve": statistics.mean(solved) if solved else float("nan"),
        **first_guess_metrics(episodes),
        "invalid_rate": sum(bool(t.info.get("invalid_move") or t.info.get("format_error")) for t in turns)
        / max(len(turns), 1),
    }


def run_log(run: RunConfig) -> RunLog:
    """The run's CSV at ``run.out``: ``COLUMNS``, one row per step, flushed as it goes, floats to 6
    significant digits."""
    path = Path(run.out)
    return RunLog(path.parent, COLUMNS, filename=path.name, significant=6)


def summarize(log: RunLog, name: str) -> None:
    """The closing lines: the run's name, then success and turns at its first and last step."""
    print(name, flush=True)
    log.summarize({"success_rate": ".3f", "turns": ".3f"})


def first_guess_metrics(episodes) -> dict[str, float]:
    """GuessTheNumber: the first guesses' mean distance from the middle of the range, and the fraction
    that are a midpoint (a binary search's first guess; two midpoints when the range has an even size).
    On 1-10 a uniformly random first guess is 2.5 from the middle, a midpoint 1 time in 5. NaN for
    other envs."""
    firsts = []
    for e in episodes:
        _, _, kwargs = LEARNING_ENVS.get(e.env_id, (None, None, {}))
        guess = extract_boxed(e.turns[0].action) if "min_number" in kwargs else None
        if guess is not None and guess.strip().isdecimal():  # isdigit() also takes "²", which int() refuses
            firsts.append(abs(int(guess) - (kwargs["min_number"] + kwargs["max_number"]) / 2))
    if not firsts:
        return {"first_guess_distance": float("nan"), "first_guess_midpoint": float("nan")}
    return {
        "first_guess_distance": statistics.mean(firsts),
        "first_guess_midpoint": sum(d <= 0.5 for d in firsts) / len(firsts),
    }


def build_trainer(run: RunConfig, policy: PolicySpec | None = None):
    """The run's trainer on its warmed-up policy (``policy`` overrides ``run.policy_spec()``)."""
    global _shuffle
    from transformers import set_seed

    from gem_adapters.runtime.models import load_model, load_tokenizer
    from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer, GEMPPOConfig, GEMPPOTrainer, tasks_dataset

    set_seed(run.seed)
    _shuffle = np.random.default_rng(run.seed)
    if run.estimator == "shuffled_rebn":
        register_shuffled_rebn()
    task = TASKS[run.task]
    folder = warmed_up_policy(policy or run.policy_spec())
    model, tokenizer = load_model(str(folder)), load_tokenizer(str(folder))
    ppo = run.estimator == "gae"
    config_class, trainer_class = (GEMPPOConfig, GEMPPOTrainer) if ppo else (GEMGRPOConfig, GEMGRPOTrainer)
    extra = (
        {"lam": run.lam, "critic_learning_rate": run.critic_learning_rate, "critic_epochs": run.critic_epochs}
        if ppo
        else {}
    )
    config = config_class(
        output_dir=tempfile.mkdtemp(prefix="gem-learning-"),  # nothing is saved there
        advantage_estimator=run.estimator,
        gamma=run.gamma,
        max_turn_tokens=task.max_turn_tokens,
        max_context_tokens=MAX_CONTEXT_TOKENS,
        learning_rate=run.learning_rate,
        lr_scheduler_type={"constant": "constant_with_warmup", "cosine": "cosine"}[run.lr_schedule],
        warmup_steps=run.warmup_steps,
        max_steps=run.steps,
        per_device_train_batch_size=run.episodes_per_step,
        num_generations=run.num_generations,
        temperature=run.temperature,
        beta=run.beta,
        use_cpu=True,
        bf16=run.bf16,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=run.seed,
        **extra,
    )
    num_tasks = run.steps * run.episodes_per_step // run.num_generations
    return trainer_class(
        model=model,
        args=config,
        train_dataset=tasks_dataset(task.env_id, num_tasks, first_seed=run.seed * TASK_SEEDS_PER_RUN),
        processing_class=tokenizer,
    )


def main(run: RunConfig, policy: PolicySpec | None = None) -> list[dict]:
    """Train; ``policy`` overrides the warmed-up policy's spec (see ``build_trainer``)."""
    from transformers import TrainerCallback

    trainer = build_trainer(run, policy)
    with run_log(run) as log:

        class Record(TrainerCallback):
            def on_log(self, _args, state, _control, logs=None, **__):
                if logs and "env/return" in logs:
                    log.record(
                        {
                            "step": state.global_step,
                            **batch_metrics(trainer.last_episodes),
                            "loss": logs.get("loss", float("nan")),
                            "entropy": logs.get("entropy", float("nan")),
                            "kl": logs.get("kl", float("nan")),
                            "critic_loss": logs.get("critic/loss", float("nan")),
                            "lr": trainer.lr_scheduler.get_last_lr()[0],
                        }
                    )

        trainer.add_callback(Record())
        trainer.train()
        summarize(log, f"{run.task} {run.estimator} gamma={run.gamma} seed={run.seed}")
    return log.rows


def parse_run(config_class: type = RunConfig, **settings: Any):
    """The run's config from the command line, saved beside its CSV (``.json``) with ``settings``."""
    from transformers import HfArgumentParser

    (cli,) = HfArgumentParser(config_class).parse_args_into_dataclasses()
    Path(cli.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cli.out).with_suffix(".json").write_text(json.dumps({**asdict(cli), **settings}, indent=1))
    return cli


if __name__ == "__main__":
    main(parse_run())

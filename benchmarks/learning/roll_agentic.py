"""The learning experiment through ROLL's own agentic pipeline (``AgenticPipeline``) on CPU.

    ROLL_SRC=/path/to/ROLL .venv-roll/bin/python -m benchmarks.learning.roll_agentic --task guess_range --estimator rebn --seed 0 --steps 40 --episodes_per_step 128 --prompt history --out benchmarks/results/learning/adapters/roll_agentic-rebn-episodes_per_step128-prompthistory-steps40-seed0.csv

(in ROLL's environment, ``scripts/roll_cpu_attempt.sh`` says how to make it; ROLL, a checkout of
github.com/alibaba/ROLL that is never committed here, at ``ROLL_SRC``.) Launched as a user runs ROLL on a
machine without a GPU: ``python -m gem_adapters.roll.cpu`` on a config written from
``benchmarks/roll_cpu/agentic_gem_cpu.yaml`` with this run's settings: ``fsdp2_train`` (fp32) on one Ray
logical GPU, ``hf_infer`` generation on another, trained weights to ``hf_infer`` over gloo each step.

``train.py``'s run as far as ROLL's pipeline can express it: the same warmed-up policy and env,
``episodes_per_step`` episodes a step in groups of ``num_generations`` sharing a seed, temperature 1,
``--max_turn_tokens`` of the task per turn, learning rate with ``warmup_steps`` of warm-up then constant or
cosine, no weight decay, clip 1.0, token-mean PPO-clip loss, no KL term. What ROLL does its own way:

* advantages: ReBN is ROLL's ``step_reinforce`` (per-turn discounted returns with ``step_reward_gamma``,
  normalised over the batch, ``reward_normalization: batch mean_std``), the estimator ROLL runs for GEM;
  ``--estimator`` must be ``rebn``;
* samples: one sample per turn. ``--prompt observation`` (section 15's runs): ROLL's
  ``StepConcatEnvManager`` prompting with the current observation alone (the range hints of
  ``guess_range`` make it a Markov state), where the other arms prompt with the whole conversation;
  ``--prompt history``: ``gem_adapters.roll.env_managers.StepChatEnvManager`` (ROLL's ``StepEnvManager``)
  prompting with the episode so far as a chat, earlier observations and replies, as the other arms do
  (``sequence_length`` grows to ``history_sample_tokens``);
* updates: ROLL trains on mini-batches of a fixed number of samples, so one optimizer step per rollout batch,
  as in the other arms, is a random ``train_samples`` of the step's turn samples (``batch_adjust_mode:
  random_sample``; with 128 episodes of 4-6 turns, 512 is 65-80% of them; under 512 samples, i.e. fewer than
  4 turns per episode, ROLL copies samples to fill the mini-batch instead). ROLL's ``delete`` mode, which
  would drop only the remainder, fails here: ``roll/pipeline/agentic/agentic_pipeline.py:729`` indexes the
  batch with a boolean tensor, which ``RemoteBatch.__getitem__`` (``roll/distributed/scheduler/
  remote_protocol.py:151``) cannot take (``RuntimeError: key must be a NestedKey``);
* task seeds: ROLL's scheduler draws the env seeds (from ``seed``), not ``train.py``'s.

The CSV has ``train.py``'s columns from ROLL's per-step metrics (``metrics_tag`` log lines: the batch it
trained on): success, return (sum of turn rewards), turns, and invalid moves as 1 − ROLL's
``action_is_valid`` (a mean per episode, then over episodes; ``train.py`` pools the turns); turns to
solve and the first-guess columns are not in ROLL's metrics (NaN).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from benchmarks.learning.common import LEARNING_ENVS, TASKS, LearningTask, PolicySpec, warmed_up_policy
from benchmarks.learning.launch import run_trainer
from benchmarks.learning.train import MAX_CONTEXT_TOKENS, RunConfig, parse_run

REPO = Path(__file__).resolve().parents[2]
BASE_CONFIG = REPO / "benchmarks" / "roll_cpu" / "agentic_gem_cpu.yaml"
METRICS = re.compile(r"metrics_tag: (\{.*\})")
TAG = "GemCoreGame"
DEVICES = 2  # Ray logical GPUs: actor_train on 0, actor_infer on 1
# ROLL pads every sample to sequence_length: a turn sample is one observation and one action, far below
# the episodes' MAX_CONTEXT_TOKENS (1024 padded tokens a sample made one 512-sample step take 17 GB).
TURN_SAMPLE_TOKENS = 256


def turn_sample_tokens(task: LearningTask) -> int:
    """ROLL's ``sequence_length`` for ``task``: its longest observation and one action, at least
    ``TURN_SAMPLE_TOKENS`` (ROLL ends an episode whose prompt does not fit before its first action, and
    its step then fails)."""
    return max(TURN_SAMPLE_TOKENS, task.observation_tokens + task.max_turn_tokens)


HISTORY_TOKENS_PER_TURN = 40  # a later GuessTheNumber hint and its chat markup


def history_sample_tokens(task: LearningTask, max_turns: int) -> int:
    """ROLL's ``sequence_length`` for ``--prompt history``: the first observation, then per turn an action
    and ``HISTORY_TOKENS_PER_TURN`` for a later observation and its chat markup, at most the other arms'
    ``MAX_CONTEXT_TOKENS``. Sized on GuessTheNumber's one-line hints (guess_range: 640; 10 random guesses
    render to 563 ids); a game that prints a board each turn needs more, or ROLL ends its episodes early."""
    tokens = task.observation_tokens + max_turns * (task.max_turn_tokens + HISTORY_TOKENS_PER_TURN)
    return max(turn_sample_tokens(task), min(MAX_CONTEXT_TOKENS, tokens))


MICRO_BATCH = 64  # samples a forward and backward (gradient accumulation up to train_samples)


@dataclass
class RollRunConfig(RunConfig):
    train_samples: int = field(
        default=512, metadata={"help": "Turn samples of a step's one optimizer step (ROLL's mini-batch)."}
    )
    env_workers: int = field(default=2, metadata={"help": "ROLL env worker processes (Ray actors)."})
    prompt: Literal["observation", "history"] = field(
        default="observation",
        metadata={
            "help": "A turn sample's prompt: the current observation alone (StepConcatEnvManager, section 15's "
            "runs) or the episode so far as a chat, as the other arms see it (StepChatEnvManager)."
        },
    )


def check_run(run: RollRunConfig) -> None:
    if run.estimator != "rebn":
        raise SystemExit("--estimator: ROLL runs ReBN as its own step_reinforce (rebn) only")
    if run.beta:
        raise SystemExit("--beta: this run has no KL term (init_kl_coef 0)")
    if run.episodes_per_step % run.num_generations or run.episodes_per_step % run.env_workers:
        raise SystemExit("episodes_per_step must be a multiple of num_generations and of env_workers")
    if run.train_samples % MICRO_BATCH:
        raise SystemExit(f"train_samples must be a multiple of {MICRO_BATCH} (the micro-batch)")


def write_config(run: RollRunConfig, folder: Path, workdir: Path) -> Path:
    """ROLL's config for this run, from ``benchmarks/roll_cpu/agentic_gem_cpu.yaml``; returns its path."""
    task = TASKS[run.task]
    max_turns = LEARNING_ENVS.get(task.env_id, (None, None, {}))[2].get("max_turns", 10)
    groups = run.episodes_per_step // run.num_generations
    cfg = yaml.safe_load(BASE_CONFIG.read_text())
    cfg.update(
        exp_name=f"gem_learning_{run.task}_seed{run.seed}",
        seed=run.seed,
        logging_dir=str(workdir / "logs"),
        output_dir=str(workdir / "output"),
        pretrain=str(folder),
        reward_pretrain=str(folder),
        max_steps=run.steps,
        save_steps=10**9,
        eval_steps=0,
        rollout_batch_size=run.episodes_per_step,
        sequence_length=(
            history_sample_tokens(task, max_turns) if run.prompt == "history" else turn_sample_tokens(task)
        ),
        step_reward_gamma=run.gamma,
        max_tokens_per_step=task.max_turn_tokens,
        max_actions_per_traj=max_turns,
        skip_mock_system_prompt=True,
        batch_adjust_mode="random_sample",
    )
    cfg["checkpoint_config"]["output_dir"] = str(workdir / "checkpoints")
    training = cfg["actor_train"]["training_args"]
    training.update(
        learning_rate=run.learning_rate,
        weight_decay=0,
        per_device_train_batch_size=MICRO_BATCH,
        gradient_accumulation_steps=run.train_samples // MICRO_BATCH,
        warmup_steps=run.warmup_steps,
        lr_scheduler_type={"constant": "constant_with_warmup", "cosine": "cosine"}[run.lr_schedule],
        seed=run.seed,
    )
    cfg["actor_train"]["infer_batch_size"] = MICRO_BATCH
    cfg["actor_infer"]["generating_args"]["temperature"] = run.temperature
    cfg["train_env_manager"].update(
        max_env_num_per_worker=run.episodes_per_step // run.env_workers,
        num_env_groups=groups,
        group_size=run.num_generations,
        tags=[TAG],
        num_groups_partition=[groups],
    )
    env = cfg["custom_envs"][TAG]
    # no system prompt, as in the other arms
    env.update(env_type="gem_core/" + task.env_id, agent_system_template=None)
    if run.prompt == "history":
        # the episode so far as a chat: every earlier turn (history_length counts the current one)
        env.update(
            env_manager_cls="benchmarks.learning.roll_env_managers.StepChatEnvManager",
            history_length=max_turns,
            agent_template="{observation}",
        )
    else:  # the current observation only
        env.update(
            env_manager_cls="benchmarks.learning.roll_env_managers.StepConcatEnvManager",
            history_length=1,
            agent_template="{current_observation}",
        )
    path = workdir / "roll_learning.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def command(config: Path) -> list[str]:
    return [
        sys.executable, "-m", "gem_adapters.roll.cpu", "--config_path", str(config.parent),
        "--config_name", config.stem, "--devices", str(DEVICES),
    ]  # fmt: skip


def step_records(log: Path) -> list[dict]:
    """ROLL's per-step metrics logged so far (``metrics_tag`` lines)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [json.loads(data) for data in METRICS.findall(text)]


def step_row(record: dict) -> dict:
    metrics = record["metrics"]

    def env(name: str) -> float:
        return float(metrics.get(f"env/{TAG}/{name}", math.nan))

    return {
        "step": int(record["step"]) + 1,
        "success_rate": env("success"),
        "return": env("reward"),
        "turns": env("num_actions"),
        "turns_to_solve": math.nan,
        "invalid_rate": 1.0 - env("action_is_valid"),
        "first_guess_distance": math.nan,
        "first_guess_midpoint": math.nan,
        "loss": float(metrics.get("actor/pg_loss", math.nan)),
        "entropy": float(metrics.get("critic/entropy/mean", math.nan)),
        "kl": float(metrics.get("critic/kl", math.nan)),
        "critic_loss": math.nan,
        "lr": float(metrics.get("actor_train/lr", metrics.get("actor/lr", math.nan))),
    }


def launch_env() -> dict[str, str]:
    """This process's environment for ROLL: the ROLL checkout and the repository on ``PYTHONPATH`` (ROLL's
    workers import the env managers and the experiments' env ids from it)."""
    env = dict(os.environ)
    roll = os.environ.get("ROLL_SRC")
    if not roll or not (Path(roll) / "roll" / "pipeline" / "agentic").is_dir():
        raise SystemExit("set ROLL_SRC to a checkout of github.com/alibaba/ROLL")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (roll, str(REPO), env.get("PYTHONPATH")) if p)
    env.update(TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", RAY_DEDUP_LOGS="0")
    return env


def main(run: RollRunConfig, policy: PolicySpec | None = None) -> list[dict]:
    """Train through ROLL's pipeline; ``policy`` overrides the warmed-up policy's spec. Returns the CSV rows."""
    check_run(run)
    folder = warmed_up_policy(policy or run.policy_spec())
    with (
        tempfile.TemporaryDirectory(prefix="gem-roll-") as workdir,
        tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as ray_dir,
    ):
        work = Path(workdir)
        roll_log = Path(run.out).with_suffix(".roll.log")
        return run_trainer(
            run,
            f"ROLL agentic {run.task} {run.estimator} gamma={run.gamma} seed={run.seed}",
            command(write_config(run, folder, work)),
            {**launch_env(), "RAY_TMPDIR": ray_dir, "ROLL_LOG_DIR": str(work / "logs")},
            roll_log,
            lambda: step_records(roll_log),
            step_row,
            cwd=work,
        )


if __name__ == "__main__":
    import signal

    # a stopped run (SIGTERM) unwinds through main's cleanup, which stops its Ray processes
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    main(parse_run(RollRunConfig, adapter="roll agentic"))

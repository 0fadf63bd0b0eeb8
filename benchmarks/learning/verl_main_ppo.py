"""The learning experiment through verl's own trainer: ``python -m verl.trainer.main_ppo`` on CPU.

    python -m benchmarks.learning.verl_main_ppo --task guess_range --estimator rebn --seed 0 --steps 40 --episodes_per_step 128 --out benchmarks/results/learning/adapters/verl_main_ppo-rebn-episodes_per_step128-steps40-seed0.csv

(``experiments.py run adapters_main_ppo`` runs it for seeds 0, 1 and 2.)

``verl_cpu.py``'s run (the same warmed-up policy, settings and task seeds: ``RunConfig``'s
``episodes_per_step``, ``num_generations``, ``gem_<estimator>`` with ``gamma``, one AdamW step per
batch at ``learning_rate`` after ``warmup_steps``, clip 1.0, no weight decay, token-mean loss,
temperature 1), launched as ``examples/train_verl.py machine=cpu`` launches verl: its Ray workers,
FSDP2 actor, transformers rollout server and agent-loop workers playing ``GemAgentLoop``. The run's
CSV has ``train.py``'s columns. The example is run as a program (``--dry-run``: it writes the task
parquet files and the agent-loop YAML, and prints its ``main_ppo`` command), not imported, in a process
where the experiments' env ids are registered; this run's own Hydra overrides are added to that command.

Two things reach verl's processes from here: the repository on ``PYTHONPATH`` with
``benchmarks.learning.common`` in ``VERL_USE_EXTERNAL_MODULES`` (the experiments' env ids, registered at
import), and the agent loop ``RecordingGemAgentLoop``, a ``GemAgentLoop`` that also writes every
training episode to ``$GEM_EPISODE_DIR`` (verl's own step metrics have the score but not the success or
invalid-move rate). A step's CSV row is written when verl's file logger writes the step's metrics.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from benchmarks.learning.common import TASKS, PolicySpec, warmed_up_policy
from benchmarks.learning.launch import run_trainer
from benchmarks.learning.train import (
    MAX_CONTEXT_TOKENS,
    TASK_SEEDS_PER_RUN,
    RunConfig,
    batch_metrics,
    check_verl_run,
    parse_run,
)
from gem_adapters.episodes.jsonl import read_jsonl, write_jsonl
from gem_adapters.verl.advantages import verl_estimator
from gem_adapters.verl.rollout import GemAgentLoop

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "train_verl.py"
# What examples/train_verl.py puts first in VERL_USE_EXTERNAL_MODULES, then the experiments' env ids.
EXTERNAL_MODULES = ["gem_adapters.verl.plugin", "gem_adapters.verl.rollout", "benchmarks.learning.common"]
EPISODE_DIR = "GEM_EPISODE_DIR"
# Runs a script (argv[1], its arguments after it) as __main__ where the experiments' env ids are registered.
RUN_WITH_LEARNING_ENVS = (
    "import runpy, sys\nimport benchmarks.learning.common\n"
    "sys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n"
)
# verl warns once per agent loop (every episode) that a Llama has no model-specific token builder
logging.getLogger("verl.utils.tokenizer.continuous_token_wiring").setLevel(logging.ERROR)


class RecordingGemAgentLoop(GemAgentLoop):
    """``GemAgentLoop`` that appends each training episode to ``$GEM_EPISODE_DIR/step<N>-<pid>.jsonl``."""

    async def run(self, sampling_params, **kwargs):
        output = await super().run(sampling_params, **kwargs)
        folder = os.environ.get(EPISODE_DIR)
        if folder and not kwargs.get("validate", False):
            step = int(kwargs["global_steps"])
            write_jsonl(Path(folder) / f"step{step:06d}-{os.getpid()}.jsonl", [output.episode], append=True)
        return output


def command(run: RunConfig, folder: Path, workdir: Path, ray_dir: str) -> list[str]:
    """The ``main_ppo`` command of ``examples/train_verl.py machine=cpu`` with this run's settings and
    ``RecordingGemAgentLoop`` in the agent-loop YAML (the example writes its inputs under ``workdir``)."""
    prompts_per_step = run.episodes_per_step // run.num_generations
    prompt_tokens = TASKS[run.task].prompt_tokens
    micro = run.episodes_per_step
    settings = {
        "actor_rollout_ref.model.path": str(folder),
        "gem.env_ids": f"[{TASKS[run.task].env_id!r}]",
        "gem.system_prompt": "null",  # verl_cpu.py's rows (and train.py's renderer) have none
        "gem.train_tasks": run.steps * prompts_per_step,
        "gem.train_first_seed": run.seed * TASK_SEEDS_PER_RUN,
        "gem.val_tasks": 1,
        "gem.max_turn_tokens": TASKS[run.task].max_turn_tokens,
        "gem.output_dir": str(workdir),
        "data.max_prompt_length": prompt_tokens,
        "data.max_response_length": MAX_CONTEXT_TOKENS - prompt_tokens,
        "data.train_batch_size": prompts_per_step,
        "algorithm.adv_estimator": verl_estimator(run.estimator),
        "algorithm.gamma": run.gamma,
        "actor_rollout_ref.rollout.n": run.num_generations,
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": "null",  # the env ends each episode
        "actor_rollout_ref.actor.ppo_mini_batch_size": prompts_per_step,  # times rollout.n: one optimizer step
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.actor.optim.lr": run.learning_rate,
        "actor_rollout_ref.rollout.temperature": run.temperature,
        "trainer.total_training_steps": run.steps,
        "trainer.test_freq": -1,
        "trainer.logger": "[console,file]",
    }
    argv = ["machine=cpu", *(f"{key}={value}" for key, value in settings.items())]
    dry = subprocess.run(
        [sys.executable, "-c", RUN_WITH_LEARNING_ENVS, str(EXAMPLE), *argv, "--dry-run"],
        env=launch_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    example = shlex.split(dry.stdout.strip().splitlines()[-1])
    if example[1:3] != ["-m", "verl.trainer.main_ppo"]:
        raise RuntimeError(f"{EXAMPLE.name} --dry-run printed no main_ppo command:\n{dry.stdout[-2000:]}")
    agent_loop = workdir / "gem_agent_loop.yaml"
    loops = yaml.safe_load(agent_loop.read_text())
    for loop in loops:  # episodes end when the env ends them, as in verl_cpu.py
        loop.update(_target_="benchmarks.learning.verl_main_ppo.RecordingGemAgentLoop")
    agent_loop.write_text(yaml.safe_dump(loops, sort_keys=False))
    overrides = [
        "data.shuffle=False",  # the tasks in order, as verl_cpu.py plays them
        "actor_rollout_ref.rollout.top_p=1.0",
        "actor_rollout_ref.rollout.top_k=-1",
        "actor_rollout_ref.actor.ppo_epochs=1",
        "actor_rollout_ref.actor.use_dynamic_bsz=False",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        "actor_rollout_ref.actor.policy_loss.loss_mode=vanilla",
        f"actor_rollout_ref.actor.optim.lr_warmup_steps={run.warmup_steps}",
        f"actor_rollout_ref.actor.optim.lr_scheduler_type={run.lr_schedule}",
        "actor_rollout_ref.actor.optim.weight_decay=0.0",
        "actor_rollout_ref.actor.optim.clip_grad=1.0",
        f"actor_rollout_ref.actor.fsdp_config.seed={run.seed}",
        f"actor_rollout_ref.rollout.seed={run.seed}",
        f"+ray_kwargs.ray_init._temp_dir={ray_dir}",
    ]
    return [sys.executable, "-m", "verl.trainer.main_ppo", *last_wins([*example[3:], *overrides])]


def last_wins(overrides: list[str]) -> list[str]:
    """One override per key (Hydra rejects a key given twice); a later one replaces an earlier one."""
    return list({override.split("=", 1)[0].lstrip("+"): override for override in overrides}.values())


def launch_env() -> dict[str, str]:
    """This process's environment for ``main_ppo`` on CPU, as ``examples/train_verl.py machine=cpu`` sets
    it, with the experiments' env ids loaded in every verl process."""
    env = dict(os.environ)
    given = [m for m in env.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    env["VERL_USE_EXTERNAL_MODULES"] = ",".join(dict.fromkeys([*EXTERNAL_MODULES, *given]))
    env["VERL_PLATFORM"] = "cpu"  # gem_adapters.verl.plugin installs gem_adapters.verl.cpu
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def main(run: RunConfig, policy: PolicySpec | None = None) -> list[dict]:
    """Train through ``main_ppo``; ``policy`` overrides the warmed-up policy's spec. Returns the CSV rows."""
    check_verl_run(run)
    folder = warmed_up_policy(policy or run.policy_spec())
    # Ray's folder right under /tmp: its socket paths have a length limit
    with (
        tempfile.TemporaryDirectory() as workdir,
        tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as ray_dir,
    ):
        work = Path(workdir)
        episodes, metrics = work / "episodes", work / "metrics.jsonl"
        episodes.mkdir()
        return run_trainer(
            run,
            f"verl main_ppo {run.task} {run.estimator} gamma={run.gamma} seed={run.seed}",
            command(run, folder, work, ray_dir),
            {**launch_env(), EPISODE_DIR: str(episodes), "VERL_FILE_LOGGER_PATH": str(metrics)},
            Path(run.out).with_suffix(".main_ppo.log"),
            lambda: complete_records(metrics),
            lambda record: step_row(record, episodes, run.episodes_per_step),
        )


def complete_records(path: Path) -> list[dict]:
    """The records of verl's file logger written so far (a line still being written is left out)."""
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]


def step_row(record: dict, episodes: Path, episodes_per_step: int) -> dict:
    """The CSV row of one step: the episodes it recorded, and verl's loss, entropy and learning rate."""
    step, data = int(record["step"]), record["data"]
    played = [e for path in sorted(episodes.glob(f"step{step:06d}-*.jsonl")) for e in read_jsonl(path)]
    if len(played) != episodes_per_step:
        raise RuntimeError(f"step {step}: {len(played)} episodes recorded, not {episodes_per_step}")
    return {
        "step": step,
        **batch_metrics(played),
        "loss": float(data.get("actor/pg_loss", float("nan"))),
        "entropy": float(data.get("actor/entropy", float("nan"))),
        "critic_loss": float("nan"),
        "lr": float(data.get("actor/lr", float("nan"))),
    }


if __name__ == "__main__":
    # a stopped run (SIGTERM) unwinds through main's cleanup, which stops main_ppo's Ray processes
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    main(parse_run(adapter="verl main_ppo"))

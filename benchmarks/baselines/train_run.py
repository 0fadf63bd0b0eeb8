"""One run: one seed of one row and estimator, through TRL's ``GEMGRPOTrainer``.

1. the policy and its warm-up (``rows``: the small policy's cached SFT build, SmolLM2's SFT on a
   scripted player's episodes, or none);
2. ``before``: ``eval_episodes`` held-out episodes (seeds from ``EVAL_FIRST_SEED``, the same for every
   run of every row) played at temperature 1;
3. ``steps`` RL steps of ``episodes_per_step`` episodes (``num_generations`` per task seed; run seed k
   trains on task seeds from k x ``TASK_SEEDS_PER_RUN``), per-turn advantages of ``estimator``;
   one curve row per step (``CURVE_COLUMNS``, ``gem_adapters.runtime.run_log.RunLog``);
4. ``after``: the same held-out episodes with the trained weights.

The curve goes to ``<out>.csv`` as it is made, each held-out episode's actions and return before and
after RL to ``<out>.heldout.jsonl`` (what a policy answered, since a run keeps no weights), and the summary
(``before``, ``after``, timings, settings, machine) to ``<out>.json`` at the end: a run whose JSON
exists is finished.

A run stopped before its end (a session that ends mid-run) resumes at its last checkpoint, written after a
step whenever that costs at most ``CHECKPOINT_SHARE`` of the time since the previous one (every step of a
long-step row, every few of a fast one): ``<out>.resume/`` holds TRL's checkpoint (weights, optimizer,
scheduler, RNG states, the adaptive entropy coefficient) and ``resume.json`` (the warm-up's and
``before``'s results, the precision, the seconds spent and the runs seen beside it so far). The next
``train`` of the same row, estimator, seed and steps goes on from there with the same training tasks,
sampling seeds and precision (``training_precision``), keeps the curve's rows up to that step, and deletes
the folder when the run's JSON is written; a smoke run keeps no checkpoint.

A mixture row (``Row.parts``) trains on ``gem_adapters.episodes.tasks.mixed_tasks`` in order (TRL's shuffle
off: every step holds each env's equal share; env ``k`` plays the task seeds its single-env run plays),
from the union of the parts' warm-ups, and is evaluated on each env's held-out episodes: the summary's
``per_env`` holds each env's ``before``/``after`` (its ``before``/``after`` are their means), and each
env's share of every step has its own curve, ``<out>--<part row name>.csv`` (``results.part_stem``).
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import shutil
import tempfile
import time
from collections import Counter
from contextlib import ExitStack, suppress
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from benchmarks.baselines.players import PLAYERS, register_tool_envs
from benchmarks.baselines.results import part_stem
from benchmarks.baselines.rows import FRAMEWORK, Row
from gem_adapters.episodes.episode import Episode
from gem_adapters.episodes.episode_stats import episode_stats
from gem_adapters.episodes.tasks import Task, make_tasks, mixed_tasks
from gem_adapters.runtime.run_log import RunLog

EVAL_FIRST_SEED = 900_000_000  # held-out episodes: far from every run's training task seeds
TASK_SEEDS_PER_RUN = 1_000_000
WARMUP_FIRST_SEED = 800_000_000  # SmolLM2's warm-up games
LR_WARMUP_STEPS = 5
# A row's adaptive entropy bonus: its coefficient grows by this much each step the entropy is under the
# row's target (TRL's default 0.005 is made for hundreds of steps; a 32-step row would end at 0.16 at most)
ENTROPY_COEF_DELTA = 0.02
CHECKPOINT_SHARE = 0.05  # of a run's time, at most, spent writing the checkpoints it resumes from
SMOKE_WARMUP_EPISODES = SMOKE_EVAL_EPISODES = 16  # a smoke run's SmolLM2 warm-up and evaluations
EVAL_KEYS = (
    "success_rate",
    "return",
    "turns",
    "format_error_rate",
    "invalid_move_rate",
    "stopped_by_context",
)
CURVE_COLUMNS = [
    "step", "wall_s", "step_s", "success_rate", "return", "turns", "format_error_rate", "invalid_move_rate",
    "stopped_by_context", "generated_tokens_per_episode", "length_cut_rate", "rewarded_turn_rate",
    "groups_with_signal", "loss", "entropy", "grad_norm", "lr", "entropy_coef",
]  # fmt: skip


def machine() -> dict[str, Any]:
    """What a run's seconds depend on: the CPU by family and model (machines of one kind differ), the flags
    that choose its precision, the threads."""
    import torch

    from benchmarks.train_step_profile import cpu_name, timing_flags

    return {
        "cpu": cpu_name(),
        "flags": timing_flags(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }


def small_spec(row: Row):
    """The warm-up build of the row's small policy: its ``PolicySpec``, or for a mixture the union of its
    parts' (``MixedPolicySpec``)."""
    from benchmarks.learning.common import TASKS, MixedPolicySpec, PolicySpec

    if row.parts:
        return MixedPolicySpec(tuple(small_spec(part) for part in row.parts))
    if row.env_kwargs:
        raise ValueError(f"{row.name}: env_kwargs reach SmolLM2's warm-up only, not a small policy's build")
    if TASKS[row.small_task].env_id != row.env_id:
        raise ValueError(f"{row.name}: warm-up task {row.small_task!r} plays {TASKS[row.small_task].env_id}")
    return PolicySpec(
        row.small_task, warmup_steps=row.small_warmup_steps, warmup_batch=row.small_warmup_batch
    )


def small_policy(row: Row) -> tuple[Path, float]:
    """The folder of the row's warmed-up small policy and the seconds spent building it (0 if cached)."""
    from benchmarks.learning.common import warmed_up_policy

    spec = small_spec(row)
    started = time.perf_counter()
    built = not (spec.folder() / "config.json").exists()
    folder = warmed_up_policy(spec)
    return folder, time.perf_counter() - started if built else 0.0


def sft_warmup(model, tokenizer, renderer, row: Row, seed: int, episodes: int):
    """``gem_adapters.trl.sft_warm_up``, one epoch (batch 8, lr 5e-5) over ``episodes`` scripted episodes
    of the row's warm-up player (seeds disjoint from training and evaluation); returns the trainer."""
    from trl import SFTConfig

    from gem_adapters.trl import sft_warm_up

    first = WARMUP_FIRST_SEED + seed * episodes
    config = SFTConfig(
        output_dir=tempfile.mkdtemp(prefix="gem-baselines-sft-"),
        num_train_epochs=1,
        per_device_train_batch_size=8,
        learning_rate=5e-5,
        lr_scheduler_type="constant",
        max_length=None,
        use_cpu=True,
        bf16=False,  # TRL would turn on bf16 autocast, which stays on the model's forward after training
        gradient_checkpointing=False,  # SFTConfig's default; the prefix-tree loss needs it off
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=seed,
    )
    return sft_warm_up(
        model, tokenizer, renderer, row.env_id, range(first, first + episodes), config,
        player=PLAYERS[row.warmup_player](), max_turns=row.max_turns, env_kwargs=dict(row.env_kwargs),
    )  # fmt: skip


def load_policy(
    row: Row, seed: int, smoke: bool, warm_up: bool = True
) -> tuple[Any, Any, Any, dict[str, Any]]:
    """``(model, processing_class, renderer, warm-up info)`` of the row's policy after its warm-up
    (``warm_up=False``: a SmolLM2 policy as loaded, for a checkpoint's weights to replace)."""
    from gem_adapters.episodes.chat_renderer import ChatRenderer
    from gem_adapters.runtime.models import load_model, load_tokenizer

    started = time.perf_counter()
    if row.policy == "small":
        folder, build_s = small_policy(row)
        model, tokenizer = load_model(str(folder)), load_tokenizer(str(folder))
        # The build declares 1024 positions; a row whose episodes run longer gets its own context (RoPE
        # has no position table, and the warm-up trained on whole scripted games of the env).
        model.config.max_position_embeddings = max(
            model.config.max_position_embeddings, row.max_context_tokens
        )
        spec = json.loads((folder / "spec.json").read_text())
        players = [p.small_task for p in row.parts] if row.parts else [row.small_task]
        info = {
            "warmup": f"scripted legal player {' + '.join(map(repr, players))}",
            "warmup_build_s": build_s,
        }
        return model, tokenizer, ChatRenderer(tokenizer), info | {f"policy_{k}": v for k, v in spec.items()}
    if row.policy == "tiny-llava":
        from gem_adapters.policies.multimodal import tiny_llava

        model, processor = tiny_llava(load_tokenizer("smollm2"), seed=seed)
        return model, processor, ChatRenderer(processor), {"warmup": "none"}
    if row.policy != "smollm2":
        raise ValueError(f"unknown policy {row.policy!r}")
    model, tokenizer = load_model("smollm2"), load_tokenizer("smollm2")
    renderer = ChatRenderer(tokenizer)
    info: dict[str, Any] = {"warmup": row.warmup_player or "none"}
    if row.warmup_player and warm_up:
        episodes = SMOKE_WARMUP_EPISODES if smoke else row.warmup_episodes
        warmup = sft_warmup(model, tokenizer, renderer, row, seed, episodes)
        info.update(
            warmup_episodes=episodes, warmup_loss=warmup.state.log_history[-1].get("train_loss", math.nan)
        )
    info["warmup_s"] = time.perf_counter() - started
    return model, tokenizer, renderer, info


def evaluate(
    model, processing_class, renderer, row: Row, episodes: int, played: list[Episode]
) -> dict[str, Any]:
    """``episode_stats`` of ``episodes`` held-out episodes at temperature 1 (a fixed sampling seed), the
    episodes appended to ``played``; for a mixture, ``episodes`` of each env (``evaluate_env``) under
    ``per_env`` and their means (episodes and seconds summed) beside it."""
    if not row.parts:
        return evaluate_env(model, processing_class, renderer, row, episodes, played)
    per_env = {
        p.env_id: evaluate_env(model, processing_class, renderer, p, episodes, played) for p in row.parts
    }
    runs = list(per_env.values())
    return {
        **{k: sum(r[k] for r in runs) / len(runs) for k in EVAL_KEYS},
        "episodes": sum(r["episodes"] for r in runs),
        "seconds": sum(r["seconds"] for r in runs),
        "per_env": per_env,
    }


def evaluate_env(
    model, processing_class, renderer, row: Row, episodes: int, played: list[Episode]
) -> dict[str, float]:
    """``episode_stats`` of ``episodes`` held-out episodes of the (single-env) row at temperature 1 (the
    episodes appended to ``played``), and ``same_first_action``: the share of them whose first action is
    the most frequent one (1.0: one answer whatever the task)."""
    from gem_adapters.evaluation.held_out import play_held_out
    from gem_adapters.policies.base import SamplingParams
    from gem_adapters.runtime.rollout_limits import RolloutLimits

    started = time.perf_counter()
    new = play_held_out(
        model,
        processing_class,
        renderer,
        row.env_id,
        episodes,
        first_seed=EVAL_FIRST_SEED,
        limits=RolloutLimits(row.max_turns, row.max_turn_tokens, row.max_context_tokens),
        sampling=SamplingParams(max_new_tokens=row.max_turn_tokens, temperature=1.0),
        env_kwargs=dict(row.env_kwargs),
    )
    played.extend(new)
    stats = episode_stats(new)
    first_actions = Counter(e.turns[0].action for e in new if e.turns)
    return {
        **{k: stats[k] for k in EVAL_KEYS},
        "same_first_action": max(first_actions.values()) / first_actions.total() if first_actions else 0.0,
        "episodes": len(new),
        "seconds": time.perf_counter() - started,
    }


def held_out_lines(phase: str, episodes: list[Episode]) -> list[dict[str, Any]]:
    """One line of ``<out>.heldout.jsonl`` per held-out episode of ``phase``: its env, seed, success,
    return and actions."""
    return [
        {
            "phase": phase,
            "env_id": e.env_id,
            "seed": e.seed,
            "success": e.success,
            "return": e.total_reward,
            "actions": [t.action for t in e.turns],
        }
        for e in episodes
    ]


def grpo_trainer(
    row: Row,
    estimator: str,
    seed: int,
    steps: int,
    model,
    processing_class,
    renderer,
    bf16: bool | None = None,
    compile_learner: bool = False,
    checkpoints: Path | None = None,
):
    """The row's ``GEMGRPOTrainer``; ``checkpoints``: the folder of its checkpoints (written when a callback
    asks, ``Checkpoints``), the last two kept: the older stays whole while the newer is written."""
    from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer, task_rows

    micro = row.micro_batch_size or row.episodes_per_step
    if row.episodes_per_step % micro or row.episodes_per_step % row.num_generations:
        raise ValueError(
            f"{row.name}: episodes_per_step must be a multiple of micro_batch_size and num_generations"
        )
    groups_per_step = row.episodes_per_step // row.num_generations
    if groups_per_step % len(row.env_ids):
        raise ValueError(
            f"{row.name}: {groups_per_step} groups a step do not split over {len(row.env_ids)} envs"
        )
    entropy_control = {}
    if row.entropy_target is not None:
        entropy_control = dict(
            use_adaptive_entropy=True,
            entropy_target=row.entropy_target,
            entropy_coef_delta=ENTROPY_COEF_DELTA,
        )
    config = GEMGRPOConfig(
        output_dir=str(checkpoints) if checkpoints else tempfile.mkdtemp(prefix="gem-baselines-"),
        shuffle_dataset=not row.parts,  # a mixture's dataset in order: each step holds equal shares
        advantage_estimator=estimator,
        gamma=row.gamma,
        max_turns=row.max_turns,
        max_turn_tokens=row.max_turn_tokens,
        max_context_tokens=row.max_context_tokens,
        learning_rate=row.learning_rate,
        lr_scheduler_type={"constant": "constant_with_warmup", "cosine": "cosine"}[row.lr_schedule],
        warmup_steps=min(LR_WARMUP_STEPS, max(steps // 4, 1)),
        max_steps=steps,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=row.episodes_per_step // micro,
        num_generations=row.num_generations,
        temperature=row.temperature,
        **entropy_control,
        beta=row.beta,
        mask_truncated_completions=row.mask_truncated_turns,
        use_cpu=True,
        bf16=bf16,
        compile_learner=compile_learner,
        logging_steps=1,
        save_strategy="no",
        save_total_limit=2,
        report_to=[],
        disable_tqdm=True,
        seed=seed,
    )
    dataset = task_rows(training_tasks(row, steps * groups_per_step, seed))
    return GEMGRPOTrainer(
        model=model, args=config, train_dataset=dataset, processing_class=processing_class, renderer=renderer
    )


def training_tasks(row: Row, num_tasks: int, seed: int) -> list[Task]:
    """The ``num_tasks`` tasks a run of ``row`` trains on, in order: seeds from ``seed *
    TASK_SEEDS_PER_RUN`` (a mixture: equal shares of its envs, round-robin), the row's ``reward_type``
    and ``env_kwargs`` in their env kwargs."""
    env_kwargs = dict(row.env_kwargs) | (
        {"reward_type": row.reward_type} if row.reward_type != "dense" else {}
    )
    first_seed = seed * TASK_SEEDS_PER_RUN
    if row.parts:
        if any(p.env_kwargs for p in row.parts):
            raise ValueError(f"{row.name}: a mixture's parts play their envs as registered (no env_kwargs)")
        return mixed_tasks(
            row.env_ids, num_tasks // len(row.env_ids), first_seed=first_seed, env_kwargs=env_kwargs
        )
    return make_tasks(row.env_id, num_tasks, first_seed=first_seed, env_kwargs=env_kwargs)


class Resume:
    """``<out>.resume/``: TRL's checkpoints of a run and ``resume.json``, what it needs to go on after a stop
    (module docstring). ``key`` names the run (row settings, estimator, seed, steps): a folder left by
    another is not resumed but cleared."""

    def __init__(self, out: Path, key: dict[str, Any]):
        self.folder = out.with_suffix(".resume")
        self.key = json.loads(json.dumps(key, default=str))  # as it reads back
        self.state: dict[str, Any] = {}

    def load(self) -> dict[str, Any] | None:
        """The saved state when it is this run's and names a checkpoint, else None (the folder cleared)."""
        with suppress(OSError, ValueError):
            state = json.loads((self.folder / "resume.json").read_text())
            checkpoint = state.get("checkpoint")  # none yet: stopped before its first step ended
            if state.get("key") == self.key and checkpoint and (self.folder / checkpoint).is_dir():
                self.state = state
                return state
        shutil.rmtree(self.folder, ignore_errors=True)
        return None

    def save(self, **fields: Any) -> None:
        self.state.update(fields, key=self.key)
        self.folder.mkdir(parents=True, exist_ok=True)
        temporary = self.folder / "resume.json.tmp"
        temporary.write_text(json.dumps(self.state, default=str))
        os.replace(temporary, self.folder / "resume.json")

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def training_precision(row: Row, state: dict[str, Any] | None) -> bool | None:
    """The trainer's ``bf16``: a resumed run keeps its first attempt's (a run is one precision, whichever CPU
    its later attempts meet). Else SmolLM2 takes GEMGRPOConfig's default, None: bf16 autocast where the
    device computes it natively; the small policy (hidden size 128) and the 3M tiny LLaVA fp32: their matrix
    products are too small for bf16 to pay (the small policy's learner pass ran at 0.82x fp32's speed in
    bf16, SmolLM2's at 2.27x: results/bf16_by_model_size.txt; its learning curve under bf16:
    results/learning/README.md section 16)."""
    if state and "bf16" in state:
        return state["bf16"]
    return None if row.policy == "smollm2" else False


def curve_rows(path: Path, last_step: int) -> list[dict[str, Any]]:
    """The rows of a curve CSV up to ``last_step``, numbers as numbers and empty cells left out."""
    with suppress(FileNotFoundError), open(path, newline="") as f:
        rows = [{k: float(v) for k, v in line.items() if v != ""} for line in csv.DictReader(f)]
        return [row | {"step": int(row["step"])} for row in rows if row["step"] <= last_step]
    return []


def train(
    row: Row, estimator: str, seed: int, out: Path, *, steps: int | None = None, smoke: bool = False
) -> dict:
    """Run it, or go on with it from ``<out>.resume/``; writes ``out.csv`` (the curve) and, last,
    ``out.json`` (the summary), and returns the summary."""
    from transformers import PrinterCallback, TrainerCallback, set_seed

    from benchmarks.baselines.runner import OVERLAPS
    from gem_adapters.runtime.allocator import reuse_freed_memory
    from gem_adapters.trl import EpisodeBatchCallback

    reuse_freed_memory()  # glibc keeps freed buffers for the next step instead of unmapping them
    register_tool_envs()
    steps = steps or row.steps
    started, attempt_started, load_start = time.perf_counter(), time.time(), os.getloadavg()
    set_seed(seed)
    settings = {k: v for k, v in asdict(row).items() if k not in ("expectation", "parts")} | (
        {"parts": [p.name for p in row.parts]} if row.parts else {}
    )
    # the settings that differ from Row's defaults: a field added later does not orphan a checkpoint
    changed = {
        f.name: settings[f.name] for f in fields(Row) if f.name in settings and settings[f.name] != f.default
    }
    resume = (
        None if smoke else Resume(out, {"row": changed, "estimator": estimator, "seed": seed, "steps": steps})
    )
    state = resume.load() if resume else None
    # A KL row's reference is the policy as passed: warmed up again (the same seed, the same weights)
    model, processing_class, renderer, warmup = load_policy(
        row, seed, smoke, warm_up=state is None or row.beta > 0
    )
    eval_episodes = min(row.eval_episodes, SMOKE_EVAL_EPISODES) if smoke else row.eval_episodes
    if state:
        warmup, before, before_lines = state["warmup"], state["before"], state["before_lines"]
        resume.save(resumed_at_steps=[*state["resumed_at_steps"], state["step"]])
    else:
        played_before: list[Episode] = []
        before = evaluate(model, processing_class, renderer, row, eval_episodes, played_before)
        before_lines = held_out_lines("before", played_before)
        if resume:
            resume.save(warmup=warmup, before=before, before_lines=before_lines, resumed_at_steps=[])
    trainer = grpo_trainer(
        row, estimator, seed, steps, model, processing_class, renderer, bf16=training_precision(row, state),
        checkpoints=resume.folder if resume else None,
    )  # fmt: skip
    if resume:
        resume.save(bf16=bool(trainer.args.bf16))
    trainer.remove_callback(PrinterCallback)
    out.parent.mkdir(parents=True, exist_ok=True)
    curve_paths = {None: out.with_suffix(".csv")} | {  # a mixture: each env's share of every step too
        p.env_id: part_stem(out, p.name).with_suffix(".csv") for p in row.parts
    }
    kept = {key: curve_rows(path, state["step"]) if state else [] for key, path in curve_paths.items()}
    logs = {
        key: RunLog(out.parent, CURVE_COLUMNS, filename=path.name, digits=8)
        for key, path in curve_paths.items()
    }
    for key, log in logs.items():
        for kept_row in kept[key]:
            log.record(kept_row)
        if kept[key]:  # wall_s goes on from the last kept row
            log.started -= kept[key][-1].get("wall_s", 0.0)
    log, part_logs = logs.pop(None), logs

    def record(state, episodes, logs, step_seconds):
        """One curve line per RL step: the batch's episode statistics and TRL's loss numbers."""
        common = {
            "step": state.global_step,
            "step_s": step_seconds,
            **{k: logs.get(k, float("nan")) for k in ("loss", "entropy", "grad_norm", "entropy_coef")},
            "lr": trainer.lr_scheduler.get_last_lr()[0],
        }
        stats = episode_stats(episodes)
        log.record({**common, **{k: stats[k] for k in CURVE_COLUMNS if k in stats}})
        for env_id, part_log in part_logs.items():
            stats = episode_stats([e for e in episodes if e.env_id == env_id])
            part_log.record({**common, **{k: stats[k] for k in CURVE_COLUMNS if k in stats}})

    train_started = time.perf_counter()
    train_s_before = state["train_s"] if state else 0.0
    wall_s_before = state["wall_s"] if state else 0.0
    beside_before = set(state["ran_beside"]) if state else set()
    label = f"{row.label(estimator)} seed {seed}"  # the runner's name for this run

    class Checkpoints(TrainerCallback):
        """Asks for a checkpoint after a step (not the last) once the time since the previous one is
        1 / CHECKPOINT_SHARE times what writing that one took, so checkpoints cost at most that share of
        the run; after each, ``resume.json`` names it, with the seconds and neighbours so far."""

        last_end, last_cost = time.perf_counter(), 0.0

        def on_step_end(self, args, trainer_state, control, **kwargs):
            self.asked = time.perf_counter()
            due = self.asked - self.last_end >= self.last_cost / CHECKPOINT_SHARE
            control.should_save = due and trainer_state.global_step < trainer_state.max_steps

        def on_save(self, args, trainer_state, control, **kwargs):
            now = time.perf_counter()
            self.last_end, self.last_cost = now, now - self.asked
            beside = OVERLAPS.beside("", attempt_started, time.time()) - {label}
            resume.save(
                checkpoint=f"checkpoint-{trainer_state.global_step}",
                step=trainer_state.global_step,
                train_s=train_s_before + now - train_started,
                wall_s=wall_s_before + now - started,
                ran_beside=sorted(beside_before | beside),
            )

    trainer.add_callback(EpisodeBatchCallback(trainer, record))
    if resume:
        trainer.add_callback(Checkpoints())
    with log, ExitStack() as open_logs:
        for part_log in part_logs.values():
            open_logs.enter_context(part_log)
        trainer.train(resume_from_checkpoint=str(resume.folder / state["checkpoint"]) if state else None)
    train_s = train_s_before + time.perf_counter() - train_started
    played_after: list[Episode] = []
    after = evaluate(trainer.model, processing_class, renderer, row, eval_episodes, played_after)
    held_out = before_lines + held_out_lines("after", played_after)
    out.with_suffix(".heldout.jsonl").write_text("".join(json.dumps(line) + "\n" for line in held_out))
    per_env = {}
    if row.parts:
        per_env = {
            p.env_id: {
                "row": p.name,
                "before": before["per_env"][p.env_id],
                "after": after["per_env"][p.env_id],
            }
            for p in row.parts
        }
        before, after = ({k: v for k, v in x.items() if k != "per_env"} for x in (before, after))
    summary = {
        "env_id": row.env_id,
        "framework": FRAMEWORK,
        "estimator": estimator,
        "policy": row.policy,
        "seed": seed,
        "steps": len(log.rows),
        "episodes_per_step": row.episodes_per_step,
        "smoke": smoke,
        "precision": "bf16 autocast" if trainer.args.bf16 else "fp32",
        "before": before,
        "after": after,
        **({"per_env": per_env} if per_env else {}),
        "train_s": train_s,
        "seconds_per_step": train_s / max(len(log.rows), 1),
        "wall_s": wall_s_before + time.perf_counter() - started,
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
        **warmup,
        "row": settings,
        "machine": machine(),
        **({"resumed_at_steps": resume.state["resumed_at_steps"]} if resume else {}),
        # the runs beside its earlier attempts (the runner adds those beside the last)
        **({"ran_beside": sorted(beside_before)} if beside_before else {}),
    }
    out.with_suffix(".json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    if resume:
        resume.clear()
    return summary

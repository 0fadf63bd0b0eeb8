"""The learning experiments of the GEM paper, in small: run them, then plot them.

    python -m benchmarks.learning.experiments run adapters discount credit critic --seeds 0 1 2 --workers 2
    python -m benchmarks.learning.experiments plot adapters discount credit critic hangman

``run`` trains every arm of the named experiments for every seed through ``train.py`` (or
``verl_cpu.py``, ``verl_main_ppo.py``), one process per run with ``OMP_NUM_THREADS=1``, ``--workers``
at a time, for the arm's own ``steps``, else ``--steps``, else ``STEPS[task]`` optimizer steps; a run
whose CSV exists is skipped, so runs shared by two experiments train once. ``plot`` writes, per
experiment, ``<name>.png`` (mean over seeds, shaded min-max, of a 5-step moving average; the arms of a
task are cut to the steps they all ran) and ``<name>.csv`` (per arm and seed: the mean of the first
and of the last ``window`` steps, a quarter of the run and at most 10) under
``benchmarks/results/learning/``, and prints per arm the mean over seeds with a 95% bootstrap interval
over seeds, each seed's first metric by 10-step block (``print_blocks``) and, where a task has two
arms, their difference paired by seed (``print_paired``).

1. ``discount``: GuessTheNumber 1-50 (12 turns, remaining range stated in each hint), ReBN with
   gamma 0.9 vs 1.0: success, turns to solve, first guess at the midpoint.
2. ``credit``: GuessTheNumber 1-10 with the range stated (a -0.1 penalty on each illegal turn), ReBN
   vs turn-agnostic GRPO vs REINFORCE (no baseline) vs ReBN with every episode weighted equally.
3. ``adapters``: the same ReBN run through TRL (``credit``'s runs) and through verl's own agent
   loop, advantage and loss code on CPU (``verl_cpu.py``).
4. ``critic``: PPO with a turn-level critic (GAE, ``GEMPPOTrainer``) vs GRPO vs ReBN on a single-turn
   task (``pick``) and on GuessTheNumber 1-10 with the range stated.
5. ``drift``: why ``credit``'s runs drift: ReBN vs the same updates on shuffled advantages
   (``shuffled_rebn``, no signal) vs ReBN with a KL term to the warmed-up policy.
6. ``batch``: ReBN, GRPO and REINFORCE at 32 and at 128 episodes per step, and ReBN with every
   episode weighted equally at 128.
7. ``discount_batch``, ``adapters_batch``, ``critic_batch``: 1, 3 and 4 again at 128 episodes per step,
   the discount on GuessTheNumber 1-10 with the range stated (``batch``'s task) and on 1-50; the 1-50
   arms and the critic ran ``--steps 40`` (results README, 7a and 7c); ``adapters_main_ppo``: 3 with
   verl's ``main_ppo`` as a third arm (``verl_main_ppo.py``); ``frameworks``: TRL and ``main_ppo`` beside
   OpenRLHF's ``train_ppo_ray`` (``openrlhf_train_ppo_ray.py``) and ROLL's agentic pipeline
   (``roll_agentic.py``, 40 steps; prompting with the current observation, and with ``prompt=history``
   with the conversation so far), each of those two run by ``PYTHON``'s interpreter (its own environment);
   ``frameworks_60``: the arms of ``frameworks`` that ran 60 steps, compared over all 60 (plots only);
   ``frameworks_fifteen``, ``frameworks_tictactoe``: the same four trainers on envs of other shapes
   (FifteenPuzzle, TicTacToe against a random opponent), 16 steps of 64 episodes.
8. ``long``: ReBN at 128 episodes per step for 120 steps: where the learning curve flattens;
   ``hold``: the same with the learning rate decayed to 0 (cosine) over the 120 steps.
9. ``credit_hold``, ``discount_hold``: ``hold``'s cosine run against GRPO, REINFORCE and ReBN with
   equal episode weights, and against gamma 1.0, each with the same schedule and length (the
   credit-assignment and discount claims at 120 steps); ``discount_hold`` also runs the discount on
   1-50 with the rate decayed to 0 over 60 steps; ``discount_builds``: those 1-50 arms with each run
   seed starting from its own warm-up policy build (``--policy_seed``); ``critic_hold``: the critic
   against ``credit_hold``'s GRPO and ReBN runs, same schedule and length, one critic pass per batch.
10. ``credit_gigpo``: GiGPO (``gigpo``: GRPO's episode-level advantage plus a step-level one over the
   turns of a group taken from the same game state, ``Env.state_key``) against ``credit_hold``'s ReBN
   and GRPO runs, same schedule, length, seeds and task order (only the GiGPO arm trains anew).
0. ``signal``: the check that the pipeline learns at all: one guess, only 7 scores (``pick``);
   ``hangman``: ReBN on Hangman, the task the earlier runs used.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path

from benchmarks.bootstrap import mean_with_interval
from benchmarks.learning.train import RunConfig

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# The trainers that need an environment of their own (scripts/install.sh; ROLL also ROLL_SRC): its Python.
PYTHON = {
    "openrlhf_train_ppo_ray.py": os.environ.get(
        "GEM_OPENRLHF_PYTHON", str(REPO / ".venv-openrlhf/bin/python")
    ),
    "roll_agentic.py": os.environ.get("GEM_ROLL_PYTHON", str(REPO / ".venv-roll/bin/python")),
}

RESULTS = HERE.parent / "results" / "learning"
RUNS = RESULTS / "curves"


# Optimizer steps per run, by task: what one session's machine time allowed for 3 seeds of every arm
# (the results README says which curves had not flattened by then).
STEPS = {"guess50": 60, "guess_range": 60, "hangman": 80, "pick": 40}


def arm(
    task: str,
    estimator: str,
    gamma: float = 0.9,
    trainer: str = "train.py",
    steps: int | None = None,
    **flags: str,
) -> dict:
    """One arm: ``trainer``'s run of ``estimator`` on ``task``; ``steps`` fixes its length (else ``run``'s);
    a flag's ``"{seed}"`` stands for the run's seed."""
    return {
        "task": task, "estimator": estimator, "gamma": gamma, "trainer": trainer, "steps": steps, "flags": flags
    }  # fmt: skip


LONG = {"steps": 120, "episodes_per_step": "128"}  # long's setting: 120 steps of 128 episodes
HELD = {**LONG, "lr_schedule": "cosine"}  # the same with the rate decayed to 0 over the 120 steps
HELD_60 = {**HELD, "steps": 60}  # the same schedule over 60 steps (the 1-50 arms)
# adapters_main_ppo's TRL and main_ppo arms and the same run through OpenRLHF's train_ppo_ray
SIXTY_STEP_FRAMEWORKS = [
    arm("guess_range", "rebn", episodes_per_step="128"),
    arm("guess_range", "rebn", trainer="verl_main_ppo.py", episodes_per_step="128"),
    arm("guess_range", "rebn", trainer="openrlhf_train_ppo_ray.py", episodes_per_step="128"),
]
FRAMEWORK_TRAINERS = ("train.py", "verl_main_ppo.py", "openrlhf_train_ppo_ray.py", "roll_agentic.py")
# the same ReBN run through every framework on envs of other shapes, 16 steps of 64 episodes each (the
# baselines table's budget for these envs): a sliding puzzle (a board to read, up to 10 moves; the
# small policy learns it in that budget) and TicTacToe against a random opponent (its reply inside each
# step, a -1/0/+1 outcome)
FIFTEEN_FRAMEWORKS = [
    arm("fifteen", "rebn", trainer=t, steps=16, episodes_per_step="64") for t in FRAMEWORK_TRAINERS
]
TICTACTOE_FRAMEWORKS = [
    arm("tictactoe", "rebn", trainer=t, steps=16, episodes_per_step="64") for t in FRAMEWORK_TRAINERS
]
EXPERIMENTS = {
    "discount": [arm("guess50", "rebn", g) for g in (0.9, 1.0)],
    "credit": [arm("guess_range", e) for e in ("rebn", "grpo", "reinforce", "rebn_per_episode")],
    "adapters": [arm("guess_range", "rebn"), arm("guess_range", "rebn", trainer="verl_cpu.py")],
    "critic": [
        *(arm("pick", e, policy="guess_range") for e in ("gae", "grpo", "rebn")),
        *(arm("guess_range", e) for e in ("gae", "grpo", "rebn")),
    ],
    "credit_lr": [arm("guess_range", e, learning_rate="1e-4") for e in ("rebn", "grpo")],
    "hangman": [arm("hangman", "rebn")],
    "drift": [
        arm("guess_range", "rebn"),
        arm("guess_range", "shuffled_rebn"),
        arm("guess_range", "rebn", beta="0.04"),
    ],
    "batch": [
        *(arm("guess_range", e) for e in ("rebn", "grpo", "reinforce")),
        *(arm("guess_range", e, episodes_per_step="128") for e in ("rebn", "grpo", "reinforce")),
        arm("guess_range", "rebn_per_episode", episodes_per_step="128"),
    ],
    # the discount, cross-framework and critic claims again at batch's 128 episodes per step
    "discount_batch": [
        arm(task, "rebn", g, episodes_per_step="128")
        for task in ("guess_range", "guess50")
        for g in (0.9, 1.0)
    ],
    "adapters_batch": [
        arm("guess_range", "rebn", episodes_per_step="128"),
        arm("guess_range", "rebn", trainer="verl_cpu.py", episodes_per_step="128"),
    ],
    # adapters_batch's two arms and the same run through verl's main_ppo (Ray workers, 1.26x a verl_cpu.py step)
    "adapters_main_ppo": [
        arm("guess_range", "rebn", episodes_per_step="128"),
        arm("guess_range", "rebn", trainer="verl_cpu.py", episodes_per_step="128"),
        arm("guess_range", "rebn", trainer="verl_main_ppo.py", episodes_per_step="128"),
    ],
    # adapters_main_ppo's TRL and main_ppo arms beside the same run through OpenRLHF's train_ppo_ray and
    # ROLL's agentic pipeline (each in its own environment: PYTHON)
    "frameworks": [
        *SIXTY_STEP_FRAMEWORKS,
        # a ROLL step here costs ~3x an OpenRLHF one (~55 s against ~20 s): 40 steps, compared at step 40;
        # prompting with the current observation alone (section 15's runs), and with the conversation so
        # far as the other arms do (issue 58, item 5)
        arm("guess_range", "rebn", trainer="roll_agentic.py", steps=40, episodes_per_step="128"),
        arm(
            "guess_range",
            "rebn",
            trainer="roll_agentic.py",
            steps=40,
            episodes_per_step="128",
            prompt="history",
        ),
    ],
    # frameworks' arms that ran 60 steps, compared over all 60 (``plot frameworks`` stops at ROLL's 40)
    "frameworks_60": SIXTY_STEP_FRAMEWORKS,
    "frameworks_fifteen": FIFTEEN_FRAMEWORKS,
    "frameworks_tictactoe": TICTACTOE_FRAMEWORKS,
    "critic_batch": [arm("guess_range", e, episodes_per_step="128") for e in ("gae", "grpo", "rebn")],
    "long": [arm("guess_range", "rebn", **LONG)],
    # long's run, and the same with the learning rate decayed to 0 over the 120 steps
    "hold": [arm("guess_range", "rebn", **LONG), arm("guess_range", "rebn", **HELD)],
    # hold's cosine run against GRPO, REINFORCE and equal episode weights, and against gamma 1.0,
    # with the same schedule and length
    "credit_hold": [arm("guess_range", e, **HELD) for e in ("rebn", "grpo", "reinforce", "rebn_per_episode")],
    "discount_hold": [
        *(arm("guess_range", "rebn", g, **HELD) for g in (0.9, 1.0)),
        *(arm("guess50", "rebn", g, **HELD_60) for g in (0.9, 1.0)),
    ],
    # discount_hold's 1-50 arms with each run seed from its own warm-up build (seed 0's is the one they share)
    "discount_builds": [arm("guess50", "rebn", g, **HELD_60, policy_seed="{seed}") for g in (0.9, 1.0)],
    # critic_batch's critic with credit_hold's schedule and length, one critic pass per batch (as the policy)
    "critic_hold": [
        arm("guess_range", "gae", **HELD, critic_epochs="1"),
        *(arm("guess_range", e, **HELD) for e in ("grpo", "rebn")),
    ],
    # GiGPO against credit_hold's ReBN and GRPO runs (same schedule and length: those two are reused)
    "credit_gigpo": [arm("guess_range", e, **HELD) for e in ("gigpo", "rebn", "grpo")],
    "signal": [arm("pick", "rebn", policy="guess")],
    # credit's ReBN run in fp32 and under bf16 autocast (the library's default on CPUs with AVX-512-BF16/AMX),
    # both from today's warm-up build (steps given, so that their names differ from credit's older runs)
    "precision": [arm("guess_range", "rebn", steps=60), arm("guess_range", "rebn", steps=60, bf16="true")],
}
DISCOUNT_METRICS = ["success_rate", "turns", "turns_to_solve", "first_guess_midpoint", "invalid_rate"]
METRICS = {  # what each experiment plots
    "discount": ["success_rate", "turns_to_solve", "first_guess_midpoint", "invalid_rate"],
    "credit": ["success_rate", "return", "turns", "invalid_rate"],
    "precision": ["success_rate", "return", "turns", "invalid_rate"],
    "adapters": ["success_rate", "return", "turns", "invalid_rate"],
    "critic": ["success_rate", "return", "invalid_rate"],
    "credit_lr": ["success_rate", "return", "turns", "invalid_rate"],
    "hangman": ["success_rate", "return", "invalid_rate", "entropy"],
    "drift": ["success_rate", "return", "invalid_rate", "entropy"],
    "batch": ["success_rate", "return", "turns", "invalid_rate"],
    "discount_batch": DISCOUNT_METRICS,
    "adapters_batch": ["success_rate", "return", "turns", "invalid_rate"],
    "adapters_main_ppo": ["success_rate", "return", "turns", "invalid_rate"],
    "frameworks": ["success_rate", "return", "turns", "invalid_rate"],
    "frameworks_60": ["success_rate", "return", "turns", "invalid_rate"],
    "frameworks_fifteen": ["success_rate", "return", "turns", "invalid_rate"],
    "frameworks_tictactoe": ["success_rate", "return", "turns", "invalid_rate"],
    "critic_batch": ["success_rate", "return", "invalid_rate"],
    "long": ["success_rate", "return", "turns", "invalid_rate"],
    "hold": ["success_rate", "return", "turns", "invalid_rate"],
    "credit_hold": ["success_rate", "return", "turns", "invalid_rate"],
    "discount_hold": DISCOUNT_METRICS,
    "discount_builds": DISCOUNT_METRICS,
    "critic_hold": ["success_rate", "return", "turns", "invalid_rate"],
    "credit_gigpo": ["success_rate", "return", "turns", "invalid_rate"],
    "signal": ["success_rate", "invalid_rate"],
}


def trainer_name(a: dict) -> str:
    """``verl`` for ``verl_cpu.py``, ``verl_main_ppo`` for ``verl_main_ppo.py``, and so on."""
    return a["trainer"].removesuffix(".py").removesuffix("_cpu")


def label(a: dict) -> str:
    via = "" if a["trainer"] == "train.py" else f" via {trainer_name(a)}"
    flags = "".join(f" {name}={value}" for name, value in a["flags"].items())
    steps = f" steps={a['steps']}" if a["steps"] else ""
    return f"{a['task']} {a['estimator']} gamma={a['gamma']}{flags}{steps}{via}"


DEFAULTS = {f.name: str(f.default) for f in fields(RunConfig)}


def run_flags(a: dict, seed: int) -> dict[str, str]:
    """``a``'s flags for run ``seed``, less those at ``train.py``'s default (so a run's name and command
    do not depend on whether an arm spells a default out)."""
    flags = {name: value.format(seed=seed) for name, value in a["flags"].items()}
    return {name: value for name, value in flags.items() if DEFAULTS.get(name) != value}


def run_path(a: dict, seed: int) -> Path:
    flags = "".join(f"-{name}{value}" for name, value in run_flags(a, seed).items())
    flags += f"-steps{a['steps']}" if a["steps"] else ""
    if a["trainer"] != "train.py":  # the commands at the top of verl_cpu.py and verl_main_ppo.py write there
        task = "" if a["task"] == "guess_range" else f"{a['task']}-"  # guess_range's runs came first
        return RESULTS / "adapters" / f"{trainer_name(a)}-{task}{a['estimator']}{flags}-seed{seed}.csv"
    return RUNS / f"{a['task']}-{a['estimator']}-g{a['gamma']}{flags}-seed{seed}.csv"


def module(a: dict) -> str:
    """The arm's trainer as a module of this package (``train.py`` -> ``benchmarks.learning.train``)."""
    return f"benchmarks.learning.{a['trainer'].removesuffix('.py')}"


def run_steps(a: dict, steps: int | None) -> int:
    """The arm's run length: its own, else ``steps`` (``run --steps``), else its task's."""
    return a["steps"] or steps or STEPS.get(a["task"], 40)


def finished(path: Path, steps: int) -> bool:
    """Whether the run at ``path`` wrote all its ``steps`` rows (a run stopped midway left fewer: it runs again)."""
    if not path.exists():
        return False
    with open(path) as f:
        return sum(1 for _ in csv.DictReader(f)) >= steps


def command(a: dict, seed: int, steps: int | None) -> list[str]:
    """The run's command, for the repository root (``run`` starts it there)."""
    steps = run_steps(a, steps)
    return [
        PYTHON.get(a["trainer"], sys.executable), "-m", module(a), "--task", a["task"], "--estimator", a["estimator"],
        "--gamma", str(a["gamma"]), "--seed", str(seed), "--steps", str(steps),
        *(x for name, value in run_flags(a, seed).items() for x in (f"--{name}", value)), "--out", str(run_path(a, seed)),
    ]  # fmt: skip


def run(
    names: list[str], seeds: list[int], steps: int | None, workers: int, tasks: list[str] | None = None
) -> None:
    jobs = {}
    for name in names:
        for a in EXPERIMENTS[name]:
            if tasks and a["task"] not in tasks:
                continue
            for seed in seeds:
                if not finished(run_path(a, seed), run_steps(a, steps)):
                    jobs.setdefault(str(run_path(a, seed)), command(a, seed, steps))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    RUNS.mkdir(parents=True, exist_ok=True)

    def one(cmd: list[str]) -> None:
        log = Path(cmd[-1]).with_suffix(".log")
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as f:
            f.write(" ".join(cmd[1:]) + "\n")
            f.flush()
            code = subprocess.call(cmd, env=env, cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
        print(f"{'done' if code == 0 else f'FAILED ({code})'}: {' '.join(cmd[1:])}", flush=True)

    print(f"{len(jobs)} runs, {workers} at a time", flush=True)
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, jobs.values()))


def read(path: Path) -> list[dict]:
    with open(path) as f:
        return [
            {k: float(v) if v not in ("", "nan") else float("nan") for k, v in r.items()}
            for r in csv.DictReader(f)
        ]


def smooth(values: list[float], width: int = 5) -> list[float]:
    out = []
    for i in range(len(values)):
        window = [v for v in values[max(0, i - width + 1) : i + 1] if v == v]
        out.append(statistics.mean(window) if window else float("nan"))
    return out


def window(num_steps: int) -> int:
    """Steps averaged at each end of a run for the summary: a quarter of the run, at most 10."""
    return max(1, min(10, num_steps // 4))


def window_mean(rows: list[dict], key: str, part: slice) -> float:
    values = [r[key] for r in rows[part] if r[key] == r[key]]
    return statistics.mean(values) if values else float("nan")


def print_blocks(runs: dict[int, list[dict]], key: str, size: int = 10) -> None:
    """Per seed, the mean of ``key`` over each ``size`` steps; for runs of 60 steps or more, also the
    mean over seeds of the last third of the run, with its interval (where a long curve has flattened)."""
    num_steps = min(len(rows) for rows in runs.values())
    if num_steps < 2 * size:
        return
    for seed, rows in runs.items():
        blocks = (window_mean(rows, key, slice(b, b + size)) for b in range(0, num_steps - size + 1, size))
        print(f"    {key} by {size}-step block, seed {seed}: " + " ".join(f"{v:.3f}" for v in blocks))
    if num_steps >= 60:
        first = num_steps - num_steps // 3
        late = [window_mean(rows, key, slice(first, num_steps)) for rows in runs.values()]
        print(f"    {key}, steps {first + 1}-{num_steps}: {mean_with_interval(late)}")


def print_paired(summary: list[dict], arms: list[dict], metrics: list[str]) -> None:
    """For two arms run on the same seeds (so on the same task seeds and warm-up policy): per seed and
    over seeds, the first arm's mean over the last ``window`` steps minus the second's."""
    first, second = ({r["seed"]: r for r in summary if r["arm"] == label(a)} for a in arms)
    seeds = sorted(first.keys() & second.keys())
    if len(seeds) < 2:
        return
    print(f"{label(arms[0])} minus {label(arms[1])}, last `window` steps, paired by seed {seeds}:")
    for k in metrics:
        differences = [first[s][f"{k}_last"] - second[s][f"{k}_last"] for s in seeds]
        print(
            f"    {k:22s} "
            + " ".join(f"{d:+.3f}" for d in differences)
            + f"  mean {mean_with_interval(differences)}"
        )


def plot(names: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for name in names:
        metrics = METRICS[name]
        tasks = sorted(
            {a["task"] for a in EXPERIMENTS[name]}, key=[a["task"] for a in EXPERIMENTS[name]].index
        )
        fig, axes = plt.subplots(
            len(tasks), len(metrics), figsize=(5 * len(metrics), 3.6 * len(tasks)), squeeze=False
        )
        summary = []
        all_runs = {  # a run that has not logged a step yet is left out
            i: {s: rows for s in range(10) if (p := run_path(a, s)).exists() and (rows := read(p))}
            for i, a in enumerate(EXPERIMENTS[name])
        }
        if not any(all_runs.values()):
            print(f"== {name}: no runs yet, nothing plotted")
            plt.close(fig)
            continue
        for task in tasks:  # compare the arms of a task over the steps they all ran
            same = [i for i, a in enumerate(EXPERIMENTS[name]) if a["task"] == task]
            horizon = min((len(rows) for i in same for rows in all_runs[i].values()), default=0)
            for i in same:
                all_runs[i] = {s: rows[:horizon] for s, rows in all_runs[i].items()}
        for i, a in enumerate(EXPERIMENTS[name]):
            runs = all_runs[i]
            if not runs:
                continue
            row_axes = axes[tasks.index(a["task"])]
            for key, ax in zip(metrics, row_axes):
                curves = [smooth([r[key] for r in rows]) for rows in runs.values()]
                n = min(len(c) for c in curves)
                steps = list(range(1, n + 1))
                columns = [[c[i] for c in curves] for i in range(n)]
                mean = [statistics.mean(v) for v in columns]
                ax.plot(steps, mean, label=f"{label(a)} ({len(runs)} seeds)")
                ax.fill_between(steps, [min(v) for v in columns], [max(v) for v in columns], alpha=0.2)
                ax.set_title(f"{a['task']}: {key} (5-step moving average)")
                ax.set_xlabel("optimizer step")
                ax.grid(alpha=0.3)
            for seed, rows in runs.items():
                w = window(len(rows))
                summary.append(
                    {"arm": label(a), "seed": seed, "steps": len(rows), "window": w}
                    | {f"{k}_first": round(window_mean(rows, k, slice(0, w)), 4) for k in metrics}
                    | {f"{k}_last": round(window_mean(rows, k, slice(-w, None)), 4) for k in metrics}
                )
        handles = [h for ax in axes[:, 0] for h in ax.get_lines()]
        rows = math.ceil(len(handles) / 2)  # the arms' legend, two columns under the plots
        fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, (0.2 * rows + 0.15) / fig.get_figheight(), 1, 1))
        RESULTS.mkdir(parents=True, exist_ok=True)
        fig.savefig(RESULTS / f"{name}.png", dpi=90)
        plt.close(fig)
        if summary:
            with open(RESULTS / f"{name}.csv", "w", newline="") as f:
                writer = csv.DictWriter(f, list(summary[0]))
                writer.writeheader()
                writer.writerows(summary)
            print(
                f"== {name}: mean over seeds of the first / last `window` steps [95% bootstrap interval over seeds]"
            )
            for i, a in enumerate(EXPERIMENTS[name]):
                if not all_runs[i]:
                    continue
                rows = [r for r in summary if r["arm"] == label(a)]
                steps = "/".join(str(r["steps"]) for r in rows)
                print(f"{label(a)} ({len(rows)} seeds, {steps} steps, window {rows[0]['window']}):")
                for k in metrics:
                    print(
                        f"    {k:22s} {mean_with_interval([r[f'{k}_first'] for r in rows])} -> {mean_with_interval([r[f'{k}_last'] for r in rows])}"
                    )
                print_blocks(all_runs[i], metrics[0])
            for task in tasks:
                if len(same := [a for a in EXPERIMENTS[name] if a["task"] == task]) == 2:
                    print_paired(summary, same, metrics)
        if name.startswith("discount"):
            for task in tasks:
                ref = reference_turns(task)
                print(
                    f"{task}: mean turns to solve: warm-up player (uniform among the numbers the hints allow) "
                    f"{ref['warmup_player']:.2f}, binary search {ref['binary_search']:.2f} (at most "
                    f"{ref['binary_search_max']}); log2(range)+1 = {ref['log2_range_plus_1']:.2f}"
                )


def reference_turns(task: str, games: int = 2000) -> dict[str, float]:
    """Turns to solve the same ``games`` games of ``task``: mean for the warm-up player, mean and most
    for binary search (the env's solver), and log2(range)+1."""
    from dataclasses import replace

    from benchmarks.learning.common import LEARNING_ENVS, TASKS, scripted_games

    warmup_player = TASKS[task]
    binary_search = replace(warmup_player, warmup_action=lambda env, _rng: env.solve_action())
    kwargs = LEARNING_ENVS[warmup_player.env_id][2]
    warmup = [len(moves) for _, moves in scripted_games(warmup_player, games, seed=7)]
    solver = [len(moves) for _, moves in scripted_games(binary_search, games, seed=7)]
    return {
        "warmup_player": statistics.mean(warmup),
        "binary_search": statistics.mean(solver),
        "binary_search_max": max(solver),
        "log2_range_plus_1": math.log2(kwargs["max_number"] - kwargs["min_number"] + 1) + 1,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", choices=["run", "plot"])
    parser.add_argument("experiments", nargs="+", choices=sorted(EXPERIMENTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, help="steps of every run (default: STEPS by task)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", nargs="+", help="only the arms on these tasks")
    cli = parser.parse_args()
    if cli.action == "run":
        run(cli.experiments, cli.seeds, cli.steps, cli.workers, cli.tasks)
    else:
        plot(cli.experiments)

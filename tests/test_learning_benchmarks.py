"""benchmarks/learning: the warm-up players, the domain tokenizer and one training step of each trainer."""

from __future__ import annotations

import csv
import importlib
import importlib.util
import json
import math
import os
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import gem_core
from gem_adapters.algorithms.advantages import ESTIMATORS

pytest.importorskip("trl")
REPO_PATH = Path(__file__).resolve().parents[1]
REPO = str(REPO_PATH)
# A policy that builds in seconds: 1 layer of width 32, warmed up by 3 SFT steps on 40 games.
TINY_POLICY = {
    "hidden_size": 32,
    "num_layers": 1,
    "warmup_episodes": 40,
    "warmup_steps": 3,
    "warmup_batch": 4,
}


@pytest.fixture(scope="module", autouse=True)
def learning_modules():
    """Import the scripts' modules for this file only, and drop the env ids they register afterwards."""
    global common, train, update_check
    from benchmarks.learning import common, train, update_check

    yield
    for env_id in common.LEARNING_ENVS:
        gem_core.unregister(env_id)
    ESTIMATORS.pop("shuffled_rebn", None)
    for name in [m for m in sys.modules if m.startswith("benchmarks.learning")]:
        del sys.modules[name]


def learning_module(name: str):
    """``benchmarks.learning.<name>``, imported afresh (the tests below drop it again)."""
    return importlib.import_module(f"benchmarks.learning.{name}")


def test_importing_the_scripts_gives_the_process_no_distributed_rank():
    """A process that imports a trainer's module (as the command tests here do) must not hand every
    subprocess it starts later a rank and a port: accelerate would then join that process group."""
    import pkgutil
    import subprocess

    import benchmarks.learning

    distributed = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    names = [  # roll_env_managers needs ROLL's checkout
        m.name for m in pkgutil.iter_modules(benchmarks.learning.__path__) if m.name != "roll_env_managers"
    ]
    code = (
        "import importlib, os\n"
        f"for name in {names!r}: importlib.import_module('benchmarks.learning.' + name)\n"
        f"print(sorted(k for k in {distributed!r} if k in os.environ))"
    )
    env = {k: v for k, v in os.environ.items() if k not in distributed}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_guess_warmup_player_plays_legally_and_always_wins():
    games = list(common.scripted_games(common.TASKS["guess"], 200, seed=3))
    for _, moves in games:
        infos = [result[4] for _, _, result in moves]
        assert not any(i.get("invalid_move") or i.get("format_error") for i in infos)
        assert infos[-1].get("success") and len(moves) <= 10
    # No preference for the middle: the first guesses spread over the whole range.
    assert len({moves[0][1] for _, moves in games}) == 10


def test_range_hints_bracket_the_target():
    env = gem_core.make("game:GuessTheNumber-v1-learn-range")
    for seed in range(20):
        env.reset(seed=seed)
        target, done = env.unwrapped.target, False
        for guess in (1, 10, 2, 9, 3, 8, 4, 7, 5, 6):
            if done:
                break
            observation, _, done, _, _ = env.step(f"\\boxed{{{guess}}}")
            if not done:
                low, high = map(int, observation.split("between ")[1].split(".")[0].split(" and "))
                assert low <= target <= high and (low, high) == (env.unwrapped.low, env.unwrapped.high)


def test_first_guess_metrics_find_the_midpoints_of_each_range():
    from gem_adapters.episodes.episode import Episode, Turn

    def episode(env_id: str, first_move: str) -> Episode:
        turn = Turn(action=first_move, observation="", reward=0.0, info={}, prompt_ids=[], action_ids=[])
        return Episode(env_id=env_id, seed=0, turns=[turn])

    on_50 = [episode("game:GuessTheNumber-v1-learn-range50", f"\\boxed{{{g}}}") for g in (25, 26, 1, 50)]
    metrics = train.first_guess_metrics(on_50)
    assert metrics["first_guess_midpoint"] == 0.5  # 25 and 26 halve 1-50; 1 and 50 do not
    assert metrics["first_guess_distance"] == statistics.mean([0.5, 0.5, 24.5, 24.5])
    on_10 = [
        episode("game:GuessTheNumber-v1-learn", m)
        for m in ("\\boxed{5}", "\\boxed{9}", "no move", "\\boxed{²}")
    ]
    assert train.first_guess_metrics(on_10) == {"first_guess_distance": 2.0, "first_guess_midpoint": 0.5}
    hangman = train.first_guess_metrics([episode("game:Hangman-v1-easy", "\\boxed{5}")])
    assert all(v != v for v in hangman.values())  # NaN: not a number-guessing game


def test_reference_turns_of_the_discount_experiment():
    experiments = learning_module("experiments")

    turns = experiments.reference_turns("guess50", games=300)
    # 2 (1 + 1/n) H_n - 3 = 6.18 for the uniform player, ~log2(n) - 1 for binary search, n = 50
    assert 5.9 < turns["warmup_player"] < 6.5 and 4.6 < turns["binary_search"] < 5.0
    assert turns["binary_search_max"] == 6 and round(turns["log2_range_plus_1"], 2) == 6.64
    del sys.modules["benchmarks.learning.experiments"]


def run_config(module_name: str) -> type:
    """The settings class a trainer module parses: its own subclass of ``train.RunConfig`` where it has one."""
    module = importlib.import_module(module_name)
    own = [
        v
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, train.RunConfig) and v.__module__ == module.__name__
    ]
    return own[0] if own else train.RunConfig


def test_every_arm_has_its_own_csv_and_a_command_its_trainer_parses():
    experiments = learning_module("experiments")
    from transformers import HfArgumentParser

    command_of_path = {}
    for arms in experiments.EXPERIMENTS.values():
        for a in arms:
            for seed in (0, 1, 2):
                path = experiments.run_path(a, seed)
                command = experiments.command(a, seed, steps=None)
                # a run shared by two arms or experiments trains once, and one CSV never holds two runs
                assert command_of_path.setdefault(path, command) == command, path
                assert command[1:3] == ["-m", experiments.module(a)] and command[-1] == str(path)
                assert importlib.util.find_spec(experiments.module(a)) is not None  # the trainer exists
                (run,) = HfArgumentParser(run_config(experiments.module(a))).parse_args_into_dataclasses(
                    command[3:]
                )
                expected = (a["task"], a["estimator"], a["gamma"], seed)
                assert (run.task, run.estimator, run.gamma, run.seed) == expected
                for name, value in a["flags"].items():
                    parsed = getattr(run, name)
                    assert parsed == type(parsed)(value.format(seed=seed))
                assert run.steps == (a["steps"] or experiments.STEPS[a["task"]])
    del sys.modules["benchmarks.learning.experiments"]


def test_a_run_stopped_midway_runs_again(tmp_path, monkeypatch):
    experiments = learning_module("experiments")
    monkeypatch.setattr(experiments, "RUNS", tmp_path)
    a = experiments.arm("guess_range", "rebn", steps=3)
    path = experiments.run_path(a, 0)
    started = []
    monkeypatch.setattr(experiments.subprocess, "call", lambda cmd, **kwargs: started.append(cmd) or 0)
    monkeypatch.setitem(experiments.EXPERIMENTS, "stopped", [a])

    path.write_text("step,success_rate\n1,0.5\n2,0.5\n")  # 2 of its 3 steps
    experiments.run(["stopped"], seeds=[0], steps=None, workers=1)
    assert [cmd[-1] for cmd in started] == [str(path)]

    started.clear()
    path.write_text("step,success_rate\n1,0.5\n2,0.5\n3,0.6\n")
    experiments.run(["stopped"], seeds=[0], steps=None, workers=1)
    assert started == []
    del sys.modules["benchmarks.learning.experiments"]


def test_a_flag_at_its_default_names_the_same_run_as_leaving_it_out():
    experiments = learning_module("experiments")

    plain = experiments.arm("guess50", "rebn", episodes_per_step="128")
    own_policy = experiments.arm("guess50", "rebn", episodes_per_step="128", policy_seed="{seed}")
    assert experiments.command(own_policy, 0, steps=None) == experiments.command(plain, 0, steps=None)
    seed1 = experiments.command(own_policy, 1, steps=None)
    assert seed1[-4:-2] == ["--policy_seed", "1"] and seed1 != experiments.command(plain, 1, steps=None)
    assert train.RunConfig(task="pick", policy="guess", policy_seed=1).policy_spec() == common.PolicySpec(
        "guess", seed=1
    )
    del sys.modules["benchmarks.learning.experiments"]


def test_block_means_and_the_late_window_of_a_long_run(capsys):
    experiments = learning_module("experiments")

    # seed 0 wins at every 3rd step index (0, 3, 6, ...), seed 1 at every step of its last 40 of 120
    runs = {
        0: [{"success_rate": float(step % 3 == 0)} for step in range(120)],
        1: [{"success_rate": float(step >= 80)} for step in range(120)],
    }
    experiments.print_blocks(runs, "success_rate")
    lines = capsys.readouterr().out.splitlines()
    # blocks of 10 steps: 4, 3, 3 wins of 10 in turn for seed 0 (steps 0-9 hold 0, 3, 6, 9)
    assert lines[0].split(": ")[1].split() == ["0.400", "0.300", "0.300"] * 4
    assert lines[1].split(": ")[1].split() == ["0.000"] * 8 + ["1.000"] * 4
    # steps 81-120 (indices 80-119): seed 0 wins at indices 81, 84, ..., 117 (13 of 40), seed 1 on all 40
    assert lines[2] == f"    success_rate, steps 81-120: {(13 / 40 + 1) / 2:.3f}"
    experiments.print_blocks({0: runs[0][:19]}, "success_rate")  # shorter than two blocks: nothing
    assert capsys.readouterr().out == ""
    del sys.modules["benchmarks.learning.experiments"]


def test_two_arms_are_compared_seed_by_seed_on_the_seeds_both_ran(capsys):
    experiments = learning_module("experiments")

    arms = [experiments.arm("guess50", "rebn", g) for g in (0.9, 1.0)]
    labels = [experiments.label(a) for a in arms]
    last = {(0, 0): 0.5, (0, 1): 0.75, (0, 2): 0.25, (1, 0): 0.25, (1, 1): 1.0, (1, 3): 0.0}  # (arm, seed)
    summary = [{"arm": labels[i], "seed": seed, "success_rate_last": v} for (i, seed), v in last.items()]
    experiments.print_paired(summary, arms, ["success_rate"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("paired by seed [0, 1]:")  # seeds 2 and 3 ran under one arm only
    assert lines[1].split()[1:3] == ["+0.250", "-0.250"] and "mean 0.000" in lines[1]
    # one shared seed: no pairing
    experiments.print_paired(summary[:1] + summary[3:4], arms, ["success_rate"])
    assert capsys.readouterr().out == ""
    del sys.modules["benchmarks.learning.experiments"]


def test_hangman_warmup_player_never_repeats_a_letter():
    for _, moves in common.scripted_games(common.TASKS["hangman"], 50, seed=0):
        letters = [action for _, action, _ in moves]
        assert len(letters) == len(set(letters))
        assert not any(result[4].get("invalid_move") for _, _, result in moves)


def test_every_tasks_first_prompts_fit_verls_prompt_share():
    from gem_adapters.episodes.chat_renderer import ChatRenderer

    renderer = ChatRenderer(common.shared_tokenizer(common.PolicySpec("guess")))
    for name, task in common.TASKS.items():
        env = gem_core.make(task.env_id)
        longest = max(len(renderer.first_prompt(env.reset(seed=seed)[0])) for seed in range(200))
        assert longest <= task.prompt_tokens < train.MAX_CONTEXT_TOKENS, name


def test_domain_tokenizer_round_trips_any_text():
    texts = [
        obs for _, moves in common.scripted_games(common.TASKS["guess"], 30, seed=0) for obs, _, _ in moves
    ]
    tokenizer = common.train_tokenizer(texts, vocab_size=300)
    for text in ["\\boxed{7}", "ünïcödé ☃ \x00 binary", "x" * 500, "<|im_end|> spoof"]:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text
    assert tokenizer.encode("123", add_special_tokens=False) == [
        tokenizer.convert_tokens_to_ids(c) for c in "123"
    ]
    assert tokenizer.eos_token == "<|im_end|>"


def test_the_warm_up_policy_follows_from_its_spec_whatever_the_thread_count(tmp_path, monkeypatch):
    import torch
    from safetensors.torch import load_file

    spec = common.PolicySpec("guess", **TINY_POLICY)
    caller_threads = torch.get_num_threads()
    weights = []
    for threads in (2, 1):  # on 2 threads even this policy's 3 SFT steps round differently
        monkeypatch.setenv("GEM_CACHE", str(tmp_path / f"threads{threads}"))
        torch.set_num_threads(threads)
        try:
            weights.append(load_file(common.warmed_up_policy(spec) / "model.safetensors"))
            assert torch.get_num_threads() == threads  # the build hands the caller's setting back
        finally:
            torch.set_num_threads(caller_threads)
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])


def test_runs_started_together_build_the_warm_up_once(tmp_path, monkeypatch):
    import threading

    monkeypatch.setenv("GEM_CACHE", str(tmp_path))
    spec = common.PolicySpec("guess", **TINY_POLICY)
    builds, build = [], common._build_warmed_up_policy
    monkeypatch.setattr(common, "_build_warmed_up_policy", lambda *args: (builds.append(args), build(*args)))
    folders, errors = [], []

    def start_run():
        try:
            folders.append(common.warmed_up_policy(spec))
        except Exception as error:
            errors.append(error)

    runs = [threading.Thread(target=start_run) for _ in range(3)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert errors == [] and len(builds) == 1
    assert folders == [spec.folder()] * 3 and (spec.folder() / "config.json").exists()


@pytest.mark.parametrize("estimator, schedule", [("rebn", "cosine"), ("gae", "constant")])
def test_one_training_step_from_a_tiny_warmed_up_policy(tmp_path, monkeypatch, estimator, schedule):
    monkeypatch.setenv("GEM_CACHE", str(tmp_path / "cache"))
    spec = common.PolicySpec("guess", **TINY_POLICY)
    out = tmp_path / "run.csv"
    run = train.RunConfig(
        task="guess", estimator=estimator, steps=2, episodes_per_step=8, num_generations=4, out=str(out),
        warmup_steps=0, lr_schedule=schedule,
    )  # fmt: skip
    rows = train.main(run, policy=spec)
    assert spec.folder().exists()
    assert [r["step"] for r in rows] == [1, 2]
    # the rate after each step's scheduler step: cosine from lr to 0 over the run's 2 steps, or constant
    lr = run.learning_rate
    assert [r["lr"] for r in rows] == pytest.approx([lr / 2, 0.0] if schedule == "cosine" else [lr, lr])
    with open(out) as f:
        written = list(csv.DictReader(f))
    assert len(written) == 2 and 0.0 <= float(written[-1]["success_rate"]) <= 1.0
    assert (float(written[-1]["critic_loss"]) >= 0) is (estimator == "gae")


@pytest.mark.parametrize(
    "settings, refused",
    [({"estimator": "gae"}, "critic"), ({"beta": 0.04}, "KL"), ({"lr_schedule": "cosine"}, None)],
)
def test_verl_runs_refuse_the_settings_they_do_not_train_with(settings, refused):
    run = train.RunConfig(**settings)
    if refused is None:
        train.check_verl_run(run)
    else:
        with pytest.raises(SystemExit, match=refused):
            train.check_verl_run(run)


def test_shuffled_rebn_permutes_rebn_over_the_batch():
    from gem_adapters.algorithms.advantages import compute_advantages

    rewards = [[0.0, -0.1, 1.0], [1.0], [0.0, 0.0, -0.1, 0.0], [-0.1, 1.0]]
    rebn = np.concatenate(compute_advantages("rebn", rewards, gamma=0.9))
    assert "shuffled_rebn" not in ESTIMATORS  # importing the script registers nothing
    train.register_shuffled_rebn()
    shuffled = np.concatenate(compute_advantages("shuffled_rebn", rewards, gamma=0.9))
    assert sorted(shuffled) == pytest.approx(sorted(rebn)) and not np.allclose(shuffled, rebn)


def test_update_check_measures_the_step_on_the_batch_it_trained_on(tmp_path, monkeypatch):
    monkeypatch.setenv("GEM_CACHE", str(tmp_path / "cache"))
    spec = common.PolicySpec("guess", **TINY_POLICY)
    run = train.RunConfig(task="guess", steps=5, episodes_per_step=8, num_generations=4, learning_rate=1e-2)
    measured = update_check.measure(run, policy=spec)
    turns = len(measured["advantage"])
    assert turns >= 8 and all(len(values) == turns for values in measured.values())
    # The policy before the step scores each reply as the rollout sampled it; the step moved them.
    assert torch.allclose(measured["before"], measured["rollout_logprob"], atol=1e-4)
    assert not torch.allclose(measured["after"], measured["before"], atol=1e-3)
    for name in ("allowed_before", "allowed_after"):
        assert torch.all((measured[name] > 0) & (measured[name] <= 1))
    assert update_check.hint_range(
        "3 is wrong: the number is higher. The number is between 4 and 10.", {}
    ) == (4, 10)
    assert update_check.hint_range("I am thinking of a number.", {"min_number": 1, "max_number": 50}) == (
        1,
        50,
    )


def run_with_verl(module: str, body: str, tmp_path: Path, port: int):
    """Run ``body`` (which sets ``result``) after ``import <module>`` in a fresh process, as verl opens a
    one-rank gloo process group there; ``TINY`` is the tiny warmed-up policy's spec. Returns ``result``."""
    import json
    import subprocess

    code = (
        f"import json\nfrom benchmarks.learning import common, {module}\n"
        f"TINY = common.PolicySpec('guess', **{TINY_POLICY!r})\n"
        f"{body}\nprint(json.dumps(result))\n"
    )
    env = {
        **os.environ,
        "GEM_CACHE": str(tmp_path / "cache"),
        "OMP_NUM_THREADS": "1",
        "MASTER_PORT": str(port),
        "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p),
    }
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_trl_and_verl_take_the_same_steps_on_the_same_batches(tmp_path, free_port):
    """``same_update.py`` on a tiny policy."""
    pytest.importorskip("verl")
    measured = run_with_verl(
        "same_update",
        "run = same_update.SameUpdateConfig(task='guess', episodes_per_step=8, num_generations=4, steps=2)\n"
        "result = same_update.compare(run, policy=TINY)",
        tmp_path,
        free_port,
    )
    assert len(measured["steps"]) == 2
    for step in measured["steps"]:
        assert step["episodes"] == 8 and step["turns"] >= 8 and step["action_tokens"] > 0
        assert step["loss"]["TRL"] == pytest.approx(step["loss"]["verl"], rel=1e-4, abs=1e-7)
        assert step["grad_norm"]["TRL"] == pytest.approx(step["grad_norm"]["verl"], rel=1e-4)
        assert step["gradient"]["relative"] < 1e-4 and step["gradient"]["cosine"] > 0.9999
    assert measured["update_norm"]["verl"] > 0
    assert measured["update"]["relative"] < 1e-3 and measured["update"]["cosine"] > 0.9999


def test_verl_cpu_run_trains_with_the_runs_learning_rate_schedule(tmp_path, free_port):
    """``verl_cpu.py``'s run on a tiny policy: 2 steps, the rate cosine to 0 as TRL's."""
    pytest.importorskip("verl")
    rows = run_with_verl(
        "verl_cpu",
        "run = verl_cpu.VerlRunConfig(task='guess', steps=2, episodes_per_step=8, num_generations=4,"
        f" warmup_steps=0, lr_schedule='cosine', out={str(tmp_path / 'run.csv')!r})\n"
        "result = verl_cpu.main(run, policy=TINY)",
        tmp_path,
        free_port,
    )
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["turns"] >= 1 and r["loss"] == r["loss"] for r in rows)
    assert [r["lr"] for r in rows] == pytest.approx([5e-4 / 2, 0.0])


def test_verl_main_ppo_trains_through_verls_trainer_on_the_runs_task_seeds(tmp_path, monkeypatch):
    """``verl_main_ppo.py`` on a tiny policy: ``python -m verl.trainer.main_ppo`` on CPU, 2 steps."""
    pytest.importorskip("verl.experimental.agent_loop")
    import pandas as pd
    import yaml

    monkeypatch.setenv("GEM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    verl_main_ppo = learning_module("verl_main_ppo")

    spec = common.PolicySpec("guess", **TINY_POLICY)
    run = train.RunConfig(
        task="guess", seed=2, steps=2, episodes_per_step=8, num_generations=4, out=str(tmp_path / "run.csv"),
        warmup_steps=0, lr_schedule="cosine",
    )  # fmt: skip
    try:
        argv = verl_main_ppo.command(run, common.warmed_up_policy(spec), tmp_path / "inputs", "/tmp/unused")
        tasks = pd.read_parquet(tmp_path / "inputs" / "data" / "train.parquet")
        seeds = [row["seed"] for row in tasks["extra_info"]]
        assert seeds == [2 * train.TASK_SEEDS_PER_RUN + i for i in range(4)]  # 2 steps of 2 tasks
        (loop,) = yaml.safe_load((tmp_path / "inputs" / "gem_agent_loop.yaml").read_text())
        assert (
            loop["_target_"] == "benchmarks.learning.verl_main_ppo.RecordingGemAgentLoop"
            and loop["max_turns"] is None
        )
        assert argv[1:3] == ["-m", "verl.trainer.main_ppo"] and "actor_rollout_ref.rollout.n=4" in argv

        rows = verl_main_ppo.main(run, policy=spec)
    finally:
        sys.modules.pop("benchmarks.learning.verl_main_ppo", None)
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:  # every step's 8 episodes recorded by the agent loop in verl's workers
        assert 0.0 <= row["success_rate"] <= 1.0 and row["turns"] >= 1
        assert row["entropy"] > 0 and row["loss"] == row["loss"]
    assert [r["lr"] for r in rows] == pytest.approx([run.learning_rate / 2, 0.0])  # verl's cosine, as TRL's
    with open(tmp_path / "run.csv") as f:
        assert len(list(csv.DictReader(f))) == 2


def test_openrlhf_command_is_the_runs_settings_as_train_ppo_ray_parses_them(tmp_path):
    """``openrlhf_train_ppo_ray.command``'s flags, parsed by OpenRLHF's own ``train_ppo_ray`` parser (its
    ``__main__`` block up to ``train(args)``), hold the run's batch, optimizer and schedule."""
    pytest.importorskip("openrlhf")
    from tests.adapters.openrlhf.openrlhf_source import parse_cli

    launcher = learning_module("openrlhf_train_ppo_ray")
    run = launcher.OpenRLHFRunConfig(task="guess_range", seed=1, steps=60, episodes_per_step=128, out="x.csv")
    argv = launcher.command(run, tmp_path / "policy", tmp_path)
    assert argv[1:3] == ["-m", "gem_adapters.openrlhf.cpu"]
    from gem_adapters.openrlhf.cpu import CPU_FLAGS, parse_gem_flags

    gem_config, openrlhf_flags = parse_gem_flags(argv[3:])
    assert gem_config.estimator == run.estimator  # the command's own flag, not a variable it would refuse
    args = parse_cli([*CPU_FLAGS, *openrlhf_flags])
    assert (args.rollout.batch_size, args.rollout.n_samples_per_prompt) == (16, 8)
    assert args.train.batch_size == args.train.micro_batch_size == 128  # one optimizer step, one micro-batch
    assert args.actor.adam.lr == run.learning_rate and tuple(args.actor.adam.betas) == (0.9, 0.999)
    assert args.actor.lr_scheduler == "constant_with_warmup"
    assert math.ceil(run.steps * args.actor.lr_warmup_ratio) == run.warmup_steps  # OpenRLHF's warm-up steps
    assert args.algo.advantage.gamma == run.gamma and args.algo.kl.init_coef == 0
    assert args.rollout.max_new_tokens == common.TASKS["guess_range"].max_turn_tokens
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    seeds = [json.loads(row["label"])["seed"] for row in rows]
    assert seeds == [train.TASK_SEEDS_PER_RUN + i for i in range(60 * 16)]  # train.py's task seeds
    with pytest.raises(SystemExit, match="estimators OpenRLHF"):
        launcher.check_run(launcher.OpenRLHFRunConfig(estimator="gae"))
    del sys.modules["benchmarks.learning.openrlhf_train_ppo_ray"]


def test_openrlhf_rows_come_from_its_log_and_the_recorded_episodes(tmp_path):
    """A step's row: OpenRLHF's ``Global step`` line (as in benchmarks/results/openrlhf_cpu's log) and the
    next ``episodes_per_step`` recorded episodes; a line still being written is not read."""
    from gem_adapters.episodes.jsonl import write_jsonl

    launcher = learning_module("openrlhf_train_ppo_ray")
    log = tmp_path / "train.log"
    line = (REPO_PATH / "benchmarks/results/openrlhf_cpu/train_ppo_ray_2_steps.log").read_text().splitlines()
    log.write_text("\n".join(x for x in line if "Global step" in x) + "\n")
    records = launcher.step_records(log)
    assert [step for step, _ in records] == [1, 2] and records[0][1]["actor_lr"] == 0.001
    played = tmp_path / "episodes"
    played.mkdir()
    task = common.TASKS["guess"]
    tokenizer = common.train_tokenizer(["\\boxed{5} is wrong"], vocab_size=300)
    episodes = common.scripted_episodes(task, common.ChatRenderer(tokenizer), 6, seed=0)
    write_jsonl(played / "episodes-1.jsonl", episodes)
    with open(played / "episodes-1.jsonl", "a") as f:
        f.write('{"env_id": "half a line')
    assert len(launcher.played_episodes(played)) == 6
    row = launcher.step_row(2, records[1][1], launcher.played_episodes(played), episodes_per_step=3)
    assert row["success_rate"] == train.batch_metrics(episodes[3:])["success_rate"] == 1.0
    assert row["step"] == 2 and row["loss"] == records[1][1]["policy_loss"]
    with pytest.raises(RuntimeError, match="2 episodes recorded"):
        launcher.step_row(2, records[1][1], episodes[:5], episodes_per_step=3)
    del sys.modules["benchmarks.learning.openrlhf_train_ppo_ray"]


def test_a_roll_turn_sample_holds_every_observation_and_its_action():
    from gem_adapters.episodes.chat_renderer import ChatRenderer

    launcher = learning_module("roll_agentic")
    renderer = ChatRenderer(common.shared_tokenizer(common.PolicySpec("guess")))
    for name, task in common.TASKS.items():
        observations = [obs for _, moves in common.scripted_games(task, 30, seed=0) for obs, _, _ in moves]
        # ROLL's prompt for a turn is its observation alone
        longest = max(len(renderer.first_prompt(obs)) for obs in observations)
        assert longest + task.max_turn_tokens <= launcher.turn_sample_tokens(task), name


def test_roll_history_prompt_runs_the_chat_manager_on_the_whole_conversation(tmp_path):
    """``--prompt history``: ROLL's turn samples through StepChatEnvManager with every earlier turn, and a
    ``sequence_length`` that holds the longest conversation of the warm-up player's games (the default,
    ``observation``, is section 15's StepConcatEnvManager on the current observation: the test above)."""
    import yaml

    from gem_adapters.episodes.chat_renderer import ChatRenderer

    launcher = learning_module("roll_agentic")
    task = common.TASKS["guess_range"]
    run = launcher.RollRunConfig(task="guess_range", steps=40, episodes_per_step=128, prompt="history")
    cfg = yaml.safe_load(launcher.write_config(run, tmp_path / "policy", tmp_path).read_text())
    env = cfg["custom_envs"]["GemCoreGame"]
    assert env["env_manager_cls"] == "benchmarks.learning.roll_env_managers.StepChatEnvManager"
    assert (
        env["history_length"] == cfg["max_actions_per_traj"] == 10
        and env["agent_template"] == "{observation}"
    )
    assert env["agent_system_template"] is None and cfg["skip_mock_system_prompt"] is True
    assert (
        cfg["sequence_length"] == launcher.history_sample_tokens(task, 10) > launcher.turn_sample_tokens(task)
    )
    renderer = ChatRenderer(common.shared_tokenizer(common.PolicySpec("guess")))
    longest = 0
    for _, moves in common.scripted_games(task, 30, seed=0):
        messages = []
        for observation, action, _ in moves:
            messages.append({"role": "user", "content": observation})
            prompt = renderer.tokenizer(renderer.render(messages, True), add_special_tokens=False)[
                "input_ids"
            ]
            longest = max(longest, len(prompt) + task.max_turn_tokens)
            messages.append({"role": "assistant", "content": action})
    assert max(len(moves) for _, moves in common.scripted_games(task, 30, seed=0)) >= 5
    assert longest <= cfg["sequence_length"], longest
    del sys.modules["benchmarks.learning.roll_agentic"]


def test_roll_config_and_rows(tmp_path):
    """``roll_agentic``'s ROLL config (the run's batch, groups, turn budget, ReBN as step_reinforce) and a
    row from ROLL's ``metrics_tag`` log line (as in benchmarks/results/roll_cpu's log)."""
    import yaml

    launcher = learning_module("roll_agentic")
    run = launcher.RollRunConfig(task="guess_range", seed=2, steps=60, episodes_per_step=128)
    cfg = yaml.safe_load(launcher.write_config(run, tmp_path / "policy", tmp_path).read_text())
    assert cfg["rollout_batch_size"] == 128 and cfg["seed"] == 2 and cfg["max_steps"] == 60
    manager = cfg["train_env_manager"]
    assert (manager["num_env_groups"], manager["group_size"]) == (16, 8)
    assert manager["max_env_num_per_worker"] * run.env_workers == 128
    assert cfg["adv_estimator"] == "step_reinforce" and cfg["step_reward_gamma"] == run.gamma
    assert cfg["max_tokens_per_step"] == 8 and cfg["max_actions_per_traj"] == 10
    env = cfg["custom_envs"]["GemCoreGame"]
    assert env["env_type"] == "gem_core/game:GuessTheNumber-v1-learn-range"
    assert env["env_manager_cls"] == "benchmarks.learning.roll_env_managers.StepConcatEnvManager"
    assert (
        env["history_length"] == 1 and env["agent_template"] == "{current_observation}"
    )  # section 15's runs
    assert cfg["actor_train"]["training_args"]["learning_rate"] == run.learning_rate
    assert (
        cfg["batch_adjust_mode"] == "random_sample"
    )  # one optimizer step a rollout (ROLL's delete mode fails)
    training = cfg["actor_train"]["training_args"]
    assert training["per_device_train_batch_size"] * training["gradient_accumulation_steps"] == 512
    assert cfg["sequence_length"] == launcher.TURN_SAMPLE_TOKENS  # a turn sample, padded
    log = tmp_path / "roll.log"
    lines = (REPO_PATH / "benchmarks/results/roll_cpu/run.log").read_text().splitlines()
    log.write_text("\n".join(x for x in lines if "metrics_tag" in x) + "\n")
    records = launcher.step_records(log)
    rows = [launcher.step_row(record) for record in records]
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["success_rate"] == 0.0 and rows[0]["turns"] == 2.0 and rows[0]["invalid_rate"] == 1.0
    assert rows[0]["return"] == pytest.approx(-0.2)
    with pytest.raises(SystemExit, match="step_reinforce"):
        launcher.check_run(launcher.RollRunConfig(estimator="grpo"))
    del sys.modules["benchmarks.learning.roll_agentic"]

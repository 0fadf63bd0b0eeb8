"""examples/train_trl.py end to end on CPU with a tiny random model: one step, its files, its flags."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from gem_adapters.episodes.jsonl import read_jsonl
from tests import script_runs

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_trl.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("train_trl", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_trl"] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def tiny_args(example, output_dir, *extra: str):
    """The example's own command line for a tiny run: one step of 4 episodes in pairs."""
    return example.parse_args(
        [
            "--model", "tiny", "--max_steps", "1", "--per_device_train_batch_size", "4",
            "--num_generations", "2", "--max_turn_tokens", "4", "--eval_episodes", "2",
            "--trajectories_per_step", "3", "--warmup_episodes", "4", "--warmup_batch_size", "2",
            "--output_dir", str(output_dir), *extra,
        ]
    )  # fmt: skip


def test_one_tiny_step_writes_metrics_curve_and_trajectories(example, tmp_path):
    script, config = tiny_args(example, tmp_path)
    example.main(script, config)

    with open(tmp_path / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["split"], r["phase"], r["step"]) for r in rows] == [
        ("eval", "start", "0"),
        ("eval", "warmup", "0"),
        ("train", "rl", "1"),
        ("eval", "end", "1"),
    ]
    train = rows[2]
    # A random model never writes \boxed{}: every turn is a format error, every episode runs 4 turns.
    assert float(train["format_error_rate"]) == 1.0 and float(train["turns"]) == 4.0
    assert float(train["return"]) == pytest.approx(-0.4)
    assert float(train["tokens_per_s"]) > 0 and float(train["step_s"]) > 0

    episodes = read_jsonl(tmp_path / "trajectories.jsonl")
    assert [e.info["split"] for e in episodes] == ["eval"] * 4 + ["train"] * 3 + ["eval"] * 2
    assert all(e.env_id == "game:GuessTheNumber-v1-easy" and e.num_turns == 4 for e in episodes)
    assert all(len(t.action_ids) <= 4 for e in episodes for t in e.turns)
    # The worked example is context before the first observation (template tokens, no loss).
    demonstration = json.loads(script.demonstration)
    assert demonstration and all(e.prefix_messages == demonstration for e in episodes)

    png = (tmp_path / "learning_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


TIMINGS = {"wall_s", "step_s", "tokens_per_s"}


def test_a_run_is_deterministic_for_its_seed(example, tmp_path):
    """Warm-up, sampling, advantages and the update: the same seed gives the same metrics and episodes."""
    runs = []
    for name in ("first", "second"):
        # temperature 1 and a few more tokens, so sampling and the update have something to differ on
        example.main(
            *tiny_args(example, tmp_path / name, "--max_turn_tokens", "6", "--learning_rate", "1e-3")
        )
        with open(tmp_path / name / "metrics.csv") as f:
            timings = TIMINGS | set(example.TIMINGS)
            rows = [{k: v for k, v in row.items() if k not in timings} for row in csv.DictReader(f)]
        actions = [
            [t.action_ids for t in e.turns] for e in read_jsonl(tmp_path / name / "trajectories.jsonl")
        ]
        runs.append((rows, actions))
    assert runs[0] == runs[1]
    assert float(runs[0][0][2]["grad_norm"]) > 0  # the step really updated the weights
    other = tiny_args(
        example, tmp_path / "other-seed", "--max_turn_tokens", "6", "--learning_rate", "1e-3", "--seed", "1"
    )
    example.main(*other)
    actions = [
        [t.action_ids for t in e.turns] for e in read_jsonl(tmp_path / "other-seed" / "trajectories.jsonl")
    ]
    assert actions != runs[0][1]


def test_the_command_line_is_trls(example):
    script, config = example.parse_args(
        [
            "--model",
            "Qwen/Qwen3-1.7B",
            "--use_vllm",
            "--vllm_mode",
            "server",
            "--per_device_train_batch_size",
            "128",
        ]
    )
    assert (script.model, config.use_vllm, config.vllm_mode, config.generation_batch_size) == (
        "Qwen/Qwen3-1.7B", True, "server", 128,
    )  # fmt: skip
    script, config = example.parse_args([])
    assert script.model == "smollm2" and config.advantage_estimator == "rebn" and config.gamma == 1.0
    assert (config.max_steps, config.generation_batch_size, config.num_generations, config.seed) == (
        12,
        16,
        2,
        0,
    )


def run_example(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=EXAMPLE.parents[1],
    )


HEAVY = ("torch", "transformers", "trl", "gem_adapters.trl")


def run_as_script(*argv: str) -> subprocess.CompletedProcess:
    return script_runs.run_as_script(EXAMPLE, argv, HEAVY)


def test_help_and_bad_settings_come_before_torch_and_trl_load(example):
    from gem_adapters.algorithms.advantages import estimator_names

    helped = run_as_script("--help")
    assert helped.stdout.strip().splitlines()[-1] == "0 []", helped.stderr[-2000:]
    text = " ".join(helped.stdout.split())
    for name in estimator_names(values=False, state_keys=True):
        assert name in text
    assert "--warmup_episodes" in text and "--per_device_train_batch_size" in text and "--help_all" in text
    for argv, message in (
        (["--advantage_estimator", "gae"], "needs a critic's per-turn values"),
        (["--advantage_estimator", "gem_nope"], "unknown estimator 'gem_nope'"),
        (["--env_id", "game:Nope-v0"], "No env registered as 'game:Nope-v0'"),
        (["--max_steps", "many"], "invalid int value"),
    ):
        failed = run_as_script(*argv)
        assert failed.stdout.strip().splitlines()[-1] == "2 []", failed.stderr[-2000:]
        assert message in failed.stderr and "Traceback" not in failed.stderr


def test_help_all_lists_trls_own_fields(example):
    helped = run_example("--help_all")
    assert helped.returncode == 0, helped.stderr[-2000:]
    text = " ".join(helped.stdout.split())
    assert "--vllm_mode" in text and "--max_turns" in text and "--warmup_episodes" in text


def test_report_to_tensorboard_and_wandb_get_the_metrics_csv_rows(example, tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))  # nothing lands in the working directory
    script, config = tiny_args(example, tmp_path, "--report_to", "tensorboard")
    assert config.report_to == ["tensorboard"]
    config.report_to = ["tensorboard", "wandb"]  # both at once (the command line takes one name)
    example.main(script, config)
    with open(tmp_path / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    for row in rows:
        for column in ("success_rate", "return", "turns"):
            scalars = [e for e in events.Scalars(f"{row['split']}/{column}") if e.step == int(row["step"])]
            assert scalars and scalars[-1].value == pytest.approx(float(row[column]), abs=1e-4)
    # wandb's offline run holds the same rows (its contents are checked in tests/test_run_log.py)
    runs = list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(runs) == 1 and runs[0].stat().st_size > 0

"""examples/train_trl_openenv.py: TRL's own environment_factory path and our rollout_func path, each
one GRPO step of a tiny random Llama against a real ``gem serve`` started by the example."""

from __future__ import annotations

import csv
import importlib.util
import math
import subprocess
import sys

import pytest

pytest.importorskip("openenv")
pytest.importorskip("trl")
pytest.importorskip("jmespath")  # TRL's tool-call parsing on transformers < 5.13

import gem_core
from tests import script_runs
from tests.openenv import support

GUESS = "game:GuessTheNumber-v1-easy"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location(
        "train_trl_openenv", support.REPO / "examples/train_trl_openenv.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_the_environment_class_plays_gem_serve_episodes(example):
    with example.gem_server(GUESS, max_sessions=4) as url:
        game = example.GemGame(url)
        local = gem_core.make(GUESS)
        assert game.reset(seed=3, prompt=[]) == local.reset(seed=3)[0]
        total = 0.0
        for move in ["\\boxed{5}", "\\boxed{2}", "\\boxed{9}", "\\boxed{1}"]:
            obs, reward, terminated, truncated, _ = local.step(move)
            assert game.play(move) == obs
            total += reward
            if terminated or truncated:
                break
        assert game.done and game.get_reward() == pytest.approx(total)
        with pytest.raises(ValueError, match="Game over"):
            game.play("\\boxed{4}")
        game.client.close()


@pytest.mark.parametrize("path", ["trl", "gem"])
def test_one_training_step_against_gem_serve(example, tmp_path, path):
    argv = ["--path", path, "--model", "tiny", "--max_steps", "1", "--per_device_train_batch_size", "2"]
    argv += ["--num_generations", "2", "--num_tasks", "4", "--output_dir", str(tmp_path)]
    argv += ["--max_completion_length", "32"] if path == "trl" else ["--max_turn_tokens", "6"]
    trainer = example.main(*example.parse_args(argv))
    logs = trainer.state.log_history
    assert trainer.state.global_step == 1 and math.isfinite(logs[-1]["train_loss"])
    with open(tmp_path / "metrics.csv", newline="") as f:
        (row,) = csv.DictReader(f)  # one row per optimizer step
    assert (row["split"], row["step"]) == ("train", "1")
    assert float(row["loss"]) == pytest.approx(logs[0]["loss"], abs=1e-4)
    assert (tmp_path / "learning_curve.png").stat().st_size > 0
    if path == "trl":  # the env's get_reward is the reward TRL logged
        assert "rewards/GemGame/mean" in logs[0]
    else:  # our path ran full episodes through openenv: sessions
        assert logs[0]["env/turns"] > 0


def test_the_command_line_is_trls_with_the_paths_own_config(example):
    from trl import GRPOConfig

    from gem_adapters.trl import GEMGRPOConfig

    script, config = example.parse_args([])  # the example's defaults, on TRL's stock config
    assert (script.path, script.model, script.num_tasks) == ("trl", "smollm2", 64)
    assert type(config) is GRPOConfig and config.bf16 is False and config.max_completion_length == 256
    assert (config.max_steps, config.per_device_train_batch_size, config.num_generations) == (10, 8, 4)
    assert (config.learning_rate, config.seed, config.report_to) == (5e-5, 0, [])
    argv = ["--path", "gem", "--max_steps", "3", "--per_device_train_batch_size", "6", "--num_generations"]
    argv += [
        "3",
        "--learning_rate",
        "1e-3",
        "--seed",
        "7",
        "--output_dir",
        "elsewhere",
        "--max_turn_tokens",
        "9",
    ]
    script, config = example.parse_args(argv)
    assert script.path == "gem" and isinstance(config, GEMGRPOConfig) and config.max_turn_tokens == 9
    assert (config.max_steps, config.generation_batch_size, config.num_generations) == (3, 6, 3)
    assert (config.learning_rate, config.seed, config.output_dir) == (1e-3, 7, "elsewhere")
    for argv in (["--max_turn_tokens", "9"], ["--no_such_flag", "1"]):  # GEM's flag is not TRL's config's
        with pytest.raises(SystemExit) as exit:
            example.parse_args(argv)
        assert exit.value.code == 2


HEAVY = ("torch", "transformers", "gem_adapters.trl", "openenv")


def run_as_script(*argv: str) -> subprocess.CompletedProcess:
    return script_runs.run_as_script(support.REPO / "examples/train_trl_openenv.py", argv, HEAVY)


def test_help_and_bad_settings_come_before_torch_and_trl_load():
    helped = run_as_script("--help")
    assert helped.stdout.strip().splitlines()[-1] == "0 []", helped.stderr[-2000:]
    text = " ".join(helped.stdout.split())
    for flag in ("--path", "--env_url", "--max_steps", "--per_device_train_batch_size", "--max_turn_tokens"):
        assert flag in text
    for argv, message in (
        (["--env_id", "game:Nope-v0"], "No env registered as 'game:Nope-v0'"),
        (["--path", "verl"], "invalid choice: 'verl'"),
        (["--max_steps", "many"], "invalid int value"),
    ):
        failed = run_as_script(*argv)
        assert failed.stdout.strip().splitlines()[-1] == "2 []", failed.stderr[-2000:]
        assert message in failed.stderr and "Traceback" not in failed.stderr

"""examples/train_trl_openenv.py: TRL's own environment_factory path and our rollout_func path, each
one GRPO step of a tiny random Llama against a real ``gem serve`` started by the example."""

from __future__ import annotations

import csv
import importlib.util
import math
import sys

import pytest

pytest.importorskip("openenv")
pytest.importorskip("trl")
pytest.importorskip("jmespath")  # TRL's tool-call parsing on transformers < 5.13

import gem_core
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
    argv = [
        "--path",
        path,
        "--model",
        "tiny",
        "--max-steps",
        "1",
        "--batch-size",
        "2",
        "--num-generations",
        "2",
    ]
    argv += ["--max-completion-length", "32", "--max-turn-tokens", "6", "--num-tasks", "4"]
    trainer = example.main([*argv, "--output-dir", str(tmp_path)])
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

"""examples/train_trl.py end to end on CPU with a tiny random model: one step, its files, its flags."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from gem_adapters.trajectory import read_jsonl

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_trl.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("train_trl", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_trl"] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_one_tiny_step_writes_metrics_curve_and_trajectories(example, tmp_path):
    args = example.Args(
        model="tiny",
        total_steps=1,
        episodes_per_step=4,
        micro_batch_size=2,
        num_generations=2,
        max_turn_tokens=4,
        eval_episodes=2,
        trajectories_per_step=3,
        output_dir=str(tmp_path),
    )
    example.main(args)

    with open(tmp_path / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["split"], r["step"]) for r in rows] == [("eval", "0"), ("train", "1"), ("eval", "1")]
    train = rows[1]
    # A random model never writes \boxed{}: every turn is a format error, every episode runs 4 turns.
    assert float(train["format_error_rate"]) == 1.0 and float(train["turns"]) == 4.0
    assert float(train["return"]) == pytest.approx(-0.4)
    assert float(train["tokens_per_s"]) > 0 and float(train["step_s"]) > 0

    episodes = read_jsonl(tmp_path / "trajectories.jsonl")
    assert [e.info["split"] for e in episodes] == ["eval"] * 2 + ["train"] * 3 + ["eval"] * 2
    assert all(e.env_id == "game:GuessTheNumber-v1-easy" and e.num_turns == 4 for e in episodes)
    assert all(len(t.action_ids) <= 4 for e in episodes for t in e.turns)
    # The worked example is context before the first observation (template tokens, no loss).
    demonstration = json.loads(args.demonstration)
    assert demonstration and all(e.prefix_messages == demonstration for e in episodes)

    png = (tmp_path / "learning_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_gpu_flags_parse(example):
    from transformers import HfArgumentParser

    (args,) = HfArgumentParser(example.Args).parse_args_into_dataclasses(
        ["--model", "Qwen/Qwen3-1.7B", "--use-vllm", "--vllm-mode", "server", "--episodes-per-step", "128"]
    )
    assert (args.model, args.use_vllm, args.vllm_mode, args.episodes_per_step) == (
        "Qwen/Qwen3-1.7B",
        True,
        "server",
        128,
    )
    (defaults,) = HfArgumentParser(example.Args).parse_args_into_dataclasses([])
    assert defaults.model == "smollm2" and defaults.advantage_estimator == "rebn" and defaults.gamma == 0.9

"""examples/train_verl.py on CPU: its files and its Hydra overrides against verl's real config (the
launch itself needs a GPU with vLLM)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("verl.experimental.agent_loop")

import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config
from verl.utils.dataset.rl_dataset import RLHFDataset

from gem_adapters.policies.transformers_policy import TransformersPolicy
from gem_adapters.verl.policy_server import PolicyServer

from .helpers import make_loop

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_verl.py"


def load_example():
    spec = importlib.util.spec_from_file_location("train_verl", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_example_launch_composes_with_verl_config(tmp_path, tokenizer, tiny_model):
    example = load_example()
    args, extra = example.parse_args(
        [
            "--train-tasks",
            "6",
            "--val-tasks",
            "2",
            "--output-dir",
            str(tmp_path),
            "--max-turns",
            "3",
            "--",
            "x=1",
        ]
    )
    assert extra == ["x=1"] and args.max_turns == 3
    paths = example.write_inputs(args)
    overrides = example.hydra_overrides(args, paths, model_path=str(tmp_path / "model"))
    with initialize_config_dir(
        config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None
    ):
        config = compose(config_name="ppo_trainer", overrides=overrides)  # unknown keys would raise
    validate_config(
        config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )
    assert not need_critic(config) and not need_reference_policy(config)
    assert config.algorithm.adv_estimator == "gem_rebn" and config.trainer.use_v1
    rollout = config.actor_rollout_ref.rollout
    assert (rollout.prompt_length, rollout.response_length) == (
        args.max_prompt_length,
        args.max_response_length,
    )

    # verl's dataset reads the parquet with the composed data config (its prompt-length filter on) ...
    dataset = RLHFDataset(str(paths["train"]), tokenizer, config.data)
    assert len(dataset) == 6 and dataset[0]["agent_name"] == "gem_agent"
    # ... and the written agent-loop YAML builds a GemAgentLoop with the example's limits.
    OmegaConf.update(
        config, "actor_rollout_ref.rollout.agent.agent_loop_config_path", str(paths["agent_loop"])
    )
    loop = make_loop(
        config, PolicyServer(TransformersPolicy(tiny_model, tokenizer)), tokenizer, yaml=paths["agent_loop"]
    )
    assert (loop.max_turns, loop.max_new_tokens) == (3, args.max_turn_tokens)

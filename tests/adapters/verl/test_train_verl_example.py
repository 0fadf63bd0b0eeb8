"""examples/train_verl.py on CPU: its config (examples/verl/gem_ppo.yaml over verl's ppo_trainer), the
command it launches, and the files it writes (the launch itself needs a GPU with vLLM)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("verl.experimental.agent_loop")

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
    spec.loader.exec_module(module)
    return module


def test_example_config_is_verls_and_the_launch_composes_it(tmp_path, tokenizer, tiny_model):
    example = load_example()
    args, config, command = example.prepare(
        [
            "gem.train_tasks=6",
            "gem.val_tasks=2",
            f"gem.output_dir={tmp_path / 'run'}",
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3",
            f"actor_rollout_ref.model.path={tmp_path / 'model'}",
            "--dry-run",
        ]
    )
    assert args.dry_run and command[1:3] == ["-m", "verl.trainer.main_ppo"]
    # main_ppo composes the same config from the printed command (hydra.* configures Hydra, not the job)
    flags, overrides = command[3:5], [o for o in command[5:] if not o.startswith("hydra.")]
    config_dir, config_name = (flag.split("=", 1)[1] for flag in flags)
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        launched = compose(config_name=config_name, overrides=overrides)  # unknown keys would raise
    assert OmegaConf.to_container(launched, resolve=True) == OmegaConf.to_container(config, resolve=True)
    validate_config(
        config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )
    assert not need_critic(config) and not need_reference_policy(config)
    assert config.algorithm.adv_estimator == "gem_rebn" and config.trainer.use_v1
    assert config.actor_rollout_ref.rollout.name == "vllm"  # machine=gpu, the default
    rollout = config.actor_rollout_ref.rollout
    assert (rollout.prompt_length, rollout.response_length) == (
        config.data.max_prompt_length,
        config.data.max_response_length,
    )
    paths = {"train": config.data.train_files, "agent_loop": rollout.agent.agent_loop_config_path}
    assert all(Path(p).is_relative_to(tmp_path / "run") for p in paths.values())

    # verl's dataset reads the parquet with the composed data config (its prompt-length filter on) ...
    dataset = RLHFDataset(paths["train"], tokenizer, config.data)
    assert len(dataset) == 6 and dataset[0]["agent_name"] == "gem_agent"
    # ... and the written agent-loop YAML builds a GemAgentLoop with the config's limits.
    loop = make_loop(
        config, PolicyServer(TransformersPolicy(tiny_model, tokenizer)), tokenizer, yaml=paths["agent_loop"]
    )
    assert (loop.max_turns, loop.max_new_tokens) == (3, config.gem.max_turn_tokens)

"""examples/train_roll.py without a GPU: the ROLL config it writes and the launch command (the launch
itself needs ROLL, a GPU and vLLM)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

pytest.importorskip("gem", reason="the reference GEM (pip install gem-llm) is what ROLL consumes")

import gem

from gem_adapters.roll import NAMESPACE

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_roll.py"


def load_example():
    spec = importlib.util.spec_from_file_location("train_roll", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def written(example, tmp_path: Path, *flags: str) -> tuple[dict, Path]:
    args = example.parse_args(["--output-dir", str(tmp_path), "--dry-run", *flags])
    path = example.write_config(args, model_path="/models/m")
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True), path


def test_rebn_config_written_for_the_run(tmp_path):
    example = load_example()
    cfg, path = written(
        example,
        tmp_path,
        *("--env-id", "game:Sudoku-v1-easy", "--gamma", "0.8", "--max-turns", "15"),
        *("--episodes-per-step", "32", "--env-kwargs", "{instruction_from_observation: true}"),
    )
    assert path == tmp_path / "roll_config" / "gem_core_rebn.yaml"
    assert cfg["adv_estimator"] == "step_reinforce" and cfg["step_reward_gamma"] == 0.8
    assert cfg["pretrain"] == cfg["reward_pretrain"] == "/models/m"
    assert cfg["rollout_batch_size"] == 32
    manager = cfg["train_env_manager"]
    assert (manager["num_env_groups"], manager["group_size"], manager["num_groups_partition"]) == (
        32,
        1,
        [32],
    )
    env = cfg["custom_envs"][example.TAG]
    assert env["env_type"] == NAMESPACE + "game:Sudoku-v1-easy"
    assert env["max_steps"] == env["history_length"] == 15  # interpolations resolved
    assert env["max_tokens_per_step"] == cfg["actor_infer"]["generating_args"]["max_new_tokens"] == 256
    assert env["env_config"] == {"instruction_from_observation": True}
    assert cfg["output_dir"] == str(tmp_path) and cfg["logging_dir"].startswith(str(tmp_path))


def test_grpo_config_groups_episodes(tmp_path):
    example = load_example()
    cfg, _ = written(
        example,
        tmp_path,
        "--advantage-estimator",
        "grpo",
        "--num-generations",
        "4",
        "--episodes-per-step",
        "32",
    )
    assert cfg["adv_estimator"] == "grpo"
    manager = cfg["train_env_manager"]
    assert (manager["num_env_groups"], manager["group_size"]) == (8, 4)
    with pytest.raises(SystemExit, match="multiple"):
        written(example, tmp_path, "--advantage-estimator", "grpo", "--num-generations", "5")
    with pytest.raises(SystemExit):
        example.parse_args(["--advantage-estimator", "ppo"])


def test_the_env_of_the_written_config_is_made_by_gem(tmp_path):
    example = load_example()
    from gem.envs.registration import ENV_REGISTRY

    from gem_adapters.roll import register_gem_core_envs

    cfg, _ = written(example, tmp_path, "--env-kwargs", "{min_number: 3, max_number: 9}")
    env_cfg = cfg["custom_envs"][example.TAG]
    saved = dict(ENV_REGISTRY)
    try:
        register_gem_core_envs()
        env = gem.make(env_id=env_cfg["env_type"], **env_cfg["env_config"])  # as ROLL's TrajEnvManager does
        assert "between 3 and 9" in env.reset(seed=0)[0]
    finally:
        ENV_REGISTRY.clear()
        ENV_REGISTRY.update(saved)


def test_launch_command_points_hydra_at_the_written_config(tmp_path, capsys):
    example = load_example()
    roll_dir = tmp_path / "ROLL"
    assert (
        example.main(["--output-dir", str(tmp_path / "run"), "--roll-dir", str(roll_dir), "--dry-run"]) == 0
    )
    config = tmp_path / "run" / "roll_config" / "gem_core_rebn.yaml"
    command = example.launch_command(config, roll_dir)
    assert command[1:3] == ["examples/start_agentic_pipeline.py", "--config_path"]
    assert (roll_dir / "examples" / command[3]).resolve() == config.parent  # relative, as Hydra requires
    assert command[4:] == ["--config_name", "gem_core_rebn"]
    assert "start_agentic_pipeline.py" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="not a ROLL checkout"):
        example.main(["--output-dir", str(tmp_path / "run"), "--roll-dir", str(roll_dir)])

"""examples/train_roll.py without a GPU or ROLL: the ROLL config it composes from its YAML and the command
line and writes, its errors, and the launch command (the launch itself needs ROLL, a GPU and vLLM)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gem_adapters.roll import NAMESPACE
from tests import script_runs

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_roll.py"
TAG = "GemCoreGame"  # the custom_envs entry of examples/roll/*.yaml


def load_example():
    spec = importlib.util.spec_from_file_location("train_roll", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def written(tmp_path: Path, *overrides: str, config_name: str = "agentic_gem_rebn") -> tuple[dict, Path]:
    """The config ``train_roll.py --dry-run`` writes for ``overrides`` (output under ``tmp_path``)."""
    example = load_example()
    argv = ["--dry-run", "--config-name", config_name, f"output_dir={tmp_path}", *overrides]
    assert example.main(argv) == 0
    path = tmp_path / "roll_config" / f"{config_name}.yaml"
    return OmegaConf.to_container(OmegaConf.load(path)), path


def test_overrides_reach_the_written_config(tmp_path):
    cfg, _ = written(
        tmp_path,
        *("pretrain=/models/m", "rollout_batch_size=32", "step_reward_gamma=0.8", "max_actions_per_traj=15"),
        *("adv_estimator=reinforce", "actor_train.training_args.learning_rate=3e-6"),
        f"custom_envs.{TAG}.env_type=gem_core/game:Sudoku-v1-easy",
        f"+custom_envs.{TAG}.env_config.instruction_from_observation=true",
    )
    assert cfg["adv_estimator"] == "reinforce" and cfg["step_reward_gamma"] == 0.8
    assert cfg["pretrain"] == cfg["reward_pretrain"] == "/models/m"
    assert cfg["actor_train"]["training_args"]["learning_rate"] == 3e-6
    manager = cfg["train_env_manager"]
    assert cfg["rollout_batch_size"] == manager["num_env_groups"] == 32 and manager[
        "num_groups_partition"
    ] == [32]
    env = cfg["custom_envs"][TAG]
    assert env["env_type"] == NAMESPACE + "game:Sudoku-v1-easy"
    assert env["max_steps"] == env["history_length"] == 15  # interpolations resolved in the written file
    assert env["max_tokens_per_step"] == cfg["actor_infer"]["generating_args"]["max_new_tokens"] == 256
    assert env["env_config"] == {"instruction_from_observation": True}
    assert env["env_manager_cls"] == "gem_adapters.roll.env_managers.StepChatEnvManager"
    assert cfg["output_dir"] == str(tmp_path) and cfg["logging_dir"] == f"{tmp_path}/logs"
    assert cfg["checkpoint_config"]["output_dir"] == f"{tmp_path}/checkpoints"


def test_grpo_is_the_other_yaml(tmp_path):
    cfg, path = written(tmp_path, "train_env_manager.group_size=4", config_name="agentic_gem_grpo")
    assert path.name == "agentic_gem_grpo.yaml"
    assert cfg["adv_estimator"] == "grpo" and cfg["reward_normalization"]["grouping"] == "traj_group_id"
    assert (cfg["train_env_manager"]["num_env_groups"], cfg["train_env_manager"]["group_size"]) == (8, 4)
    assert cfg["custom_envs"][TAG]["env_manager_cls"].endswith(".TrajEnvManager")


def test_smollm2_and_a_relative_output_dir_are_resolved(tmp_path, monkeypatch):
    from gem_adapters.runtime.models import resolve

    monkeypatch.chdir(tmp_path)
    assert load_example().main(["--dry-run", "output_dir=run", "pretrain=smollm2"]) == 0
    cfg = OmegaConf.load(tmp_path / "run" / "roll_config" / "agentic_gem_rebn.yaml")
    assert cfg.pretrain == cfg.reward_pretrain == resolve("smollm2") != "smollm2"
    assert (
        cfg.output_dir == str(tmp_path / "run")
        and cfg.tracker_kwargs.log_dir == f"{tmp_path}/run/tensorboard"
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "rollout_batch_sz=32",
            "Could not override 'rollout_batch_sz'",
        ),  # not a key of the YAML: struct mode
        (f"custom_envs.{TAG}.env_config.max_turns=3", "use +custom_envs"),  # a new key needs Hydra's +
        (f"custom_envs.{TAG}.env_type=gem_core/game:Sudoku-v9", "Did you mean: game:Sudoku-v1"),
    ],
)
def test_a_bad_override_is_an_error_and_writes_nothing(tmp_path, capsys, override, message):
    with pytest.raises(SystemExit) as exit_info:
        load_example().main(["--dry-run", f"output_dir={tmp_path}", override])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "roll_config").exists()


def test_the_env_of_the_written_config_is_made_by_gem(tmp_path):
    gem = pytest.importorskip("gem", reason="the reference GEM (pip install gem-llm) is what ROLL consumes")
    from gem.envs.registration import ENV_REGISTRY

    from gem_adapters.roll import register_gem_core_envs

    cfg, _ = written(
        tmp_path, f"+custom_envs.{TAG}.env_config.min_number=3", f"+custom_envs.{TAG}.env_config.max_number=9"
    )
    env_cfg = cfg["custom_envs"][TAG]
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
    assert example.main([f"output_dir={tmp_path / 'run'}", "--roll-dir", str(roll_dir), "--dry-run"]) == 0
    config = tmp_path / "run" / "roll_config" / "agentic_gem_rebn.yaml"
    command = example.launch_command(config, roll_dir)
    assert command[1:3] == ["examples/start_agentic_pipeline.py", "--config_path"]
    assert (roll_dir / "examples" / command[3]).resolve() == config.parent  # relative, as Hydra requires
    assert command[4:] == ["--config_name", "agentic_gem_rebn"]
    assert f"cd {roll_dir} && " in capsys.readouterr().out
    assert example.launch_env(roll_dir)["PYTHONPATH"].split(":")[:2] == [
        str(roll_dir),
        str(EXAMPLE.parents[1]),
    ]
    with pytest.raises(SystemExit, match="not a ROLL checkout"):
        example.main([f"output_dir={tmp_path / 'run'}", "--roll-dir", str(roll_dir)])


def test_help_needs_no_roll():
    out = script_runs.run_as_script(EXAMPLE, ["--help"], ["roll.pipeline"])
    assert "custom_envs.GemCoreGame.history_length=1" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stderr[-2000:]

"""GiGPO and the per-turn reward contract through the trainers: one real GEMGRPOTrainer step with
``gigpo`` (the state keys the rollout recorded reach the estimator), the TRL example whose scorer gives
turns without a signal (None), and the verl example through verl's own estimator registry."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl")

from gem_adapters.algorithms.advantages import compute_advantages
from gem_adapters.trl import GEMGRPOTrainer

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ENV_ID = "game:GuessTheNumber-v1-easy"


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def token_rows(episodes, per_turn, width):
    """Each turn's value on its action ids, laid out from the turns themselves (as TRL's completion)."""
    rows = np.zeros((len(episodes), width))
    for b, (episode, values) in enumerate(zip(episodes, per_turn)):
        position = 0
        for k, (turn, value) in enumerate(zip(episode.turns, values)):
            position += len(turn.prompt_ids) if k else 0
            rows[b, position : position + len(turn.action_ids)] = value
            position += len(turn.action_ids)
    return rows


def test_gigpo_trains_in_trl_on_the_recorded_state_keys(tokenizer, tmp_path):
    from tests.adapters.trl.test_trl_adapter import make_trainer

    trainer = make_trainer(
        tokenizer,
        tmp_path,
        env_id=ENV_ID,
        trainer_class=GEMGRPOTrainer,
        advantage_estimator="gigpo",
        gamma=0.9,
        per_device_train_batch_size=8,
        num_generations=4,
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    episodes = trainer.last_episodes
    keys = [[t.state_key for t in e.turns] for e in episodes]
    assert all(k is not None for row in keys for k in row)
    # The copies of a task start from one state: their first turns share a key (an anchor).
    groups = [e.group_id for e in episodes]
    for g in set(groups):
        assert len({keys[b][0] for b in range(len(episodes)) if groups[b] == g}) == 1
    per_turn = compute_advantages(
        "gigpo", [[t.reward for t in e.turns] for e in episodes], gamma=0.9, group_ids=groups, state_keys=keys
    )
    width = trainer.last_advantages.shape[1]
    np.testing.assert_allclose(
        trainer.last_advantages.numpy(), token_rows(episodes, per_turn, width), rtol=1e-5, atol=1e-6
    )
    assert np.abs(trainer.last_advantages.numpy()).sum() > 0
    assert any(not np.array_equal(p.detach(), before[n]) for n, p in trainer.model.named_parameters())


def test_trl_example_trains_on_a_scorers_turn_rewards_with_none(tmp_path):
    example = load_example("per_turn_rewards_trl")
    args, config = example.parse_args(
        [
            "--model", "tiny", "--max_steps", "1", "--per_device_train_batch_size", "6",
            "--num_generations", "3", "--max_turn_tokens", "6", "--output_dir", str(tmp_path),
        ]
    )  # fmt: skip
    assert (config.advantage_estimator, config.gamma, config.learning_rate) == ("rebn", 0.9, 1e-5)  # DEFAULTS
    trainer = example.main(args, config)
    assert trainer.state.global_step == 1 and len(trainer.last_episodes) == 6
    episodes = trainer.last_episodes
    turn_rewards = [example.judge(e) for e in episodes]  # the scorer's answers, None included
    assert [[t.reward for t in e.turns] for e in episodes] == [
        [0.0 if r is None else r for r in row] for row in turn_rewards
    ]
    assert any(r is None for row in turn_rewards for r in row)
    per_turn = compute_advantages("rebn", turn_rewards, gamma=0.9)
    width = trainer.last_advantages.shape[1]
    np.testing.assert_allclose(
        trainer.last_advantages.numpy(), token_rows(episodes, per_turn, width), rtol=1e-5, atol=1e-6
    )


def test_trl_examples_command_line_is_trls():
    example = load_example("per_turn_rewards_trl")
    args, config = example.parse_args(
        ["--env_id", ENV_ID, "--max_steps", "4", "--advantage_estimator", "grpo"]
    )
    assert (args.model, args.env_id, config.max_steps, config.advantage_estimator) == (
        "smollm2",
        ENV_ID,
        4,
        "grpo",
    )
    assert (config.generation_batch_size, config.num_generations, config.max_turn_tokens) == (8, 4, 24)
    for argv in (["--steps", "4"], ["--advantage_estimator", "gem_nope"]):  # not a flag; not an estimator
        with pytest.raises(SystemExit) as exit:
            example.parse_args(argv)
        assert exit.value.code == 2


@pytest.mark.parametrize("estimator", ["rebn", "grpo", "reinforce", "rloo"])
def test_verl_example_hands_turn_rewards_with_none_to_verls_estimators(estimator, capsys):
    pytest.importorskip("verl")
    example = load_example("per_turn_rewards_verl")
    advantages = example.main(estimator)  # asserts the shared module's numbers on every action id
    assert advantages.shape == (2, 24) and "per-turn advantages" in capsys.readouterr().out

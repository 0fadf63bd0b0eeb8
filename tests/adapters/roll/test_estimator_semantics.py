"""The advantages that ROLL computes under examples/roll/*.yaml equal gem_adapters.algorithms.advantages on the same episodes.

ROLL is not on PyPI, so its arithmetic is written out below from its source (alibaba/ROLL, main at
commit 8eb27cc of 2026-08-18), in torch float32 as ROLL runs it, and driven by the YAML's fields:

* ``roll/pipeline/agentic/utils.py::compute_discounted_returns``: for ``step_reinforce`` each turn
  sample of a trajectory gets ``step_rewards[t] = r_t + step_reward_gamma * step_rewards[t+1]``;
* ``roll/pipeline/agentic/utils.py::compute_response_level_rewards``: ``step_reinforce`` normalises
  ``step_rewards``; other estimators normalise ``scores.sum(-1)`` (TrajEnvManager puts the episode's
  reward sum on its last token, so that is the episode score);
* ``roll/pipeline/agentic/utils.py::agentic_reward_norm``: per group of ``grouping`` (``batch``: one
  group), mean and ``torch.std`` (unbiased) over the group or the batch as ``norm_mean_type`` /
  ``norm_std_type`` say, ``(x - mean) / (std + 1e-6)``, and 0 where the group has one element or
  ``|std| <= 1e-6``; the two types default from ``method`` and ``grouping``
  (``roll/pipeline/agentic/agentic_config.py::_resolve_reward_norm_defaults``);
* ``roll/utils/functionals.py::expand_to_token_level`` puts that number on the sample's last token and
  ``compute_reinforce_return`` sums rewards backwards with the token-level ``gamma``;
  ``agentic_compute_advantage`` then whitens only if ``whiten_advantages`` and clips at
  ``advantage_clip``.

The one difference is documented in the ReBN YAML: ROLL's batch std is the sample std, gem_adapters'
ReBN the population std (GEM's), so ROLL's ReBN advantages are gem_adapters' times sqrt(n / (n - 1)).
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

gem = pytest.importorskip("gem", reason="the reference GEM (pip install gem-llm) is what ROLL consumes")

import gem_core  # noqa: E402
from gem_adapters.algorithms.advantages import compute_advantages  # noqa: E402
from gem_adapters.roll import NAMESPACE  # noqa: E402
from gem_adapters.roll.env import make_roll_env  # noqa: E402
from tests.adapters.roll.players import play  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[3] / "examples" / "roll"
GAMES = ["game:GuessTheNumber-v1-hard", "game:Sudoku-v1-easy", "game:Mastermind-v1-easy"]


def load(name: str) -> dict:
    return yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())


def norm_types(cfg: dict) -> tuple[str | None, str | None]:
    """``norm_mean_type`` / ``norm_std_type`` as ROLL resolves them (explicit fields win over ``method``)."""
    rn = cfg["reward_normalization"]
    scope = "batch" if rn.get("grouping", "batch").lower() == "batch" else "group"
    method = rn.get("method", "identity")
    derived = {
        "identity": (None, None),
        "mean": (scope, None),
        "mean_std": (scope, scope),
        "asym_clip": (scope, scope),
    }.get(method, (None, None))
    return (rn.get("norm_mean_type") or derived[0], rn.get("norm_std_type") or derived[1])


def roll_normalise(
    x: torch.Tensor, groups: list, mean_type: str | None, std_type: str | None
) -> torch.Tensor:
    """``agentic_reward_norm`` on float32 scores ``x`` with one group key per sample."""
    out = torch.empty_like(x)
    batch_mean, batch_std = x.mean(), x.std()
    for key in dict.fromkeys(groups):
        idx = torch.tensor([i for i, g in enumerate(groups) if g == key])
        scores = x[idx]
        mean = {"batch": batch_mean, "group": scores.mean()}.get(mean_type, 0.0)
        std = {"batch": batch_std, "group": scores.std()}.get(std_type)
        if std is None:
            out[idx] = scores - mean
        elif scores.numel() > 1 and std.abs() > 1e-6:
            out[idx] = (scores - mean) / (std + 1e-6)
        else:
            out[idx] = torch.zeros_like(scores)
    return out


def roll_token_advantages(
    response_level: float, prompt_len: int, response_len: int, gamma: float
) -> torch.Tensor:
    """``expand_to_token_level`` + ``compute_reinforce_return`` for one unpadded sample, on its response tokens."""
    token_rewards = torch.zeros(prompt_len + response_len)
    token_rewards[-1] = response_level  # the last attended token
    token_rewards = token_rewards[1:]  # "select the response part": logits predict the next token
    returns, running = torch.zeros_like(token_rewards), 0.0
    for t in reversed(range(len(token_rewards))):
        running = token_rewards[t] + gamma * running
        returns[t] = running
    return returns[prompt_len - 1 :]  # the response tokens


def roll_advantages(cfg: dict, episode_rewards: list[list[float]], episode_groups: list) -> list[np.ndarray]:
    """Per-turn advantages of ROLL's agentic pipeline under ``cfg``, one array per episode."""
    assert (
        not cfg.get("whiten_advantages")
        and cfg.get("advantage_clip") is None
        and cfg.get("reward_clip") is None
    )
    mean_type, std_type = norm_types(cfg)
    grouping = cfg["reward_normalization"]["grouping"]
    if cfg["adv_estimator"] == "step_reinforce":  # one sample per turn
        gamma = float(cfg["step_reward_gamma"])
        samples, groups = [], []
        for rewards, group in zip(episode_rewards, episode_groups):
            r = torch.tensor(np.asarray(rewards, dtype=np.float32))
            step_rewards, running = torch.empty_like(r), 0.0
            for t in reversed(range(len(r))):
                running = r[t] + gamma * running
                step_rewards[t] = running
            samples.append(step_rewards)
            groups += [group if grouping != "batch" else "default"] * len(r)
        normed = roll_normalise(torch.cat(samples), groups, mean_type, std_type).numpy()
        return np.split(normed.astype(np.float64), np.cumsum([len(r) for r in episode_rewards])[:-1])
    # one sample per episode; its score is the sum of the turn rewards, on every turn's tokens
    scores = torch.tensor([float(sum(r)) for r in episode_rewards], dtype=torch.float32)
    groups = [g if grouping != "batch" else "default" for g in episode_groups]
    normed = roll_normalise(scores, groups, mean_type, std_type).numpy().astype(np.float64)
    return [np.full(len(r), a) for r, a in zip(episode_rewards, normed)]


def gem_core_episodes(groups: int, per_group: int) -> tuple[list[list[float]], list]:
    """Rewards of ``groups`` x ``per_group`` episodes (a group shares game and seed), mixed-skill agents."""
    rewards, group_ids = [], []
    for g in range(groups):
        env = make_roll_env(GAMES[g % len(GAMES)])
        for k in range(per_group):
            agent = random.Random(f"{g}:{k}")
            rewards.append(play(env, seed=100 + g, agent=agent, p_random=0.0 if g == 0 else 0.3 * (k % 3)))
            group_ids.append((GAMES[g % len(GAMES)], 100 + g))
    return rewards, group_ids


@pytest.fixture(scope="module")
def episodes():
    return gem_core_episodes(groups=6, per_group=4)


def test_rebn_config_is_step_reinforce_over_the_batch():
    cfg = load("agentic_gem_rebn")
    assert cfg["adv_estimator"] == "step_reinforce"
    assert norm_types(cfg) == ("batch", "batch") and cfg["reward_normalization"]["grouping"] == "batch"
    assert cfg["gamma"] == 1.0 and 0 < cfg["step_reward_gamma"] <= 1
    env = cfg["custom_envs"][cfg["train_env_manager"]["tags"][0]]
    assert env["env_manager_cls"].rsplit(".", 1)[1] in (
        "StepChatEnvManager",
        "StepConcatEnvManager",
        "StepEnvManager",
    )  # a sample per turn
    assert env["env_type"].startswith(NAMESPACE) and env["env_type"][len(NAMESPACE) :] in gem_core.list_envs()


def test_roll_rebn_equals_gem_rebn_up_to_the_std_ddof(episodes):
    cfg = load("agentic_gem_rebn")
    rewards, groups = episodes
    roll = np.concatenate(roll_advantages(cfg, rewards, groups))
    ours = np.concatenate(compute_advantages("rebn", rewards, gamma=cfg["step_reward_gamma"]))
    n = len(ours)
    assert n > 30 and np.std(ours) > 0.5  # varied returns: the comparison means something
    np.testing.assert_allclose(roll, ours * math.sqrt((n - 1) / n), rtol=1e-5, atol=2e-6)
    assert not np.allclose(roll, ours, rtol=1e-3)  # the ddof difference is real, and documented


def test_grpo_config_is_group_normalised_episode_scores():
    cfg = load("agentic_gem_grpo")
    assert cfg["adv_estimator"] == "grpo" and cfg["gamma"] == 1.0
    assert (
        norm_types(cfg) == ("group", "group") and cfg["reward_normalization"]["grouping"] == "traj_group_id"
    )
    env = cfg["custom_envs"][cfg["train_env_manager"]["tags"][0]]
    assert env["env_manager_cls"].endswith(".TrajEnvManager")  # one sample per episode
    assert cfg["train_env_manager"]["group_size"] > 1
    assert (
        cfg["rollout_batch_size"]
        == cfg["train_env_manager"]["num_env_groups"] * cfg["train_env_manager"]["group_size"]
    )


def test_roll_grpo_equals_gem_grpo(episodes):
    cfg = load("agentic_gem_grpo")
    rewards, groups = episodes
    roll = roll_advantages(cfg, rewards, groups)
    ours = compute_advantages("grpo", rewards, group_ids=groups)
    np.testing.assert_allclose(np.concatenate(roll), np.concatenate(ours), rtol=1e-5, atol=2e-6)
    solver_group = np.concatenate(ours[:4])  # group 0: the solver alone, identical returns: no signal
    assert np.all(np.abs(solver_group) < 1e-6) and np.all(np.concatenate(roll[:4]) == 0)
    assert np.count_nonzero(np.abs(np.concatenate(ours)) > 0.1) > 10


@pytest.mark.parametrize("name", ["agentic_gem_rebn", "agentic_gem_grpo"])
def test_token_level_return_spreads_the_sample_advantage_over_its_response(name):
    gamma = load(name)["gamma"]
    tokens = roll_token_advantages(0.75, prompt_len=9, response_len=5, gamma=gamma)
    assert tokens.tolist() == [0.75] * 5
    assert (
        roll_token_advantages(0.75, prompt_len=9, response_len=5, gamma=0.9)[0] < 0.75
    )  # why gamma must be 1

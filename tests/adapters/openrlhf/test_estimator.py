"""The per-turn estimator that replaces ``RemoteExperienceMaker.compute_advantages_and_returns``, on
the played episodes as OpenRLHF batches them (its own conversion, ``concat_experiences`` and the
arguments its CLI parses), against ``gem_adapters.algorithms.advantages`` and against OpenRLHF's own estimator."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("openrlhf.utils.agent")

import torch
from openrlhf.trainer.ppo_utils.experience import Experience
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController

from gem_adapters.algorithms.advantages import compute_advantages, discounted_returns, turn_values_to_tokens
from gem_adapters.openrlhf.advantages import (
    NUM_TURNS,
    STATE_KEYS,
    TURN_REWARDS,
    compute_advantages_and_returns,
    gem_advantages_and_returns,
    mask_runs,
)

from .conftest import AGENT_FUNC, MAX_LEN
from .openrlhf_source import parse_cli, process_response_into_experience, stock_experience_maker

GAMMA = 0.9
MICRO_BATCH = 2


def cli_args(*extra: str) -> SimpleNamespace:
    return parse_cli(
        [
            "--actor.model_name_or_path=model",
            f"--train.agent_func_path={AGENT_FUNC}",
            "--actor.num_gpus_per_node=1",
            "--vllm.num_engines=1",
            "--rollout.batch_size=3",
            "--rollout.n_samples_per_prompt=2",
            f"--rollout.micro_batch_size={MICRO_BATCH}",
            "--algo.advantage.estimator=reinforce",
            f"--algo.advantage.gamma={GAMMA}",
            *extra,
        ]
    )


def batches(played, tokenizer, kl=None) -> list[Experience]:
    """What ``make_experience_batch`` hands the estimator: micro batches of the rollout (OpenRLHF's
    ``concat_experiences``), ``kl`` set by ``make_experience`` (zeros without a reference model)."""
    samples = [process_response_into_experience(copy.deepcopy(o), MAX_LEN) for _, _, o in played]
    for i, sample in enumerate(samples):
        sample.index = [i]
    out = [
        Experience.concat_experiences(samples[i : i + MICRO_BATCH], tokenizer.pad_token_id)
        for i in range(0, len(samples), MICRO_BATCH)
    ]
    for experience in out:
        experience.kl = (
            torch.zeros(experience.action_mask.shape) if kl is None else kl(experience.action_mask.shape)
        )
    return out


def maker(args, kl_coef=0.0):
    """What the method reads of ``RemoteExperienceMaker``: ``strategy.args``, ``kl_ctl``, the critic."""
    return SimpleNamespace(
        strategy=SimpleNamespace(args=args), kl_ctl=FixedKLController(kl_coef), critic_model_group=None
    )


def float32_rewards(played) -> list[list[float]]:
    """The per-turn rewards as they reach the trainer (OpenRLHF stores float32)."""
    return [
        torch.tensor(o["extra_logs"][TURN_REWARDS], dtype=torch.float32).double().tolist()
        for _, _, o in played
    ]


def rows(experiences):
    for experience in experiences:
        for b in range(experience.action_mask.shape[0]):
            yield experience, b


@pytest.mark.parametrize("name", ["rebn", "rebn_per_episode", "grpo", "dr_grpo", "rloo", "reinforce"])
def test_gem_estimator_equals_shared_advantages(played, tokenizer, name):
    experiences = batches(played, tokenizer)
    out = compute_advantages_and_returns(maker(cli_args()), experiences, estimator=name)
    assert out == experiences
    rewards = float32_rewards(played)
    expected = compute_advantages(name, rewards, gamma=GAMMA, group_ids=[o["label"] for _, _, o in played])
    for e, (experience, b) in enumerate(rows(out)):
        mask = experience.action_mask[b]
        spans = mask_runs(mask)
        assert len(spans) == len(rewards[e])
        width = mask.shape[0]
        want = torch.from_numpy(turn_values_to_tokens(expected[e], spans, width, mask.numpy())).float()
        assert torch.equal(experience.advantages[b], want)
        returns = turn_values_to_tokens(discounted_returns(rewards[e], GAMMA), spans, width, mask.numpy())
        assert torch.equal(experience.returns[b], torch.from_numpy(returns).float())
        assert experience.info["return"][b].item() == pytest.approx(sum(rewards[e]))
    for experience in out:
        assert TURN_REWARDS not in experience.info and NUM_TURNS in experience.info and experience.kl is None
    if name == "rebn":  # per-turn returns survived: the turns of a rewarded episode get different advantages
        assert all(len(set(np.round(a, 6))) > 1 for a, r in zip(expected, rewards) if any(r))
    if name == "grpo":  # the winning GuessTheNumber group has a baseline, the losing ones differ too
        assert any(np.any(a != 0) for a in expected)


@pytest.mark.parametrize("name", ["gigpo", "gigpo_no_std"])
def test_gigpo_groups_turns_by_the_state_keys_the_executor_sent(played, tokenizer, name):
    """The state keys travel as codes in ``extra_logs``; decoded, they group turns as the episodes' own
    keys do: the advantages equal ``compute_advantages`` on the episodes' ``Turn.state_key``."""
    experiences = batches(played, tokenizer)
    out = compute_advantages_and_returns(maker(cli_args()), experiences, estimator=name)
    rewards = float32_rewards(played)
    groups = [o["label"] for _, _, o in played]
    keys = [[t.state_key for t in o["episode"].turns] for _, _, o in played]
    expected = compute_advantages(name, rewards, gamma=GAMMA, group_ids=groups, state_keys=keys)
    for e, (experience, b) in enumerate(rows(out)):
        mask = experience.action_mask[b]
        want = turn_values_to_tokens(expected[e], mask_runs(mask), mask.shape[0], mask.numpy())
        assert torch.equal(experience.advantages[b], torch.from_numpy(want).float())
    for experience in out:
        assert STATE_KEYS not in experience.info and TURN_REWARDS not in experience.info
    # The step level did something: episode level alone (no keys) gives other numbers.
    no_keys = [[None] * len(r) for r in rewards]
    episode_level = compute_advantages(name, rewards, gamma=GAMMA, group_ids=groups, state_keys=no_keys)
    assert any(not np.allclose(a, b) for a, b in zip(expected, episode_level))


def test_samples_without_state_keys_are_refused_for_gigpo(played, tokenizer):
    (experience, *_) = batches(played, tokenizer)
    experience.info.pop(STATE_KEYS)
    with pytest.raises(ValueError, match="state keys"):
        gem_advantages_and_returns([experience], "gigpo")
    gem_advantages_and_returns([experience], "grpo")  # an estimator without state keys does not read them


def test_kl_clip_and_length_penalty_are_charged_to_turns(played, tokenizer):
    """KL of each turn's own tokens, the reward clip per turn, and OpenRLHF's stop-properly penalty
    (a truncated sample's reward set to -0.5) as a change of the last turn's reward."""
    generator = torch.Generator().manual_seed(0)
    experiences = batches(played, tokenizer, kl=lambda shape: torch.rand(shape, generator=generator))
    kls = [experience.kl[b].clone() for experience, b in rows(experiences)]
    args = cli_args("--reward.stop_properly_penalty_coef=-0.5", "--reward.clip_range", "-0.05", "10")
    out = compute_advantages_and_returns(maker(args, kl_coef=0.05), experiences, estimator="rebn")

    per_episode = []
    for e, (rewards, (_, _, output)) in enumerate(zip(float32_rewards(played), played)):
        spans = [(s - 1, t - 1) for s, t in output["action_ranges"]]
        r = np.clip(np.array(rewards), -0.05, 10.0)
        r -= 0.05 * np.array([kls[e][s:t].double().sum().item() for s, t in spans])
        if output["truncated"]:
            total = torch.tensor([output["reward"]]).float().item()
            r[-1] += float(np.float32(-0.5) - np.float32(total))
        per_episode.append(r)
    expected = compute_advantages("rebn", per_episode, gamma=GAMMA)
    assert any(o["truncated"] for _, _, o in played) and not all(o["truncated"] for _, _, o in played)
    for e, (experience, b) in enumerate(rows(out)):
        mask = experience.action_mask[b].numpy()
        want = turn_values_to_tokens(expected[e], mask_runs(mask), mask.shape[0], mask)
        torch.testing.assert_close(
            experience.advantages[b].double(), torch.from_numpy(want), atol=1e-5, rtol=0
        )
        assert experience.info["return"][b].item() == pytest.approx(per_episode[e].sum(), abs=1e-5)


def test_stock_reinforce_discounts_the_summed_reward_per_token(played, tokenizer):
    """OpenRLHF's own ``reinforce`` + gamma on the same batch: the episode's summed reward on its last
    action token, discounted per token position (env ids included), whitened over action tokens."""
    stock = stock_experience_maker(cli_args(), kl_coef=0.0)
    out = stock.compute_advantages_and_returns(batches(played, tokenizer))
    raw, masks = [], []
    for experience, b in rows(out):
        mask = experience.action_mask[b].double()
        last = int(torch.nonzero(mask)[-1])
        positions = torch.arange(mask.shape[0], dtype=torch.float64)
        total = experience.rewards[b].double()  # clipped to (-10, 10): no change here
        raw.append(torch.where(positions <= last, total * GAMMA ** (last - positions), 0.0) * mask)
        masks.append(mask)
    flat, flat_mask = torch.cat(raw), torch.cat(masks)
    mean = (flat * flat_mask).sum() / flat_mask.sum()
    rstd = (((flat - mean) ** 2 * flat_mask).sum() / flat_mask.sum()).rsqrt()
    gem = gem_advantages_and_returns(batches(played, tokenizer), "rebn", gamma=GAMMA)
    for (experience, b), expected, mask, (gem_experience, _) in zip(rows(out), raw, masks, rows(gem)):
        on = mask.bool()
        torch.testing.assert_close(
            experience.advantages[b][on].double(), ((expected - mean) * rstd)[on], atol=1e-5, rtol=1e-5
        )
        # GEM gives each turn one advantage; OpenRLHF's varies within a turn, token by token.
        spans = mask_runs(mask)
        assert all(len(set(gem_experience.advantages[b][s:t].tolist())) == 1 for s, t in spans)
        if experience.rewards[b] != 0:
            assert any(len(set(experience.advantages[b][s:t].tolist())) > 1 for s, t in spans)


def test_samples_without_per_turn_rewards_are_refused(played, tokenizer):
    (experience, *_) = batches(played, tokenizer)
    experience.info.pop(TURN_REWARDS)
    with pytest.raises(ValueError, match="GemAgentExecutor"):
        gem_advantages_and_returns([experience], "rebn")


def test_a_critic_run_is_refused(played, tokenizer):
    args = cli_args()
    args.algo.advantage.estimator = "gae"
    with pytest.raises(ValueError, match="estimator reinforce"):
        compute_advantages_and_returns(maker(args), batches(played, tokenizer), estimator="rebn")

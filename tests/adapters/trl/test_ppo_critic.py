"""GEMPPOTrainer: a real TRL step whose advantages come from a critic trained beside it (turn-level GAE,
or a registered value estimator), the critic's step separate from computing advantages."""

from __future__ import annotations

import os
from itertools import pairwise

import numpy as np
import pytest
import torch

pytest.importorskip("trl")

from gem_adapters.algorithms.advantages import (
    ESTIMATORS,
    compute_advantages,
    discounted_returns,
    register_estimator,
)
from gem_adapters.trl import GEMGRPOConfig, GEMPPOConfig, GEMPPOTrainer
from tests.adapters.trl.test_trl_adapter import (
    action_length_env,  # noqa: F401 (autouse: registers TEST_ENV)
    make_trainer,
)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


class ProbePPOTrainer(GEMPPOTrainer):
    """Records the critic's values before each advantage computation, and the advantages."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen: list[tuple[list, list[np.ndarray], list[np.ndarray]]] = []

    def turn_advantages(self, episodes):
        with torch.no_grad():
            values = [v.double().numpy() for v in self.critic.turn_values(episodes, 0)]
        advantages = super().turn_advantages(episodes)
        self.seen.append((list(episodes), values, advantages))
        return advantages


@pytest.fixture(scope="module")
def ppo_run(tokenizer, tmp_path_factory):
    trainer = make_trainer(
        tokenizer,
        tmp_path_factory.mktemp("ppo"),
        config_class=GEMPPOConfig,
        trainer_class=ProbePPOTrainer,
        max_steps=2,
        gamma=0.9,
        lam=0.95,
        whiten_advantages=False,
        gradient_checkpointing=True,  # TRL's default: the critic copies a checkpointed decoder
    )
    policy_before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    critic_before = {n: p.detach().clone() for n, p in trainer.critic.named_parameters()}
    trainer.train()
    return trainer, policy_before, critic_before


def test_advantages_are_gae_of_the_critics_values(ppo_run):
    trainer, _, _ = ppo_run
    assert len(trainer.seen) == 2
    episodes, values, advantages = trainer.seen[1]  # the second step: the critic has been trained once
    assert any(np.abs(v).max() > 1e-4 for v in values)
    rewards = [[t.reward for t in e.turns] for e in episodes]
    expected = compute_advantages("gae", rewards, gamma=0.9, lam=0.95, values=values)
    for got, want in zip(advantages, expected):
        np.testing.assert_allclose(got, want, atol=1e-9)
    assert len({round(float(a), 6) for a in np.concatenate(advantages)}) > 3


def test_step_trains_policy_and_critic_and_logs_the_critic(ppo_run):
    trainer, policy_before, critic_before = ppo_run
    assert any(not torch.equal(p, policy_before[n]) for n, p in trainer.model.named_parameters())
    assert not torch.equal(trainer.critic.head.weight, critic_before["head.weight"])
    assert any(
        not torch.equal(p, critic_before[n])
        for n, p in trainer.critic.named_parameters()
        if n.startswith("backbone")
    )
    logged = [h for h in trainer.state.log_history if "critic/loss" in h]
    assert len(logged) == 2 and all(np.isfinite(h["critic/explained_variance"]) for h in logged)


def test_critic_regresses_onto_the_returns(ppo_run):
    """With lam = 1 the targets are the discounted returns whatever the values: repeated fits close the gap."""
    trainer, _, _ = ppo_run
    trainer.args.lam = 1.0
    episodes = trainer.seen[1][0]
    returns = np.concatenate([discounted_returns([t.reward for t in e.turns], 0.9) for e in episodes])

    def error() -> float:
        with torch.no_grad():
            values = torch.cat(trainer.critic.turn_values(episodes, 0)).double().numpy()
        return float(np.mean((values - returns) ** 2))

    start = error()
    for _ in range(10):
        trainer.critic_step(episodes)
    assert error() < 0.5 * start


def test_computing_advantages_trains_no_critic(ppo_run):
    trainer, _, _ = ppo_run
    episodes = trainer.seen[1][0]
    before = {n: p.detach().clone() for n, p in trainer.critic.named_parameters()}
    first = trainer.turn_advantages(episodes)
    assert all(torch.equal(p, before[n]) for n, p in trainer.critic.named_parameters())
    for got, want in zip(trainer.turn_advantages(episodes), first):
        np.testing.assert_array_equal(got, want)


def test_values_are_read_before_each_action_and_ignore_padding(ppo_run):
    trainer, _, _ = ppo_run
    episodes = trainer.seen[0][0]
    batched = trainer.critic.turn_values(episodes, 0)
    for episode, values in zip(episodes, batched):
        sequence = episode.to_sequence(include_closing=False)
        ids = torch.tensor([sequence.token_ids])
        with torch.no_grad():
            alone = trainer.critic(ids, torch.ones_like(ids))[0]
        starts = [start for start, _ in sequence.turn_spans]
        torch.testing.assert_close(values.detach(), alone[[s - 1 for s in starts]], atol=1e-5, rtol=0)


def test_micro_batches_group_by_length_and_give_the_whole_batchs_values(ppo_run):
    trainer, _, _ = ppo_run
    episodes = trainer.seen[0][0]
    lengths = [len(e.to_sequence(include_closing=False).token_ids) for e in episodes]
    trainer.args.critic_micro_batch_size = 3
    groups = trainer.micro_batches(episodes)
    assert sorted(i for g in groups for i in g) == list(range(len(episodes)))
    assert [len(g) for g in groups[:-1]] == [3] * (len(groups) - 1)
    assert all(min(lengths[i] for i in a) >= max(lengths[i] for i in b) for a, b in pairwise(groups))
    with torch.no_grad():
        whole = trainer.critic.turn_values(episodes, 0)
        micro = trainer.critic_values(episodes)
    for w, m in zip(whole, micro):
        torch.testing.assert_close(m, w, atol=1e-5, rtol=0)


def test_the_critics_step_does_not_depend_on_the_micro_batch_size(ppo_run):
    """Accumulated over micro-batches, the gradient is the whole batch's mean squared error gradient."""
    trainer, _, _ = ppo_run
    episodes = trainer.seen[1][0]
    targets = [torch.linspace(-1, 1, len(e.turns)) for e in episodes]
    start = {n: p.detach().clone() for n, p in trainer.critic.named_parameters()}
    trainer.args.critic_epochs = 1
    steps, losses = [], []
    for size in (1, 4, len(episodes)):
        trainer.critic.load_state_dict(start)
        trainer.critic_optimizer = torch.optim.SGD(trainer.critic.parameters(), lr=0.1)  # Adam hides scale
        trainer.args.critic_micro_batch_size = size
        losses.append(trainer.fit_critic(episodes, targets))
        steps.append({n: p.detach() - start[n] for n, p in trainer.critic.named_parameters()})
    trainer.critic.load_state_dict(start)
    with torch.no_grad():
        values = torch.cat(trainer.critic.turn_values(episodes, 0))
    assert losses[0] == pytest.approx(float(torch.mean((values - torch.cat(targets)) ** 2)), rel=1e-4)
    assert losses[1] == pytest.approx(losses[0], rel=1e-4) and losses[2] == pytest.approx(losses[0], rel=1e-4)
    assert any(s.abs().max() > 1e-5 for s in steps[0].values())
    for other in steps[1:]:
        for name, step in steps[0].items():
            torch.testing.assert_close(other[name], step, atol=1e-6, rtol=1e-3)


def test_configs_pair_value_estimators_with_the_critic(tmp_path):
    with pytest.raises(ValueError, match="GEMPPOConfig"):
        GEMGRPOConfig(output_dir=str(tmp_path), advantage_estimator="gae")
    with pytest.raises(ValueError, match=r"needs_values=True, one of \['gae'.*not 'rebn'"):
        GEMPPOConfig(output_dir=str(tmp_path), advantage_estimator="rebn")
    with pytest.raises(ValueError, match="critic_micro_batch_size"):
        GEMPPOConfig(output_dir=str(tmp_path), critic_micro_batch_size=0)


@pytest.fixture
def td0_estimator():
    """A value estimator of another package: one-step TD errors ``r_k + gamma V_{k+1} - V_k``."""

    @register_estimator("test_td0", needs_values=True)
    def td0(batch, *, gamma, **_):
        rewards, values = batch.to_matrix(batch.rewards), batch.to_matrix(batch.values)
        following = np.zeros_like(values)
        following[:, :-1] = values[:, 1:]  # zero past an episode's end (to_matrix pads with zeros)
        return (rewards + gamma * following - values)[batch.episode, batch.position]

    yield "test_td0"
    del ESTIMATORS["test_td0"]


def test_a_registered_value_estimator_is_the_one_that_runs(tokenizer, tmp_path, td0_estimator):
    trainer = make_trainer(
        tokenizer,
        tmp_path,
        config_class=GEMPPOConfig,
        trainer_class=ProbePPOTrainer,
        advantage_estimator=td0_estimator,
        gamma=0.9,
        lam=0.95,
        whiten_advantages=False,
    )
    critic_before = trainer.critic.head.weight.detach().clone()
    trainer.train()
    ((episodes, values, advantages),) = trainer.seen
    rewards = [[t.reward for t in e.turns] for e in episodes]
    expected = compute_advantages(td0_estimator, rewards, gamma=0.9, values=values)
    gae = compute_advantages("gae", rewards, gamma=0.9, lam=0.95, values=values)
    for got, want in zip(advantages, expected):
        np.testing.assert_allclose(got, want, atol=1e-9)
    assert any(not np.allclose(a, g) for a, g in zip(advantages, gae) if len(a) > 1)
    assert not torch.equal(trainer.critic.head.weight, critic_before)  # training_step ran critic_step
    assert len([h for h in trainer.state.log_history if "critic/loss" in h]) == 1

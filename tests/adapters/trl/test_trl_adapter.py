"""GEMGRPOTrainer: real TRL GRPO steps on GEM episodes with a tiny randomly initialised Llama.

A test env (``test:ActionLength-v0``) rewards each action by its length, so a random model gets
varied per-turn rewards and every estimator has something to normalise.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
import torch

pytest.importorskip("trl")

import gem_core
from gem_adapters.algorithms import prefix_tree
from gem_adapters.algorithms.advantages import compute_advantages
from gem_adapters.trl import (
    GEMGRPOConfig,
    GEMGRPOTrainer,
    episode_to_sample,
    mixed_tasks_dataset,
    parse_task_prompt,
    task_prompt,
    tasks_dataset,
)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
TEST_ENV = "test:ActionLength-v0"
SCALED_ENV = "test:ActionLengthX10-v0"  # the same game, rewards 10x: a mixture's envs on different scales
GAME = "game:GuessTheNumber-v1-easy"


class ActionLengthEnv(gem_core.Env):
    """Three turns; each action earns (characters mod 5) / 4."""

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        self.turn = 0
        return f"Say something ({self.rng.randint(0, 9)}).", {}

    def step(self, action):
        self.turn += 1
        done = self.turn >= 3
        return f"Turn {self.turn} done.", (len(action) % 5) / 4, False, done, {"success": done}

    def sample_random_action(self):
        return "x" * self.action_rng.randint(0, 9)


class ScaledActionLengthEnv(ActionLengthEnv):
    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, 10 * reward, terminated, truncated, info


@pytest.fixture(scope="module", autouse=True)
def action_length_env():
    gem_core.register(TEST_ENV, ActionLengthEnv, description="test env: reward by action length")
    gem_core.register(SCALED_ENV, ScaledActionLengthEnv, description="test env: ten times the reward")
    yield
    gem_core.unregister(TEST_ENV)
    gem_core.unregister(SCALED_ENV)


class ProbeTrainer(GEMGRPOTrainer):
    """Records what TRL's scoring step produced and what its loss consumed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.scored: list[tuple[list[dict], dict]] = []
        self.loss_inputs: list[dict] = []

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        self.scored.append(([dict(row) for row in inputs], output))
        return output

    def _compute_loss(self, model, inputs):
        self.loss_inputs.append(inputs)
        return super()._compute_loss(model, inputs)


def make_trainer(
    tokenizer, tmp_path, env_id=TEST_ENV, seed=0, config_class=GEMGRPOConfig, trainer_class=None, **overrides
):
    """A trainer (default ``ProbeTrainer``) of a tiny random Llama on ``env_id``: one small step."""
    from gem_adapters.runtime.models import tiny_causal_lm

    settings = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=6,
        num_generations=3,
        max_steps=1,
        learning_rate=1e-3,
        max_turn_tokens=6,
        gradient_checkpointing=False,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        seed=seed,
        disable_tqdm=True,
    )
    settings.update(overrides)
    config = config_class(**settings)
    return (trainer_class or ProbeTrainer)(
        model=tiny_causal_lm(tokenizer, seed=seed),
        args=config,
        train_dataset=tasks_dataset(env_id, 20),
        processing_class=tokenizer,
    )


def expected_token_advantages(episode, per_turn, width):
    """Each turn's advantage on its action ids, laid out from the turns themselves."""
    row, position = np.zeros(width), 0
    for k, (turn, value) in enumerate(zip(episode.turns, per_turn)):
        if k > 0:
            position += len(turn.prompt_ids)
        row[position : position + len(turn.action_ids)] = value
        position += len(turn.action_ids)
    return row


def test_task_prompts_round_trip():
    assert parse_task_prompt(task_prompt(GAME, 7)) == (GAME, 7)
    with pytest.raises(ValueError, match="env id and a seed"):
        parse_task_prompt("What is 2 + 2?")
    rows = tasks_dataset([GAME, TEST_ENV], 4, first_seed=10)
    assert rows["env_id"] == [GAME, TEST_ENV, GAME, TEST_ENV]
    assert [parse_task_prompt(p) for p in rows["prompt"]] == list(zip(rows["env_id"], rows["seed"]))


def test_config_picks_fp32_on_cpu_and_checks_the_estimator(tmp_path):
    config = GEMGRPOConfig(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=2)
    assert config.bf16 is (torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    assert not config.gradient_checkpointing and config.share_prefixes  # the prefix tree runs by default
    with pytest.raises(ValueError, match="unknown estimator 'ppo'"):
        GEMGRPOConfig(output_dir=str(tmp_path), advantage_estimator="ppo")


@pytest.fixture(scope="module")
def rebn_run(tokenizer, tmp_path_factory):
    """One GRPO step with ReBN (gamma 0.9), and the parameters before it."""
    trainer = make_trainer(tokenizer, tmp_path_factory.mktemp("rebn"), advantage_estimator="rebn", gamma=0.9)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    result = trainer.train()
    return trainer, before, result


def check_shared_advantages(trainer, estimator):
    """The advantages TRL's loss consumed are the shared module's, each turn's on that turn's tokens."""
    (rows, output), inputs = trainer.scored[0], trainer.loss_inputs[0]
    episodes = [row["episode"] for row in rows]
    rewards = [[t.reward for t in e.turns] for e in episodes]
    assert len({r for episode in rewards for r in episode}) > 1  # varied rewards: nothing cancels trivially
    # The G copies of a task share env id and seed, hence a GRPO group.
    groups = [parse_task_prompt(row["prompt"]) for row in rows]
    assert groups[0::3] == groups[1::3] == groups[2::3]
    per_turn = compute_advantages(estimator, rewards, gamma=0.9, group_ids=groups)

    width = output["completion_ids"].size(1)
    expected = torch.tensor(
        np.stack([expected_token_advantages(e, a, width) for e, a in zip(episodes, per_turn)]),
        dtype=torch.float32,
    )
    assert output["advantages"].shape == (len(episodes), width)
    torch.testing.assert_close(output["advantages"], expected)
    assert expected.abs().sum() > 0
    # The loss consumed exactly these rows (TRL shuffles them before the step).
    used = sorted(map(tuple, inputs["advantages"].tolist()))
    assert used == sorted(map(tuple, expected.tolist()))


def test_grpo_step_trains_on_actions_only(rebn_run):
    trainer, before, result = rebn_run
    assert np.isfinite(result.training_loss)
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert len(changed) == len(before)

    (rows, output), inputs = trainer.scored[0], trainer.loss_inputs[0]
    episodes = [row["episode"] for row in rows]
    assert len(episodes) == 6 and all(e.num_turns == 3 for e in episodes)
    # The loss mask TRL uses is the episodes' own mask: 1 on generated ids, 0 on env/template ids.
    width = output["completion_ids"].size(1)
    expected_mask = torch.zeros(len(episodes), width, dtype=torch.long)
    for i, episode in enumerate(episodes):
        sequence = episode.to_sequence(include_closing=False)
        start = sequence.turn_spans[0][0]
        assert output["prompt_ids"][i][output["prompt_mask"][i].bool()].tolist() == sequence.token_ids[:start]
        mask = sequence.loss_mask[start:]
        expected_mask[i, : len(mask)] = torch.tensor(mask)
    assert torch.equal(output["completion_mask"] * output["tool_mask"], expected_mask)
    assert 0 < expected_mask.sum() < output["completion_mask"].sum()  # there are env tokens to exclude

    # No gradient reaches the logprob of an env or template token; action tokens do get one.
    captured = {}
    compute = trainer._get_per_token_logps_and_entropies

    def keep_logps(*args, **kwargs):
        logps, entropies, aux = compute(*args, **kwargs)
        logps.retain_grad()
        captured["logps"] = logps
        return logps, entropies, aux

    trainer._get_per_token_logps_and_entropies = keep_logps
    try:
        trainer.model.zero_grad()
        trainer._compute_loss(trainer.model, inputs).backward()
    finally:
        del trainer._get_per_token_logps_and_entropies
    grad = captured["logps"].grad
    loss_mask = (inputs["completion_mask"] * inputs["tool_mask"]).bool()
    assert torch.all(grad[~loss_mask] == 0)
    assert torch.all(grad[loss_mask & (inputs["advantages"] != 0)] != 0)


def test_rebn_advantages_are_the_shared_modules(rebn_run):
    check_shared_advantages(rebn_run[0], "rebn")


def test_grpo_advantages_are_the_shared_modules(tokenizer, tmp_path):
    trainer = make_trainer(tokenizer, tmp_path, advantage_estimator="grpo", gamma=0.9, learning_rate=0.0)
    trainer.train()
    check_shared_advantages(trainer, "grpo")


def test_mixed_tasks_dataset_equal_shares_own_seeds_and_deterministic():
    envs = [GAME, TEST_ENV, SCALED_ENV]
    rows = mixed_tasks_dataset(envs, 4, first_seed=100)
    assert len(rows) == 12 and rows["env_id"] == envs * 4  # round-robin: every 3 rows hold one of each
    for env in envs:  # each env plays the seeds its own dataset would
        assert [s for e, s in zip(rows["env_id"], rows["seed"]) if e == env] == tasks_dataset(env, 4, 100)[
            "seed"
        ]
    assert [parse_task_prompt(p) for p in rows["prompt"]] == list(zip(rows["env_id"], rows["seed"]))
    assert mixed_tasks_dataset(envs, 4, first_seed=100)["prompt"] == rows["prompt"]
    with pytest.raises(ValueError, match="distinct env ids"):
        mixed_tasks_dataset([GAME, GAME], 2)


def test_rebn_per_env_step_on_a_mixed_dataset(tokenizer, tmp_path):
    """A real step on two envs whose rewards differ tenfold: each row's task env id is its stratum, a
    GRPO group stays within one env, and the advantages are the shared rebn_per_env's."""
    from gem_adapters.runtime.models import tiny_causal_lm

    config = GEMGRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=12, num_generations=3, max_steps=1,
        learning_rate=1e-3, max_turn_tokens=6, gradient_checkpointing=False, report_to=[],
        save_strategy="no", logging_steps=1, seed=0, disable_tqdm=True, gamma=0.9,
        advantage_estimator="rebn_per_env", shuffle_dataset=False,
    )  # fmt: skip
    trainer = ProbeTrainer(
        model=tiny_causal_lm(tokenizer, seed=0),
        args=config,
        train_dataset=mixed_tasks_dataset([TEST_ENV, SCALED_ENV], 4),
        processing_class=tokenizer,
    )
    trainer.train()
    (rows, output), inputs = trainer.scored[0], trainer.loss_inputs[0]
    episodes = [row["episode"] for row in rows]
    strata = [e.env_id for e in episodes]
    assert sorted(strata) == [TEST_ENV] * 6 + [SCALED_ENV] * 6  # equal shares in the step (no shuffle)
    groups = [parse_task_prompt(row["prompt"]) for row in rows]
    assert all(g[0] == env for g, env in zip(groups, strata))  # every group within one env
    rewards = [[t.reward for t in e.turns] for e in episodes]
    per_env = compute_advantages("rebn_per_env", rewards, gamma=0.9, strata=strata)
    width = output["completion_ids"].size(1)
    expected = torch.tensor(
        np.stack([expected_token_advantages(e, a, width) for e, a in zip(episodes, per_env)]),
        dtype=torch.float32,
    )
    torch.testing.assert_close(output["advantages"], expected)
    assert sorted(map(tuple, inputs["advantages"].tolist())) == sorted(map(tuple, expected.tolist()))
    # Each env's turns are z-scored on their own (mean 0, std 1); one ReBN over both would not be.
    flat, where = np.concatenate(per_env), np.repeat(strata, [len(r) for r in rewards])
    for env in (TEST_ENV, SCALED_ENV):
        assert abs(flat[where == env].mean()) < 1e-9 and flat[where == env].std() == pytest.approx(
            1, abs=1e-4
        )
    plain = np.concatenate(compute_advantages("rebn", rewards, gamma=0.9))
    assert abs(plain[where == TEST_ENV].mean()) > 0.1


def test_a_step_on_tasks_with_env_kwargs_plays_them_with_those_kwargs(tokenizer, tmp_path):
    """A real step on a game made with ``reward_type="sparse"`` through the tasks' env kwargs: the
    random policy's junk earns 0 (the dense game: -0.1 a turn), each group is one task's starts, and the
    batch's statistics are logged."""
    from gem_adapters.episodes.tasks import make_tasks
    from gem_adapters.runtime.models import tiny_causal_lm
    from gem_adapters.trl import task_rows

    config = GEMGRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=6, num_generations=3, max_steps=1,
        learning_rate=1e-3, max_turn_tokens=6, gradient_checkpointing=False, report_to=[],
        save_strategy="no", logging_steps=1, seed=0, disable_tqdm=True,
    )  # fmt: skip
    tasks = make_tasks(GAME, 4, env_kwargs={"reward_type": "sparse"})
    trainer = ProbeTrainer(
        model=tiny_causal_lm(tokenizer, seed=0),
        args=config,
        train_dataset=task_rows(tasks),
        processing_class=tokenizer,
    )
    trainer.train()
    episodes = [row["episode"] for row in trainer.scored[0][0]]
    assert len(episodes) == 6 and all(t.reward == 0.0 for e in episodes for t in e.turns)
    assert any(t.info.get("format_error") for e in episodes for t in e.turns)  # junk, unpenalised
    assert len({e.group_id for e in episodes}) == 2
    assert "env/groups_with_signal" in trainer.state.log_history[0]


def test_episode_samples_and_logged_metrics(rebn_run):
    trainer = rebn_run[0]
    rows, _ = trainer.scored[0]
    for row in rows:
        sample = episode_to_sample(row["episode"])
        full = row["episode"].to_sequence(include_closing=False)
        assert sample.prompt_ids + sample.completion_ids == full.token_ids
        assert len(sample.logprobs) == len(sample.env_mask) == len(sample.completion_ids)
        assert [sample.completion_ids[a:b] for a, b in sample.turn_spans] == [
            t.action_ids for t in row["episode"].turns
        ]
        for (a, b), turn in zip(sample.turn_spans, row["episode"].turns):
            assert sample.logprobs[a:b] == turn.logprobs
        assert all(lp == 0.0 for lp, m in zip(sample.logprobs, sample.env_mask) if m == 0)
        assert sum(sample.env_mask) == sum(b - a for a, b in sample.turn_spans)
        assert all(sample.env_mask[a:b] == [1] * (b - a) for a, b in sample.turn_spans)
    logged = trainer.state.log_history[0]
    episodes = [row["episode"] for row in rows]
    assert logged["env/turns"] == 3
    assert logged["env/return"] == pytest.approx(np.mean([e.total_reward for e in episodes]))
    # TRL's logged reward is the return of the per-turn rewards the estimator trained on.
    assert logged["reward"] == pytest.approx(logged["env/return"])
    assert rows[0]["turn_spans"] == episode_to_sample(rows[0]["episode"]).turn_spans
    assert logged["env/tokens_per_second"] > 0
    assert json.loads(rows[0]["prompt"])["env_id"] == TEST_ENV


def test_reward_funcs_are_refused_with_where_the_rewards_come_from(rebn_run, tokenizer):
    """A GRPOTrainer script's reward function would be called and logged but not trained on: refused."""
    from gem_adapters.runtime.models import tiny_causal_lm

    def my_reward(completions, **kwargs):
        return [12.23] * len(completions)

    # The run's own config: a fresh TrainingArguments would reset accelerate's state under the run.
    with pytest.raises(ValueError, match="env's per-turn rewards"):
        GEMGRPOTrainer(
            tiny_causal_lm(tokenizer, seed=0),
            rebn_run[0].args,
            tasks_dataset(TEST_ENV, 4),
            processing_class=tokenizer,
            reward_funcs=[my_reward],
        )


def test_the_learner_shares_prefixes_with_the_padded_forwards_loss(rebn_run):
    """One forward over the batch's prefix tree gives TRL's padded forward's loss and gradients."""
    from tests.adapters.algorithms.test_prefix_tree import assert_same_gradient

    trainer = rebn_run[0]
    inputs = trainer.loss_inputs[0]
    results = {}
    for share in (False, True):
        trainer.args.share_prefixes = share
        trainer.model.zero_grad()
        loss = trainer._compute_loss(trainer.model, inputs)
        loss.backward()
        results[share] = (loss.detach(), {n: p.grad.clone() for n, p in trainer.model.named_parameters()})
    trainer.args.share_prefixes = True
    torch.testing.assert_close(results[True][0], results[False][0], atol=1e-6, rtol=1e-5)
    for name, grad in results[True][1].items():
        assert_same_gradient(grad, results[False][1][name], name)
    # The step logged how many tokens went through the learner and how many the batch's tree holds.
    logged = trainer.state.log_history[0]
    width = inputs["prompt_ids"].size(1) + inputs["completion_ids"].size(1)
    assert 0 < logged["timing/unique_tokens"] <= logged["timing/learner_tokens"] < 6 * width
    assert logged["timing/forward_s"] > 0 and logged["timing/backward_s"] > 0


@pytest.mark.skipif(prefix_tree.why_not_compile() is not None, reason=str(prefix_tree.why_not_compile()))
def test_compile_learner_gives_the_padded_forwards_loss(rebn_run):
    """``compile_learner``: the prefix-tree forward through compiled decoder layers, same loss and gradients."""
    from tests.adapters.algorithms.test_prefix_tree import assert_same_gradient

    trainer = rebn_run[0]
    inputs = trainer.loss_inputs[0]
    results = {}
    for share, compiled in ((False, False), (True, True)):
        trainer.args.share_prefixes, trainer.args.compile_learner = share, compiled
        trainer.model.zero_grad()
        loss = trainer._compute_loss(trainer.model, inputs)
        loss.backward()
        results[compiled] = (loss.detach(), {n: p.grad.clone() for n, p in trainer.model.named_parameters()})
    trainer.args.share_prefixes, trainer.args.compile_learner = True, False
    torch.testing.assert_close(results[True][0], results[False][0], atol=1e-6, rtol=1e-5)
    for name, grad in results[True][1].items():
        assert_same_gradient(grad, results[False][1][name], name)


def test_compile_learner_without_a_compiler_is_refused(tmp_path):
    from torch._inductor import config as inductor_config

    # torch's own patch: pytest's monkeypatch undoes this attribute with a delattr, which hides it for good
    refused = pytest.raises(ValueError, match=r"compile_learner: .*'no-such-compiler\+\+' is not on PATH")
    with inductor_config.patch({"cpp.cxx": (None, "no-such-compiler++")}), refused:
        GEMGRPOConfig(output_dir=str(tmp_path), use_cpu=True, compile_learner=True)
    assert inductor_config.cpp.cxx != (None, "no-such-compiler++")


def test_mask_truncated_completions_masks_each_cut_action_and_nothing_else(tokenizer, tmp_path):
    """TRL drops a whole completion whose end was cut; here each action cut by ``max_turn_tokens`` loses its
    loss and only it, while every token stays visible to the later turns' attention."""
    trainer = make_trainer(tokenizer, tmp_path, mask_truncated_completions=True, max_turn_tokens=3)
    # a random model (almost) never ends a turn: a bias on the end-of-turn logit makes it end ~1 in 4
    head = trainer.model.lm_head
    biased = torch.nn.Linear(head.in_features, head.out_features, bias=True)
    with torch.no_grad():
        biased.weight.copy_(head.weight)
        biased.bias.zero_()
        biased.bias[tokenizer.eos_token_id] = math.log(head.out_features / 3)
    trainer.model.lm_head = biased
    trainer.train()
    (rows, output), _ = trainer.scored[0], trainer.loss_inputs[0]
    episodes = [row["episode"] for row in rows]
    reasons = [t.finish_reason for e in episodes for t in e.turns]
    assert "length" in reasons and "stop" in reasons  # both kinds of turn, or the test shows nothing
    for row, (episode, spans) in enumerate(zip(episodes, [row["turn_spans"] for row in rows])):
        loss_mask = output["completion_mask"][row] * output["tool_mask"][row]
        for turn, (start, end) in zip(episode.turns, spans):
            expected = 0 if turn.finish_reason == "length" else 1
            assert torch.all(loss_mask[start:end] == expected), (turn.finish_reason, loss_mask[start:end])
        assert torch.all(output["completion_mask"][row, : spans[-1][1]] == 1)  # attention keeps every id


def test_a_kl_regularised_step_uses_the_starting_policy_as_reference(tokenizer, tmp_path):
    """beta > 0: TRL's reference model is the policy as it started, and its KL reaches the logs."""
    trainer = make_trainer(tokenizer, tmp_path, beta=0.04)
    reference = trainer.ref_model
    assert reference is not None and reference is not trainer.model
    start = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    assert all(torch.equal(start[n], p) for n, p in reference.named_parameters())
    trainer.train()
    assert all(torch.equal(start[n], p) for n, p in reference.named_parameters())  # the reference stays
    assert not all(torch.equal(start[n], p.detach()) for n, p in trainer.model.named_parameters())
    kl = [log["kl"] for log in trainer.state.log_history if "kl" in log]
    assert kl and all(math.isfinite(value) and value >= 0 for value in kl)


def test_an_entropy_bonus_on_the_prefix_trees_entropies_is_the_padded_forwards(tokenizer, tmp_path):
    """TRL's entropy bonus (``entropy_coef``) differentiates the prefix tree's entropies: the same loss and
    gradients as TRL's padded forward, and a loss below the one without the bonus."""
    from tests.adapters.algorithms.test_prefix_tree import assert_same_gradient

    trainer = make_trainer(tokenizer, tmp_path, entropy_coef=0.5)
    trainer.train()
    inputs = trainer.loss_inputs[0]
    results = {}
    for share, coef in ((False, 0.5), (True, 0.5), (True, 0.0)):
        trainer.args.share_prefixes, trainer.entropy_coef = share, coef
        trainer.model.zero_grad()
        loss = trainer._compute_loss(trainer.model, inputs)
        loss.backward()
        results[share, coef] = (
            loss.detach(),
            {n: p.grad.clone() for n, p in trainer.model.named_parameters()},
        )
    torch.testing.assert_close(results[True, 0.5][0], results[False, 0.5][0], atol=1e-6, rtol=1e-5)
    for name, grad in results[True, 0.5][1].items():
        assert_same_gradient(grad, results[False, 0.5][1][name], name)
    assert results[True, 0.5][0] < results[True, 0.0][0]  # minus half the batch's mean entropy (> 0)
    head = "lm_head.weight" if "lm_head.weight" in results[True, 0.0][1] else "model.embed_tokens.weight"
    assert not torch.allclose(results[True, 0.5][1][head], results[True, 0.0][1][head])

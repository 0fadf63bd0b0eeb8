"""The same episodes through TRL's, verl's and OpenRLHF's advantage hooks give identical token-level
advantages: each adapter encodes the episodes in its framework's transport (TRL's samples, verl's
``token_level_rewards`` rows with the ``index`` uids and the agent loop's ``gem_state_keys`` field,
OpenRLHF's ``Experience`` built by OpenRLHF's own code from the agent executor's output, state keys as
codes in its info), and its hook decodes them and calls
``gem_adapters.algorithms.advantages.token_advantages`` / ``turn_values_on_tokens``. GiGPO included: each turn's
state key travels with its sample (``tests/adapters/verl/test_state_keys.py`` runs verl's half through
TransferQueue and the v1 trainer's advantage step)."""

from __future__ import annotations

import copy
import types

import numpy as np
import pytest
import torch

pytest.importorskip("verl")
pytest.importorskip("openrlhf.utils.agent")

from accelerate import Accelerator
from omegaconf import OmegaConf
from openrlhf.trainer.ppo_utils.experience import Experience
from verl.trainer.ppo import core_algos

from gem_adapters.algorithms.advantages import compute_advantages, turn_values_on_tokens
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import rescore
from gem_adapters.episodes.tasks import make_tasks
from gem_adapters.openrlhf.advantages import gem_advantages_and_returns
from gem_adapters.openrlhf.rollout import GemAgentExecutor
from gem_adapters.policies.transformers_policy import TransformersPolicy
from gem_adapters.runtime.rollout import rollout
from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer
from gem_adapters.trl.rollout import rollout_output
from gem_adapters.verl.advantages import register_estimators
from gem_adapters.verl.state_keys import FIELD as VERL_STATE_KEYS
from gem_adapters.verl.state_keys import state_keys_field
from gem_adapters.verl.token_rewards import rewards_on_tokens

from .openrlhf.openrlhf_source import process_response_into_experience

GAMMA = 0.9
MAX_LEN = 2048
ESTIMATORS = ["rebn", "rebn_per_episode", "grpo", "dr_grpo", "rloo", "reinforce", "gigpo", "gigpo_no_std"]


@pytest.fixture(scope="module")
def episodes(tokenizer, tiny_model):
    """Three groups (two GuessTheNumber seeds, one Mastermind seed) of episodes of different lengths,
    played by a tiny model, rescored with varied per-turn rewards so that every estimator has work."""
    policy = TransformersPolicy(tiny_model, tokenizer, seed=0)
    renderer = ChatRenderer(tokenizer, "Guess.")
    played = []
    for env_id, num_tasks, max_turns in [
        ("game:GuessTheNumber-v1-easy", 2, 2),
        ("game:Mastermind-v1-easy", 1, 4),
    ]:
        tasks = [t for t in make_tasks(env_id, num_tasks, first_seed=len(played)) for _ in range(3)]
        played += rollout(
            [t.env_id for t in tasks],
            policy,
            renderer,
            seeds=[t.seed for t in tasks],
            max_turns=max_turns,
            max_new_tokens=4,
        )
    rng = np.random.default_rng(0)
    scored = rescore(played, lambda e: [float(r) for r in rng.integers(-2, 3, e.num_turns) / 2])
    assert len({e.num_turns for e in scored}) > 1 and all(e.turns for e in scored)
    return scored


def on_actions(advantages: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """Each row's advantages on its action tokens, in order; asserts they are 0 everywhere else."""
    assert torch.all(advantages[mask == 0] == 0)
    return [row[m == 1] for row, m in zip(advantages, mask)]


def trl_rows(episodes, name) -> list[torch.Tensor]:
    config = GEMGRPOConfig(
        output_dir="unused", use_cpu=True, advantage_estimator=name, gamma=GAMMA, report_to=[]
    )
    rows = rollout_output(episodes, 0.0)  # what the rollout_func hands TRL: samples, spans, episodes
    width = max(len(ids) for ids in rows["completion_ids"])
    # The trainer's hook needs only its config and accelerator: the scoring step's path, minus TRL.
    trainer = types.SimpleNamespace(args=config, accelerator=Accelerator(cpu=True))
    per_turn = GEMGRPOTrainer.turn_advantages(trainer, rows["episode"])
    advantages = torch.from_numpy(
        turn_values_on_tokens(per_turn, width, turn_spans=rows["turn_spans"])
    ).float()
    mask = torch.zeros(advantages.shape, dtype=torch.long)
    for row, env_mask in enumerate(rows["env_mask"]):
        mask[row, : len(env_mask)] = torch.tensor(env_mask)
    return on_actions(advantages, mask)


def verl_rows(episodes, name) -> list[torch.Tensor]:
    register_estimators()
    responses = [e.to_prompt_response() for e in episodes]  # what GemAgentLoop returns
    width = max(len(r.response_ids) for r in responses)
    rewards = torch.zeros(len(episodes), width)
    mask = torch.zeros(len(episodes), width, dtype=torch.long)
    for row, (episode, response) in enumerate(zip(episodes, responses)):
        turn_rewards = [t.reward for t in episode.turns]
        n = len(response.response_ids)
        rewards[row, :n] = torch.tensor(rewards_on_tokens(turn_rewards, response.turn_spans, n))
        mask[row, :n] = torch.tensor(response.response_mask)
    uids = np.array([f"{e.env_id}/{e.seed}" for e in episodes], dtype=object)
    # The agent loop's per-sample field, as a non-tensor batch hands it over (the v1 trainer: the patch).
    keys = np.array([state_keys_field([t.state_key for t in e.turns]) for e in episodes], dtype=object)
    advantages, _ = core_algos.get_adv_estimator_fn(f"gem_{name}")(
        token_level_rewards=rewards,
        response_mask=mask,
        config=OmegaConf.create({"gamma": GAMMA}),
        index=uids,
        non_tensor_batch={"uid": uids, VERL_STATE_KEYS: keys},
    )
    return on_actions(advantages, mask)


def openrlhf_rows(episodes, tokenizer, name) -> list[torch.Tensor]:
    executor = GemAgentExecutor(turn_rewards=True)
    samples = []
    for episode in episodes:
        label = make_tasks(episode.env_id, 1, first_seed=episode.seed)[0].to_json()
        output = executor._output(episode, {}, "", label, want_logprobs=True)
        samples.append(process_response_into_experience(copy.deepcopy(output), MAX_LEN))
    experiences = [
        Experience.concat_experiences(samples[i : i + 3], tokenizer.pad_token_id) for i in (0, 3, 6)
    ]
    for experience in experiences:
        experience.kl = torch.zeros(experience.action_mask.shape)
    out = gem_advantages_and_returns(experiences, name, gamma=GAMMA)
    return [row for e in out for row in on_actions(e.advantages, e.action_mask.long())]


@pytest.mark.parametrize("name", ESTIMATORS)
def test_three_adapters_put_the_same_advantages_on_the_same_tokens(episodes, tokenizer, name):
    trl, verl, openrlhf = (
        trl_rows(episodes, name),
        verl_rows(episodes, name),
        openrlhf_rows(episodes, tokenizer, name),
    )
    groups = [f"{e.env_id}/{e.seed}" for e in episodes]
    state_keys = [[t.state_key for t in e.turns] for e in episodes]
    expected = compute_advantages(
        name,
        [[t.reward for t in e.turns] for e in episodes],
        gamma=GAMMA,
        group_ids=groups,
        state_keys=state_keys,
    )
    for e, episode in enumerate(episodes):
        want = torch.from_numpy(
            np.concatenate([np.full(len(t.action_ids), a) for t, a in zip(episode.turns, expected[e])])
        ).float()
        assert torch.equal(trl[e], want), f"TRL, episode {e}"
        assert torch.equal(verl[e], want), f"verl, episode {e}"
        assert torch.equal(openrlhf[e], want), f"OpenRLHF, episode {e}"
    if name in ("grpo", "rloo", "rebn"):
        assert any(np.any(a != 0) for a in expected)
    if name.startswith("gigpo"):  # the state keys mattered: the episode level alone differs
        assert all(k is not None for keys in state_keys for k in keys[:1])
        episode_level = compute_advantages(
            name,
            [[t.reward for t in e.turns] for e in episodes],
            gamma=GAMMA,
            group_ids=groups,
            state_keys=[[None] * len(k) for k in state_keys],
        )
        assert any(not np.allclose(a, b) for a, b in zip(expected, episode_level))

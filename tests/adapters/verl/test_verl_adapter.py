"""The verl adapter against real verl 0.9: GemAgentLoop built the way verl's worker builds it, a real
(tiny, CPU) transformers generator behind the server-manager interface, the dataset read by verl's
RLHFDataset, and the samples pushed through verl's own storage format and ``compute_advantage``."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata

import numpy as np
import pytest

pytest.importorskip("verl")
pytest.importorskip("verl.experimental.agent_loop")  # needs cachetools, fastapi, uvicorn beyond plain verl

import hydra
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.ray_trainer import apply_kl_penalty, compute_advantage
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

import gem_core
from gem_adapters.algorithms.advantages import (
    compute_advantages,
    discounted_returns,
    mask_runs,
    turn_values_to_tokens,
)
from gem_adapters.episodes.tasks import make_tasks
from gem_adapters.policies.transformers_policy import TransformersPolicy
from gem_adapters.verl.advantages import register_estimators
from gem_adapters.verl.policy_server import PolicyServer
from gem_adapters.verl.rollout import GemAgentLoop
from gem_adapters.verl.rows import AGENT_NAME, task_from_row, task_rows, write_dataset

from .helpers import AGENT_YAML, GAMMA, REPO, make_loop, verl_config

ENV_IDS = ["game:GuessTheNumber-v1-easy", "game:Mastermind-v1-easy"]
SESSIONS = 2  # rollout.n: samples per row (same env id and seed: one GRPO group)
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


@pytest.fixture(scope="module")
def played(tmp_path_factory, tokenizer, tiny_model):
    """Three rows (two envs), two sessions each, played concurrently as verl's worker plays them."""
    config = verl_config(**{"agent.agent_loop_config_path": str(AGENT_YAML)})
    path = write_dataset(
        tmp_path_factory.mktemp("verl") / "train.parquet", task_rows(make_tasks(ENV_IDS, 3, first_seed=7))
    )
    dataset = RLHFDataset(str(path), tokenizer, config.data)
    server = PolicyServer(TransformersPolicy(tiny_model, tokenizer, seed=0))

    async def play_all():
        jobs, kwargs = [], []
        for i in range(len(dataset)):
            row = dataset[i]
            for session in range(SESSIONS):
                loop = make_loop(config, server, tokenizer, max_new_tokens=6, max_turns=None)
                kw = {**copy.deepcopy(row), "uid": f"uid{i}", "session_id": session}
                kw.pop("agent_name")  # verl's worker consumes it to pick the loop
                jobs.append(loop.run(dict(SAMPLING), **kw))
                kwargs.append(kw)
        return list(zip(await asyncio.gather(*jobs), kwargs))

    return config, dataset, asyncio.run(play_all())


def to_verl_batch(played_outputs, config):
    """What verl's v1 trainer does with the samples: ``as_dict()`` + the row into storage
    (``list_of_dict_to_tensordict``), then ``_compute_advantage``'s read-back and padding."""
    fields = []
    for output, kwargs in played_outputs:
        field = output.as_dict()
        field.update(kwargs)
        field["loss_mask"] = field["response_mask"]
        fields.append(field)
    stored = list_of_dict_to_tensordict(fields)
    data = stored.select("uid", "response_mask", "rm_scores", "rollout_log_probs")
    data = DataProto(batch=data.to_padded_tensor())
    data.batch["token_level_scores"] = data.batch["rm_scores"]
    data.non_tensor_batch["uid"] = np.array(data.batch.pop("uid").tolist(), dtype=object)
    keys = [f"{kw['uid']}_{kw['session_id']}_0" for _, kw in played_outputs]
    return data, keys


def test_agent_loop_plays_token_exact_multi_turn_episodes(played, tokenizer, tiny_model):
    config, dataset, outputs = played
    assert len(outputs) == 3 * SESSIONS
    for output, kwargs in outputs:
        episode = output.episode
        task = kwargs["extra_info"]
        assert (episode.env_id, episode.seed) == (task["env_id"], task["seed"])
        assert episode.num_turns >= 2
        # The prompt is the template's own rendering of the dataset row (what verl's length filter measured).
        assert output.prompt_ids == tokenizer.apply_chat_template(
            list(kwargs["raw_prompt"]), add_generation_prompt=True, tokenize=True, return_dict=False
        )
        assert output.prompt_ids + output.response_ids == episode.to_sequence().token_ids
        assert len(output.response_ids) <= config.actor_rollout_ref.rollout.response_length
        # One run of mask 1 per action, holding exactly the generated ids.
        spans = mask_runs(output.response_mask)
        assert len(spans) == episode.num_turns
        for (start, end), turn in zip(spans, episode.turns):
            assert output.response_ids[start:end] == turn.action_ids
            assert 1 <= len(turn.action_ids) <= 6
        # Replaying the actions in a fresh env gives the same rewards: they are the env's.
        env = gem_core.make(task["env_id"])
        env.reset(seed=task["seed"])
        replayed = [env.step(turn.action)[1] for turn in episode.turns]
        assert output.extra_fields["turn_scores"] == replayed == [t.reward for t in episode.turns]
        # rm_scores: each turn's reward on its action's last id.
        rm_scores = output.as_dict()["rm_scores"]
        expected = torch.zeros(len(output.response_ids))
        for (_, end), reward in zip(spans, replayed):
            expected[end - 1] = reward
        assert torch.equal(rm_scores, expected)
        assert output.reward_score == pytest.approx(sum(replayed))
        # The server's weight versions, which the v1 trainer turns into integer tags.
        assert output.extra_fields["min_global_steps"] == output.extra_fields["max_global_steps"] == 0
    # Both limits show up: GuessTheNumber ends by itself, Mastermind runs into response_length.
    reasons = {(o.episode.env_id, o.episode.info.get("stopped_by")) for o, _ in outputs}
    assert (ENV_IDS[0], None) in reasons and (ENV_IDS[1], "max_context_tokens") in reasons


def test_logprobs_are_the_models_on_generated_ids(played, tiny_model):
    _, _, outputs = played
    for output, _ in outputs[:2]:
        ids = torch.tensor([output.prompt_ids + output.response_ids])
        with torch.no_grad():
            logp = torch.log_softmax(tiny_model(ids).logits[0, :-1].double(), dim=-1)
        scored = logp.gather(1, ids[0, 1:, None])[:, 0][len(output.prompt_ids) - 1 :]
        mask = torch.tensor(output.response_mask, dtype=torch.bool)
        got = torch.tensor(output.response_logprobs, dtype=torch.float64)
        torch.testing.assert_close(got[mask], scored[mask], atol=2e-4, rtol=0)
        assert torch.all(got[~mask] == 0)


@pytest.mark.parametrize("name", ["rebn", "rebn_per_episode", "grpo", "dr_grpo", "rloo", "reinforce"])
def test_verl_compute_advantage_equals_shared_estimator(played, name):
    config, _, outputs = played
    data, keys = to_verl_batch(outputs, config)
    data.batch["token_level_rewards"] = data.batch["token_level_scores"]
    try:  # the v1 trainer's entry point (needs TransferQueue, part of verl[verl-core])
        from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories as v1_compute
    except ImportError:
        v1_compute = None
    register_estimators()
    algorithm = config.algorithm
    if v1_compute is not None:
        data = v1_compute(
            data,
            batch_keys=keys,
            adv_estimator=f"gem_{name}",
            gamma=GAMMA,
            num_repeat=SESSIONS,
            config=algorithm,
        )
    else:
        data = compute_advantage(data, adv_estimator=f"gem_{name}", gamma=GAMMA, config=algorithm)

    episodes = [o.episode for o, _ in outputs]
    expected = compute_advantages(
        name,
        [[t.reward for t in e.turns] for e in episodes],
        gamma=GAMMA,
        group_ids=[kw["uid"] for _, kw in outputs],
    )
    width = data.batch["advantages"].shape[1]
    for b, (output, _) in enumerate(outputs):
        spans = mask_runs(output.response_mask)
        want = turn_values_to_tokens(expected[b], spans, width)
        torch.testing.assert_close(
            data.batch["advantages"][b].double(), torch.from_numpy(want), atol=1e-6, rtol=1e-6
        )
        returns = discounted_returns([t.reward for t in output.episode.turns], GAMMA)
        want_returns = turn_values_to_tokens(returns, spans, width)
        torch.testing.assert_close(
            data.batch["returns"][b].double(), torch.from_numpy(want_returns), atol=1e-6, rtol=1e-6
        )
    if name == "rebn":  # per-turn returns survived: the turns of an episode get different advantages
        assert all(len(set(np.round(a, 6))) > 1 for a in expected)


def test_kl_in_reward_is_charged_to_each_turn(played):
    """With ``algorithm.use_kl_in_reward`` verl subtracts a per-token KL penalty from the scores; each
    turn's reward then carries the penalty of its own span (action + the env ids after it)."""
    config, _, outputs = played
    data, _ = to_verl_batch(outputs, config)
    generator = torch.Generator().manual_seed(0)
    shape = data.batch["response_mask"].shape
    data.batch["old_log_probs"] = -torch.rand(shape, generator=generator)
    data.batch["ref_log_prob"] = -torch.rand(shape, generator=generator)
    data, _ = apply_kl_penalty(data, kl_ctrl=core_algos.FixedKLController(0.05), kl_penalty="kl")
    register_estimators()
    data = compute_advantage(data, adv_estimator="gem_rebn", gamma=GAMMA, config=config.algorithm)

    rewards = data.batch["token_level_rewards"].double()
    per_episode = []
    for b, (output, _) in enumerate(outputs):
        spans = mask_runs(output.response_mask)
        cuts = [0] + [s for s, _ in spans[1:]] + [shape[1]]
        per_episode.append([float(rewards[b, lo:hi].sum()) for lo, hi in itertools.pairwise(cuts)])
        assert per_episode[-1] != [t.reward for t in output.episode.turns]  # the penalty is in
    expected = compute_advantages("rebn", per_episode, gamma=GAMMA)
    for b, (output, _) in enumerate(outputs):
        want = turn_values_to_tokens(expected[b], mask_runs(output.response_mask), shape[1])
        torch.testing.assert_close(
            data.batch["advantages"][b].double(), torch.from_numpy(want), atol=1e-6, rtol=1e-6
        )


def test_scalar_reward_on_last_token_is_the_last_turns():
    """verl's own loops write one scalar on the row's last token; the estimator reads it as the
    reward of the last turn (here with env ids after the last action)."""
    register_estimators()
    mask = torch.tensor([[1, 1, 0, 0, 1, 0, 1, 1, 0, 0], [1, 0, 1, 1, 1, 0, 0, 0, 0, 0]])
    rewards = torch.zeros(2, 10)
    rewards[0, 9] = 1.0
    rewards[1, 4] = 0.5
    fn = core_algos.get_adv_estimator_fn("gem_reinforce")
    advantages, returns = fn(
        token_level_rewards=rewards, response_mask=mask, config=OmegaConf.create({"gamma": 0.5})
    )
    expected = torch.tensor(
        [[0.25, 0.25, 0, 0, 0.5, 0, 1, 1, 0, 0], [0.25, 0, 0.5, 0.5, 0.5, 0, 0, 0, 0, 0]], dtype=torch.float32
    )
    assert torch.equal(advantages, expected) and torch.equal(returns, expected)


def test_env_kwargs_travel_through_the_parquet(tmp_path, tokenizer, tiny_model):
    rows = task_rows(
        make_tasks(ENV_IDS[0], 1, first_seed=3, env_kwargs={"max_turns": 2}, system_prompt="Guess.")
    )
    dataset = RLHFDataset(str(write_dataset(tmp_path / "t.parquet", rows)), tokenizer, verl_config().data)
    row = dataset[0]
    assert json.loads(row["extra_info"]["env_kwargs"]) == {"max_turns": 2}
    assert row["raw_prompt"][0] == {"role": "system", "content": "Guess."}
    loop = make_loop(
        verl_config(), PolicyServer(TransformersPolicy(tiny_model, tokenizer, seed=1)), tokenizer
    )
    loop.max_new_tokens = 4
    output = asyncio.run(loop.run(dict(SAMPLING), **row))
    assert output.episode.num_turns == 2 and output.episode.turns[-1].truncated  # the env's own limit
    assert output.episode.system_prompt == "Guess."
    assert output.prompt_ids == tokenizer.apply_chat_template(
        list(row["raw_prompt"]), add_generation_prompt=True, tokenize=True, return_dict=False
    )


def test_malformed_row_is_named():
    with pytest.raises(ValueError, match="env_id, seed"):
        task_from_row({"seed": 1})


def test_legacy_trainer_is_refused(tokenizer, tiny_model):
    config = verl_config()
    config.trainer.use_v1 = False
    with pytest.raises(hydra.errors.InstantiationException, match="use_v1"):
        make_loop(config, PolicyServer(TransformersPolicy(tiny_model, tokenizer)), tokenizer)


def test_register_decorator_and_yaml_name_the_same_class():
    import gem_adapters.verl.rollout as module

    assert OmegaConf.load(AGENT_YAML)[0]["_target_"] == f"{module.__name__}.{GemAgentLoop.__qualname__}"
    assert OmegaConf.load(AGENT_YAML)[0]["name"] == AGENT_NAME


def test_importing_the_agent_loop_keeps_the_yamls_entry(monkeypatch):
    """verl's worker loads the agent-loop YAML into its registry, then imports our module at the first
    episode: the import must not replace the YAML's entry (and drop its max_turns/max_new_tokens)."""
    from verl.experimental.agent_loop import agent_loop as verl_agent_loop

    from gem_adapters.verl.rollout import register_gem_agent_loop

    registry = verl_agent_loop._agent_loop_registry
    monkeypatch.delitem(registry, AGENT_NAME, raising=False)
    register_gem_agent_loop()  # without a YAML: the class itself, no keyword arguments
    assert registry[AGENT_NAME] == {"_target_": "gem_adapters.verl.rollout.GemAgentLoop"}
    yaml_entry = OmegaConf.load(AGENT_YAML)[0]
    registry[AGENT_NAME] = yaml_entry
    register_gem_agent_loop()
    assert registry[AGENT_NAME] is yaml_entry and registry[AGENT_NAME]["max_turns"] == 8


def test_plugin_entry_point_registers_estimators_in_a_fresh_process(tmp_path):
    """verl loads the ``verl.plugins`` entry points on ``import verl`` (as in each Ray worker). A
    distribution declaring ours is put on the path; a fresh interpreter then has ``gem_rebn``."""
    dist = tmp_path / "gem_verl_probe-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gem-verl-probe\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[verl.plugins]\ngem = gem_adapters.verl.plugin\n")
    code = textwrap.dedent(
        """
        import verl
        from verl.trainer.ppo import core_algos
        print(sorted(k for k in core_algos.ADV_ESTIMATOR_REGISTRY if k.startswith("gem_")))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    env.pop("VERL_USE_EXTERNAL_MODULES", None)
    env["VERL_USE_EXTERNAL_PLUGINS"] = "gem"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"')) == [
        "gem_dr_grpo",
        "gem_gigpo",  # with the state-key transport the plugin installs (gem_adapters.verl.state_keys)
        "gem_gigpo_no_std",
        "gem_grpo",
        "gem_rebn",
        "gem_rebn_per_episode",
        "gem_reinforce",
        "gem_rloo",
    ]


def test_gem_core_declares_the_verl_plugin():
    points = metadata.entry_points(group="verl.plugins")
    assert any(p.value == "gem_adapters.verl.plugin" and p.dist.name == "gem-core" for p in points), (
        'pyproject.toml needs [project.entry-points."verl.plugins"] gem = "gem_adapters.verl.plugin" '
        "(then reinstall: pip install -e . --no-deps)"
    )

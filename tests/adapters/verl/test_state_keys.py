"""GiGPO in verl: each turn's state key travels from ``GemAgentLoop`` through verl's TransferQueue into
the v1 trainer's own advantage step (``PPOTrainer._compute_advantage``, patched by
``gem_adapters.verl.state_keys``) and on to ``gem_gigpo``, whose token advantages are the shared
``compute_advantages("gigpo", ...)`` of the same episodes on the same tokens.

The samples are stored as verl's v1 agent-loop worker stores them (``as_dict()`` plus the row, one
``kv_batch_put`` per agent loop) in a real TransferQueue on a local Ray of the test's own; the
trainer's method runs unchanged on them. The pinned verl lines are checked against the installed verl."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("verl")
pytest.importorskip("verl.experimental.agent_loop")
pytest.importorskip("transfer_queue")

import torch
import transfer_queue as tq
from omegaconf import OmegaConf
from transfer_queue import KVBatchMeta
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.v1.trainer_base import PPOTrainer
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from gem_adapters.algorithms.advantages import (
    compute_advantages,
    mask_runs,
    state_keys_from_json,
    turn_values_to_tokens,
)
from gem_adapters.runtime.patching import source_root
from gem_adapters.verl import state_keys
from gem_adapters.verl.advantages import register_estimators

from .helpers import GAMMA
from .test_verl_adapter import played  # noqa: F401  (the fixture: three rows, two sessions each)

PARTITION = "train"


@pytest.mark.parametrize(
    "patch, line", state_keys.PATCHES.lines(), ids=[str(line) for _, line in state_keys.PATCHES.lines()]
)
def test_patched_verl_line_is_unchanged(patch, line):
    found = line.read(source_root("verl"))
    assert found == line.text, f"verl changed {line} (now {found!r}); re-check {patch.name}: {patch.why}"


@pytest.fixture(scope="module")
def transfer_queue(monkeypatch_module):
    """verl's TransferQueue (controller and one storage unit as Ray actors) on a local Ray of its own."""
    import ray

    monkeypatch_module.setenv("RAY_AUTH_MODE", "disabled")  # no token written to ~/.ray
    monkeypatch_module.setenv("RAY_USAGE_STATS_ENABLED", "0")
    temp_dir = tempfile.mkdtemp(prefix="gem-ray-")
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp_dir)
    try:
        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        yield tq
    finally:
        tq.close()
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patcher:
        yield patcher


def store(outputs, prefix="", drop=()):
    """``AgentLoopWorkerTQ._agent_loop_postprocess``: each loop's ``as_dict()`` plus its row, under the key
    ``{uid}_{session}_{index}`` (less the fields ``drop``); returns the keys in order."""
    keys = []
    for output, kwargs in outputs:
        key = f"{prefix}{kwargs['uid']}_{kwargs['session_id']}_0"
        field = output.as_dict()
        field.update(kwargs)
        field["loss_mask"] = field["response_mask"]
        for name in drop:
            del field[name]
        tq.kv_batch_put(
            keys=[key],
            fields=list_of_dict_to_tensordict([field]),
            tags=[{"status": "success"}],
            partition_id=PARTITION,
        )
        keys.append(key)
    return keys


def compute_in_trainer(config, keys, estimator):
    """verl's v1 trainer's advantage step on the stored samples; the advantages and returns it wrote."""
    config = OmegaConf.create(OmegaConf.to_container(config))
    config.algorithm.adv_estimator = estimator
    config.actor_rollout_ref.rollout.n = 2
    config.algorithm.rollout_correction = None  # needs old_log_probs, from a trainer step not run here
    meta = KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id=PARTITION)
    PPOTrainer._compute_advantage(SimpleNamespace(config=config), meta, metrics={})  # reads self.config only
    written = tq.kv_batch_get(keys=keys, partition_id=PARTITION, select_fields=["advantages", "returns"])
    return list(written["advantages"].unbind(0)), list(written["returns"].unbind(0))


@pytest.mark.parametrize("name", ["gigpo", "gigpo_no_std"])
def test_gigpo_through_verls_v1_advantage_step(played, transfer_queue, name):  # noqa: F811
    config, _, outputs = played
    assert f"gem_{name}" in register_estimators()
    keys = store(outputs, prefix=f"{name}-")
    advantages, _ = compute_in_trainer(config, keys, f"gem_{name}")

    episodes = [o.episode for o, _ in outputs]
    turn_keys = [[t.state_key for t in e.turns] for e in episodes]
    assert all(k is not None for keys_ in turn_keys for k in keys_[:1])  # the games name their states
    for (output, _), episode_keys in zip(
        outputs, turn_keys
    ):  # the field holds the episode's keys, JSON-exact
        assert state_keys_from_json(output.as_dict()[state_keys.FIELD]) == episode_keys
    groups = [kw["uid"] for _, kw in outputs]
    rewards = [[t.reward for t in e.turns] for e in episodes]
    expected = compute_advantages(name, rewards, gamma=GAMMA, group_ids=groups, state_keys=turn_keys)
    for b, (output, _) in enumerate(outputs):
        want = turn_values_to_tokens(expected[b], mask_runs(output.response_mask), len(output.response_ids))
        torch.testing.assert_close(advantages[b].double(), torch.from_numpy(want), atol=1e-6, rtol=1e-6)
    # The step level did something: without state keys (episode level only) the numbers differ.
    episode_level = compute_advantages(
        name, rewards, gamma=GAMMA, group_ids=groups, state_keys=[[None] * len(r) for r in rewards]
    )
    assert any(not np.allclose(a, e) for a, e in zip(expected, episode_level))


def test_samples_without_state_keys_are_refused_by_name(played, transfer_queue):  # noqa: F811
    """A sample stored without ``gem_state_keys`` (another agent loop) stops ``gem_gigpo`` with the reason;
    estimators that need no keys never read the field."""
    config, _, outputs = played
    register_estimators()
    keys = store(outputs, prefix="bare-", drop=[state_keys.FIELD])
    with pytest.raises(ValueError, match="GemAgentLoop"):
        compute_in_trainer(config, keys, "gem_gigpo")
    advantages, _ = compute_in_trainer(config, keys, "gem_grpo")
    assert len(advantages) == len(outputs)


def test_the_estimator_without_the_transport_says_what_is_missing():
    register_estimators()
    rewards = torch.tensor([[0.0, 1.0, 0.0]])
    mask = torch.tensor([[1, 1, 0]])
    with pytest.raises(ValueError, match="needs each turn's env state key"):
        core_algos.get_adv_estimator_fn("gem_gigpo")(
            token_level_rewards=rewards, response_mask=mask, config=None, index=np.array(["a"], dtype=object)
        )
    # What a non-tensor batch carries (verl hands GDPO one) is read as well.
    batch = {state_keys.FIELD: np.array(['[["s", 1]]'], dtype=object)}
    advantages, _ = core_algos.get_adv_estimator_fn("gem_gigpo")(
        token_level_rewards=rewards,
        response_mask=mask,
        index=np.array(["a"], dtype=object),
        non_tensor_batch=batch,
    )
    assert advantages.shape == rewards.shape


def test_state_key_estimators_are_registered_only_with_their_transport():
    code = (
        "from verl.trainer.ppo import core_algos as c\n"
        "from gem_adapters.verl import advantages as a, state_keys as s\n"
        "a.register_estimators(with_state_keys=False)\n"
        "print('gem_gigpo' in c.ADV_ESTIMATOR_REGISTRY, 'gem_rebn' in c.ADV_ESTIMATOR_REGISTRY, s.PATCHES.installed)\n"
        "a.register_estimators()\n"
        "print('gem_gigpo' in c.ADV_ESTIMATOR_REGISTRY, 'gem_gigpo_no_std' in c.ADV_ESTIMATOR_REGISTRY,"
        " s.PATCHES.installed)\n"
        "from verl.trainer.ppo.v1.trainer_base import PPOTrainer\n"
        "print(getattr(PPOTrainer._compute_advantage, '_gem_patched', False))\n"
    )
    env = {"VERL_USE_EXTERNAL_PLUGINS": "none"}  # without gem-core's verl plugin, which registers everything
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["False", "True", "False", "True", "True", "True", "True"]

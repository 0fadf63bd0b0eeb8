"""Estimators of another package, registered through the ``gem_adapters.estimators`` entry point group,
reach the trainers: a fresh process that only has the plugin installed sees it in the shared registry,
in verl's estimator registry and in TRL's trainer; one registered later in a process reaches verl too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gem_adapters.algorithms.advantages import ESTIMATORS, estimator_names, get_estimator, register_estimator

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "custom-estimators.md"


def guide_plugin() -> str:
    """The estimator module of docs/custom-estimators.md, as a reader would copy it."""
    return GUIDE.read_text().split("```python\n", 1)[1].split("```", 1)[0]


PROBE = """
import json, types
import gem_adapters
from gem_adapters.algorithms.advantages import ESTIMATORS, estimator_names
loaded_at_import = "clipped_rebn" in ESTIMATORS  # plugins load at the registry's first use, not on import
import torch
from omegaconf import OmegaConf
from gem_adapters.verl.advantages import register_estimators
from verl.trainer.ppo import core_algos
from gem_adapters.trl.config import GEMGRPOConfig
from gem_adapters.trl.trainer import GEMGRPOTrainer

out = {"loaded_at_import": loaded_at_import, "registered": "clipped_rebn" in estimator_names()}
register_estimators()
fn = core_algos.get_adv_estimator_fn("gem_clipped_rebn")
mask = torch.tensor([[1, 1, 0, 1, 0], [1, 0, 0, 0, 0]])
rewards = torch.tensor([[0.0, 1.0, 0.0, 2.0, 0.0], [0.5, 0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
advantages, _ = fn(token_level_rewards=rewards, response_mask=mask, config=OmegaConf.create({"gamma": 0.5}))
out["verl"] = advantages.tolist()

config = GEMGRPOConfig(output_dir="{out_dir}", advantage_estimator="clipped_rebn", gamma=0.5, use_cpu=True)
trainer = types.SimpleNamespace(args=config, accelerator=types.SimpleNamespace(num_processes=1, process_index=0))
turn = lambda r: types.SimpleNamespace(reward=r)
episodes = [
    types.SimpleNamespace(turns=[turn(1.0), turn(2.0)], group_id="a"),
    types.SimpleNamespace(turns=[turn(0.5)], group_id="b"),
]
out["trl"] = [a.tolist() for a in GEMGRPOTrainer.turn_advantages(trainer, episodes)]
print(json.dumps(out))
"""


def test_the_guides_entry_point_estimator_reaches_verl_and_trl_in_a_fresh_process(tmp_path):
    (tmp_path / "my_estimators.py").write_text(guide_plugin())
    dist = tmp_path / "gem_estimator_probe-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gem-estimator-probe\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[gem_adapters.estimators]\nmy_estimators = my_estimators\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    code = textwrap.dedent(PROBE).replace("{out_dir}", str(tmp_path / "trl"))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["registered"] and not out["loaded_at_import"]
    # Episode 1: turns with rewards 1 and 2 (gamma 0.5: returns 2, 2); episode 2: one turn, return 0.5.
    returns = np.array([2.0, 2.0, 0.5])
    z = np.clip((returns - returns.mean()) / (returns.std() + 1e-6), -3, 3)
    np.testing.assert_allclose(out["verl"], [[z[0], z[0], 0, z[1], 0], [z[2], 0, 0, 0, 0]], rtol=1e-6)
    np.testing.assert_allclose(np.concatenate(out["trl"]), z, rtol=1e-6)


def test_an_estimator_registered_later_reaches_verl():
    from verl.trainer.ppo import core_algos

    from gem_adapters.verl.advantages import register_estimators

    register_estimators()

    @register_estimator("test_late_zero")
    def zero(batch, **_):
        return np.zeros(len(batch.rewards))

    try:
        assert "gem_test_late_zero" in core_algos.ADV_ESTIMATOR_REGISTRY
    finally:
        del ESTIMATORS["test_late_zero"]
        core_algos.ADV_ESTIMATOR_REGISTRY.pop("gem_test_late_zero", None)


def test_estimators_declare_what_they_need():
    assert get_estimator("gae").needs_values and not get_estimator("rebn").needs_values
    assert get_estimator("grpo").needs_groups and not get_estimator("rebn_per_episode").needs_groups
    without_values = estimator_names(values=False)
    assert "gae" not in without_values and {"rebn", "grpo"} <= set(without_values)
    assert "grpo" not in estimator_names(values=False, groups=False)
    with pytest.raises(KeyError, match="unknown estimator"):
        get_estimator("ppo?")


def test_a_broken_plugin_warns_and_the_built_in_estimators_stay(tmp_path):
    dist = tmp_path / "gem_broken_probe-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gem-broken-probe\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[gem_adapters.estimators]\nbroken = no_such_module_here\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    code = (
        "import sys, warnings\n"
        "warnings.simplefilter('always')\n"
        "import gem_adapters, gem_adapters.algorithms.advantages as a\n"
        "print('imported', file=sys.stderr, flush=True)\n"
        "print(a.estimator_names(), flush=True)\n"
        "print(a.get_estimator('rebn').name, flush=True)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "'rebn'" in run.stdout
    # Reported once, at the registry's first listing, not when the package is imported.
    assert run.stderr.count("estimator entry point 'broken'") == 1 and "failed to load" in run.stderr
    assert run.stderr.index("imported") < run.stderr.index("failed to load")

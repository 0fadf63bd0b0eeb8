"""Installing the estimator in OpenRLHF's Ray workers: the runtime-env hook, the patch applied when
the experience maker is imported, and a real local Ray job started the way OpenRLHF starts it."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid

import pytest

pytest.importorskip("openrlhf.utils.agent")

from gem_adapters.openrlhf import config as openrlhf_config
from gem_adapters.openrlhf import hook
from gem_adapters.openrlhf.advantages import compute_advantages_and_returns
from gem_adapters.openrlhf.config import ESTIMATOR_ENV
from gem_adapters.runtime import patching


def test_runtime_env_hook_adds_the_setup_hook_and_the_estimator(monkeypatch):
    monkeypatch.setenv(ESTIMATOR_ENV, "rebn")
    openrlhf_env = {"env_vars": {"TOKENIZERS_PARALLELISM": "true"}}  # what train_ppo_ray gives ray.init
    env = hook.runtime_env_hook(openrlhf_env)
    assert env == {
        "env_vars": {"TOKENIZERS_PARALLELISM": "true", ESTIMATOR_ENV: "rebn"},
        "worker_process_setup_hook": "gem_adapters.openrlhf.hook.setup_worker",
    }
    assert openrlhf_env == {"env_vars": {"TOKENIZERS_PARALLELISM": "true"}}
    assert hook.runtime_env_hook(None)["env_vars"] == {ESTIMATOR_ENV: "rebn"}
    with pytest.raises(ValueError, match="worker_process_setup_hook"):
        hook.runtime_env_hook({"worker_process_setup_hook": "other.hook"})
    monkeypatch.setenv(ESTIMATOR_ENV, "gae")  # needs a critic's per-turn values
    with pytest.raises(ValueError, match="choose one of"):
        hook.runtime_env_hook(None)
    monkeypatch.delenv(ESTIMATOR_ENV)
    monkeypatch.delenv(openrlhf_config.CPU_ENV, raising=False)
    with pytest.raises(ValueError, match=ESTIMATOR_ENV):
        hook.runtime_env_hook(None)


def test_runtime_env_hook_carries_the_cpu_switch_without_an_estimator(monkeypatch):
    monkeypatch.delenv(ESTIMATOR_ENV, raising=False)
    monkeypatch.setenv(openrlhf_config.CPU_ENV, "1")
    env = hook.runtime_env_hook({"env_vars": {"A": "1"}})
    assert env == {
        "env_vars": {"A": "1", openrlhf_config.CPU_ENV: "1"},
        "worker_process_setup_hook": hook.SETUP_HOOK,
    }
    monkeypatch.setenv(ESTIMATOR_ENV, "rebn")
    assert hook.runtime_env_hook(None)["env_vars"] == {ESTIMATOR_ENV: "rebn", openrlhf_config.CPU_ENV: "1"}


def test_the_configuration_is_one_object_and_the_environment_only_carries_it(monkeypatch):
    config = openrlhf_config.GemOpenRLHFConfig(estimator="rebn", cpu=True)
    env = config.environment()
    assert env == {
        "RAY_RUNTIME_ENV_HOOK": openrlhf_config.RUNTIME_ENV_HOOK,
        ESTIMATOR_ENV: "rebn",
        openrlhf_config.CPU_ENV: "1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert openrlhf_config.GemOpenRLHFConfig.from_environment() == config  # what the workers read back
    assert hook.runtime_env_hook(None)["env_vars"] == config.worker_variables()
    assert openrlhf_config.GemOpenRLHFConfig().environment() == {}  # OpenRLHF untouched: no hook at all
    with pytest.raises(ValueError, match="choose one of"):
        openrlhf_config.GemOpenRLHFConfig(estimator="gae")  # needs a critic's per-turn values
    # A launcher's environment: the caller's variables, with stale transport variables replaced.
    stale = {"PATH": "/bin", ESTIMATOR_ENV: "grpo", "RAY_RUNTIME_ENV_HOOK": "old.hook"}
    assert openrlhf_config.launch_environment(openrlhf_config.GemOpenRLHFConfig(), stale) == {"PATH": "/bin"}
    assert openrlhf_config.launch_environment(openrlhf_config.GemOpenRLHFConfig(estimator="rloo"), stale) == {
        "PATH": "/bin",
        "RAY_RUNTIME_ENV_HOOK": openrlhf_config.RUNTIME_ENV_HOOK,
        ESTIMATOR_ENV: "rloo",
    }


@pytest.mark.parametrize("line", hook.estimator_patch("rebn").lines, ids=str)
def test_the_estimator_swap_is_pinned_to_openrlhfs_lines(line):
    """The replaced method and what the replacement reads as OpenRLHF's does, in the installed OpenRLHF."""
    assert line.read(patching.source_root("openrlhf")) == line.text


@pytest.fixture
def probe_module(tmp_path, monkeypatch):
    """A module with a ``RemoteExperienceMaker`` class, not imported yet (the real one needs flash-attn)."""
    name = f"gem_probe_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            class RemoteExperienceMaker:
                def compute_advantages_and_returns(self, experiences):
                    return "openrlhf"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_setup_worker_patches_the_experience_maker_when_it_is_imported(probe_module, monkeypatch):
    monkeypatch.setattr(hook, "TARGET", probe_module)
    monkeypatch.setenv(ESTIMATOR_ENV, "grpo")
    monkeypatch.delenv(openrlhf_config.CPU_ENV, raising=False)
    hook.setup_worker()
    assert probe_module not in sys.modules and len(patching.pending(probe_module)) == 1
    module = __import__(probe_module)
    assert patching.pending(probe_module) == []  # one import, one patch
    cls = module.RemoteExperienceMaker
    assert cls.gem_estimator == "grpo"
    method = cls.__dict__["compute_advantages_and_returns"]
    assert isinstance(method, functools.partialmethod)
    assert method.func is compute_advantages_and_returns and method.keywords == {"estimator": "grpo"}
    assert cls()._gem_original_compute_advantages_and_returns([]) == "openrlhf"
    # A module imported before the hook runs is patched at once.
    monkeypatch.setenv(ESTIMATOR_ENV, "rloo")
    hook.setup_worker()
    assert cls.gem_estimator == "rloo" and patching.pending(probe_module) == []


def test_setup_worker_does_nothing_without_an_estimator(probe_module, monkeypatch):
    monkeypatch.setattr(hook, "TARGET", probe_module)
    monkeypatch.delenv(ESTIMATOR_ENV, raising=False)
    monkeypatch.delenv(openrlhf_config.CPU_ENV, raising=False)
    hook.setup_worker()
    assert patching.pending(probe_module) == []
    assert not hasattr(__import__(probe_module).RemoteExperienceMaker, "gem_estimator")


def test_install_patches_openrlhf_in_process():
    """Needs OpenRLHF's trainer modules, which import flash-attn: GPU machines only."""
    module = pytest.importorskip(hook.TARGET, reason="OpenRLHF's trainer imports flash-attn (CUDA builds)")
    original = module.RemoteExperienceMaker.__dict__["compute_advantages_and_returns"]
    hook.install("rebn")
    try:
        method = module.RemoteExperienceMaker.__dict__["compute_advantages_and_returns"]
        assert isinstance(method, functools.partialmethod) and method.keywords == {"estimator": "rebn"}
    finally:
        hook.uninstall()
    assert module.RemoteExperienceMaker.__dict__["compute_advantages_and_returns"] is original


@pytest.mark.slow
def test_ray_workers_of_an_openrlhf_style_launch_get_the_hook():
    """A fresh driver with ``RAY_RUNTIME_ENV_HOOK`` calls ``ray.init`` as ``train_ppo_ray`` does; an
    actor (as OpenRLHF's trainer, engines and models are) sees the estimator and the pending patch."""
    pytest.importorskip("ray")
    # address="local": a Ray instance of its own, even where a cluster runs on the machine (ray.init()
    # would join it); its session files in a directory of its own (short: Ray's socket paths are short).
    temp_dir = tempfile.mkdtemp(prefix="gem-ray-")
    code = textwrap.dedent(
        f"""
        import json, os, sys
        import ray

        ray.init(address="local", num_cpus=1, include_dashboard=False, _temp_dir={temp_dir!r},
                 runtime_env={{"env_vars": {{"TOKENIZERS_PARALLELISM": "true"}}}})

        @ray.remote
        class Worker:
            def report(self):
                from gem_adapters.openrlhf import hook
                from gem_adapters.runtime import patching
                pending = [hook.TARGET] if patching.pending(hook.TARGET) else []
                return {{"estimator": os.environ.get({ESTIMATOR_ENV!r}),
                         "tokenizers": os.environ.get("TOKENIZERS_PARALLELISM"),
                         "pending": pending, "imported": hook.TARGET in sys.modules}}

        print(json.dumps(ray.get(Worker.remote().report.remote())))
        ray.shutdown()
        """
    )
    env = {
        **os.environ,
        ESTIMATOR_ENV: "rebn",
        "RAY_RUNTIME_ENV_HOOK": "gem_adapters.openrlhf.hook.runtime_env_hook",
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        deadline = time.monotonic() + 10  # Ray's processes write their last logs as they exit
        while os.path.exists(temp_dir) and time.monotonic() < deadline:
            shutil.rmtree(temp_dir, ignore_errors=True)
            time.sleep(0.5)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"estimator": "rebn", "tokenizers": "true", "pending": [hook.TARGET], "imported": False}

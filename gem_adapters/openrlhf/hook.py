"""Installing the GEM estimator where OpenRLHF computes advantages: inside its Ray workers.

OpenRLHF 0.11 computes advantages in ``RemoteExperienceMaker.compute_advantages_and_returns``, run by
the ``PPOTrainer`` Ray actor (its single controller). ``--train.agent_func_path`` is loaded only in
the vLLM engine actors (``openrlhf.trainer.ray.vllm_engine._load_agent_executor``), so a patch made
when the agent module is imported never reaches the trainer; neither does one made in the driver.
Ray's own hooks do:

* ``runtime_env_hook``: with ``RAY_RUNTIME_ENV_HOOK=gem_adapters.openrlhf.hook.runtime_env_hook`` in
  the driver's environment, Ray passes the ``runtime_env`` that OpenRLHF gives ``ray.init`` through
  this function, which adds ``worker_process_setup_hook`` (``setup_worker``, run at the start of
  every worker process of the job) and ``GEM_OPENRLHF_ESTIMATOR`` to the workers' ``env_vars`` (the
  vLLM engine actors read it to send per-turn rewards).
* ``setup_worker``: patches ``RemoteExperienceMaker`` as soon as
  ``openrlhf.trainer.ppo_utils.experience_maker`` is imported in the worker (at once if it already
  is); workers that never import it (vLLM engines, model actors) pay nothing.

Launch (one line; the estimator's name is read from the driver's environment)::

    GEM_OPENRLHF_ESTIMATOR=rebn RAY_RUNTIME_ENV_HOOK=gem_adapters.openrlhf.hook.runtime_env_hook \\
        python -m openrlhf.cli.train_ppo_ray --algo.advantage.estimator reinforce \\
        --train.agent_func_path "$(python -m gem_adapters.openrlhf.agent_func)" ...

Submitting to a running cluster with ``ray job submit`` instead, give the same two entries directly:
``--runtime-env-json '{"worker_process_setup_hook": "gem_adapters.openrlhf.hook.setup_worker",
"env_vars": {"GEM_OPENRLHF_ESTIMATOR": "rebn"}}'``. (Ray skips ``RAY_RUNTIME_ENV_HOOK`` for drivers
started with ``uv run``.) In one process (a custom driver, tests): ``install()`` / ``uninstall()``.

The same hook carries OpenRLHF's CPU patches to every worker when ``GEM_OPENRLHF_CPU=1`` is in the
driver's environment (``python -m gem_adapters.openrlhf.cpu`` sets it; ``gem_adapters/openrlhf/cpu.py``).
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from types import ModuleType
from typing import Any

from gem_adapters.openrlhf.estimator import (
    ESTIMATOR_ENV,
    compute_advantages_and_returns,
    configured_estimator,
)
from gem_adapters.patching import patch_on_import

CPU_ENV = "GEM_OPENRLHF_CPU"  # "1": also patch OpenRLHF for CPU in every worker (gem_adapters.openrlhf.cpu)

TARGET = "openrlhf.trainer.ppo_utils.experience_maker"
SETUP_HOOK = f"{__name__}.setup_worker"
_ORIGINAL = "_gem_original_compute_advantages_and_returns"


def runtime_env_hook(runtime_env: dict[str, Any] | None) -> dict[str, Any]:
    """``RAY_RUNTIME_ENV_HOOK``: ``runtime_env`` plus the setup hook and the variables it reads
    (the estimator's name, and ``GEM_OPENRLHF_CPU`` when set)."""
    name = configured_estimator()
    cpu = os.environ.get(CPU_ENV) == "1"
    if name is None and not cpu:
        raise ValueError(f"set {ESTIMATOR_ENV} (e.g. rebn) or {CPU_ENV}=1 in the driver's environment")
    env = dict(runtime_env or {})
    existing = env.get("worker_process_setup_hook")
    if existing not in (None, SETUP_HOOK):
        raise ValueError(f"the runtime env already has a worker_process_setup_hook ({existing!r})")
    env["worker_process_setup_hook"] = SETUP_HOOK
    env["env_vars"] = {
        **dict(env.get("env_vars") or {}),
        **({ESTIMATOR_ENV: name} if name is not None else {}),
        **({CPU_ENV: "1"} if cpu else {}),
    }
    return env


def setup_worker() -> None:
    """``worker_process_setup_hook``: patch the experience maker of this worker when it is imported, and
    OpenRLHF's CUDA calls when ``GEM_OPENRLHF_CPU=1`` (``gem_adapters.openrlhf.cpu.install``)."""
    if os.environ.get(CPU_ENV) == "1":
        from gem_adapters.openrlhf import cpu

        cpu.install()
    name = configured_estimator()
    if name is not None:
        patch_on_import(TARGET, functools.partial(_patch, estimator=name))


def install(estimator: str | None = None) -> None:
    """Patch ``RemoteExperienceMaker`` in this process now (imports OpenRLHF's trainer modules)."""
    name = estimator or configured_estimator()
    if name is None:
        raise ValueError(f"name an estimator or set {ESTIMATOR_ENV}")
    _patch(importlib.import_module(TARGET), estimator=name)


def uninstall() -> None:
    """Restore OpenRLHF's own method (if ``install`` or ``setup_worker`` patched it)."""
    module = sys.modules.get(TARGET)
    cls = getattr(module, "RemoteExperienceMaker", None)
    if cls is not None and _ORIGINAL in cls.__dict__:
        cls.compute_advantages_and_returns = cls.__dict__[_ORIGINAL]
        delattr(cls, _ORIGINAL)
        delattr(cls, "gem_estimator")


def _patch(module: ModuleType, *, estimator: str) -> None:
    cls = module.RemoteExperienceMaker
    if _ORIGINAL not in cls.__dict__:
        setattr(cls, _ORIGINAL, cls.__dict__["compute_advantages_and_returns"])
    cls.compute_advantages_and_returns = functools.partialmethod(
        compute_advantages_and_returns, estimator=estimator
    )
    cls.gem_estimator = estimator

"""What gem_adapters changes in an OpenRLHF run, configured in one place (``GemOpenRLHFConfig``), and how
it reaches OpenRLHF's Ray workers.

Two changes, both optional: the GEM per-turn ``estimator`` replaces OpenRLHF's in the trainer, and
``cpu`` patches OpenRLHF's CUDA calls in every worker (``gem_adapters.openrlhf.cpu``). A launcher
builds the configuration and says so: ``examples/train_openrlhf.py`` (``--advantage_estimator``) and
``python -m gem_adapters.openrlhf.cpu`` (``--gem.estimator``) each build a ``GemOpenRLHFConfig`` and put
``config.environment()`` into the environment of the OpenRLHF driver they start. Nothing else
configures it.

Why the environment: OpenRLHF 0.11 computes advantages in
``RemoteExperienceMaker.compute_advantages_and_returns``, run by the ``PPOTrainer`` Ray actor (its single
controller), and ``--train.agent_func_path`` is loaded only in the vLLM engine actors
(``openrlhf.trainer.ray.vllm_engine._load_agent_executor``), so a patch made when the agent module is
imported never reaches the trainer; neither does one made in the driver. Ray's own hooks do, and
environment variables are their transport (this table is the one place they are described):

| variable | put in the driver's environment by | read by |
|---|---|---|
| ``RAY_RUNTIME_ENV_HOOK`` | ``config.environment()`` | Ray, in the driver's ``ray.init``: it passes OpenRLHF's ``runtime_env`` through ``runtime_env_hook``, which adds ``worker_process_setup_hook`` (``setup_worker``) and the two variables below to the workers' ``env_vars`` |
| ``GEM_OPENRLHF_ESTIMATOR`` | ``config.environment()`` (when ``estimator``) | ``setup_worker`` (patches ``RemoteExperienceMaker`` when ``openrlhf.trainer.ppo_utils.experience_maker`` is imported; workers that never import it pay nothing) and the agent executor in the vLLM engine actors (sends per-turn rewards) |
| ``GEM_OPENRLHF_CPU`` | ``config.environment()`` (when ``cpu``) | ``setup_worker`` (``gem_adapters.openrlhf.cpu.install``) |

``GemOpenRLHFConfig.from_environment()`` is the one reader of the last two.

Launching ``train_ppo_ray`` yourself, give it ``GemOpenRLHFConfig(estimator="rebn").environment()``::

    GEM_OPENRLHF_ESTIMATOR=rebn RAY_RUNTIME_ENV_HOOK=gem_adapters.openrlhf.hook.runtime_env_hook \\
        python -m openrlhf.cli.train_ppo_ray --algo.advantage.estimator reinforce \\
        --train.agent_func_path "$(python -m gem_adapters.openrlhf.agent_func)" ...

Submitting to a running cluster with ``ray job submit`` instead, give the workers' entries directly:
``--runtime-env-json '{"worker_process_setup_hook": "gem_adapters.openrlhf.hook.setup_worker",
"env_vars": {"GEM_OPENRLHF_ESTIMATOR": "rebn"}}'``. (Ray skips ``RAY_RUNTIME_ENV_HOOK`` for drivers
started with ``uv run``.) In one process (a custom driver, tests): ``install()`` / ``uninstall()``.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gem_adapters.openrlhf.advantages import (
    ESTIMATOR_ENV,
    compute_advantages_and_returns,
    configured_estimator,
    estimator_names,
)
from gem_adapters.patching import patch_on_import

CPU_ENV = "GEM_OPENRLHF_CPU"  # "1": also patch OpenRLHF for CPU in every worker (gem_adapters.openrlhf.cpu)
RUNTIME_ENV_HOOK = f"{__name__}.runtime_env_hook"

TARGET = "openrlhf.trainer.ppo_utils.experience_maker"
SETUP_HOOK = f"{__name__}.setup_worker"
_ORIGINAL = "_gem_original_compute_advantages_and_returns"


@dataclass(frozen=True)
class GemOpenRLHFConfig:
    """What gem_adapters changes in an OpenRLHF run (see the module docstring).

    ``estimator``: a GEM estimator OpenRLHF can feed (``estimator_names()``: no critic values) that
    replaces OpenRLHF's in the trainer; launch with ``--algo.advantage.estimator reinforce``. None
    keeps OpenRLHF's own. ``cpu``: patch OpenRLHF's CUDA calls in every worker."""

    estimator: str | None = None
    cpu: bool = False

    def __post_init__(self) -> None:
        if self.estimator is not None and self.estimator not in estimator_names():
            raise ValueError(f"estimator {self.estimator!r}: choose one of {estimator_names()}")

    @property
    def changes_anything(self) -> bool:
        return self.estimator is not None or self.cpu

    def environment(self) -> dict[str, str]:
        """The entries of the OpenRLHF driver's environment that carry this configuration to every Ray
        worker (empty when it changes nothing)."""
        if not self.changes_anything:
            return {}
        return {"RAY_RUNTIME_ENV_HOOK": RUNTIME_ENV_HOOK, **self.worker_variables()}

    def worker_variables(self) -> dict[str, str]:
        """The variables the workers read (``from_environment``)."""
        return {
            **({ESTIMATOR_ENV: self.estimator} if self.estimator is not None else {}),
            **({CPU_ENV: "1"} if self.cpu else {}),
        }

    @classmethod
    def from_environment(cls) -> GemOpenRLHFConfig:
        """The configuration the variables of this process carry (in a worker, or in the driver's hook)."""
        return cls(estimator=configured_estimator(), cpu=os.environ.get(CPU_ENV) == "1")


TRANSPORT_VARIABLES = ("RAY_RUNTIME_ENV_HOOK", ESTIMATOR_ENV, CPU_ENV)  # what ``environment()`` may set


def launch_environment(config: GemOpenRLHFConfig, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``config``'s entries and no other value of
    the variables that carry it: what a launcher passes to the OpenRLHF driver it starts."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in TRANSPORT_VARIABLES}
    return {**env, **config.environment()}


def runtime_env_hook(runtime_env: dict[str, Any] | None) -> dict[str, Any]:
    """``RAY_RUNTIME_ENV_HOOK``: ``runtime_env`` plus the setup hook and the variables it reads."""
    config = GemOpenRLHFConfig.from_environment()
    if not config.changes_anything:
        raise ValueError(
            f"the driver's environment configures nothing ({ESTIMATOR_ENV}, {CPU_ENV}): "
            "put GemOpenRLHFConfig(...).environment() in it"
        )
    env = dict(runtime_env or {})
    existing = env.get("worker_process_setup_hook")
    if existing not in (None, SETUP_HOOK):
        raise ValueError(f"the runtime env already has a worker_process_setup_hook ({existing!r})")
    env["worker_process_setup_hook"] = SETUP_HOOK
    env["env_vars"] = {**dict(env.get("env_vars") or {}), **config.worker_variables()}
    return env


def setup_worker() -> None:
    """``worker_process_setup_hook``: what ``GemOpenRLHFConfig.from_environment()`` says, in this worker:
    OpenRLHF's CUDA calls patched (``cpu``; ``gem_adapters.openrlhf.cpu.install``) and the experience
    maker patched when it is imported (``estimator``)."""
    config = GemOpenRLHFConfig.from_environment()
    if config.cpu:
        from gem_adapters.openrlhf import cpu

        cpu.install()
    if config.estimator is not None:
        patch_on_import(TARGET, functools.partial(_patch, estimator=config.estimator))


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

"""What gem_adapters changes in an OpenRLHF run (``GemOpenRLHFConfig``), the environment variables that
carry it to OpenRLHF's Ray workers, and their one reader (``GemOpenRLHFConfig.from_environment``).

A leaf: it imports neither OpenRLHF nor the other modules of this folder, so the launcher
(``examples/train_openrlhf.py``), the CPU entry point (``cpu``), the Ray hooks (``hook``) and the agent
executor (``rollout``) all read the configuration from here.

Why the environment: OpenRLHF 0.11 computes advantages in
``RemoteExperienceMaker.compute_advantages_and_returns``, run by the ``PPOTrainer`` Ray actor (its single
controller), and ``--train.agent_func_path`` is loaded only in the vLLM engine actors
(``openrlhf.trainer.ray.vllm_engine._load_agent_executor``), so a patch made when the agent module is
imported never reaches the trainer; neither does one made in the driver. Ray's own hooks do, and
environment variables are their transport (this table is the one place they are described):

| variable | put in the driver's environment by | read by |
|---|---|---|
| ``RAY_RUNTIME_ENV_HOOK`` | ``config.environment()`` | Ray, in the driver's ``ray.init``: it passes OpenRLHF's ``runtime_env`` through ``hook.runtime_env_hook``, which adds ``worker_process_setup_hook`` (``hook.setup_worker``) and the two variables below to the workers' ``env_vars`` |
| ``GEM_OPENRLHF_ESTIMATOR`` | ``config.environment()`` (when ``estimator``) | ``hook.setup_worker`` (patches ``RemoteExperienceMaker`` when ``openrlhf.trainer.ppo_utils.experience_maker`` is imported; workers that never import it pay nothing) and the agent executor in the vLLM engine actors (sends per-turn rewards) |
| ``GEM_OPENRLHF_CPU`` | ``config.environment()`` (when ``cpu``) | ``hook.setup_worker`` (``gem_adapters.openrlhf.cpu.install``) |

Launching ``train_ppo_ray`` yourself, give it ``GemOpenRLHFConfig(estimator="rebn").environment()``::

    GEM_OPENRLHF_ESTIMATOR=rebn RAY_RUNTIME_ENV_HOOK=gem_adapters.openrlhf.hook.runtime_env_hook \\
        python -m openrlhf.cli.train_ppo_ray --algo.advantage.estimator reinforce \\
        --train.agent_func_path "$(python -m gem_adapters.openrlhf.agent_func)" ...

Submitting to a running cluster with ``ray job submit`` instead, give the workers' entries directly:
``--runtime-env-json '{"worker_process_setup_hook": "gem_adapters.openrlhf.hook.setup_worker",
"env_vars": {"GEM_OPENRLHF_ESTIMATOR": "rebn"}}'``. (Ray skips ``RAY_RUNTIME_ENV_HOOK`` for drivers
started with ``uv run``.)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from gem_adapters.algorithms.advantages import estimator_names as shared_estimator_names
from gem_adapters.algorithms.advantages import require_estimator

ESTIMATOR_ENV = "GEM_OPENRLHF_ESTIMATOR"  # the GEM estimator that replaces OpenRLHF's
CPU_ENV = "GEM_OPENRLHF_CPU"  # "1": also patch OpenRLHF for CPU in every worker (gem_adapters.openrlhf.cpu)
RUNTIME_ENV_HOOK_ENV = "RAY_RUNTIME_ENV_HOOK"
RUNTIME_ENV_HOOK = "gem_adapters.openrlhf.hook.runtime_env_hook"
TRANSPORT_VARIABLES = (RUNTIME_ENV_HOOK_ENV, ESTIMATOR_ENV, CPU_ENV)  # what ``environment()`` may set

# What OpenRLHF's trainer can feed an estimator: group ids (the label) and state keys (the executor's
# extra_logs), no critic values.
FEEDS = {"values": False, "groups": True, "state_keys": True}


def estimator_names() -> list[str]:
    """The shared estimators OpenRLHF can feed, read from the registry at call time."""
    return shared_estimator_names(**FEEDS)


@dataclass(frozen=True)
class GemOpenRLHFConfig:
    """What gem_adapters changes in an OpenRLHF run (see the module docstring).

    ``estimator``: a GEM estimator OpenRLHF can feed (``estimator_names()``: no critic values) that
    replaces OpenRLHF's in the trainer; launch with ``--algo.advantage.estimator reinforce``. None
    keeps OpenRLHF's own. ``cpu``: patch OpenRLHF's CUDA calls in every worker."""

    estimator: str | None = None
    cpu: bool = False

    def __post_init__(self) -> None:
        if self.estimator is not None:
            require_estimator(self.estimator, **FEEDS, trainer="OpenRLHF")

    @property
    def changes_anything(self) -> bool:
        return self.estimator is not None or self.cpu

    def environment(self) -> dict[str, str]:
        """The entries of the OpenRLHF driver's environment that carry this configuration to every Ray
        worker (empty when it changes nothing)."""
        if not self.changes_anything:
            return {}
        return {RUNTIME_ENV_HOOK_ENV: RUNTIME_ENV_HOOK, **self.worker_variables()}

    def worker_variables(self) -> dict[str, str]:
        """The variables the workers read (``from_environment``)."""
        return {
            **({ESTIMATOR_ENV: self.estimator} if self.estimator is not None else {}),
            **({CPU_ENV: "1"} if self.cpu else {}),
        }

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> GemOpenRLHFConfig:
        """The configuration the variables of ``environ`` (default: this process's) carry: in a worker,
        in the driver's hook, in the agent executor. The one reader of these variables."""
        environ = os.environ if environ is None else environ
        try:
            return cls(estimator=environ.get(ESTIMATOR_ENV) or None, cpu=environ.get(CPU_ENV) == "1")
        except ValueError as exc:
            raise ValueError(f"{ESTIMATOR_ENV}={environ.get(ESTIMATOR_ENV)!r}: {exc}") from None


def launch_environment(config: GemOpenRLHFConfig, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``config``'s entries and no other value of
    the variables that carry it: what a launcher passes to the OpenRLHF driver it starts."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in TRANSPORT_VARIABLES}
    return {**env, **config.environment()}

"""How the run's ``GemOpenRLHFConfig`` (``gem_adapters.openrlhf.config``) reaches OpenRLHF's Ray workers, and
the estimator swap it asks for there.

Two changes, both optional: the GEM per-turn ``estimator`` replaces OpenRLHF's in the trainer
(``estimator_patch``: a ``Patch`` pinned to the OpenRLHF lines it replaces, as every framework patch is),
and ``cpu`` patches OpenRLHF's CUDA calls in every worker (``gem_adapters.openrlhf.cpu``). A launcher
builds the configuration and says so: ``examples/train_openrlhf.py`` and ``python -m
gem_adapters.openrlhf.cpu`` (both ``--gem.estimator``) each build a ``GemOpenRLHFConfig`` and put
``config.environment()`` into the environment of the OpenRLHF driver they start; Ray's driver then calls
``runtime_env_hook``, and every worker ``setup_worker`` (the variables and why: ``config``'s docstring).
In one process (a custom driver, tests): ``install()`` / ``uninstall()``.
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Any

from gem_adapters.openrlhf.advantages import compute_advantages_and_returns
from gem_adapters.openrlhf.config import CPU_ENV, ESTIMATOR_ENV, GemOpenRLHFConfig
from gem_adapters.runtime.patching import Line, Patch, PatchSet

TARGET = "openrlhf.trainer.ppo_utils.experience_maker"
SETUP_HOOK = f"{__name__}.setup_worker"
_ORIGINAL = "_gem_original_compute_advantages_and_returns"
_MAKER = "openrlhf/trainer/ppo_utils/experience_maker.py"
# The method the estimator swap replaces, and what the replacement reads as the original does.
_MAKER_LINES = (
    Line(
        _MAKER,
        238,
        "def compute_advantages_and_returns(self, experiences: List[Experience]) -> List[Experience]:",
    ),
    Line(_MAKER, 240, "args = self.strategy.args"),
    Line(_MAKER, 247, "apply_length_penalties(experiences, args)"),
    Line(_MAKER, 286, "self.kl_ctl.value,"),
)


def estimator_patch(estimator: str) -> Patch:
    """``RemoteExperienceMaker.compute_advantages_and_returns`` replaced by the GEM ``estimator``'s
    (``gem_adapters.openrlhf.advantages.compute_advantages_and_returns``)."""
    return Patch(
        TARGET,
        functools.partial(_use_gem_estimator, estimator=estimator),
        _MAKER_LINES,
        "OpenRLHF's estimators are a hard-coded if chain inside this method: no registry to add one to",
    )


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
        PatchSet("OpenRLHF", [estimator_patch(config.estimator)]).install()


def install(estimator: str | None = None) -> None:
    """Patch ``RemoteExperienceMaker`` in this process now (imports OpenRLHF's trainer modules)."""
    name = estimator or GemOpenRLHFConfig.from_environment().estimator
    if name is None:
        raise ValueError(f"name an estimator or set {ESTIMATOR_ENV}")
    estimator_patch(name).apply(importlib.import_module(TARGET))


def uninstall() -> None:
    """Restore OpenRLHF's own method (if ``install`` or ``setup_worker`` patched it)."""
    module = sys.modules.get(TARGET)
    cls = getattr(module, "RemoteExperienceMaker", None)
    if cls is not None and _ORIGINAL in cls.__dict__:
        cls.compute_advantages_and_returns = cls.__dict__[_ORIGINAL]
        delattr(cls, _ORIGINAL)
        delattr(cls, "gem_estimator")


def _use_gem_estimator(module: Any, *, estimator: str) -> None:
    cls = module.RemoteExperienceMaker
    if _ORIGINAL not in cls.__dict__:
        setattr(cls, _ORIGINAL, cls.__dict__["compute_advantages_and_returns"])
    cls.compute_advantages_and_returns = functools.partialmethod(
        compute_advantages_and_returns, estimator=estimator
    )
    cls.gem_estimator = estimator

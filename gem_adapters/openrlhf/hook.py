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
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gem_adapters.openrlhf.estimator import (
    ESTIMATOR_ENV,
    compute_advantages_and_returns,
    configured_estimator,
)

TARGET = "openrlhf.trainer.ppo_utils.experience_maker"
SETUP_HOOK = f"{__name__}.setup_worker"
_ORIGINAL = "_gem_original_compute_advantages_and_returns"


def runtime_env_hook(runtime_env: dict[str, Any] | None) -> dict[str, Any]:
    """``RAY_RUNTIME_ENV_HOOK``: ``runtime_env`` plus the setup hook and the estimator variable."""
    name = configured_estimator()
    if name is None:
        raise ValueError(f"set {ESTIMATOR_ENV} (e.g. rebn) in the driver's environment")
    env = dict(runtime_env or {})
    existing = env.get("worker_process_setup_hook")
    if existing not in (None, SETUP_HOOK):
        raise ValueError(f"the runtime env already has a worker_process_setup_hook ({existing!r})")
    env["worker_process_setup_hook"] = SETUP_HOOK
    env["env_vars"] = {**dict(env.get("env_vars") or {}), ESTIMATOR_ENV: name}
    return env


def setup_worker() -> None:
    """``worker_process_setup_hook``: patch the experience maker of this worker when it is imported."""
    name = configured_estimator()
    if name is None:
        return
    patch = functools.partial(_patch, estimator=name)
    if TARGET in sys.modules:
        patch(sys.modules[TARGET])
    else:
        patch_on_import(TARGET, patch)


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


def patch_on_import(module_name: str, patch: Callable[[ModuleType], None]) -> None:
    """Call ``patch(module)`` right after ``module_name`` is first imported in this process."""
    sys.meta_path.insert(0, _PatchOnImport(module_name, patch))


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader the other finders return for one module name."""

    def __init__(self, module_name: str, patch: Callable[[ModuleType], None]):
        self.module_name = module_name
        self.patch = patch

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.module_name:
            return None
        sys.meta_path.remove(self)  # one import; also keeps the lookup below from finding us again
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            sys.meta_path.insert(0, self)
            return None
        spec.loader = _PatchingLoader(spec.loader, self)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, finder: _PatchOnImport):
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self.loader.exec_module(module)
        except BaseException:
            sys.meta_path.insert(0, self.finder)  # a failed import can be retried, and patched then
            raise
        self.finder.patch(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, is_package, ...
        return getattr(self.loader, name)

"""ROLL's env managers, importable from a module that first registers gem_core's envs with gem.

ROLL's env workers (``roll/pipeline/agentic/environment_worker.py``) import each env's
``env_manager_cls`` by its dotted path and the manager calls ``gem.make(env_type, ...)`` in that worker
process. Naming the manager through this module, e.g.::

    env_manager_cls: gem_adapters.roll.env_managers.StepConcatEnvManager

runs ``register_gem_core_envs()`` in the worker before any env is built, so ``env_type:
gem_core/game:Sudoku-v0-easy`` (or a bare id that gem-llm does not register) resolves to gem_core.
The classes are ROLL's own, re-exported unchanged. Importing this module needs ROLL on the path.

ROLL's ``ProxyEnvManager`` is not re-exported: the env worker recognises it by the substring
``proxy_env_manager`` in the configured path.
"""

from roll.pipeline.agentic.env_manager.step_concat_env_manager import StepConcatEnvManager
from roll.pipeline.agentic.env_manager.step_env_manager import StepEnvManager
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager

from gem_adapters.roll.registration import register_gem_core_envs

register_gem_core_envs()

__all__ = ["StepConcatEnvManager", "StepEnvManager", "TrajEnvManager"]

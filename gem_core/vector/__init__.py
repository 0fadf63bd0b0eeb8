"""Vector envs: many envs stepped as one batch (see ``gem_core.vector.base`` for the semantics).

Backends, one semantics: ``SyncVectorEnv`` (one after another), ``AsyncVectorEnv`` (a thread per env,
waiting overlaps), ``ProcessVectorEnv`` (worker processes, CPU work in parallel) and ``RayVectorEnv``
(Ray actors, needs ``gem-core[ray]``; Ray itself is imported only when one is built).
``gem_core.vector.backends`` names them for ``make_vec(backend=...)`` and resolves the older keywords.
``gem_core.vector.faults.InjectFaults`` makes envs raise, hang or crash on purpose, to test all this.
"""

from gem_core.vector.backends import BACKENDS, DEFAULT_BACKEND, resolve_backend
from gem_core.vector.base import AutoresetMode, VectorEnv
from gem_core.vector.processes import ProcessVectorEnv
from gem_core.vector.ray_backend import RayVectorEnv
from gem_core.vector.sync import SyncVectorEnv
from gem_core.vector.threads import AsyncVectorEnv

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "AsyncVectorEnv",
    "AutoresetMode",
    "ProcessVectorEnv",
    "RayVectorEnv",
    "SyncVectorEnv",
    "VectorEnv",
    "resolve_backend",
]

"""Vector envs: many envs stepped as one batch (see ``gem_core.vector.base`` for the semantics)."""

from gem_core.vector.base import AutoresetMode, VectorEnv
from gem_core.vector.sync import SyncVectorEnv
from gem_core.vector.threads import AsyncVectorEnv

__all__ = ["AsyncVectorEnv", "AutoresetMode", "SyncVectorEnv", "VectorEnv"]

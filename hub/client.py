"""The classes OpenEnv's ``AutoEnv``/``AutoAction`` load for ``gem`` (they live in ``gem_core.openenv``)."""

from gem_core.openenv.env_client import GemEnv
from gem_core.openenv.protocol import GemAction, GemObservation, GemState

__all__ = ["GemAction", "GemEnv", "GemObservation", "GemState"]

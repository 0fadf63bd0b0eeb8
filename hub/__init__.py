"""gem-core's envs for OpenEnv: ``GemEnv`` (the client), ``GemAction``, ``GemObservation``, ``GemState``."""

from .client import GemAction, GemEnv, GemObservation, GemState

__all__ = ["GemAction", "GemEnv", "GemObservation", "GemState"]

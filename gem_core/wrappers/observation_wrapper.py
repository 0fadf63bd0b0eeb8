"""The reference gem's ``gem.wrappers.observation_wrapper``: ``ObservationWrapper`` (same arguments, same
text: ``gem_core.wrappers.reference_observation.ReferenceObservation``) and ``maybe_add_new_line``."""

from gem_core.wrappers.reference_observation import ReferenceObservation as ObservationWrapper
from gem_core.wrappers.reference_observation import _line as maybe_add_new_line

__all__ = ["ObservationWrapper", "maybe_add_new_line"]

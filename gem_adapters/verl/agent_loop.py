"""Deprecated alias of ``gem_adapters.verl.rollout`` (the same module object), kept for code outside the repository."""

import sys
import warnings

from gem_adapters.verl import rollout as _module

warnings.warn(f"{__name__} is deprecated: import gem_adapters.verl.rollout", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _module

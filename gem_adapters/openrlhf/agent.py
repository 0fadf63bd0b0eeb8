"""Deprecated alias of ``gem_adapters.openrlhf.rollout`` (the same module object), kept for code outside the repository."""

import sys
import warnings

from gem_adapters.openrlhf import rollout as _module

warnings.warn(
    f"{__name__} is deprecated: import gem_adapters.openrlhf.rollout", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = _module

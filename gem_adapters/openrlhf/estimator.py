"""Deprecated alias of ``gem_adapters.openrlhf.advantages`` (the same module object), kept for code outside the repository."""

import sys
import warnings

from gem_adapters.openrlhf import advantages as _module

warnings.warn(
    f"{__name__} is deprecated: import gem_adapters.openrlhf.advantages", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = _module

"""Deprecated alias of ``gem_adapters.verl.advantages`` (the same module object), kept for code outside the repository."""

import sys
import warnings

from gem_adapters.verl import advantages as _module

warnings.warn(
    f"{__name__} is deprecated: import gem_adapters.verl.advantages", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = _module

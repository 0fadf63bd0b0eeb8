"""Built-in environments; importing this package imports every module and package in it, and each
registers its own ids when imported (``gem_core.register``), so a new env is one new module here.

Envs of other packages register through the ``gem_core.envs`` entry point group (``gem_core.registry``).
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

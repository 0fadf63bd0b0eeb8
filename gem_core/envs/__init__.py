"""Built-in environments; importing this package registers their ids."""

import importlib

BUILTIN_MODULES = (
    "code",
    "games",
    "geometry",
    "logic",
    "math",
    "multiagent",
    "qa",
    "reasoning_gym",
    "terminal",
)

for _name in BUILTIN_MODULES:
    importlib.import_module(f"gem_core.envs.{_name}")

"""Import ``examples/train_oat.py`` (hence ``gem_adapters.oat.program`` and Oat's real argument classes)
on a machine without Oat's GPU stack.

Oat 0.2.4's ``oat.algorithms`` and ``oat.interface`` import vLLM, DeepSpeed, Launchpad, dm-tree, einops,
SciPy, Levenshtein and ``pyarrow.plasma`` (gone from pyarrow >= 12) at module top; none of them is used by
argument parsing. ``stand_ins()`` puts an empty module in place of each of those that is not installed,
for the duration of a ``with`` block only: afterwards the stand-ins are gone from ``sys.modules`` (an
``import vllm`` fails again), while the real modules imported inside it stay (tyro reads their source for
the help of each field). Only the names listed here are stood in for: a missing import of gem_core,
gem_adapters or Oat still fails.

``python -m tests.adapters.oat.oat_stand_ins ARGS...`` runs the example as ``python examples/train_oat.py
ARGS...`` would, up to where it would start Oat's program (``--help`` included).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "train_oat.py"
GPU_STACK = ("deepspeed", "vllm", "launchpad", "tree", "einops", "scipy", "Levenshtein")


class StandIn(types.ModuleType):
    """A module whose every public attribute is a new, empty class (usable as a base, a decorator, a value)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(
            name, (), {"__init__": lambda self, *a, **k: None, "__call__": lambda self, *a, **k: self}
        )
        setattr(self, name, value)
        return value


class StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: set[str]):
        self.roots = roots

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return StandIn(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


@contextlib.contextmanager
def stand_ins() -> Iterator[list[str]]:
    """Yields the names stood in for."""
    missing = {name for name in (*GPU_STACK, "pyarrow") if importlib.util.find_spec(name) is None}
    before = set(sys.modules)
    finder = StandInFinder(missing)
    sys.meta_path.insert(0, finder)
    pyarrow = None
    try:
        if "pyarrow" not in missing and importlib.util.find_spec("pyarrow.plasma") is None:
            import pyarrow

            sys.modules["pyarrow.plasma"] = pyarrow.plasma = StandIn("pyarrow.plasma")
        yield sorted(missing) + (["pyarrow.plasma"] if pyarrow else [])
    finally:
        sys.meta_path.remove(finder)
        if pyarrow is not None:
            del pyarrow.plasma
        for name in set(sys.modules) - before:
            if isinstance(sys.modules.get(name), StandIn):
                del sys.modules[name]


def load_example() -> types.ModuleType:
    """``examples/train_oat.py`` as a module (not run as ``__main__``)."""
    with stand_ins():
        spec = importlib.util.spec_from_file_location("train_oat_example", EXAMPLE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    example = load_example()
    sys.argv = [str(EXAMPLE.relative_to(ROOT)), *sys.argv[1:]]
    print(example.parse_args())

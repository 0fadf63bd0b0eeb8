"""Runtime patches of a framework, each pinned to the framework lines it replaces.

Running a trainer where it was not written to run (verl, OpenRLHF or ROLL on a CPU) takes a few narrow
changes to its code: a hard-coded ``"cuda"``, an assert on the inference engine, a method a strategy
lacks. ``gem_adapters/<framework>/cpu.py`` makes them at run time, without copying or editing the
framework, through this module:

* ``Line``: one line of the framework's source, by file (relative to the folder that holds the
  framework's top-level package, e.g. ``verl/utils/distributed.py``), 1-based number and text.
* ``Patch``: what changes (``apply``, called with the module ``module`` once it is imported), the lines
  it replaces or relies on, and why. ``Patch.changed_lines()`` reads those lines from the installed (or
  checked-out) framework and returns the ones whose text differs: a framework upgrade that moves or
  rewrites a patched line is caught by the adapter's tests (each parametrised over ``PATCHES``) and
  reported by ``PatchSet.install`` as a warning, instead of silently patching code that changed.
* ``PatchSet``: a framework's patches; ``install()`` applies each one now if its module is imported,
  else right after the module's first import (``patch_on_import``), once per process.
* ``patch_on_import(module_name, patch)``: the mechanism: a ``sys.meta_path`` finder that finds nothing
  itself and wraps the loader the other finders return for ``module_name``.

A process that should run patched is told so explicitly: the framework's own seam for code in its
workers (verl's plugins, Ray's ``worker_process_setup_hook``, vLLM's ``worker_extension_cls``) calls
the adapter's ``install``; nothing is loaded through ``sitecustomize``.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Line:
    """One line of a framework's source: ``file`` relative to the folder holding its top-level package,
    1-based ``number``, and its ``text`` without the surrounding whitespace."""

    file: str
    number: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.number}"

    def read(self, root: str | Path) -> str | None:
        """The line's text (stripped) in the source under ``root``; None if the file or line is missing."""
        path = Path(root) / self.file
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return None
        return lines[self.number - 1].strip() if 0 < self.number <= len(lines) else None


@dataclass(frozen=True)
class Patch:
    """``apply(module)`` once ``module`` is imported; ``lines`` are the framework lines it replaces (or
    whose behaviour it relies on); ``why`` says what goes wrong without it."""

    module: str
    apply: Callable[[ModuleType], None]
    lines: tuple[Line, ...]
    why: str

    @property
    def name(self) -> str:
        return f"{self.module}:{getattr(self.apply, '__name__', 'patch')}"

    def changed_lines(self, root: str | Path | None = None) -> list[tuple[Line, str | None]]:
        """``(line, text found)`` for each of ``lines`` whose text is not the expected one in the source
        under ``root`` (default: where the patched module's top-level package is installed)."""
        root = source_root(self.module.split(".")[0]) if root is None else Path(root)
        if root is None:
            return [(line, None) for line in self.lines]
        return [(line, found) for line in self.lines if (found := line.read(root)) != line.text]


def source_root(package: str) -> Path | None:
    """The folder that holds the top-level ``package`` (its ``Line.file`` paths start there), found
    without importing it; None when it is not importable."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).parent
    return Path(spec.origin).parent if spec.origin else None


@dataclass
class PatchSet:
    """A framework's patches (``name``: the framework, for messages)."""

    name: str
    patches: Sequence[Patch]
    installed: bool = field(default=False, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def install(self, root: str | Path | None = None) -> None:
        """Apply every patch in this process (now, or when its module is first imported); idempotent.
        A patch whose framework lines changed is applied anyway, with a warning naming them."""
        with self._lock:
            if self.installed:
                return
            self.installed = True
        for patch in self.patches:
            for line, found in patch.changed_lines(root):
                logger.warning(
                    "%s: %s no longer reads %r (found %r); the patch %s was written for it: %s",
                    self.name,
                    line,
                    line.text,
                    found,
                    patch.name,
                    patch.why,
                )
            patch_on_import(patch.module, patch.apply)

    def lines(self) -> list[tuple[Patch, Line]]:
        """Every ``(patch, line)`` pair, for tests parametrised over the framework lines."""
        return [(patch, line) for patch in self.patches for line in patch.lines]


MARK = "_gem_patched"


def wrap(owner: Any, name: str, build: Callable[[Any], Callable[..., Any]]) -> None:
    """``owner.name = build(owner.name)``, once: the new function is marked, and a second call (the same
    module imported again, or a patch set installed twice) finds the mark and leaves it. The mark is an
    attribute of our own, not ``__wrapped__``: the original may already carry one (``functools.cache``)."""
    original = getattr(owner, name)
    if getattr(original, MARK, False):
        return
    replacement = build(original)
    setattr(replacement, MARK, True)
    setattr(owner, name, replacement)


def patch_on_import(module_name: str, patch: Callable[[ModuleType], None]) -> None:
    """Call ``patch(module)`` now if ``module_name`` is imported, else right after its first import in
    this process (a failed import leaves the patch armed for the next try)."""
    with _FINDER.lock:
        module = sys.modules.get(module_name)
        if module is None:
            _FINDER.pending.setdefault(module_name, []).append(patch)
            if _FINDER not in sys.meta_path:
                sys.meta_path.insert(0, _FINDER)
            return
    patch(module)


def pending(module_name: str) -> list[Callable[[ModuleType], None]]:
    """The patches still waiting for ``module_name``'s import."""
    with _FINDER.lock:
        return list(_FINDER.pending.get(module_name, ()))


def cancel(module_name: str, patches: Iterable[Callable[[ModuleType], None]] | None = None) -> None:
    """Forget waiting patches of ``module_name`` (all of them, or those in ``patches``)."""
    with _FINDER.lock:
        waiting = _FINDER.pending.get(module_name, [])
        keep = [] if patches is None else [p for p in waiting if p not in list(patches)]
        if keep:
            _FINDER.pending[module_name] = keep
        else:
            _FINDER.pending.pop(module_name, None)


class _PatchFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a module with waiting patches, wraps the loader the next finders give."""

    def __init__(self) -> None:
        self.pending: dict[str, list[Callable[[ModuleType], None]]] = {}
        self.lock = threading.RLock()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        with self.lock:
            if fullname not in self.pending:
                return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, self)
        return spec

    def take(self, fullname: str) -> list[Callable[[ModuleType], None]]:
        with self.lock:
            return self.pending.pop(fullname, [])


class _PatchingLoader(importlib.abc.Loader):
    """The real loader, then the module's waiting patches."""

    def __init__(self, loader: Any, finder: _PatchFinder):
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)  # raising here keeps the patches waiting for a retried import
        for patch in self.finder.take(module.__name__):
            patch(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, is_package, get_resource_reader...
        return getattr(self.loader, name)


_FINDER = _PatchFinder()

"""gem_adapters.runtime.patching: patches applied at a module's import, and pinned to the lines they replace."""

from __future__ import annotations

import logging
import sys
import uuid
from pathlib import Path

import pytest

from gem_adapters.runtime import patching
from gem_adapters.runtime.patching import Line, Patch, PatchSet, patch_on_import, source_root


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A throw-away top-level package ``gem_patch_demo_<n>`` with a module ``target`` (its 3rd line is
    ``VALUE = 1``), importable from ``tmp_path``; returns its name."""
    name = f"gem_patch_demo_{uuid.uuid4().hex[:12]}"
    folder = tmp_path / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "target.py").write_text(
        "# a module a framework ships\n\nVALUE = 1\n\n\ndef f():\n    return VALUE\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for module in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[module]
    patching.cancel(f"{name}.target")


def test_a_patch_runs_right_after_the_first_import_and_once(package):
    calls = []

    def set_value(module):
        calls.append(module.__name__)
        module.VALUE = 2

    patch_on_import(f"{package}.target", set_value)
    assert calls == []  # nothing imported yet
    target = __import__(f"{package}.target", fromlist=["f"])
    assert calls == [f"{package}.target"] and target.f() == 2
    from importlib import reload

    reload(target)  # a later import (here a reload) does not patch again
    assert calls == [f"{package}.target"]


def test_a_patch_of_an_imported_module_runs_now(package):
    target = __import__(f"{package}.target", fromlist=["f"])
    patch_on_import(f"{package}.target", lambda module: setattr(module, "VALUE", 3))
    assert target.f() == 3 and patching.pending(f"{package}.target") == []


def test_a_failed_import_keeps_the_patch_for_the_next_try(package, tmp_path):
    source = tmp_path / package / "target.py"
    good = source.read_text()
    source.write_text("raise RuntimeError('broken')\n")
    patch_on_import(f"{package}.target", lambda module: setattr(module, "VALUE", 4))
    with pytest.raises(RuntimeError, match="broken"):
        __import__(f"{package}.target")
    source.write_text(good)
    sys.modules.pop(f"{package}.target", None)
    import importlib

    importlib.invalidate_caches()
    assert importlib.import_module(f"{package}.target").f() == 4


def test_the_patched_module_keeps_its_source_for_inspect(package):
    import inspect

    patch_on_import(f"{package}.target", lambda module: None)
    target = __import__(f"{package}.target", fromlist=["f"])
    assert "return VALUE" in inspect.getsource(target.f)


def test_line_read_and_changed_lines(package, tmp_path):
    assert source_root(package) == tmp_path
    same = Line(f"{package}/target.py", 3, "VALUE = 1")
    moved = Line(f"{package}/target.py", 2, "VALUE = 1")
    missing = Line(f"{package}/gone.py", 1, "x = 1")
    assert (
        same.read(tmp_path) == "VALUE = 1" and moved.read(tmp_path) == "" and missing.read(tmp_path) is None
    )
    patch = Patch(f"{package}.target", lambda module: None, (same, moved, missing), "demo")
    assert patch.changed_lines() == [(moved, ""), (missing, None)]
    assert source_root("gem_no_such_package_xyz") is None
    assert Patch("gem_no_such_package_xyz.m", print, (same,), "").changed_lines() == [(same, None)]


def test_a_patch_set_installs_once_and_warns_about_changed_lines(package, caplog):
    applied = []
    stale = Line(f"{package}/target.py", 3, "VALUE = 100")
    patches = PatchSet(
        "demo", [Patch(f"{package}.target", lambda module: applied.append(module.VALUE), (stale,), "why")]
    )
    with caplog.at_level(logging.WARNING, logger="gem_adapters.runtime.patching"):
        patches.install()
        patches.install()
    __import__(f"{package}.target")
    assert applied == [1]
    (record,) = caplog.records
    assert f"{package}/target.py:3" in record.getMessage() and "'VALUE = 1'" in record.getMessage()
    assert patches.lines() == [(patches.patches[0], stale)]


def test_every_framework_patch_names_its_lines(tmp_path):
    """Each adapter's ``PATCHES`` is a PatchSet whose every patch names at least one line of its
    framework's own package, by a path inside that package."""
    checked = 0
    for module_name in ("gem_adapters.verl.cpu", "gem_adapters.openrlhf.cpu", "gem_adapters.roll.cpu"):
        try:
            module = __import__(module_name, fromlist=["PATCHES"])
        except ImportError:
            continue  # the framework is not installed here
        for patch in module.PATCHES.patches:
            top = patch.module.split(".")[0]
            assert patch.lines and patch.why
            assert all(
                Path(line.file).parts[0] == top and line.number > 0 and line.text for line in patch.lines
            )
        checked += 1
    assert checked >= 1


def test_wrap_marks_its_own_replacement_even_over_a_cached_function():
    import functools
    import types

    @functools.cache
    def available() -> bool:  # functools.cache sets __wrapped__: not our mark
        return True

    owner = types.SimpleNamespace(available=available)
    calls = []

    def build(original):
        calls.append(original)
        return lambda: original() and False

    patching.wrap(owner, "available", build)
    patching.wrap(owner, "available", build)  # a second install leaves the first replacement
    assert calls == [available] and owner.available() is False

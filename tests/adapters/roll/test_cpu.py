"""gem_adapters.roll.cpu against a ROLL checkout: each ROLL line a CPU patch names is still there, word for
word (these fail when ROLL changes one), and the patches land on ROLL's own classes when its modules are
imported. ROLL is not on PyPI: the checkout comes from ``ROLL_SRC`` (or ``roll`` on the path); without one
these tests skip. The 2-step run of ROLL's pipeline on CPU is ``scripts/roll_cpu_attempt.sh``."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gem_adapters.roll import cpu

LINES = cpu.PATCHES.lines()


def roll_checkout() -> Path | None:
    """The folder holding ROLL's ``roll`` package: ``ROLL_SRC``, else wherever ``roll`` imports from
    (PyPI's unrelated ``roll`` has no ``roll/pipeline/agentic``)."""
    candidates = [Path(os.environ["ROLL_SRC"])] if os.environ.get("ROLL_SRC") else []
    spec = importlib.util.find_spec("roll") if not candidates else None
    if spec is not None and spec.submodule_search_locations:
        candidates.append(Path(next(iter(spec.submodule_search_locations))).parent)
    return next((c for c in candidates if (c / "roll" / "pipeline" / "agentic").is_dir()), None)


ROLL = roll_checkout()
needs_roll = pytest.mark.skipif(
    ROLL is None, reason="no ROLL checkout: set ROLL_SRC to one of github.com/alibaba/ROLL"
)


@needs_roll
@pytest.mark.parametrize("patch, line", LINES, ids=[str(line) for _, line in LINES])
def test_patched_roll_line_is_unchanged(patch, line):
    found = line.read(ROLL)
    assert found == line.text, f"ROLL changed {line} (now {found!r}); re-check {patch.name}: {patch.why}"


@needs_roll
def test_the_patches_land_on_rolls_classes_at_import():
    """In a fresh process with ROLL importable: ``install()`` first, then ROLL's modules; the CPU platform
    counts ``GEM_ROLL_CPU_DEVICES`` Ray GPUs, the config accepts hf_infer, hf_infer's methods are
    coroutines with the ones the agentic pipeline calls, and the router builds an hf_infer payload."""
    pytest.importorskip("dacite", reason="ROLL's requirements are not installed here")
    code = (
        "import asyncio, inspect\n"
        "from gem_adapters.roll import cpu\n"
        "cpu.install()\n"
        "from roll.platforms.cpu import CpuPlatform\n"
        "from roll.distributed.strategy.hf_strategy import HfInferStrategy\n"
        "from roll.distributed.scheduler.router import RouterClient\n"
        "from roll.pipeline.agentic.agentic_config import AgenticConfig\n"
        "calls = ['initialize', 'generate', 'generate_request', 'abort_requests', 'setup_collective_group',"
        " 'broadcast_parameter', 'load_states', 'offload_states']\n"
        "print(CpuPlatform.ray_device_key, CpuPlatform.device_count(), CpuPlatform.empty_cache(),"
        " all(inspect.iscoroutinefunction(getattr(HfInferStrategy, c)) for c in calls),"
        " getattr(AgenticConfig.__post_init__, '_gem_patched', False),"
        " getattr(RouterClient._preprocess_generate, '_gem_patched', False))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROLL), os.environ.get("PYTHONPATH", "")]),
        cpu.DEVICES_ENV: "3",
        "ROLL_LOG_DIR": "/tmp",
    }
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0 and "ModuleNotFoundError" in out.stderr:
        pytest.skip(f"ROLL does not import here: {out.stderr.strip().splitlines()[-1]}")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-6:] == ["GPU", "3", "None", "True", "True", "True"]


def test_the_module_imports_nothing_of_roll():
    """``gem_adapters.roll.cpu`` lists its patches (and the tests their lines) without importing ROLL."""
    code = "import sys\nfrom gem_adapters.roll import cpu\nprint(len(cpu.PATCHES.patches), 'roll' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["4", "False"]

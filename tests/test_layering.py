"""The layers hold: gem_core ships alone (no torch, trainer, Ray or gem_adapters on import or when listing
every id), no adapter imports another, and a framework is imported only in its own adapter folder."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = {"trl", "verl", "openrlhf", "oat", "roll"}
HEAVY = ["torch", "transformers", "ray", "gem_adapters", "vllm", "openenv", *sorted(FRAMEWORKS)]
# Imports of a framework outside its folder, each with its reason.
ALLOWED = {
    # verl's own model loading imports TRL when it looks installed; the CPU patch probes what it would get.
    ("gem_adapters/verl/cpu.py", "trl"),
}


def imported_modules(path: Path) -> set[str]:
    """Every absolute import in ``path``, at any depth (lazy imports included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_gem_core_imports_and_lists_every_id_without_heavy_packages():
    code = (
        "import sys, gem_core\n"
        "ids = gem_core.list_envs()\n"
        "[gem_core.registry.spec(i) for i in ids]\n"
        f"print(len(ids), [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    count, loaded = out.stdout.split(" ", 1)
    assert int(count) > 200
    assert json.loads(loaded.replace("'", '"')) == []


def test_gem_core_never_imports_gem_adapters_torch_or_a_trainer():
    for path in sorted((ROOT / "gem_core").rglob("*.py")):
        tops = {name.split(".")[0] for name in imported_modules(path)}
        bad = tops & {"gem_adapters", "torch", "transformers", *FRAMEWORKS}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_adapters_import_neither_each_other_nor_other_frameworks():
    for path in sorted((ROOT / "gem_adapters").rglob("*.py")):
        relative = path.relative_to(ROOT)
        own = relative.parts[1] if len(relative.parts) > 2 else None
        for name in imported_modules(path):
            parts = name.split(".")
            if parts[0] in FRAMEWORKS and parts[0] != own:
                assert (relative.as_posix(), parts[0]) in ALLOWED, f"{relative} imports the framework {name}"
            if parts[0] == "gem_adapters" and len(parts) > 1 and parts[1] in FRAMEWORKS:
                assert parts[1] == own, f"{relative} imports another adapter: {name}"


def test_the_scan_sees_lazy_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from trl import GRPOTrainer\n    import verl.protocol\n")
    assert imported_modules(module) == {"trl", "verl.protocol"}


def test_the_data_model_is_the_bottom_layer_and_the_algorithms_run_no_infrastructure():
    """``gem_adapters/episodes`` (episodes, rendering, tasks) imports nothing else of gem_adapters, and
    ``gem_adapters/algorithms`` (estimators, the prefix tree, warm-up episodes) nothing of ``runtime``
    (rollout, patching, models, logs) or of a framework folder."""
    for folder, allowed in (
        ("episodes", {"episodes"}),
        ("algorithms", {"episodes", "algorithms", "policies"}),
    ):
        for path in sorted((ROOT / "gem_adapters" / folder).rglob("*.py")):
            for name in imported_modules(path):
                parts = name.split(".")
                if parts[0] == "gem_adapters":
                    assert len(parts) > 1 and parts[1] in allowed, f"{path.relative_to(ROOT)} imports {name}"

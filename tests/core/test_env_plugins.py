"""Envs of another package, registered through the ``gem_core.envs`` entry point group: the package that
docs/adding-an-env.md builds, installed with pip into a fresh interpreter, passes its own test and is
found by ``gem list`` and ``gem eval --model solver``; a function entry point registers ids too, and
threads racing the first ``make`` all find them; a broken plugin warns and the other envs stay."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "adding-an-env.md"


def guide_files() -> dict[str, str]:
    """The guide's Python and TOML blocks by the path named on their first line (``# nim_env.py``)."""
    blocks = re.findall(r"```(?:python|toml)\n# (\S+)\n(.*?)```", GUIDE.read_text(), re.S)
    return {path: f"# {path}\n{code}" for path, code in blocks}


def python(args: list[str], site: Path, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python args`` in a fresh interpreter that also sees the packages installed in ``site``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def dist_info(site: Path, name: str, entry_points: str) -> None:
    """An installed distribution ``name`` in ``site`` whose only metadata is its entry points."""
    dist = site / f"{name}-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(entry_points)


def test_the_guides_package_installs_and_make_list_and_eval_find_its_env(tmp_path):
    files = guide_files()
    assert set(files) == {"nim_env.py", "tests/test_nim_env.py", "pyproject.toml"}
    package, site = tmp_path / "gem-nim", tmp_path / "site"
    for path, code in files.items():
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text(code)
    pip = ["-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-t", str(site)]
    installed = python([*pip, str(package)], tmp_path, tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert (site / "nim_env.py").exists() and not (site / "tests").exists()

    # from outside the package folder: what runs is the installed copy, found through its entry point
    test = python(["-m", "pytest", "-q", "-p", "no:cacheprovider", str(package / "tests")], site, tmp_path)
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-3000:]
    assert "3 passed" in test.stdout

    listed = python(["-m", "gem_core.cli", "list", "Nim"], site, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "game:Nim-v0" in listed.stdout and "Nim against a random opponent" in listed.stdout
    assert listed.stdout.rstrip().endswith("1 env")

    out = tmp_path / "eval"
    args = ["eval", "--model", "solver", "--env", "game:Nim-v0", "--episodes", "6", "--out", str(out)]
    evaluated = python(["-m", "gem_core.cli", *args], site, tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())["envs"]["game:Nim-v0"]
    assert metrics["episodes"] == 6 and metrics["success_rate"] == 1.0 and metrics["mean_return"] == 1.0
    assert metrics["format_error_rate"] == 0.0


FUNCTION_PLUGIN = """
import gem_core

def register_all():
    gem_core.register("test:NimFromFunction-v0", "nim_env:NimEnv", max_pile=9)
"""

RACE = """
import threading, gem_core
errors, barrier = [], threading.Barrier(8)
def play():
    barrier.wait()
    try:
        env = gem_core.make("test:NimFromFunction-v0")
        env.reset(seed=0)
        assert env.unwrapped.max_pile == 9
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=play) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(errors, gem_core.list_envs("Nim"))
"""


def test_a_function_entry_point_registers_and_racing_threads_all_find_its_ids(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "nim_env.py").write_text(guide_files()["nim_env.py"])
    (site / "nim_plugin.py").write_text(FUNCTION_PLUGIN)
    dist_info(site, "gem_nim_function", "[gem_core.envs]\nnim = nim_plugin:register_all\n")
    for _ in range(2):
        run = python(["-c", RACE], site, tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
        # the function ran once, and nim_env (imported by the first make) registered its own id
        assert run.stdout.strip() == "[] ['game:Nim-v0', 'test:NimFromFunction-v0']", run.stderr


def test_a_broken_plugin_warns_naming_it_and_the_other_envs_stay(tmp_path):
    site = tmp_path / "site"
    dist_info(site, "gem_broken_envs", "[gem_core.envs]\nbroken = no_such_module_here\n")
    run = python(["-m", "gem_core.cli", "list", "GuessTheNumber-v1-easy"], site, tmp_path)
    assert run.returncode == 0, run.stderr
    assert "game:GuessTheNumber-v1-easy" in run.stdout
    assert "env entry point 'broken' (no_such_module_here) failed to load" in run.stderr
    assert "Traceback" not in run.stderr

"""An env that needs an optional package says so at ``make``, naming the package and the extra, never
mid-episode (``gem_core.extras``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gem_core
from gem_core.extras import MissingExtraError

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL_MODULES = ["bm25s", "math_verify", "reasoning_gym", "PIL", "openenv", "mcp", "datasets"]


@pytest.mark.parametrize(
    ("module", "env_id", "package", "extra"),
    [
        ("bm25s", "web:Shop-v0", "bm25s", "tools"),
        ("bm25s", "web:WikiGame-v0", "bm25s", "tools"),
        ("math_verify", "math:Arithmetic-v0", "math-verify", "tasks"),
        ("math_verify", "math:GeometryFigures-v0-easy", "math-verify", "tasks"),
        ("PIL", "math:GeometryFigures-v0-easy", "pillow", "vision"),
        ("reasoning_gym", "rg:letter_counting", "reasoning-gym", "tasks"),
        ("openenv", "openenv:http://127.0.0.1:1", "openenv", "openenv"),
    ],
)
def test_make_names_the_missing_package_and_its_extra(monkeypatch, module, env_id, package, extra):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError) as raised:
        gem_core.make(env_id)
    assert f"needs {package}," in str(raised.value)
    assert f"pip install 'gem-core[{extra}]'" in str(raised.value)


def test_the_mcp_tool_names_its_package_before_it_connects(monkeypatch):
    from gem_core.tools.mcp import MCPTool

    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(MissingExtraError, match=r"needs mcp, .*pip install 'gem-core\[tools\]'"):
        MCPTool({"command": sys.executable, "args": ["-c", "pass"]})


SWEEP = """
import json, sys
for module in sys.argv[1:]:
    sys.modules[module] = None  # not installed
import gem_core
from gem_core.extras import MissingExtraError

firsts = {}
for env_id in gem_core.list_envs():
    spec = gem_core.spec(env_id)
    if spec.data_source == "offline":
        firsts.setdefault(spec.entry_point, env_id)
refused, played, failed = [], [], {}
for env_id in firsts.values():
    try:
        env = gem_core.make(env_id)
    except MissingExtraError:
        refused.append(env_id)
        continue
    try:
        env.reset(seed=0)
        for _ in range(5):
            *_, terminated, truncated, _ = env.step(env.sample_random_action())
            if terminated or truncated:
                break
        played.append(env_id)
    except ImportError as exc:
        failed[env_id] = repr(exc)
    finally:
        env.close()
print(json.dumps({"refused": refused, "played": played, "failed": failed}))
"""


def test_without_any_optional_package_every_env_fails_at_make_or_plays():
    """One env per env class, every optional package missing (and nothing imported or cached before):
    each either refuses at ``make`` or plays steps without an ImportError."""
    done = subprocess.run(
        [sys.executable, "-c", SWEEP, *OPTIONAL_MODULES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["failed"] == {}
    assert {"web:Shop-v0", "web:WikiGame-v0", "math:Arithmetic-v0"} <= set(result["refused"])
    assert "game:GuessTheNumber-v1" in result["played"]

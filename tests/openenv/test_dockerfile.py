"""The Dockerfiles' command, run as written outside Docker (Docker cannot build here): their ENV
defaults, their CMD, the installed ``gem`` script; then an episode and a graceful stop. ``Dockerfile``
builds from this checkout; ``hub/Dockerfile`` is the Hugging Face Space of the ``gem_env`` OpenEnv
package and builds from that folder alone."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("openenv")

import gem_core
from gem_core.openenv import OpenEnvClientEnv
from tests.openenv import support

DOCKERFILES = {
    "Dockerfile": 'pip install --no-cache-dir ".[openenv]"',
    "hub/Dockerfile": "pip install --no-cache-dir --find-links wheels .",
}


def dockerfile_env_and_cmd(path: Path) -> tuple[dict[str, str], list[str]]:
    """The ENV defaults and the exec-form CMD of a Dockerfile (continuation lines joined)."""
    text = path.read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    cmd: list[str] | None = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("ENV "):
            for item in shlex.split(line[4:]):
                key, _, value = item.partition("=")
                env[key] = value
        elif line.startswith("CMD "):
            cmd = json.loads(line[4:])
    assert cmd is not None, f"{path} has no exec-form CMD"
    return env, cmd


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_the_dockerfile_installs_gem_core_with_openenv_and_runs_gem_serve_as_uid_1000(name):
    path = support.REPO / name
    text = path.read_text()
    assert DOCKERFILES[name] in text
    assert "--uid 1000" in text and "\nUSER " in text  # Hugging Face Spaces run containers as uid 1000
    env, cmd = dockerfile_env_and_cmd(path)
    assert env["GEM_HOST"] == "0.0.0.0" and env["PORT"] == "8000"
    assert cmd[:2] == ["sh", "-c"] and cmd[2].startswith("exec gem serve ")


def test_the_hub_package_installs_gem_core_with_the_openenv_extra():
    pyproject = (support.REPO / "hub" / "pyproject.toml").read_text()
    assert '"gem-core[openenv]"' in pyproject and 'name = "openenv-gem_env"' in pyproject


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_the_dockerfile_command_serves_episodes_and_stops_cleanly(name):
    env, cmd = dockerfile_env_and_cmd(support.REPO / name)
    gem_script = Path(sys.executable).parent / "gem"
    if not gem_script.exists():
        pytest.skip("the gem console script is not installed next to this Python")
    if shutil.which("sh") is None:
        pytest.skip("no sh")
    # As in the container, but on localhost, a free port, this checkout's venv first on PATH.
    overrides = {
        **env,
        "GEM_HOST": "127.0.0.1",
        "PORT": "0",
        "GEM_ENV": "game:GuessTheNumber-v1-easy",
        "GEM_SERVE_ARGS": "--step-timeout 30",
        "PATH": f"{gem_script.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    server = support.start([], command=cmd, env=overrides)
    try:
        client = OpenEnvClientEnv(server.url)
        local = gem_core.make("game:GuessTheNumber-v1-easy")
        assert client.reset(seed=8) == local.reset(seed=8)
        assert client.step("\\boxed{5}")[:4] == local.step("\\boxed{5}")[:4]
        client.close()
    finally:
        assert support.stop(server) == 0  # SIGTERM reaches gem serve (exec), which exits cleanly

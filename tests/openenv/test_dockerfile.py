"""The Dockerfile's command, run as written outside Docker (Docker cannot build here): its ENV defaults,
its CMD, the installed ``gem`` script; then an episode and a graceful stop."""

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

DOCKERFILE = support.REPO / "Dockerfile"


def dockerfile_env_and_cmd() -> tuple[dict[str, str], list[str]]:
    """The ENV defaults and the exec-form CMD of the Dockerfile (continuation lines joined)."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
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
    assert cmd is not None, "the Dockerfile has no exec-form CMD"
    return env, cmd


def test_the_dockerfile_installs_the_openenv_extra_and_runs_gem_serve():
    text = DOCKERFILE.read_text()
    assert 'pip install --no-cache-dir ".[openenv]"' in text
    env, cmd = dockerfile_env_and_cmd()
    assert env["GEM_HOST"] == "0.0.0.0" and env["PORT"] == "8000"
    assert cmd[:2] == ["sh", "-c"] and cmd[2].startswith("exec gem serve ")


def test_the_dockerfile_command_serves_episodes_and_stops_cleanly():
    env, cmd = dockerfile_env_and_cmd()
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

"""gem-core as OpenEnv users meet it, with the current openenv release: the installed distribution is
``openenv`` (never the old ``openenv-core`` beside it), ``hub/`` is an OpenEnv package that ``AutoEnv``
discovers through its ``openenv.yaml``, ``openenv validate`` passes it and a running ``gem serve``, and
names the field a broken manifest gets wrong; ``GemEnv`` (the typed client) plays like in process."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

pytest.importorskip("openenv")

from openenv.cli._cli_utils import validate_env_structure
from openenv.cli._validation import validate_running_environment
from packaging.version import Version

import gem_core
from gem_core.openenv import GemAction, GemEnv, GemObservation, GemState
from tests.openenv import support

HUB = support.REPO / "hub"
GUESS = "game:GuessTheNumber-v1-easy"
ACTIONS = ["\\boxed{5}", "\\boxed{3}", "\\boxed{8}", "\\boxed{2}", "\\boxed{9}"]


@pytest.fixture(scope="module")
def guess_server():
    with support.running(["serve", GUESS, "--port", "0"]) as server:
        yield server


def local_episode(seed: int) -> list:
    env = gem_core.make(GUESS)
    record = [env.reset(seed=seed)[0]]
    for action in ACTIONS:
        obs, reward, terminated, truncated, _ = env.step(action)
        record.append((obs, reward, terminated, truncated))
        if terminated or truncated:
            break
    return record


def test_the_openenv_extra_is_the_current_openenv_release_and_openenv_core_is_not_installed():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((support.REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (requirement,) = [r for r in extras["openenv"] if re.match(r"openenv\b(?!-)", r)]
    pinned = Version(re.split(r"[=<>~!,]+", requirement)[-1])
    assert pinned >= Version("0.10.0")
    assert not any("openenv-core" in r for deps in extras.values() for r in deps)
    import openenv

    assert Version(metadata.version("openenv")) >= Version("0.10.0")
    assert openenv.__version__ == metadata.version("openenv")  # no other distribution wrote over it
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.distribution("openenv-core")


def test_the_typed_client_plays_gem_serve_episodes_like_in_process(guess_server):
    for seed in (0, 4):
        expected = local_episode(seed)
        with GemEnv(base_url=guess_server.url).sync() as env:
            result = env.reset(seed=seed)
            assert isinstance(result.observation, GemObservation)
            assert result.observation.text == expected[0] and result.observation.seed == seed
            for action, step in zip(ACTIONS, expected[1:]):
                result = env.step(GemAction(action=action)) if seed else env.step(action)
                obs = result.observation
                assert (obs.text, result.reward, obs.terminated, obs.truncated) == step
                assert result.done == (step[2] or step[3])
            state = env.state()
            assert (
                isinstance(state, GemState)
                and state.env_id == GUESS
                and state.step_count == len(expected) - 1
            )


def install_hub(tmp_path: Path) -> Path:
    """``pip install`` the hub package (from a copy, so no build files land in the repo) into a folder."""
    source, site = tmp_path / "hub", tmp_path / "site"
    shutil.copytree(HUB, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "wheels"))
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    done = subprocess.run([*pip, "-t", str(site), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return site


AUTOENV = """
import json, sys
from openenv import AutoAction, AutoEnv
info = AutoEnv.get_env_info("gem")
Action = AutoAction.from_env("gem")
record = []
client = AutoEnv.from_env("gem", base_url=sys.argv[1])
with client.sync() as env:
    result = env.reset(seed=int(sys.argv[2]))
    record.append(result.observation.text)
    for action in json.loads(sys.argv[3]):
        result = env.step(Action(action=action))
        obs = result.observation
        record.append([obs.text, result.reward, obs.terminated, obs.truncated])
        if result.done:
            break
print(json.dumps({"info": info, "action": Action.__name__, "client": type(client).__name__, "record": record}))
"""


def test_autoenv_discovers_the_hub_package_through_its_manifest_and_plays_gem_serve(guess_server, tmp_path):
    site = install_hub(tmp_path)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(support.REPO)]),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),  # AutoEnv's discovery cache
    }
    args = [guess_server.url, "6", json.dumps(ACTIONS)]
    done = subprocess.run(
        [sys.executable, "-c", AUTOENV, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["info"]["package"] == "openenv-gem_env" and out["info"]["spec_version"] == 1
    assert (out["action"], out["client"]) == ("GemAction", "GemEnv")
    expected = local_episode(6)
    assert out["record"] == [expected[0], *[list(step) for step in expected[1:]]]


def openenv_validate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "openenv.cli", "validate", *args], capture_output=True, text=True, timeout=120
    )


def test_openenv_validate_passes_the_manifest_and_names_the_field_a_broken_one_gets_wrong(tmp_path):
    done = openenv_validate(str(HUB), "--level", "static", "--skip-build")
    assert done.returncode == 0 and "PASS  static.manifest" in done.stdout, done.stdout + done.stderr
    assert not [w for w in validate_env_structure(HUB) if "missing" in w and "outputs" not in w]

    broken = tmp_path / "broken"
    broken.mkdir()
    manifest = (HUB / "openenv.yaml").read_text()
    assert "    floor_margin: 0.1\n" in manifest and "    episode_timeout_s:" in manifest
    manifest = manifest.replace("    floor_margin: 0.1\n", "    floor_margin: 0.1\n    tolerance: 1\n")
    (broken / "openenv.yaml").write_text(re.sub(r"    episode_timeout_s: .*\n", "", manifest))
    done = openenv_validate(str(broken), "--level", "static", "--skip-build")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "reward.tolerance: Extra inputs are not permitted" in done.stdout
    assert "resources.episode_timeout_s: Field required" in done.stdout


def test_openenv_validate_passes_a_running_gem_serve(guess_server):
    report = validate_running_environment(guess_server.url, timeout_s=30)
    failed = [c for c in report["criteria"] if not c["passed"]]
    assert report["passed"] and not failed, failed


def test_the_hub_app_serves_the_env_named_in_gem_env(monkeypatch):
    from fastapi.testclient import TestClient

    monkeypatch.setenv("GEM_ENV", GUESS)
    spec = importlib.util.spec_from_file_location("gem_env_hub_app", HUB / "server" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = local_episode(3)
    with TestClient(module.app) as client:
        assert client.get("/health").json() == {"status": "healthy"}
        assert client.get("/metadata").json()["name"] == GUESS
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "reset", "data": {"seed": 3}})
            assert ws.receive_json()["data"]["observation"]["text"] == expected[0]
            ws.send_json({"type": "step", "data": {"action": ACTIONS[0]}})
            reply = ws.receive_json()["data"]
            assert (reply["observation"]["text"], reply["reward"]) == expected[1][:2]

"""``gem serve`` serves the new families: one episode of sql:*, web:Shop-v0 and web:WikiGame-v0 each,
played through a real server (a subprocess on a free loopback port) with ``gem_core.make("openenv:URL")``,
gives the same observations and rewards as in process, and the scripted solver wins remotely."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("openenv")

import gem_core

REPO = Path(__file__).resolve().parents[2]


def serve(env_id: str) -> tuple[subprocess.Popen, str]:
    """``gem serve ENV_ID --port 0``; returns the process and the URL it announces."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gem_core.cli", "serve", env_id, "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    urls: queue.Queue = queue.Queue()

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("gem serve:") and " on http" in line:
                urls.put(line.split(" on ", 1)[1].split()[0])
        urls.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        url = urls.get(timeout=120)
    except queue.Empty:
        url = None
    if url is None:
        stop(proc)
        pytest.fail(f"gem serve {env_id} did not start")
    return proc, url


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("env_id", ["sql:Mixed-v0", "web:Shop-v0", "web:WikiGame-v0"])
def test_a_served_episode_equals_the_local_one_and_the_solver_wins(env_id):
    proc, url = serve(env_id)
    try:
        remote = gem_core.make(f"openenv:{url}")
        local = gem_core.make(env_id)
        remote_obs, _ = remote.reset(seed=5)
        local_obs, _ = local.reset(seed=5)
        assert remote_obs == local_obs
        actions = ["not an action", *[None] * 20]  # a penalised reply, then the local solver's moves
        for action in actions:
            action = local.solve_action() if action is None else action
            remote_step = remote.step(action)
            local_step = local.step(action)
            assert remote_step[:4] == local_step[:4]
            if local_step[2] or local_step[3]:
                break
        assert local_step[4]["success"] and remote_step[4]["success"] and remote_step[1] == 1.0
        remote.close()
    finally:
        stop(proc)

"""Test support for ``gem serve``: starting real servers in subprocesses, a misbehaving env, and a
third-party OpenEnv server that is not ours."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import gem_core
from tests.core.toy_envs import CountdownEnv

REPO = Path(__file__).resolve().parents[2]
MOODY = "test:Moody-v0"


class MoodyEnv(CountdownEnv):
    """CountdownEnv (5 turns) whose action ``raise`` raises, ``hang`` sleeps for an hour and
    ``slow`` sleeps 0.2 s; any other action is a digit guess."""

    def __init__(self, length: int = 5):
        super().__init__(length=length)

    def step(self, action):
        if action == "raise":
            raise ValueError("the env broke on purpose")
        if action == "hang":
            time.sleep(3600)
        if action == "slow":
            time.sleep(0.2)
        return super().step(action)


def register_test_envs() -> None:
    if MOODY not in gem_core.list_envs():
        gem_core.register(MOODY, MoodyEnv, description="test env: raises, hangs or sleeps on request")


@dataclass
class Server:
    proc: subprocess.Popen
    url: str
    lines: list[str]

    @property
    def ws_url(self) -> str:
        return "ws" + self.url[4:] + "/ws"


def _server_code(argv: Sequence[str], register: bool) -> str:
    prelude = (
        "from tests.openenv.support import register_test_envs; register_test_envs(); " if register else ""
    )
    return f"import sys; {prelude}from gem_core.cli import main; sys.exit(main({list(argv)!r}))"


def start(
    argv: Sequence[str],
    register: bool = False,
    timeout: float = 90.0,
    command: Sequence[str] | None = None,
    env: dict[str, str] | None = None,
) -> Server:
    """Start ``gem serve ARGV`` (or ``command``) and wait for its announcement line with the URL."""
    cmd = list(command) if command is not None else [sys.executable, "-c", _server_code(argv, register)]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )
    lines: list[str] = []
    found: queue.Queue = queue.Queue()

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line.rstrip("\n"))
            if line.startswith("gem serve:") and " on http" in line:
                found.put(line.split(" on ", 1)[1].split()[0])
        found.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        url = found.get(timeout=timeout)
    except queue.Empty:
        url = None
    if url is None:
        stop(Server(proc, "", lines))
        raise RuntimeError("gem serve did not start:\n" + "\n".join(lines))
    return Server(proc, url, lines)


def stop(server: Server, timeout: float = 20.0) -> int:
    """SIGTERM, then wait (SIGKILL after ``timeout``); the exit status."""
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()
    return server.proc.returncode


@contextlib.contextmanager
def running(argv: Sequence[str], register: bool = False, **kwargs) -> Iterator[Server]:
    server = start(argv, register, **kwargs)
    try:
        yield server
    finally:
        stop(server)


# ---- a third-party OpenEnv server (not gem serve): an echo env written with openenv's create_app --
THIRD_PARTY_SERVER = """
import sys
import uvicorn
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class ShoutAction(Action):
    message: str


class ShoutObservation(Observation):
    shouted: str = ""
    length: int = 0


class ShoutEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id="e", step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id or "e", step_count=0)
        return ShoutObservation(shouted=f"ready (seed {seed})", length=0)

    def step(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        done = self._state.step_count >= 3
        return ShoutObservation(
            shouted=action.message.upper(), length=len(action.message), reward=float(len(action.message)), done=done
        )

    @property
    def state(self):
        return self._state


app = create_app(ShoutEnvironment, ShoutAction, ShoutObservation, env_name="shout", max_concurrent_envs=4)
server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))

import socket

sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(64)
print(f"gem serve: third-party on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
server.run(sockets=[sock])
"""

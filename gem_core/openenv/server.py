"""``gem serve``: any gem_core env as an OpenEnv server, built on openenv's ``HTTPEnvServer``.

The protocol is OpenEnv's own (PyPI ``openenv``; the routes and message handling are openenv's code):

* ``/ws`` — a WebSocket session: one connection is one session with its own env instance
  (``{"type": "reset", "data": {"seed": 7}}``, ``{"type": "step", "data": {"action": "..."}}``,
  ``{"type": "state"}``, ``{"type": "close"}``); errors come back as ``{"type": "error", ...}`` and the
  session stays usable. ``openenv.core.GenericEnvClient``, ``gem_core.openenv.GemEnv`` (what
  ``AutoEnv.from_env("gem", base_url=...)`` returns) and every OpenEnv client speak it.
* ``/health``, ``/metadata``, ``/schema`` — health check, the served env id, JSON schemas.
* ``POST /reset`` and ``POST /step`` — OpenEnv's stateless HTTP calls (each request gets a fresh env,
  so ``/step`` without a session is answered with a JSON error that points to ``/ws``).
* ``POST /mcp`` — OpenEnv's JSON-RPC route (session lifecycle; a gem_core env has no MCP tools).

What this module adds around openenv's server:

* ``GemEnvironment``: an OpenEnv ``Environment`` around one gem_core env. The env lives on its own
  daemon thread; every reset/step has a deadline (``step_timeout``). An env that raises answers that
  request with an error (the next ``reset`` starts from a fresh instance); one that hangs past the
  deadline is abandoned with its thread, and the session goes on with a fresh env at its next
  ``reset``. Either way no other session notices.
* ``gem_core.openenv.guard.ProtocolGuard``: one documented error per kind of bad input (its table),
  the payload limit (``max_payload_bytes``) for HTTP bodies and WebSocket frames, and a reason on every
  refusal, including past ``max_sessions`` (``CAPACITY_REACHED``). Unhandled errors in HTTP routes
  become JSON ``500`` responses.
* Idle sessions expire after ``session_timeout`` seconds (openenv's reaper closes their env; the
  next message on such a connection gets an error saying so).
* Graceful shutdown (SIGINT/SIGTERM through uvicorn): connections are closed, every live env is
  closed, then the process exits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import logging
import queue
import signal
import socket
import sys
import threading
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import ConcurrencyConfig, EnvironmentMetadata

from gem_core.core import Env, Wrapper
from gem_core.openenv.codec import encode_observation, to_jsonable
from gem_core.openenv.guard import HARD_LIMIT_FACTOR, ProtocolGuard
from gem_core.openenv.protocol import GemAction, GemObservation, GemState

log = logging.getLogger("gem_core.openenv")

DEFAULT_MAX_SESSIONS = 64
DEFAULT_SESSION_TIMEOUT = 600.0
DEFAULT_STEP_TIMEOUT = 60.0
DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20
TOOL_NAMES = ("python", "search")
# Wrappers that can be given by name (``--wrapper Name:key=value``); ChatTemplate needs a tokenizer
# object and ToolEnvWrapper is ``--tools``.
WRAPPER_NAMES = (
    "ConcatObservations",
    "ContextBudget",
    "EpisodeStatistics",
    "LastKTurns",
    "ObservationActionHistory",
    "ChatMessages",
    "TimeLimit",
)


class SessionError(RuntimeError):
    """A request this session cannot serve (no episode, episode over, expired, timed out)."""


# ---- what one session serves --------------------------------------------------------------------
@dataclass(frozen=True)
class ServeConfig:
    """How each session builds its env: ``make(env_id, **env_kwargs)``, then tools, then wrappers."""

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    search_url: str | None = None
    wrappers: tuple[tuple[str, dict[str, Any]], ...] = ()
    step_timeout: float = DEFAULT_STEP_TIMEOUT

    def __post_init__(self) -> None:
        unknown = [t for t in self.tools if t not in TOOL_NAMES]
        if unknown:
            raise ValueError(f"unknown tool {unknown[0]!r}; choose from {', '.join(TOOL_NAMES)}")
        for name, _ in self.wrappers:
            if name not in WRAPPER_NAMES:
                raise ValueError(f"unknown wrapper {name!r}; choose from {', '.join(WRAPPER_NAMES)}")
        if not self.step_timeout > 0:
            raise ValueError("step_timeout must be positive")

    def build(self) -> Env:
        """A fresh env for one session."""
        import gem_core.wrappers
        from gem_core.registry import make

        env = make(self.env_id, **self.env_kwargs)
        if self.tools:
            from gem_core.wrappers.tools import ToolEnvWrapper

            env = ToolEnvWrapper(env, self._build_tools())
        for name, kwargs in self.wrappers:
            env = getattr(gem_core.wrappers, name)(env, **kwargs)
        return env

    def _build_tools(self) -> list[Any]:
        tools = []
        for name in self.tools:
            if name == "python":
                from gem_core.tools.python import PythonTool

                tools.append(PythonTool())
            else:
                from gem_core.tools.search import SearchTool

                tools.append(SearchTool(url=self.search_url) if self.search_url else SearchTool())
        return tools


def parse_wrapper(text: str) -> tuple[str, dict[str, Any]]:
    """``"TimeLimit:max_turns=5"`` -> ``("TimeLimit", {"max_turns": 5})``; values are JSON when they
    parse as JSON (numbers, true/false, null, quoted strings), else plain strings."""
    name, _, rest = text.partition(":")
    kwargs: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"wrapper option {item!r} is not key=value")
        try:
            kwargs[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key.strip()] = value
    return name.strip(), kwargs


# ---- one env on its own thread ------------------------------------------------------------------
class _Worker:
    """A daemon thread that runs one session's env calls in order. A call that hangs is abandoned
    with its thread (daemon threads never hold up the process's exit)."""

    def __init__(self, name: str):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put((future, fn))
        return future

    def stop(self) -> None:
        self._jobs.put(None)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)


def _close_env(env: Env) -> None:
    """Close every layer of ``env`` and the session's tools (wrappers close neither what they wrap
    nor their tools)."""
    layer: Any = env
    while layer is not None:
        for tool in getattr(layer, "tools", None) or ():
            with contextlib.suppress(Exception):
                tool.close()
        with contextlib.suppress(Exception):
            layer.close()
        layer = layer.env if isinstance(layer, Wrapper) else None


class GemEnvironment(Environment):
    """One OpenEnv session's env: a gem_core env built from ``config``, run on its own thread."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each instance owns its env; nothing is shared

    def __init__(self, config: ServeConfig, session_timeout: float | None = None):
        super().__init__()
        self.config = config
        self.session_timeout = session_timeout
        self._env: Env | None = None
        self._worker: _Worker | None = None
        self._in_episode = False
        self._done = False
        self._seed: int | None = None
        self._episode_id: str | None = None
        self._step_count = 0
        self._ended: str | None = None  # why the session can no longer be used
        self._note: str | None = None  # why the last episode was lost (told to a step that follows)
        _LIVE_ENVIRONMENTS.add(self)

    # ---- OpenEnv's Environment API (the async forms are what the server calls) -------------------
    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GemObservation:
        self._check_open()
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise SessionError(f"seed must be an integer, got {seed!r}")
        obs, info = await self._run(functools.partial(self._reset_env, seed, kwargs), "reset")
        self._in_episode, self._done, self._step_count, self._note = True, False, 0, None
        self._episode_id = episode_id or uuid.uuid4().hex
        return GemObservation(
            **encode_observation(obs),
            info=to_jsonable(info),
            seed=self._seed,
            env_id=self.config.env_id,
            reward=None,
            done=False,
        )

    async def step_async(
        self, action: GemAction, timeout_s: float | None = None, **kwargs: Any
    ) -> GemObservation:
        self._check_open()
        if not self._in_episode or self._env is None:
            raise SessionError(self._note or "no episode in progress: send a reset first")
        if self._done:
            raise SessionError("the episode is over: send a reset to start the next one")
        obs, reward, terminated, truncated, info = await self._run(
            functools.partial(self._env.step, action.action), "step", timeout_s
        )
        self._step_count += 1
        self._done = bool(terminated or truncated)
        return GemObservation(
            **encode_observation(obs),
            terminated=bool(terminated),
            truncated=bool(truncated),
            info=to_jsonable(info),
            seed=self._seed,
            env_id=self.config.env_id,
            reward=float(reward),
            done=self._done,
        )

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GemObservation:
        return _run_sync(self.reset_async(seed=seed, episode_id=episode_id, **kwargs))

    def step(self, action: GemAction, timeout_s: float | None = None, **kwargs: Any) -> GemObservation:
        return _run_sync(self.step_async(action, timeout_s=timeout_s))

    @property
    def state(self) -> GemState:
        return GemState(
            episode_id=self._episode_id,
            step_count=self._step_count,
            env_id=self.config.env_id,
            seed=self._seed,
            done=self._done,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        from gem_core import __version__
        from gem_core.registry import spec

        description = spec(self.config.env_id).description or self.config.env_id
        extras = [f"tools: {', '.join(self.config.tools)}"] if self.config.tools else []
        extras += [f"wrapper: {name}" for name, _ in self.config.wrappers]
        return EnvironmentMetadata(
            name=self.config.env_id,
            description="; ".join([description, *extras]),
            version=f"gem_core {__version__}",
        )

    def close(self, reason: str | None = None) -> None:
        """End the session: close its env on its thread (waiting a few seconds at most)."""
        if self._ended is None:
            idle = f"sessions idle for {self.session_timeout:g} s expire" if self.session_timeout else ""
            self._ended = reason or ", ".join(filter(None, ["the server closed it", idle]))
        worker, env = self._worker, self._env
        self._worker = self._env = None
        self._in_episode = False
        if worker is not None:
            if env is not None:
                with contextlib.suppress(Exception):
                    worker.submit(functools.partial(_close_env, env)).result(timeout=5.0)
            worker.stop()

    # ---- internals --------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._ended is not None:
            raise SessionError(f"this session has ended ({self._ended}); open a new connection")

    def _reset_env(self, seed: int | None, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """On the worker thread: build the env if needed, then reset it."""
        if self._env is None:
            self._env = self.config.build()
        obs, info = self._env.reset(seed=seed, **kwargs)
        self._seed = getattr(self._env.unwrapped, "seed", seed)
        return obs, info

    async def _run(self, fn: Callable[[], Any], what: str, timeout_s: float | None = None) -> Any:
        """``fn()`` on this session's thread, within the deadline."""
        if self._worker is None:
            self._worker = _Worker(f"gem-session-{id(self):x}")
        worker = self._worker
        deadline = self.config.step_timeout if not timeout_s else min(timeout_s, self.config.step_timeout)
        call = asyncio.wrap_future(worker.submit(fn))
        done, _ = await asyncio.wait({call}, timeout=deadline)
        if not done:
            # The thread is stuck inside the env: leave both behind, the next reset starts afresh.
            call.cancel()
            if self._worker is worker:
                worker.stop()
                self._worker, self._env, self._in_episode = None, None, False
            self._note = (
                f"the last {what} exceeded the {deadline:g} s deadline and was abandoned; send a reset"
            )
            log.warning(
                "%s: %s exceeded the %g s deadline; its env was abandoned", self.config.env_id, what, deadline
            )
            raise SessionError(f"{what} exceeded the {deadline:g} s deadline; the env was abandoned")
        try:
            return call.result()
        except Exception as exc:
            # The env raised: its state is unknown, so the next reset builds a fresh one.
            env, self._env, self._in_episode = self._env, None, False
            if env is not None and self._worker is worker:
                worker.submit(functools.partial(_close_env, env))
            self._note = f"the last {what} raised {type(exc).__name__}; send a reset"
            raise SessionError(f"the env raised {type(exc).__name__} in {what}: {exc}") from exc


def _run_sync(coro: Any) -> Any:
    """Run a coroutine from synchronous code (OpenEnv's sync ``reset``/``step`` forms)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called inside a running loop
        return pool.submit(asyncio.run, coro).result()


_LIVE_ENVIRONMENTS: weakref.WeakSet[GemEnvironment] = weakref.WeakSet()


# ---- the app ------------------------------------------------------------------------------------
def create_app(
    config: ServeConfig,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_timeout: float | None = DEFAULT_SESSION_TIMEOUT,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
):
    """The FastAPI app: openenv's ``HTTPEnvServer`` routes for ``config``'s env, behind the
    ``ProtocolGuard`` (payload limit, one error per kind of bad input), with JSON errors and every
    session closed at shutdown."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    if max_sessions < 1:
        raise ValueError("max_sessions must be at least 1")
    if max_payload_bytes < 1024:
        raise ValueError("max_payload_bytes must be at least 1024")
    app = FastAPI(
        title=f"gem serve {config.env_id}",
        description=f"The gem_core env {config.env_id!r} over the OpenEnv protocol (WebSocket sessions at /ws).",
    )
    server = HTTPEnvServer(
        functools.partial(GemEnvironment, config, session_timeout=session_timeout or None),
        GemAction,
        GemObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=session_timeout or None
        ),
        env_name=config.env_id,
        state_cls=GemState,
    )
    server.register_routes(app)
    app.state.openenv_server = server
    app.state.gem_config = config

    @app.exception_handler(SessionError)
    async def _session_error(request: Request, exc: SessionError) -> JSONResponse:
        detail = str(exc)
        if request.url.path == "/step":
            detail += " (POST /step is stateless: each request gets a fresh env; play episodes over the /ws session)"
        return JSONResponse(status_code=409, content={"detail": detail, "code": "SESSION_ERROR"})

    @app.exception_handler(Exception)
    async def _any_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("error serving %s", request.url.path)
        return JSONResponse(
            status_code=500, content={"detail": f"{type(exc).__name__}: {exc}", "code": "INTERNAL_ERROR"}
        )

    async def _close_sessions() -> None:
        # Sessions whose connection uvicorn already closed are gone; close whatever is left.
        envs = [env for env in list(_LIVE_ENVIRONMENTS) if env.config is config]
        loop = asyncio.get_running_loop()
        await asyncio.gather(
            *(
                loop.run_in_executor(None, functools.partial(env.close, "the server shut down"))
                for env in envs
            ),
            return_exceptions=True,
        )

    app.router.on_shutdown.append(_close_sessions)
    app.add_middleware(ProtocolGuard, max_bytes=max_payload_bytes, action_cls=GemAction)
    return app


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(
    config: ServeConfig,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_timeout: float | None = DEFAULT_SESSION_TIMEOUT,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    log_level: str = "warning",
    announce: Callable[[str], None] | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM. ``announce`` receives the base URL once the server listens."""
    import uvicorn

    app = create_app(config, max_sessions, session_timeout, max_payload_bytes)
    sock = sock or bind_socket(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    url_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    uv_config = uvicorn.Config(
        app,
        log_level=log_level,
        # Larger than the limit, so a frame between the two gets the guard's PAYLOAD_TOO_LARGE and the
        # session lives on; above it the WebSocket layer refuses it unread (close code 1009).
        ws_max_size=HARD_LIMIT_FACTOR * max_payload_bytes + 65536,
        timeout_graceful_shutdown=5,
        lifespan="on",
    )
    server = uvicorn.Server(uv_config)
    if announce is not None:
        url = f"http://{url_host}:{bound_port}"

        async def _announce() -> None:
            announce(url)

        app.router.on_startup.append(_announce)
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal under the handlers it
    # found: these make that a normal return, so the process exits with status 0 and its atexit
    # handlers (e.g. closing the Python tool's sandbox workers) run.
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, _raise_stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    except _Stopped:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()


class _Stopped(Exception):
    """A stop signal, after uvicorn's graceful shutdown."""


def _raise_stopped(signum: int, frame: Any) -> None:
    raise _Stopped()


def _print_announcement(config: ServeConfig, max_sessions: int) -> Callable[[str], None]:
    def announce(url: str) -> None:
        print(
            f"gem serve: {config.env_id} on {url} (OpenEnv: WebSocket sessions at /ws, max {max_sessions}; "
            f"health at /health)",
            flush=True,
        )
        sys.stdout.flush()

    return announce


def run_cli(
    env_id: str,
    host: str,
    port: int,
    max_sessions: int,
    session_timeout: float,
    step_timeout: float,
    max_payload_bytes: int,
    tools: Sequence[str],
    search_url: str | None,
    wrappers: Sequence[str],
    env_kwargs: dict[str, Any],
    log_level: str,
) -> None:
    """What ``gem serve`` runs; a ``ValueError``/``OSError`` is a problem with the request."""
    config = ServeConfig(
        env_id=env_id,
        env_kwargs=dict(env_kwargs),
        tools=tuple(tools),
        search_url=search_url,
        wrappers=tuple(parse_wrapper(w) for w in wrappers),
        step_timeout=step_timeout,
    )
    # Build (and reset) one env now, so a bad id, option or kwarg fails before the server starts.
    probe = config.build()
    try:
        probe.reset(seed=0)
    finally:
        _close_env(probe)
    sock = bind_socket(host, port)
    serve(
        config,
        max_sessions=max_sessions,
        session_timeout=session_timeout,
        max_payload_bytes=max_payload_bytes,
        log_level=log_level,
        announce=_print_announcement(config, max_sessions),
        sock=sock,
    )

"""OpenEnvClientEnv: any OpenEnv server (``gem serve`` or a third party's) as a gem_core ``Env``.

    env = gem_core.make("openenv:http://127.0.0.1:8000")       # or OpenEnvClientEnv(url)
    obs, info = env.reset(seed=7)
    obs, reward, terminated, truncated, info = env.step("\\\\boxed{5}")

Each instance holds one OpenEnv session (a WebSocket to ``/ws``, through openenv's own
``GenericEnvClient``), opened on the first ``reset``, so building one (or pickling it to a worker
process) costs nothing; ``close()`` ends the session. ``make_vec("openenv:URL", 32)`` gives 32
independent sessions, and our rollout drivers and adapters use them like local envs.

Against ``gem serve`` everything a gem_core step returns comes back: the observation (text,
``MultimodalObservation`` or JSON data), the per-turn reward, ``terminated``/``truncated``, the info
dict (JSON-safe: tuples arrive as lists) and the episode's seed. Against another OpenEnv server:

* the action text is sent as the one string field of the server's action schema (read from
  ``/schema``), or as ``action_field`` if given; an action schema without a single string field takes
  the action text as a JSON object of its fields;
* the observation is the observation object's one string field (or ``observation_field``), else the
  whole object as JSON; ``info["openenv_observation"]`` holds the object as received;
* ``done`` becomes ``terminated`` (OpenEnv has no separate truncation) and a missing reward is 0.

A server-side error (an env that raised, a deadline, a refused message) raises ``OpenEnvError`` from
``reset``/``step``; a vector env then replaces this env with a fresh one (a new session), as it does for
a local env that raises. A broken connection is reopened, as a new session, by the next ``reset``.
Snapshots (``get_state``/``set_state``) are not part of the OpenEnv protocol and raise.
"""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.error
import urllib.request
from typing import Any

from gem_core.core import Env, StepResult
from gem_core.extras import require
from gem_core.openenv.codec import decode_observation

_SCHEMAS: dict[str, dict[str, Any]] = {}
_SCHEMAS_LOCK = threading.Lock()


class OpenEnvError(RuntimeError):
    """The OpenEnv server answered with an error, or could not be reached."""


def fetch_schema(url: str, timeout: float = 10.0) -> dict[str, Any]:
    """The server's ``/schema`` (action, observation and state JSON schemas), cached per URL."""
    with _SCHEMAS_LOCK:
        if url in _SCHEMAS:
            return _SCHEMAS[url]
    try:
        with urllib.request.urlopen(f"{url}/schema", timeout=timeout) as response:
            schema = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise OpenEnvError(f"cannot read the schema of the OpenEnv server at {url}: {exc}") from None
    with _SCHEMAS_LOCK:
        _SCHEMAS[url] = schema
    return schema


def is_gem_server(schema: dict[str, Any]) -> bool:
    """Whether a server's schema is that of ``gem serve`` (observations carry terminated/truncated)."""
    props = schema.get("observation", {}).get("properties", {})
    return {"terminated", "truncated", "kind", "info"} <= set(props) and "action" in schema.get(
        "action", {}
    ).get("properties", {})


def _string_fields(schema: dict[str, Any]) -> list[str]:
    props = schema.get("properties", {})
    return [name for name, p in props.items() if name != "metadata" and p.get("type") == "string"]


class OpenEnvClientEnv(Env):
    """A gem_core env whose episodes run in a session on the OpenEnv server at ``url``.

    ``action_field``/``observation_field`` name the action and observation fields of a third-party
    server (found from its schema when left out). ``connect_timeout`` bounds opening the session,
    ``message_timeout`` each reset/step (after it the session is dropped and the call raises).
    """

    def __init__(
        self,
        url: str,
        action_field: str | None = None,
        observation_field: str | None = None,
        connect_timeout: float = 10.0,
        message_timeout: float = 300.0,
    ):
        require("openenv", package="openenv", extra="openenv", needed_by="openenv: envs")
        url = url.strip().rstrip("/")
        if url.startswith(("ws://", "wss://")):
            url = "http" + url[2:]
        if not url.startswith(("http://", "https://")):
            raise ValueError(
                f"an OpenEnv server URL starts with http://, https://, ws:// or wss://, got {url!r}"
            )
        self.url = url
        self.action_field = action_field
        self.observation_field = observation_field
        self.connect_timeout = connect_timeout
        self.message_timeout = message_timeout
        self.seed: int | None = None
        self._client: Any = None  # openenv's SyncEnvClient, opened by the first reset
        self._gem: bool | None = None
        self._action_field: str | None = None

    # ---- the Env API ------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._prepare()
        data = dict(kwargs)
        if seed is not None:
            data["seed"] = int(seed)
        payload = self._call("reset", data)
        obs = payload.get("observation") or {}
        if self._gem:
            self.seed = obs.get("seed", seed)
            return decode_observation(obs), dict(obs.get("info") or {})
        self.seed = seed
        return self._third_party_obs(obs), {"openenv_observation": obs}

    def step(self, action: str) -> StepResult:
        if self._client is None:
            raise OpenEnvError("no session: call reset() first")
        payload = self._call("step", self._action_payload(action))
        obs = payload.get("observation") or {}
        reward = float(payload.get("reward") or 0.0)
        if self._gem:
            info = dict(obs.get("info") or {})
            return (
                decode_observation(obs),
                reward,
                bool(obs.get("terminated")),
                bool(obs.get("truncated")),
                info,
            )
        done = bool(payload.get("done"))
        return self._third_party_obs(obs), reward, done, False, {"openenv_observation": obs}

    def sample_random_action(self) -> str:
        raise NotImplementedError("the OpenEnv protocol has no random action; sample one on the client side")

    def state(self) -> dict[str, Any]:
        """The session's OpenEnv state (``episode_id``, ``step_count``; ``gem serve`` adds env_id, seed, done)."""
        if self._client is None:
            raise OpenEnvError("no session: call reset() first")
        return self._call("state", None)

    def get_state(self) -> dict[str, Any]:
        raise NotImplementedError("snapshots of a remote env are not part of the OpenEnv protocol")

    def set_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError("snapshots of a remote env are not part of the OpenEnv protocol")

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def __getstate__(self) -> dict[str, Any]:  # a live connection does not travel to another process
        return {**vars(self), "_client": None}

    def __str__(self) -> str:
        return f"<openenv:{self.url}>"

    # ---- internals --------------------------------------------------------------------------------
    def _prepare(self) -> None:
        if self._gem is None:
            schema = fetch_schema(self.url, self.connect_timeout)
            self._gem = is_gem_server(schema)
            self._action_field = self.action_field or (
                "action" if self._gem else self._guess_action_field(schema)
            )
        if self._client is None:
            from openenv.core.generic_client import GenericEnvClient

            client = GenericEnvClient(
                base_url=self.url,
                connect_timeout_s=self.connect_timeout,
                message_timeout_s=self.message_timeout,
            ).sync()
            try:
                client.connect()
            except Exception as exc:
                client.close()
                raise OpenEnvError(f"cannot open a session on {self.url}: {exc}") from None
            self._client = client

    def _guess_action_field(self, schema: dict[str, Any]) -> str | None:
        fields = _string_fields(schema.get("action", {}))
        return fields[0] if len(fields) == 1 else None

    def _action_payload(self, action: str) -> dict[str, Any]:
        if self._action_field is not None:
            return {self._action_field: action}
        try:
            payload = json.loads(action)
        except json.JSONDecodeError:
            payload = None
        if not isinstance(payload, dict):
            raise OpenEnvError(
                f"the action schema of {self.url} has no single string field, so an action must be a JSON object "
                "of its fields (or pass action_field=...)"
            )
        return payload

    def _third_party_obs(self, obs: dict[str, Any]) -> Any:
        if self.observation_field is not None:
            value = obs.get(self.observation_field)
            return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        strings = [v for k, v in obs.items() if isinstance(v, str)]
        if len(strings) == 1:
            return strings[0]
        return json.dumps(obs, ensure_ascii=False, sort_keys=True)

    def _call(self, kind: str, data: Any) -> dict[str, Any]:
        client = self._client
        try:
            if kind == "reset":
                result = client.reset(**data)
            elif kind == "step":
                result = client.step(data)
            else:
                return dict(client.state())
        except RuntimeError as exc:
            if str(exc).startswith("Server error:"):  # the session is fine; the request was refused
                raise OpenEnvError(str(exc)) from None
            self._drop()
            raise OpenEnvError(f"{kind} on {self.url} failed: {exc}") from None
        except Exception as exc:  # the connection broke or timed out: that session is gone
            self._drop()
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise OpenEnvError(
                f"{kind} on {self.url} failed ({reason}); the next reset opens a new session"
            ) from None
        return {"observation": result.observation, "reward": result.reward, "done": result.done}

    def _drop(self) -> None:
        self.close()

"""gem_core over the OpenEnv protocol (PyPI ``openenv`` 0.10; ``pip install 'gem-core[openenv]'``).

* Serving: ``gem serve ENV_ID`` (``gem_core.openenv.server``) puts any registered env behind an
  OpenEnv server, one env per session, so OpenEnv clients, TRL's ``environment_factory`` and other
  frameworks that speak OpenEnv can use it.
* Using: ``gem_core.make("openenv:http://host:port")`` or ``OpenEnvClientEnv(url)``
  (``gem_core.openenv.client``) wraps a session on any OpenEnv server as a gem_core ``Env``.
* OpenEnv's own typed client for ``gem serve``: ``GemEnv`` (``gem_core.openenv.env_client``), which
  ``AutoEnv.from_env("gem", base_url=...)`` returns once the repo's ``hub/`` package is installed.

openenv (with FastAPI, uvicorn, websockets) is imported only when one of these is used, never by
``import gem_core``; the names below load on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "OpenEnvClientEnv": "gem_core.openenv.client",
    "OpenEnvError": "gem_core.openenv.client",
    "GemAction": "gem_core.openenv.protocol",
    "GemEnv": "gem_core.openenv.env_client",
    "GemObservation": "gem_core.openenv.protocol",
    "GemState": "gem_core.openenv.protocol",
    "GemEnvironment": "gem_core.openenv.server",
    "ServeConfig": "gem_core.openenv.server",
    "create_app": "gem_core.openenv.server",
    "serve": "gem_core.openenv.server",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

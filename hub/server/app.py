"""The OpenEnv app of this package (``app: server.app:app`` in openenv.yaml).

``uvicorn server.app:app --port 8000`` (or ``gem-env-server``) serves the gem_core env id in ``$GEM_ENV``
(default ``game:GuessTheNumber-v0``) exactly as ``gem serve $GEM_ENV`` does; ``gem-env-server`` also
reads ``GEM_HOST``, ``PORT`` and ``GEM_SERVE_ARGS`` (any other ``gem serve`` option), as the Dockerfile
does.
"""

from __future__ import annotations

import os
import shlex

from gem_core.cli import main as gem_main
from gem_core.openenv.server import ServeConfig, create_app

DEFAULT_ENV = "game:GuessTheNumber-v0"
app = create_app(ServeConfig(env_id=os.environ.get("GEM_ENV", DEFAULT_ENV)))


def main() -> int:
    return gem_main(
        [
            "serve",
            os.environ.get("GEM_ENV", DEFAULT_ENV),
            "--host",
            os.environ.get("GEM_HOST", "0.0.0.0"),
            "--port",
            os.environ.get("PORT", "8000"),
            *shlex.split(os.environ.get("GEM_SERVE_ARGS", "")),
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())

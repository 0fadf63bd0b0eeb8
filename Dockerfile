# gem serve in a container: one gem_core env id as an OpenEnv server (WebSocket sessions at /ws,
# health at /health), built from this checkout, for `docker run`, openenv's
# `GemEnv.from_docker_image(...)` / `GenericEnvClient.from_docker_image(...)`, or a Hugging Face Space
# (Docker SDK, app_port 8000; it runs as uid 1000, as Spaces do). `hub/` is the same server as an
# OpenEnv package (openenv.yaml, AutoEnv discovery, `openenv push`).
#
#   docker build -t gem-serve .
#   docker run --rm -p 8000:8000 gem-serve                                   # game:GuessTheNumber-v0
#   docker run --rm -p 8000:8000 -e GEM_ENV=game:Sudoku-v0-easy gem-serve
#   docker run --rm -p 8000:8000 -e GEM_ENV=math:GSM8K -e GEM_SERVE_ARGS="--tools python" gem-serve
#
# Then, from the host:  gem_core.make("openenv:http://127.0.0.1:8000")  or any OpenEnv client.
# GEM_SERVE_ARGS takes any other `gem serve` option (--wrapper, --env-kwargs, --step-timeout, ...).
# The command below is tested as written (tests/openenv/test_dockerfile.py runs it outside Docker).
FROM python:3.11-slim

# bubblewrap isolates the Python tool's sandbox (--tools python); without it the sandbox falls back loudly.
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/gem
COPY pyproject.toml README.md ./
COPY gem_core ./gem_core
COPY gem_adapters ./gem_adapters
RUN pip install --no-cache-dir ".[openenv]"

RUN useradd --create-home --uid 1000 gem
USER gem

ENV GEM_ENV=game:GuessTheNumber-v0 \
    GEM_HOST=0.0.0.0 \
    PORT=8000 \
    GEM_MAX_SESSIONS=64 \
    GEM_SERVE_ARGS=""
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ['PORT'], timeout=4)"

# exec: gem serve is PID 1 and gets docker stop's SIGTERM (graceful shutdown, exit status 0).
CMD ["sh", "-c", "exec gem serve \"$GEM_ENV\" --host \"$GEM_HOST\" --port \"$PORT\" --max-sessions \"$GEM_MAX_SESSIONS\" $GEM_SERVE_ARGS"]

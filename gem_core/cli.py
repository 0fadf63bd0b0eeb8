"""The ``gem`` command: list the envs, play one in the terminal, evaluate an agent.

    gem list [PATTERN]                    registered envs: category, turns, tools, data source
    gem play ENV_ID [--seed N]            play an env yourself
    gem eval --model M --env ID[,ID...]   fixed-seed evaluation with a report (see gem_adapters.evaluation)
    gem serve ENV_ID [--port N]           serve an env over the OpenEnv protocol (see gem_core.openenv)

``gem list`` shows the envs of installed plugins too (the ``gem_core.envs`` entry point group, see
``gem_core.registry``).

``list``, ``play`` and ``serve`` are gem_core's (``serve`` imports openenv: ``pip install
'gem-core[openenv]'``). Other packages add commands through the ``gem_core.cli`` entry point group:
each entry is a function ``add_command(subparsers)`` that adds its parser with ``set_defaults(func=...)``
(``func(args) -> exit status``); ``gem_adapters.evaluation.cli`` adds ``eval`` that way, so gem_core imports
nothing of gem_adapters. A problem with the request (unknown env, unreachable endpoint, model that
does not load) raises ``UserError``: one line ``gem: error: ...``, exit status 2, no traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata

from gem_core.registry import EnvNotFoundError, EnvSpec, list_envs, spec

USAGE_ERROR = 2
COMMAND_GROUP = "gem_core.cli"


class UserError(Exception):
    """Printed as one line, exit status 2."""


# ---- gem list -----------------------------------------------------------------------------------
def env_rows(pattern: str | None = None) -> list[list[str]]:
    """One row per matching env: id, category, turns, tools, data source, description."""
    return [_env_row(spec(env_id)) for env_id in list_envs(pattern)]


def _env_row(s: EnvSpec) -> list[str]:
    tools = s.kwargs.get("tools") or ()
    tool_names = tools if isinstance(tools, str) else ",".join(getattr(t, "name", str(t)) for t in tools)
    return [
        s.id,
        s.category or "-",
        "multi" if s.multi_turn else "single",
        tool_names or "-",
        s.data_source,
        s.description,
    ]


def cmd_list(args: argparse.Namespace) -> int:
    rows = env_rows(args.pattern)
    if not rows:
        raise UserError(f"no registered env matches {args.pattern!r}")
    header = ["ID", "CATEGORY", "TURNS", "TOOLS", "DATA", "DESCRIPTION"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        print("  ".join(x.ljust(w) for x, w in zip(row, widths)) + "  " + row[-1])
    print(f"\n{len(rows)} env{'s' if len(rows) != 1 else ''}")
    return 0


# ---- gem play -----------------------------------------------------------------------------------
def cmd_play(args: argparse.Namespace) -> int:
    from gem_core.play import play

    spec(args.env_id)  # an unknown id fails here, with close matches
    try:
        play(args.env_id, seed=args.seed)
    except (EOFError, KeyboardInterrupt):
        print()
    return 0


# ---- gem serve ----------------------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    import json

    spec(args.env_id)  # an unknown id fails here, with close matches
    try:
        from gem_core.openenv.server import run_cli
    except ImportError as exc:
        raise UserError(f"gem serve needs openenv (pip install 'gem-core[openenv]'): {exc}") from None
    try:
        env_kwargs = json.loads(args.env_kwargs) if args.env_kwargs else {}
    except json.JSONDecodeError as exc:
        raise UserError(f"--env-kwargs is not JSON: {exc}") from None
    if not isinstance(env_kwargs, dict):
        raise UserError("--env-kwargs must be a JSON object")
    for name, value in [("--max-sessions", args.max_sessions), ("--step-timeout", args.step_timeout)]:
        if value <= 0:
            raise UserError(f"{name} must be positive")
    try:
        run_cli(
            env_id=args.env_id,
            host=args.host,
            port=args.port,
            max_sessions=args.max_sessions,
            session_timeout=args.session_timeout,
            step_timeout=args.step_timeout,
            max_payload_bytes=args.max_payload_bytes,
            tools=[t.strip() for t in args.tools.split(",") if t.strip()],
            search_url=args.search_url,
            wrappers=args.wrapper,
            env_kwargs=env_kwargs,
            log_level=args.log_level,
        )
    except EnvNotFoundError:
        raise
    except OSError as exc:
        raise UserError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise UserError(f"cannot serve {args.env_id}: {exc}") from None
    return 0


# ---- the parser ---------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gem", description="GEM: a gym for LLM agents.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = commands.add_parser("list", help="list registered envs")
    p.add_argument("pattern", nargs="?", help="glob (game:*-easy) or case-insensitive substring")
    p.set_defaults(func=cmd_list)

    p = commands.add_parser("play", help="play an env yourself in the terminal")
    p.add_argument("env_id")
    p.add_argument("--seed", type=int, default=None, help="the episode's seed (default: random)")
    p.set_defaults(func=cmd_play)

    p = commands.add_parser(
        "serve",
        help="serve an env over the OpenEnv protocol",
        description="Serve ENV_ID as an OpenEnv server: a WebSocket session per client at /ws (one env each), "
        "health at /health. gem_core.make('openenv:http://HOST:PORT') and any OpenEnv client connect to it. "
        "Stop it with Ctrl-C or SIGTERM.",
    )
    p.add_argument("env_id")
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 for all)"
    )
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument(
        "--max-sessions", type=int, default=64, help="concurrent sessions, one env each (default 64)"
    )
    p.add_argument(
        "--session-timeout",
        type=float,
        default=600.0,
        help="idle sessions expire after this many seconds (0: never)",
    )
    p.add_argument(
        "--step-timeout", type=float, default=60.0, help="deadline of one reset or step in seconds"
    )
    p.add_argument(
        "--max-payload-bytes", type=int, default=1 << 20, help="largest request or message (default 1 MiB)"
    )
    p.add_argument("--tools", default="", help="tools to give each env: python,search")
    p.add_argument("--search-url", default=None, help="a gem search server for --tools search")
    p.add_argument(
        "--wrapper",
        action="append",
        default=[],
        metavar="NAME[:K=V,...]",
        help="wrap each env, in order (repeatable), e.g. TimeLimit:max_turns=5 or LastKTurns:k=2",
    )
    p.add_argument("--env-kwargs", default=None, help="JSON object of constructor arguments for the env")
    p.add_argument(
        "--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"]
    )
    p.set_defaults(func=cmd_serve)

    # Commands of other packages (gem_adapters contributes `eval`), registered as entry points.
    for entry_point in sorted(metadata.entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        entry_point.load()(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    try:
        code = args.func(args)
    except (UserError, EnvNotFoundError) as exc:
        print(f"gem: error: {exc}", file=sys.stderr)
        code = USAGE_ERROR
    except KeyboardInterrupt:
        print("gem: interrupted", file=sys.stderr)
        code = 130
    return code


if __name__ == "__main__":
    # Through the importable module: commands of other packages raise *its* UserError.
    from gem_core.cli import main as module_main

    sys.exit(module_main())

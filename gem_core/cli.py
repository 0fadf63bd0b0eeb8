"""The ``gem`` command: list the envs, play one in the terminal, evaluate an agent.

    gem list [PATTERN]                    registered envs: category, turns, tools, data source
    gem play ENV_ID [--seed N]            play an env yourself
    gem eval --model M --env ID[,ID...]   fixed-seed evaluation with a report (see gem_adapters.evaluation)
    gem serve ENV_ID [--port N]           serve an env over the OpenEnv protocol (see gem_core.openenv)

``list`` and ``play`` need only gem_core. ``eval`` imports ``gem_adapters`` (torch, transformers) when
it runs; ``serve`` imports openenv-core (``pip install 'gem-core[openenv]'``). A problem with the request (unknown env, unreachable endpoint, model that does not load)
prints one line ``gem: error: ...`` and exits with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence

from gem_core.registry import EnvNotFoundError, EnvSpec, list_envs, spec

USAGE_ERROR = 2


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


# ---- gem eval -----------------------------------------------------------------------------------
def cmd_eval(args: argparse.Namespace) -> int:
    try:
        from gem_adapters.evaluation import EvalConfig, EvalError, evaluate, table_rows, text_table
    except ImportError as exc:
        raise UserError(
            f"gem eval needs the adapters extra (pip install 'gem-core[adapters]'): {exc}"
        ) from None
    _quiet_libraries()
    try:
        config = EvalConfig(
            env_ids=args.env.split(","),
            episodes=args.episodes,
            k=args.k,
            seed=args.seed,
            tools=tuple(t.strip() for t in args.tools.split(",") if t.strip()) if args.tools else (),
            search_url=args.search_url,
            max_turns=args.max_turns,
            max_new_tokens=args.max_new_tokens,
            max_context_tokens=args.max_context_tokens or None,
            temperature=args.temperature,
            top_p=args.top_p,
            concurrency=args.concurrency,
            system_prompt=_system_prompt(args.system_prompt),
        )
        out = args.out or os.path.join("gem-eval", f"{_slug(args.model)}-{time.strftime('%Y%m%d-%H%M%S')}")
        result = evaluate(
            args.model,
            config,
            out,
            progress=not args.no_progress,
            command="gem " + shlex.join(args.argv),
            tokenizer=args.tokenizer,
            served_model=args.served_model,
            api_key=args.api_key or os.environ.get("OPENAI_API_KEY"),
        )
    except EvalError as exc:
        raise UserError(str(exc)) from None
    print(text_table(*table_rows(result.metrics, config.k)))
    print(f"\nreport: {result.files['report']}")
    print(f"trajectories: {result.files['trajectories']}")
    return 0


def _system_prompt(value: str | None) -> str | None:
    from gem_adapters.evaluation import DEFAULT_SYSTEM_PROMPT

    if value is None:
        return DEFAULT_SYSTEM_PROMPT
    if value.startswith("@"):
        try:
            with open(value[1:], encoding="utf-8") as f:
                return f.read()
        except OSError as exc:
            raise UserError(f"cannot read the system prompt file {value[1:]!r}: {exc.strerror}") from None
    return value or None


def _slug(model: str) -> str:
    name = model.rstrip("/").split("://")[-1]
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[-60:] or "model"


def _quiet_libraries() -> None:
    """Library warnings (transformers' generation hints) would bury the one-line errors and the table."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# ---- gem serve ----------------------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    import json

    spec(args.env_id)  # an unknown id fails here, with close matches
    try:
        from gem_core.openenv.server import run_cli
    except ImportError as exc:
        raise UserError(f"gem serve needs openenv-core (pip install 'gem-core[openenv]'): {exc}") from None
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
        "eval",
        help="evaluate an agent on envs with fixed seeds",
        description="Play fixed-seed episodes with an agent and write trajectories, metrics and a report.",
    )
    p.add_argument(
        "--model",
        required=True,
        help="random | solver | smollm2 | tiny | a local transformers model folder | "
        "an OpenAI-compatible endpoint URL (http://host:8000/v1, e.g. vLLM)",
    )
    p.add_argument("--env", required=True, help="env ids or globs, comma-separated")
    p.add_argument("--episodes", type=int, default=8, help="seeds per env (default 8)")
    p.add_argument("--k", type=int, default=1, help="samples per seed, for pass@k and avg@k (default 1)")
    p.add_argument("--seed", type=int, default=0, help="episode i plays seed SEED+i (default 0)")
    p.add_argument("--tools", default="", help="tools to give every env: python,search")
    p.add_argument("--search-url", default=None, help="a gem search server for --tools search")
    p.add_argument("--out", default=None, help="output folder (default gem-eval/MODEL-TIME)")
    p.add_argument("--max-turns", type=int, default=None, help="cap on turns per episode")
    p.add_argument("--max-new-tokens", type=int, default=256, help="per turn (default 256)")
    p.add_argument("--max-context-tokens", type=int, default=8192, help="per episode; 0 for no cap")
    p.add_argument("--temperature", type=float, default=None, help="default 0 for k=1, else 1.0")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--concurrency", type=int, default=16, help="episodes played as one batch (default 16)")
    p.add_argument(
        "--system-prompt",
        default=None,
        help="system prompt text, @FILE, or '' for none (default: a short few-shot prompt)",
    )
    p.add_argument("--tokenizer", default=None, help="tokenizer for an endpoint (default: the served model)")
    p.add_argument("--served-model", default=None, help="model name at the endpoint (default: its first)")
    p.add_argument("--api-key", default=None, help="endpoint API key (default: $OPENAI_API_KEY)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_eval)

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
    sys.exit(main())

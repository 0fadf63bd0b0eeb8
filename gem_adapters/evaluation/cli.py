"""``gem eval``: fixed-seed evaluation of an agent, a command that gem_adapters adds to gem_core's
``gem`` CLI through the ``gem_core.cli`` entry point group (see ``gem_core.cli``).

Nothing heavy is imported until the command runs: ``gem list`` stays free of torch.
"""

from __future__ import annotations

import argparse
import os
import shlex
import time

from gem_core.cli import UserError


def add_eval_command(commands: argparse._SubParsersAction) -> None:
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
    for env_id, why in result.metrics["skipped"].items():
        print(f"skipped {env_id}: {why}")
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

"""Baseline table: the random policy, the scripted solvers and the offline SmolLM2-135M-Instruct on every
game (easy settings) and every offline task set that is registered.

    python -m benchmarks.baselines.untrained

writes ``benchmarks/results/baselines.md`` (the table, with this command and the settings at the top),
``baselines.json`` (the numbers, also used by ``--resume``) and ``baselines.png``. The full reports and
trajectories of every run go to ``--work-dir`` (default ``/tmp/gem-baselines``). Every cell is a
``gem_adapters.evaluation.evaluate`` run with fixed seeds (episode i has seed i), so the table is
reproducible; ``gem eval --model M --env ID --episodes N`` reproduces any one cell.

SmolLM2 plays greedily with the short few-shot system prompt of ``gem eval``
(``DEFAULT_SYSTEM_PROMPT``), a few episodes per env to fit a CPU budget.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import gem_core
from gem_adapters.evaluation import EvalConfig, evaluate, has_solver, load_agent
from gem_core.envs.games import ALIASES

RESULTS = Path(__file__).resolve().parents[1] / "results"
AGENTS = ("random", "solver", "smollm2")
CONCURRENCY = 16  # episodes generated as one batch


def baseline_envs() -> list[str]:
    """Every game at easy settings (gem_core's -v1 design, one id per game), then every offline task set outside the games."""
    games = [i for i in gem_core.list_envs("game:*-v1-easy") if not any(f":{a}-" in i for a in ALIASES)]
    tasks = [
        i
        for i in gem_core.list_envs()
        if gem_core.spec(i).category != "game" and gem_core.spec(i).data_source == "offline"
    ]
    return games + tasks


def solvable(env_id: str) -> bool:
    env = gem_core.make(env_id)
    try:
        env.reset(seed=0)
        return has_solver(env)
    finally:
        env.close()


def smoke_error(env_id: str) -> str | None:
    """Why ``env_id`` cannot be evaluated (it fails to build, reset or step), or None."""
    try:
        with gem_core.make(env_id) as env:
            env.reset(seed=0)
            env.step(env.sample_random_action())
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return None


def groups(envs: list[str]) -> list[list[str]]:
    """The envs by category, games first: one batched evaluation per group (episodes of different
    envs share generation batches, which is what makes SmolLM2 on CPU affordable)."""
    by_category: dict[str, list[str]] = {}
    for env_id in envs:
        by_category.setdefault(gem_core.spec(env_id).category, []).append(env_id)
    order = sorted(by_category, key=lambda c: (c != "game", c == "rg", c))
    return [by_category[c] for c in order]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=32, help="seeds per env for random and solver")
    parser.add_argument("--smollm2-episodes", type=int, default=8, help="seeds per env for SmolLM2")
    parser.add_argument(
        "--smollm2-large-episodes",
        type=int,
        default=2,
        help="SmolLM2 seeds per env in categories of more than 20 envs (reasoning-gym, terminal)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=48, help="SmolLM2 tokens per turn")
    parser.add_argument("--max-context-tokens", type=int, default=768, help="SmolLM2 context per episode")
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--envs", default=None, help="comma-separated ids (default: all baseline envs)")
    parser.add_argument("--work-dir", default="/tmp/gem-baselines")
    parser.add_argument("--out", default=str(RESULTS / "baselines.md"))
    parser.add_argument("--resume", action="store_true", help="keep the cells already in baselines.json")
    parser.add_argument(
        "--table-only", action="store_true", help="rewrite the table from baselines.json, run nothing"
    )
    args = parser.parse_args()

    out = Path(args.out)
    store = out.with_suffix(".json")
    envs = args.envs.split(",") if args.envs else baseline_envs()
    results: dict[str, dict[str, dict]] = {}
    stored = json.loads(store.read_text()) if store.exists() else {}
    if args.resume or args.table_only:
        results = stored.get("results", {})
    threads = os.environ.get("OMP_NUM_THREADS")
    command = (
        "" if threads is None else f"OMP_NUM_THREADS={threads} "
    ) + "python -m benchmarks.baselines.untrained"
    kept = [a for a in sys.argv[1:] if a not in ("--resume", "--table-only")]  # the same table
    command += (" " + shlex.join(kept)) if kept else ""
    started = time.time()

    def log(text: str) -> None:
        print(f"[{time.time() - started:7.0f}s] {text}", flush=True)

    if args.table_only:
        _write(out, store, command, args, envs, results, stored.get("broken", {}))
        return
    broken = {}
    for env_id in envs:
        error = smoke_error(env_id)
        if error is not None:
            broken[env_id] = error
            log(f"{env_id}: {error}")
    for name in args.agents.split(","):
        agent = None
        for group in groups([e for e in envs if e not in broken]):
            todo = [e for e in group if name not in results.get(e, {})]
            if name == "solver":
                for env_id in [e for e in todo if not solvable(e)]:
                    results.setdefault(env_id, {})[name] = {"skipped": "no scripted solver"}
                    todo.remove(env_id)
            if not todo:
                continue
            episodes = args.episodes
            if name == "smollm2":
                episodes = args.smollm2_large_episodes if len(group) > 20 else args.smollm2_episodes
            agent = agent or load_agent(name, EvalConfig(todo))
            # One batch of episodes per call: no batching is lost, and each finished call is saved.
            per_call = max(1, CONCURRENCY // episodes)
            for start in range(0, len(todo), per_call):
                ids = todo[start : start + per_call]
                config = EvalConfig(
                    ids,
                    episodes=episodes,
                    max_new_tokens=args.max_new_tokens,
                    max_context_tokens=args.max_context_tokens,
                    concurrency=CONCURRENCY,
                )
                t0 = time.perf_counter()
                result = evaluate(
                    name,
                    config,
                    Path(args.work_dir) / name / ids[0].replace(":", "_"),
                    progress=False,
                    agent=agent,
                )
                for env_id in ids:
                    results.setdefault(env_id, {})[name] = result.metrics["envs"][env_id]
                    log(f"{name:8s} {env_id:36s} {_brief(results[env_id][name])}")
                log(f"{name}: {len(ids)} envs x {episodes} episodes in {time.perf_counter() - t0:.0f} s")
                _write(out, store, command, args, envs, results, broken)
    _write(out, store, command, args, envs, results, broken)


def _brief(m: dict) -> str:
    if "success_rate" not in m:
        return m.get("error") or m.get("skipped", "")
    return f"success {m['success_rate']:.2f} return {m['mean_return']:.2f} turns {m['mean_turns']:.1f}"


def _write(
    out: Path,
    store: Path,
    command: str,
    args: argparse.Namespace,
    envs: list[str],
    results: dict,
    broken: dict,
) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {"command": command, "results": results, "broken": broken}
    store.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")

    def cell(env_id: str, agent: str, key: str, fmt: str) -> str:
        m = results.get(env_id, {}).get(agent)
        if m is None:
            return "…"  # not run yet
        if key not in m or m[key] is None:
            return "—"
        return format(m[key], fmt)

    lines = [
        "# Baselines: random, scripted solvers, SmolLM2-135M-Instruct",
        "",
        "Made with:",
        "",
        "```",
        command,
        "```",
        "",
        f"Every game at easy settings and every offline task set registered at the time. Seeds 0..N-1 per env "
        f"(random and solver: N = {args.episodes}; SmolLM2: N = {args.smollm2_episodes}, and "
        f"{args.smollm2_large_episodes} per env in categories of more than 20 envs, greedy, the few-shot "
        f"system prompt of `gem eval`, at most {args.max_new_tokens} new tokens per turn and "
        f"{args.max_context_tokens} tokens per episode (an episode that fills them ends there), on CPU). "
        "Episodes of different envs share generation batches. Success: share of episodes won; return: mean "
        "episode return; fmt err: share of SmolLM2's turns with no parsable answer. — : no scripted solver; "
        "… : not run (a run cut short; `--resume` continues it). "
        "One cell again: `gem eval --model random|solver|smollm2 --env ID --episodes N`.",
        "",
        "| env | random success | random return | solver success | solver return | SmolLM2 success "
        "| SmolLM2 return | SmolLM2 fmt err | SmolLM2 turns |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    columns = [
        ("random", "success_rate", ".0%"),
        ("random", "mean_return", ".2f"),
        ("solver", "success_rate", ".0%"),
        ("solver", "mean_return", ".2f"),
        ("smollm2", "success_rate", ".0%"),
        ("smollm2", "mean_return", ".2f"),
        ("smollm2", "format_error_rate", ".0%"),
        ("smollm2", "mean_turns", ".1f"),
    ]
    for env_id in envs:
        row = [
            env_id,
            cell(env_id, "random", "success_rate", ".0%"),
            cell(env_id, "random", "mean_return", ".2f"),
            cell(env_id, "solver", "success_rate", ".0%"),
            cell(env_id, "solver", "mean_return", ".2f"),
            cell(env_id, "smollm2", "success_rate", ".0%"),
            cell(env_id, "smollm2", "mean_return", ".2f"),
            cell(env_id, "smollm2", "format_error_rate", ".0%"),
            cell(env_id, "smollm2", "mean_turns", ".1f"),
        ]
        lines.append("| " + " | ".join(row) + " |")
    for category, ids in _by_category(envs).items():
        means = []
        for agent, key, fmt in columns:
            values = [results.get(e, {}).get(agent, {}).get(key) for e in ids]
            values = [v for v in values if v is not None]
            means.append(format(sum(values) / len(values), fmt) if values else "—")
        lines.append(f"| **{category}: mean over {len(ids)} envs** | " + " | ".join(means) + " |")
    if broken:
        lines += ["", "Not evaluated (the env failed to build, reset or step):", ""]
        lines += [f"- {env_id}: {error}" for env_id, error in broken.items()]
    lines += ["", "![success rates](baselines.png)", ""]
    out.write_text("\n".join(lines))
    _chart(out.with_suffix(".png"), envs, results)


def _by_category(envs: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for env_id in envs:
        out.setdefault(gem_core.spec(env_id).category, []).append(env_id)
    return out


def _chart(path: Path, envs: list[str], results: dict) -> None:
    """Success per game and task env; reasoning-gym's many tasks as one mean bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {e: [e] for e in envs if gem_core.spec(e).category != "rg"}
    rg = [e for e in envs if gem_core.spec(e).category == "rg"]
    if rg:
        rows[f"rg: mean over {len(rg)} tasks"] = rg
    fig, ax = plt.subplots(figsize=(9, 1.5 + 0.45 * len(rows)))
    height = 0.27
    for j, (agent, color) in enumerate(zip(AGENTS, ("#999999", "#55A868", "#4C72B0"))):
        values = []
        for ids in rows.values():
            found = [results.get(e, {}).get(agent, {}).get("success_rate") for e in ids]
            found = [v for v in found if v is not None]
            values.append(sum(found) / len(found) if found else 0.0)
        ax.barh([i + (j - 1) * height for i in range(len(rows))], values, height, label=agent, color=color)
    ax.set_yticks(range(len(rows)), list(rows), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("success rate")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()

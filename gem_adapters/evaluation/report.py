"""The output folder: trajectories.jsonl, metrics.json, report.md and the charts; the results table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gem_adapters.episodes.jsonl import write_jsonl
from gem_adapters.evaluation.config import EvalResult


def table_rows(metrics: dict[str, Any], k: int) -> tuple[list[str], list[list[str]]]:
    """The results table (header, rows): one row per env and a last row with the mean over envs."""
    header = ["env", "episodes", "success", f"pass@{k}", f"avg@{k}", "mean return", "mean turns"]
    header += ["format errors", "invalid moves", "prompt tok/ep", "completion tok/ep"]

    def row(name: str, m: dict[str, Any]) -> list[str]:
        def tokens(value: float | None) -> str:
            return "-" if value is None else f"{value:.0f}"

        return [
            name,
            str(m["episodes"]),
            f"{m['success_rate']:.1%}",
            f"{m[f'pass@{k}']:.1%}",
            f"{m[f'avg@{k}']:.1%}",
            f"{m['mean_return']:.3f}",
            f"{m['mean_turns']:.1f}",
            f"{m['format_error_rate']:.1%}",
            f"{m['invalid_move_rate']:.1%}",
            tokens(m["prompt_tokens"]),
            tokens(m["completion_tokens"]),
        ]

    rows = [row(env_id, m) for env_id, m in metrics["envs"].items()]
    if len(rows) > 1:
        rows.append(row("mean over envs", metrics["overall"]))
    return header, rows


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(x) for x in column) for column in zip(header, *rows)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in [header, *rows]]
    return "\n".join(lines)


def write_report(result: EvalResult, out_dir: Path, *, command: str | None = None) -> dict[str, Path]:
    """Write trajectories.jsonl, metrics.json, report.md and the charts into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "trajectories": out_dir / "trajectories.jsonl",
        "metrics": out_dir / "metrics.json",
        "report": out_dir / "report.md",
        "summary_chart": out_dir / "summary.png",
        "returns_chart": out_dir / "returns.png",
    }
    write_jsonl(files["trajectories"], result.episodes)
    files["metrics"].write_text(json.dumps(result.metrics, indent=2, sort_keys=True) + "\n")
    _charts(result, files["summary_chart"], files["returns_chart"])
    config, k = result.config, result.config.k
    settings = {
        "model": result.model,
        "envs": ", ".join(result.metrics["config"]["env_ids"]),
        "episodes per env": f"{config.episodes} seeds ({config.seed}..{config.seed + config.episodes - 1}) x {k} samples",
        "tools": ", ".join(config.tools) or "none",
        "max turns": str(config.max_turns or "the env's own"),
        "wall time": f"{result.wall_seconds:.1f} s",
    }
    if result.metrics["overall"].get("completion_tokens") is not None:  # a model, not random/solver
        settings["temperature / top-p"] = f"{config.sampling_temperature:g} / {config.top_p:g}"
        settings["max new tokens / context tokens"] = f"{config.max_new_tokens} / {config.max_context_tokens}"
        settings["system prompt"] = "none" if config.system_prompt is None else repr(config.system_prompt)
    lines = [f"# GEM evaluation: {result.model}", ""]
    if command:
        lines += ["```", command, "```", ""]
    lines += [
        "| setting | value |",
        "|---|---|",
        *(f"| {key} | {value} |" for key, value in settings.items()),
    ]
    lines += ["", "## Results", "", markdown_table(*table_rows(result.metrics, k)), ""]
    lines += [
        f"success: share of episodes won; pass@{k} / avg@{k}: per seed, over its {k} samples, the unbiased "
        "pass@k estimate and the mean success; format errors: share of turns whose action could not be "
        'parsed (`info["format_error"]`); invalid moves: share of turns whose action parsed but was not '
        'legal (`info["invalid_move"]`); tokens: per episode, each turn\'s full context (prompt) and the '
        "generated tokens.",
        "",
        *_skipped_lines(result.metrics.get("skipped") or {}),
        "![summary](summary.png)",
        "",
        "![returns](returns.png)",
        "",
        "Files: `trajectories.jsonl` (one episode per line; `gem_adapters.episodes.jsonl.read_jsonl` reads it), "
        "`metrics.json` (the numbers above).",
        "",
    ]
    files["report"].write_text("\n".join(lines))
    return files


def _skipped_lines(skipped: dict[str, str]) -> list[str]:
    """The report's list of the envs that were not played, and why."""
    if not skipped:
        return []
    return ["## Skipped", "", *(f"- `{env_id}`: {why}" for env_id, why in skipped.items()), ""]


def _charts(result: EvalResult, summary_path: Path, returns_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = result.metrics["envs"]
    names = list(envs)
    k = result.config.k
    height = 2.4 + 0.35 * len(names)
    fig, axes = plt.subplots(1, 4, figsize=(16, height), sharey=True)
    y = list(range(len(names)))
    panels = [
        ("success rate", [envs[n]["success_rate"] for n in names], (0, 1)),
        (f"pass@{k}", [envs[n][f"pass@{k}"] for n in names], (0, 1)),
        ("mean return", [envs[n]["mean_return"] for n in names], None),
        ("format-error rate (turns)", [envs[n]["format_error_rate"] for n in names], (0, 1)),
    ]
    for ax, (title, values, limits) in zip(axes, panels):
        bars = ax.barh(y, values, color="#4C72B0")
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
        ax.set_title(title, fontsize=10)
        if limits:
            ax.set_xlim(*limits)
        ax.axvline(0, color="black", linewidth=0.6)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, names, fontsize=8)
    axes[0].invert_yaxis()
    fig.suptitle(f"{result.model}: {result.config.episodes} seeds x {k} samples per env", fontsize=11)
    fig.tight_layout()
    fig.savefig(summary_path, dpi=100)
    plt.close(fig)

    returns: dict[str, list[float]] = {n: [] for n in names}
    for episode in result.episodes:
        returns[str(episode.env_id)].append(episode.total_reward)
    fig, ax = plt.subplots(figsize=(8, height))
    ax.boxplot([returns[n] for n in names], orientation="horizontal", showmeans=True)
    ax.set_yticks([i + 1 for i in y], names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("episode return")
    ax.set_title(f"{result.model}: returns per episode", fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(returns_path, dpi=100)
    plt.close(fig)

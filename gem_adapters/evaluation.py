"""Evaluation: play fixed-seed episodes of registered envs with an agent, measure them, write a report.

An agent is one of:
  ``random``   each env's ``sample_random_action`` (its generator re-seeded per episode and sample)
  ``solver``   the env's scripted solver (``Env.solve_action``; the games have one)
  a model      ``smollm2`` (the offline SmolLM2-135M-Instruct), ``tiny`` (a random ~1M-parameter
               Llama on SmolLM2's tokenizer, for tests), a local transformers model folder, or an
               ``http(s)://`` URL of an OpenAI-compatible ``/v1/completions`` server (vLLM)

Seeds: episode ``i`` of every env has seed ``seed + i``; for pass@k each seed is played ``k`` times.
Models are sampled with temperature 0 (greedy) when ``k == 1`` and 1.0 otherwise, from a generator
seeded with ``seed``, so a rerun with a local model gives identical numbers.

Metrics per env (and their mean over envs):
  ``success_rate``       share of episodes whose last step reported ``info["success"]``
  ``pass@k`` / ``avg@k`` per seed, the unbiased pass@k estimator (Chen et al., 2021) over its k
                         samples, and the mean success of those samples; averaged over seeds
  ``mean_return``, ``mean_turns``
  ``format_error_rate``  share of turns whose info has ``format_error`` (the action could not be parsed)
  ``prompt_tokens`` / ``completion_tokens``  per episode: the context each turn was generated from,
                         summed over turns (what an API bills), and the generated tokens; None for
                         agents that do not use tokens

Output folder: ``trajectories.jsonl`` (``gem_adapters.trajectory.read_jsonl`` reads it),
``metrics.json`` (numbers only, identical across deterministic reruns), ``report.md`` and the charts
``summary.png`` and ``returns.png``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem_adapters.policies.base import Policy, SamplingParams
from gem_adapters.policies.openai_http import OpenAICompletionsPolicy
from gem_adapters.trajectory import ChatRenderer, Episode, Turn, write_jsonl
from gem_core import Env, Wrapper, make, spec
from gem_core.registry import EnvNotFoundError

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful AI assistant. Think briefly, then give your move or answer in the format the "
    "task asks for, usually inside \\boxed{}.\n"
    "Example:\nUser: Guess a number between 1 and 100.\nAssistant: The middle is 50. \\boxed{50}"
)
TOOL_NAMES = ("python", "search")


class EvalError(Exception):
    """A problem with the user's request (unknown env, unreachable endpoint, model that does not
    load): its message is one line meant for the user, not a traceback."""


@dataclass
class EvalConfig:
    env_ids: list[str]
    episodes: int = 8
    k: int = 1
    seed: int = 0
    tools: tuple[str, ...] = ()
    search_url: str | None = None
    max_turns: int | None = None
    max_new_tokens: int = 256
    max_context_tokens: int | None = 8192
    temperature: float | None = None  # None: 0 (greedy) when k == 1, else 1.0
    top_p: float = 1.0
    concurrency: int = 16
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT

    def __post_init__(self) -> None:
        if self.episodes < 1 or self.k < 1 or self.concurrency < 1:
            raise EvalError("--episodes, --k and --concurrency must be at least 1")
        unknown = [t for t in self.tools if t not in TOOL_NAMES]
        if unknown:
            raise EvalError(f"unknown tool {unknown[0]!r}; choose from {', '.join(TOOL_NAMES)}")

    @property
    def sampling_temperature(self) -> float:
        if self.temperature is not None:
            return self.temperature
        return 0.0 if self.k == 1 else 1.0


@dataclass
class Agent:
    """What plays: ``act(env)`` for text agents, or a token ``policy`` with its ``renderer``."""

    name: str
    act: Callable[[Env], str] | None = None
    start: Callable[[Env, int, int], None] | None = None  # (env, seed, sample) after each reset
    policy: Policy | None = None
    renderer: ChatRenderer | None = None

    @property
    def uses_tokens(self) -> bool:
        return self.policy is not None


@dataclass
class EvalResult:
    model: str
    config: EvalConfig
    episodes: list[Episode]
    metrics: dict[str, Any]
    wall_seconds: float = 0.0
    files: dict[str, Path] = field(default_factory=dict)


# ---- env ids ------------------------------------------------------------------------------------
def resolve_env_ids(names: Sequence[str]) -> list[str]:
    """Registered ids for ``names`` (ids or globs such as ``game:*-easy``), in order, without repeats."""
    from gem_core import list_envs

    ids: list[str] = []
    for name in names:
        name = name.strip()
        if not name:
            continue
        if any(c in name for c in "*?["):
            matched = list_envs(name)
            if not matched:
                raise EvalError(f"no registered env matches {name!r} (see `gem list`)")
        else:
            try:
                matched = [spec(name).id]
            except EnvNotFoundError as exc:
                raise EvalError(str(exc)) from None
        ids.extend(i for i in matched if i not in ids)
    if not ids:
        raise EvalError("no env given")
    return ids


# ---- agents -------------------------------------------------------------------------------------
def innermost_game(env: Env) -> Env:
    """The env that holds the game state: below wrappers, and the game a ``RandomDifficulty`` drew."""
    inner = env.unwrapped
    while isinstance(getattr(inner, "game", None), Env):
        inner = inner.game
    return inner


def random_agent() -> Agent:
    def start(env: Env, seed: int, sample: int) -> None:
        # Sample j of a seed draws its own actions, so pass@k of the random agent means something
        # (``Env.action_rng`` serves this generator).
        innermost_game(env)._action_rng = random.Random(f"random-agent:{seed}:{sample}")

    return Agent("random", act=lambda env: env.sample_random_action(), start=start)


def has_solver(env: Env) -> bool:
    """Whether the game in play (after ``reset``) has a scripted solver: overrides ``Env.solve_action``."""
    return type(innermost_game(env)).solve_action is not Env.solve_action


def scripted_solver(env: Env) -> Callable[[Env], str] | None:
    """The solver of the game in play as a function of that game (``innermost_game(env)``), or None."""
    return type(innermost_game(env)).solve_action if has_solver(env) else None


def solver_agent() -> Agent:
    def act(env: Env) -> str:
        action = env.solve_action()
        if action is None:
            raise EvalError(f"{env.spec.id if env.spec else env} has no scripted solver")
        return action

    return Agent("solver", act=act)


def load_agent(
    model: str,
    config: EvalConfig,
    *,
    tokenizer: str | None = None,
    served_model: str | None = None,
    api_key: str | None = None,
) -> Agent:
    """The agent named by ``model`` (see the module docstring); raises ``EvalError`` with one line."""
    if model == "random":
        return random_agent()
    if model == "solver":
        return solver_agent()
    if model.startswith(("http://", "https://")):
        return _endpoint_agent(model, config, tokenizer, served_model, api_key)
    return _local_agent(model, config, tokenizer)


def _local_agent(model: str, config: EvalConfig, tokenizer_name: str | None) -> Agent:
    from gem_adapters.models import load_model, load_tokenizer, tiny_causal_lm
    from gem_adapters.policies.transformers_policy import TransformersPolicy

    try:
        if model == "tiny":
            tokenizer = load_tokenizer(tokenizer_name or "smollm2")
            lm = tiny_causal_lm(tokenizer, seed=0)
        else:
            tokenizer = load_tokenizer(tokenizer_name or model)
            lm = load_model(model)
    except Exception as exc:  # transformers raises many kinds; the user needs one line
        raise EvalError(f"cannot load model {model!r}: {_one_line(exc)}") from None
    renderer = _renderer(tokenizer, config, model)
    return Agent(model, policy=TransformersPolicy(lm, tokenizer, seed=config.seed), renderer=renderer)


class _Endpoint(OpenAICompletionsPolicy):
    """The HTTP policy, with connection failures turned into one-line ``EvalError``s."""

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return super()._post(body)
        except (urllib.error.URLError, OSError) as exc:
            raise EvalError(f"the endpoint {self.url} did not answer: {_reason(exc)}") from None
        except RuntimeError as exc:
            raise EvalError(_one_line(exc)) from None


def endpoint_base(url: str) -> str:
    """``http://host:port`` or ``.../v1`` -> the ``.../v1`` base URL."""
    base = url.rstrip("/")
    for suffix in ("/completions", "/chat/completions"):
        base = base.removesuffix(suffix)
    return base if base.endswith("/v1") else base + "/v1"


def _endpoint_agent(
    url: str, config: EvalConfig, tokenizer_name: str | None, served_model: str | None, api_key: str | None
) -> Agent:
    from gem_adapters.models import load_tokenizer

    base = endpoint_base(url)
    root = None
    if served_model is None:
        request = urllib.request.Request(base + "/models")
        if api_key:
            request.add_header("Authorization", f"Bearer {api_key}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                served = json.loads(response.read()).get("data") or []
        except urllib.error.HTTPError as exc:
            raise EvalError(
                f"{base}/models answered HTTP {exc.code}; pass --served-model NAME for this server"
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise EvalError(f"cannot reach the endpoint {url}: {_reason(exc)}") from None
        if not served:
            raise EvalError(f"{base}/models lists no model; pass --served-model NAME")
        served_model, root = served[0]["id"], served[0].get("root")
    candidates = [tokenizer_name] if tokenizer_name else [c for c in (root, served_model) if c]
    tokenizer, errors = None, []
    for candidate in candidates:
        try:
            tokenizer = load_tokenizer(candidate)
            break
        except Exception as exc:
            errors.append(f"{candidate}: {_one_line(exc)}")
    if tokenizer is None:
        raise EvalError(
            f"cannot load the tokenizer of the served model ({'; '.join(errors)}); pass --tokenizer PATH"
        )
    policy = _Endpoint(base, served_model, api_key=api_key)
    return Agent(url, policy=policy, renderer=_renderer(tokenizer, config, url))


def _renderer(tokenizer: Any, config: EvalConfig, model: str) -> ChatRenderer:
    try:
        return ChatRenderer(tokenizer, config.system_prompt)
    except Exception as exc:
        raise EvalError(f"the chat template of {model!r} cannot be used: {_one_line(exc)}") from None


# ---- tools --------------------------------------------------------------------------------------
def build_tools(config: EvalConfig) -> list[Any]:
    tools = []
    for name in config.tools:
        try:
            if name == "python":
                from gem_core.tools.python import PythonTool

                tools.append(PythonTool())
            else:
                from gem_core.tools.search import SearchTool

                tools.append(SearchTool(url=config.search_url) if config.search_url else SearchTool())
        except Exception as exc:
            raise EvalError(f"cannot start the {name} tool: {_one_line(exc)}") from None
    return tools


# ---- playing ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    env_id: str
    seed: int
    sample: int


def jobs_for(config: EvalConfig, env_ids: Sequence[str]) -> list[Job]:
    return [
        Job(env_id, config.seed + i, j)
        for env_id in env_ids
        for i in range(config.episodes)
        for j in range(config.k)
    ]


class _ReportEnds(Wrapper):
    """Calls ``on_end()`` when the env ends an episode (drives the progress bar while a batch plays)."""

    def __init__(self, env: Env, on_end: Callable[[], None]):
        super().__init__(env)
        self.on_end = on_end

    def step(self, action: str):
        result = self.env.step(action)
        if result[2] or result[3]:
            self.on_end()
        return result


def run_episodes(
    agent: Agent, config: EvalConfig, env_ids: Sequence[str], *, progress: bool = True
) -> list[Episode]:
    """Every job's episode, in job order (env, then seed, then sample)."""
    from tqdm.auto import tqdm

    jobs = jobs_for(config, env_ids)
    tools = build_tools(config)
    bar = tqdm(total=len(jobs), unit="ep", desc=agent.name, disable=not progress, file=sys.stderr)
    try:
        if agent.uses_tokens:
            return _run_model(agent, config, jobs, tools, bar)
        return [_run_text(agent, config, job, tools, bar) for job in jobs]
    finally:
        bar.close()
        for tool in tools:
            tool.close()


def _wrap(env: Env, tools: list[Any]) -> Env:
    if tools:
        from gem_core.wrappers.tools import ToolEnvWrapper

        env = ToolEnvWrapper(env, tools)
    return env


def _run_text(agent: Agent, config: EvalConfig, job: Job, tools: list[Any], bar: Any) -> Episode:
    env = _wrap(make(job.env_id), tools)
    try:
        obs, _ = env.reset(seed=job.seed)
        if agent.start is not None:
            agent.start(env, job.seed, job.sample)
        episode = Episode(env_id=job.env_id, seed=job.seed, info={"sample": job.sample})
        limit = config.max_turns or 100_000
        while True:
            action = agent.act(env)  # type: ignore[misc]
            next_obs, reward, terminated, truncated, info = env.step(action)
            episode.turns.append(
                Turn(
                    observation=str(obs),
                    action=action,
                    prompt_ids=[],
                    action_ids=[],
                    reward=float(reward),
                    terminated=bool(terminated),
                    truncated=bool(truncated),
                    info=dict(info),
                )
            )
            obs = next_obs
            if terminated or truncated:
                break
            if len(episode.turns) >= limit:
                episode.info["stopped_by"] = "max_turns"
                episode.turns[-1].truncated = True
                break
        episode.final_observation = str(obs)
        return episode
    except NotImplementedError:
        raise EvalError(f"{job.env_id} cannot sample random actions") from None
    finally:
        env.close()
        bar.update(1)


def _run_model(
    agent: Agent, config: EvalConfig, jobs: list[Job], tools: list[Any], bar: Any
) -> list[Episode]:
    from gem_adapters.rollout import rollout
    from gem_core.vector import AsyncVectorEnv, SyncVectorEnv

    params = SamplingParams(
        max_new_tokens=config.max_new_tokens, temperature=config.sampling_temperature, top_p=config.top_p
    )
    episodes: list[Episode] = []
    for start in range(0, len(jobs), config.concurrency):
        chunk = jobs[start : start + config.concurrency]
        ended = [0]

        def on_end(ended: list[int] = ended) -> None:
            ended[0] += 1
            bar.update(1)

        def env_fn(env_id: str) -> Callable[[], Env]:
            return lambda: _ReportEnds(_wrap(make(env_id), tools), on_end)

        vector_cls = AsyncVectorEnv if tools else SyncVectorEnv  # tool calls overlap in threads
        vec = vector_cls([env_fn(job.env_id) for job in chunk], autoreset_mode="disabled")
        try:
            played = rollout(
                vec,
                agent.policy,  # type: ignore[arg-type]
                agent.renderer,  # type: ignore[arg-type]
                seeds=[job.seed for job in chunk],
                max_turns=config.max_turns,
                max_new_tokens=config.max_new_tokens,
                max_context_tokens=config.max_context_tokens,
                sampling=params,
            )
        finally:
            vec.close()
        bar.update(len(chunk) - ended[0])  # episodes the driver stopped (turn or context limits)
        for job, episode in zip(chunk, played):
            episode.env_id, episode.seed = job.env_id, job.seed
            episode.info["sample"] = job.sample
            episodes.append(episode)
    return episodes


# ---- metrics ------------------------------------------------------------------------------------
def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of P(at least one of k samples succeeds) from c successes in n samples."""
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def token_counts(episode: Episode) -> tuple[int, int]:
    """(prompt tokens, completion tokens): each turn's full context, summed over turns; generated ids."""
    sequence = episode.to_sequence(include_closing=False)
    return sum(start for start, _ in sequence.turn_spans), episode.num_generated_tokens


def env_metrics(episodes: Sequence[Episode], k: int, uses_tokens: bool) -> dict[str, Any]:
    """The metrics of one env's episodes (see the module docstring)."""
    by_seed: dict[Any, list[Episode]] = {}
    for episode in episodes:
        by_seed.setdefault(episode.seed, []).append(episode)
    n = len(episodes)
    turns = [t for e in episodes for t in e.turns]
    metrics: dict[str, Any] = {
        "episodes": n,
        "seeds": len(by_seed),
        "success_rate": sum(e.success for e in episodes) / n,
        f"pass@{k}": _mean(pass_at_k(len(g), sum(e.success for e in g), k) for g in by_seed.values()),
        f"avg@{k}": _mean(_mean(float(e.success) for e in g) for g in by_seed.values()),
        "mean_return": _mean(e.total_reward for e in episodes),
        "std_return": _std([e.total_reward for e in episodes]),
        "mean_turns": _mean(e.num_turns for e in episodes),
        "format_error_rate": sum(bool(t.info.get("format_error")) for t in turns) / max(len(turns), 1),
        "stopped_by_limit": sum("stopped_by" in e.info for e in episodes),
        "prompt_tokens": None,
        "completion_tokens": None,
    }
    if uses_tokens:
        counts = [token_counts(e) for e in episodes]
        metrics["prompt_tokens"] = _mean(p for p, _ in counts)
        metrics["completion_tokens"] = _mean(c for _, c in counts)
    return metrics


def compute_metrics(episodes: Sequence[Episode], k: int, uses_tokens: bool) -> dict[str, Any]:
    """``{"envs": {env_id: metrics}, "overall": the unweighted mean of each metric over envs}``."""
    by_env: dict[str, list[Episode]] = {}
    for episode in episodes:
        by_env.setdefault(str(episode.env_id), []).append(episode)
    envs = {env_id: env_metrics(group, k, uses_tokens) for env_id, group in by_env.items()}
    overall: dict[str, Any] = {}
    for key in next(iter(envs.values()), {}):
        values = [m[key] for m in envs.values()]
        if key in ("episodes", "seeds", "stopped_by_limit"):
            overall[key] = sum(values)
        else:
            overall[key] = None if any(v is None for v in values) else _mean(values)
    return {"envs": envs, "overall": overall}


def _mean(values: Any) -> float:
    values = list(values)
    return float(sum(values) / len(values)) if values else 0.0


def _std(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


# ---- the whole evaluation -----------------------------------------------------------------------
def evaluate(
    model: str,
    config: EvalConfig,
    out_dir: str | Path | None = None,
    *,
    progress: bool = True,
    command: str | None = None,
    agent: Agent | None = None,
    **agent_kwargs: Any,
) -> EvalResult:
    """Load the agent, play every job, compute metrics and (with ``out_dir``) write the outputs."""
    env_ids = resolve_env_ids(config.env_ids)  # before loading a model: a typo fails fast
    for env_id in env_ids:
        _check_env_builds(env_id)
    agent = agent or load_agent(model, config, **agent_kwargs)
    if agent.name == "solver":
        for env_id in env_ids:
            env = make(env_id)
            env.reset(seed=config.seed)
            if not has_solver(env):
                raise EvalError(f"{env_id} has no scripted solver (solvers exist for the games)")
    started = time.perf_counter()
    episodes = run_episodes(agent, dataclasses.replace(config, env_ids=env_ids), env_ids, progress=progress)
    metrics = {
        "model": model,
        "config": {**dataclasses.asdict(config), "env_ids": env_ids},
        **compute_metrics(episodes, config.k, agent.uses_tokens),
    }
    result = EvalResult(model, config, episodes, metrics, time.perf_counter() - started)
    if out_dir is not None:
        result.files = write_report(result, Path(out_dir), command=command)
    return result


# ---- report -------------------------------------------------------------------------------------
def table_rows(metrics: dict[str, Any], k: int) -> tuple[list[str], list[list[str]]]:
    """The results table (header, rows): one row per env and a last row with the mean over envs."""
    header = ["env", "episodes", "success", f"pass@{k}", f"avg@{k}", "mean return", "mean turns"]
    header += ["format errors", "prompt tok/ep", "completion tok/ep"]

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
        "parsed; tokens: per episode, each turn's full context (prompt) and the generated tokens.",
        "",
        "![summary](summary.png)",
        "",
        "![returns](returns.png)",
        "",
        "Files: `trajectories.jsonl` (one episode per line; `gem_adapters.trajectory.read_jsonl` reads it), "
        "`metrics.json` (the numbers above).",
        "",
    ]
    files["report"].write_text("\n".join(lines))
    return files


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


def _check_env_builds(env_id: str) -> None:
    try:
        make(env_id).close()
    except Exception as exc:  # e.g. a hub-data env without its optional dependency
        raise EvalError(f"cannot build {env_id}: {_one_line(exc)}") from None


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    if isinstance(reason, BaseException) and getattr(reason, "strerror", None):
        return str(reason.strerror)
    return _one_line(reason)


def _one_line(exc: Any) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first if len(first) <= 300 else first[:297] + "..."

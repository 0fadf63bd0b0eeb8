"""Evaluation: play fixed-seed episodes of registered envs with an agent, measure them, write a report.

An agent is one of:
  ``random``   each env's ``sample_random_action`` (its generator re-seeded per episode and sample)
  ``solver``   the env's scripted solver (``Env.solve_action``; the games and TicTacToe have one)
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
  ``invalid_move_rate``  share of turns whose info has ``invalid_move`` (parsed, but not a legal move)
  ``prompt_tokens`` / ``completion_tokens``  per episode: the context each turn was generated from,
                         summed over turns (what an API bills), and the generated tokens; None for
                         agents that do not use tokens
``success_rate``, ``mean_return``, ``mean_turns``, ``format_error_rate``, ``invalid_move_rate`` and
``completion_tokens`` are ``gem_adapters.episodes.episode_stats``'s ``success_rate``, ``return``, ``turns``,
``format_error_rate``, ``invalid_move_rate`` and ``generated_tokens_per_episode`` of the env's episodes.

An env the agent cannot play (the ``solver`` agent on an env without a scripted solver) is skipped
with a warning and listed, with the reason, under ``skipped`` in ``metrics.json`` and in the report;
the other envs are played. With nothing left to play, the evaluation fails with that list.

Output folder: ``trajectories.jsonl`` (``gem_adapters.episodes.jsonl.read_jsonl`` reads it),
``metrics.json`` (numbers only, identical across deterministic reruns), ``report.md`` and the charts
``summary.png`` and ``returns.png``.

Modules: ``config`` (EvalConfig, EvalResult), ``agents``, ``episodes`` (playing them), ``metrics``,
``report``, ``pipeline`` (``evaluate``: all of it), ``errors`` (EvalError).
"""

from gem_adapters.evaluation.agents import (
    Agent,
    endpoint_base,
    has_solver,
    innermost_game,
    load_agent,
    random_agent,
    solver_agent,
)
from gem_adapters.evaluation.config import DEFAULT_SYSTEM_PROMPT, TOOL_NAMES, EvalConfig, EvalResult
from gem_adapters.evaluation.episodes import Job, build_tools, jobs_for, run_episodes
from gem_adapters.evaluation.errors import EvalError
from gem_adapters.evaluation.metrics import compute_metrics, env_metrics, pass_at_k, token_counts
from gem_adapters.evaluation.pipeline import evaluate, resolve_env_ids
from gem_adapters.evaluation.report import markdown_table, table_rows, text_table, write_report

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "TOOL_NAMES",
    "Agent",
    "EvalConfig",
    "EvalError",
    "EvalResult",
    "Job",
    "build_tools",
    "compute_metrics",
    "endpoint_base",
    "env_metrics",
    "evaluate",
    "has_solver",
    "innermost_game",
    "jobs_for",
    "load_agent",
    "markdown_table",
    "pass_at_k",
    "random_agent",
    "resolve_env_ids",
    "run_episodes",
    "solver_agent",
    "table_rows",
    "text_table",
    "token_counts",
    "write_report",
]

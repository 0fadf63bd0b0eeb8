"""The agents that play: ``random``, ``solver`` (``Env.solve_action``), a local model or an endpoint."""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.evaluation.config import EvalConfig
from gem_adapters.evaluation.errors import EvalError, one_line, reason
from gem_adapters.policies.base import Policy
from gem_adapters.policies.openai_http import OpenAICompletionsPolicy
from gem_core import Env
from gem_core.envs.multiagent import MultiAgentEnv, SingleAgentView


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
    """Whether the game in play (after ``reset``) has a scripted solver: overrides ``Env.solve_action``
    (a multi-agent env seen from one agent: ``MultiAgentEnv.solve_action``)."""
    game = innermost_game(env)
    if isinstance(game, SingleAgentView):
        return type(game.env).solve_action is not MultiAgentEnv.solve_action
    return type(game).solve_action is not Env.solve_action


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
    from gem_adapters.policies.transformers_policy import TransformersPolicy
    from gem_adapters.runtime.models import load_model, load_tokenizer, tiny_causal_lm

    try:
        if model == "tiny":
            tokenizer = load_tokenizer(tokenizer_name or "smollm2")
            lm = tiny_causal_lm(tokenizer, seed=0)
        else:
            tokenizer = load_tokenizer(tokenizer_name or model)
            lm = load_model(model)
    except Exception as exc:  # transformers raises many kinds; the user needs one line
        raise EvalError(f"cannot load model {model!r}: {one_line(exc)}") from None
    renderer = _renderer(tokenizer, config, model)
    return Agent(model, policy=TransformersPolicy(lm, tokenizer, seed=config.seed), renderer=renderer)


class _Endpoint(OpenAICompletionsPolicy):
    """The HTTP policy, with connection failures turned into one-line ``EvalError``s."""

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return super()._post(body)
        except (urllib.error.URLError, OSError) as exc:
            raise EvalError(f"the endpoint {self.url} did not answer: {reason(exc)}") from None
        except RuntimeError as exc:
            raise EvalError(one_line(exc)) from None


def endpoint_base(url: str) -> str:
    """``http://host:port`` or ``.../v1`` -> the ``.../v1`` base URL."""
    base = url.rstrip("/")
    for suffix in ("/completions", "/chat/completions"):
        base = base.removesuffix(suffix)
    return base if base.endswith("/v1") else base + "/v1"


def _endpoint_agent(
    url: str, config: EvalConfig, tokenizer_name: str | None, served_model: str | None, api_key: str | None
) -> Agent:
    from gem_adapters.runtime.models import load_tokenizer

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
            raise EvalError(f"cannot reach the endpoint {url}: {reason(exc)}") from None
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
            errors.append(f"{candidate}: {one_line(exc)}")
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
        raise EvalError(f"the chat template of {model!r} cannot be used: {one_line(exc)}") from None

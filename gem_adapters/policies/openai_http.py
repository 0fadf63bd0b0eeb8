"""OpenAICompletionsPolicy: generation through an OpenAI-compatible ``/v1/completions`` server (vLLM).

Prompts go out as token ids (``"prompt": [[ids], ...]``), and the generated ids come back as ids:
vLLM's ``return_token_ids`` field (``choices[i].token_ids``), or else the logprob tokens rendered as
``"token_id:N"`` (``return_tokens_as_token_ids``). The returned text is never re-tokenised: a
server that sends neither is an error, because re-encoding text can change the tokens.

Logprobs are the server's logprobs of the sampled tokens (vLLM: of the raw model distribution by
default, like ``TransformersPolicy``). The client uses only the standard library; ``agenerate`` runs
requests in threads, so concurrent episodes reach the server concurrently (it batches them).
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from gem_adapters.policies.base import Generation, Policy, SamplingParams


class OpenAICompletionsPolicy(Policy):
    """``base_url`` like ``http://127.0.0.1:8000/v1``; ``model`` the served model's name.

    ``extra_body`` adds fields to every request (e.g. ``{"min_p": 0.05}``);
    ``max_prompts_per_request`` splits big batches into several requests.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 600.0,
        extra_body: dict[str, Any] | None = None,
        max_prompts_per_request: int | None = None,
    ):
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.extra_body = dict(extra_body or {})
        self.max_prompts_per_request = max_prompts_per_request

    def request_body(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": [[int(t) for t in p] for p in prompts],
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "n": 1,
            "logprobs": 1,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        if params.top_k > 0:
            body["top_k"] = params.top_k
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop_token_ids:
            body["stop_token_ids"] = list(params.stop_token_ids)
        body.update(self.extra_body)
        return body

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        size = self.max_prompts_per_request or max(len(prompts), 1)
        out: list[Generation] = []
        for start in range(0, len(prompts), size):
            chunk = prompts[start : start + size]
            out.extend(parse_completions(self._post(self.request_body(chunk, params)), len(chunk)))
        return out

    async def agenerate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        return await asyncio.to_thread(self.generate, prompts, params)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise RuntimeError(f"{self.url} answered HTTP {exc.code}: {detail}") from None


def parse_completions(response: dict[str, Any], num_prompts: int) -> list[Generation]:
    """The generations of a ``/v1/completions`` response, in prompt order."""
    choices = sorted(response.get("choices", []), key=lambda c: c.get("index", 0))
    if len(choices) != num_prompts:
        raise RuntimeError(f"the server returned {len(choices)} choices for {num_prompts} prompts")
    generations = []
    for choice in choices:
        logprobs = choice.get("logprobs") or {}
        ids = choice.get("token_ids")
        if ids is None:
            tokens = logprobs.get("tokens") or []
            if tokens and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
                ids = [int(t.split(":", 1)[1]) for t in tokens]
        if ids is None:
            raise RuntimeError(
                "the server returned no generated token ids (vLLM: return_token_ids or "
                "return_tokens_as_token_ids); text is never re-tokenised"
            )
        values = logprobs.get("token_logprobs")
        if values is not None and len(values) != len(ids):
            raise RuntimeError(f"{len(values)} logprobs for {len(ids)} generated tokens")
        info = {k: choice[k] for k in ("stop_reason",) if choice.get(k) is not None}
        finish = "stop" if choice.get("finish_reason") == "stop" else "length"
        generations.append(
            Generation(
                [int(t) for t in ids], None if values is None else [float(x) for x in values], finish, info
            )
        )
    return generations

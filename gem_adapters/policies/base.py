"""The policy protocol: token-id prompts in, generated token ids (+ their logprobs) out.

A policy never sees text. The rollout driver renders observations into token ids (see
``gem_adapters.episodes.chat_renderer``) and keeps the generated ids exactly as produced, so training uses the
tokens the model actually sampled: text is never re-tokenised.

``Generation.token_ids`` includes the stop token when generation ended on one (``finish_reason ==
"stop"``): the model chose to end its turn, and that choice is trained. ``finish_reason == "length"``
means ``max_new_tokens`` ran out; the chat renderer then closes the turn itself.

Backends: ``TransformersPolicy`` (a local transformers model) and ``OpenAICompletionsPolicy`` (an
OpenAI-compatible ``/v1/completions`` server such as vLLM).

Random streams: a sampling backend that takes per-prompt seeds (``TransformersPolicy``) draws the
``k``-th token of a prompt from ``stream_uniform(seed, k)``, one uniform number per token, so what a
sequence samples depends on its seed and its logits only, never on which other sequences share its
batch. The rollout drivers give every turn the seed ``stream_seed(base, env_index, turn)``.

Weight updates: ``mark_weights_updated(model)`` tells every policy generating from ``model`` that
its weights changed (a backend that keeps key/value caches drops them; see
``TransformersPolicy``).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one turn. ``temperature=0`` is greedy; ``top_k=0`` and ``top_p=1`` switch those filters off.

    ``stop_token_ids``: generation of a sequence ends after any of these (None: the backend's default,
    usually the model's EOS). ``seed`` makes one call reproducible without touching global RNG state.
    """

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop_token_ids: tuple[int, ...] | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.top_k < 0:
            raise ValueError(f"invalid sampling parameters: {self}")
        if self.stop_token_ids is not None:  # a tuple, so params are hashable and batch together
            object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))


@dataclass
class Generation:
    """One sampled continuation: ids exactly as generated, the logprob of each, and why it ended."""

    token_ids: list[int]
    logprobs: list[float] | None
    finish_reason: str  # "stop" (the last id is a stop token) | "length" (max_new_tokens reached)
    info: dict[str, Any] = field(default_factory=dict)


class Policy:
    """Base class of policy backends: implement ``generate``; ``agenerate`` batches concurrent calls."""

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        """One ``Generation`` per prompt, in order."""
        raise NotImplementedError

    def release(self, prompt_ids: Sequence[int]) -> None:
        """The episode that last generated from ``prompt_ids`` has ended: a backend that keeps state per
        sequence (a key/value cache) may drop it. A hint; the default does nothing."""

    async def agenerate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        """``generate`` for asyncio callers. Calls that arrive while the event loop is busy, or while a
        batch is generating, are merged into the next single ``generate`` call (per sampling params)."""
        coalescer = self.__dict__.get("_coalescer")
        if coalescer is None:
            coalescer = self.__dict__["_coalescer"] = Coalescer(lambda key, items: self.generate(items, key))
        return await coalescer.submit(params, list(prompts))


_MASK64 = (1 << 64) - 1


def _mix64(z: int) -> int:
    """splitmix64's finaliser: a bijective scramble of a 64-bit integer."""
    z = (z + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def stream_seed(*keys: int) -> int:
    """A 64-bit seed from a tuple of integers (e.g. ``(base, env_index, turn)``)."""
    z = 0x243F6A8885A308D3
    for key in keys:
        z = _mix64(z ^ (int(key) & _MASK64))
    return z


def stream_uniform(seed: int, step: int) -> float:
    """The ``step``-th number of the random stream ``seed``: uniform in [0, 1), 53 bits."""
    return (_mix64((int(seed) & _MASK64) ^ _mix64(int(step))) >> 11) * 2.0**-53


def mark_weights_updated(model: Any) -> int:
    """Record that ``model``'s weights changed (an optimizer step, a weight load): policies that keep
    key/value caches for ``model`` never reuse the ones computed before. Returns the new version.
    (In-place updates of the parameters are detected without this call; it covers the rest.)"""
    version = int(getattr(model, "_gem_weights_version", 0)) + 1
    model._gem_weights_version = version
    return version


class FunctionPolicy(Policy):
    """A policy from a plain function ``fn(prompts, params)`` returning, per prompt, a ``Generation``,
    a list of ids, or ``(ids, logprobs)``. Without a ``Generation`` the finish reason is inferred:
    "stop" when the last id is one of ``params.stop_token_ids``."""

    def __init__(self, fn: Callable[[list[list[int]], SamplingParams], Sequence[Any]]):
        self.fn = fn

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        outputs = list(self.fn([list(p) for p in prompts], params))
        if len(outputs) != len(prompts):
            raise ValueError(
                f"the policy function returned {len(outputs)} outputs for {len(prompts)} prompts"
            )
        return [_as_generation(out, params) for out in outputs]


def as_policy(policy: Policy | Callable[..., Sequence[Any]]) -> Policy:
    """``policy`` itself if it has ``generate``, else a ``FunctionPolicy`` around the function."""
    if hasattr(policy, "generate"):
        return policy  # type: ignore[return-value]
    if callable(policy):
        return FunctionPolicy(policy)
    raise TypeError(f"a policy has a generate method or is a function, got {type(policy).__name__}")


def _as_generation(out: Any, params: SamplingParams) -> Generation:
    if isinstance(out, Generation):
        return out
    if isinstance(out, tuple) and len(out) == 2:
        ids, logprobs = [int(t) for t in out[0]], [float(x) for x in out[1]]
    else:
        ids, logprobs = [int(t) for t in out], None
    stopped = bool(ids) and ids[-1] in (params.stop_token_ids or ())
    return Generation(ids, logprobs, "stop" if stopped else "length")


class Coalescer:
    """Merges concurrent ``await submit(key, items)`` calls into one ``batch_fn(key, all_items)`` call.

    ``batch_fn`` is synchronous and runs in a worker thread, one batch at a time; requests that
    arrive while it runs wait and form the next batch. Each caller gets the results of its own items.
    """

    def __init__(self, batch_fn: Callable[[Any, list[Any]], Sequence[Any]]):
        self.batch_fn = batch_fn
        self._state: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    async def submit(self, key: Hashable, items: list[Any]) -> list[Any]:
        loop = asyncio.get_running_loop()
        state = self._state.setdefault(loop, _LoopState())
        future: asyncio.Future = loop.create_future()
        queue = state.pending.setdefault(key, [])
        queue.append((items, future))
        if len(queue) == 1:
            task = loop.create_task(self._flush(state, key))
            state.tasks.add(task)  # the loop keeps only weak references to tasks
            task.add_done_callback(state.tasks.discard)
        return await future

    async def _flush(self, state: _LoopState, key: Hashable) -> None:
        await asyncio.sleep(0)  # let every coroutine that is ready add its request first
        async with state.lock:
            waiting = state.pending.pop(key, [])
            if not waiting:
                return
            flat = [item for items, _ in waiting for item in items]
            try:
                results = list(await asyncio.to_thread(self.batch_fn, key, flat))
                if len(results) != len(flat):
                    raise RuntimeError(f"batch_fn returned {len(results)} results for {len(flat)} items")
            except BaseException as exc:
                for _, future in waiting:
                    if not future.done():
                        future.set_exception(exc)
                return
            start = 0
            for items, future in waiting:
                if not future.done():
                    future.set_result(results[start : start + len(items)])
                start += len(items)


class _LoopState:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.pending: dict[Hashable, list[tuple[list[Any], asyncio.Future]]] = {}
        self.tasks: set[asyncio.Task] = set()

"""TransformersPolicy: sampling from a local transformers causal LM, CPU or GPU.

Two generation paths, the same samples:

* ``cache="kv"`` (the default where the model supports it, see ``kv_engine.supports_model``):
  ``KVEngine`` keeps key/value rows between calls, so a multi-turn episode prefills only what was
  appended since its last turn, a batch's shared system prompt and worked game are computed once,
  and sequences join and leave the decoding batch one step at a time (continuous batching). The
  rollout drivers (``gem_adapters.runtime.rollout``) use it directly: an episode's next turn joins as soon as
  its env has answered, and its cache is dropped when the episode ends. ``max_cache_tokens`` bounds
  the KV kept between generations (least recently used rows are evicted, counted in ``stats()``;
  0 keeps none).
* ``cache="none"``: every call left-pads its prompts into one batch and prefills them whole, then
  decodes one token per step for all of them (the reference path, kept for comparison).

Both return exactly what a trainer needs:

* the ids exactly as sampled (never re-tokenised text), the stop token included when one was hit;
* the logprob of each sampled id under the model's raw distribution: ``log_softmax`` of the logits
  at temperature 1, before top-k/top-p filtering. This is what a trainer recomputes from the same
  weights, and what vLLM returns by default (``logprobs_mode="raw_logprobs"``);
* reproducible sampling: prompt ``i`` of a call samples from the random stream
  ``stream_seed(base, i)`` (``base``: ``SamplingParams.seed``, else drawn from the policy's own
  ``torch.Generator``), or from the per-prompt ``seeds`` a rollout driver passes. A sequence's ids
  depend on its stream and its logits only, never on its batch, so both paths sample the same ids
  (logprobs agree to float rounding). The global torch RNG is never touched.

Weight updates: after an optimizer step the cached keys/values are stale. The engine compares a
version before every step: ``policy.weights_updated()`` / ``mark_weights_updated(model)`` bump it,
and in-place changes of the parameters (what optimizers and ``load_state_dict`` do) are detected on
their own; a changed version drops every cache and re-prefills running sequences.

The model is switched to eval mode while generating and restored afterwards.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import secrets
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

from gem_adapters.policies.base import (
    Coalescer,
    Generation,
    Policy,
    SamplingParams,
    stream_seed,
    stream_uniform,
)
from gem_adapters.runtime import precision

CACHE_MODES = ("auto", "kv", "none")


class TransformersPolicy(Policy):
    """``model``: a transformers causal LM; ``tokenizer`` (optional) supplies the pad and EOS ids.

    ``cache``: ``"kv"`` (the engine; an error if the model is not supported), ``"none"`` (re-prefill
    every call) or ``"auto"`` (``"kv"`` when supported). ``max_batch_size``: sequences generated
    together (None: all). ``max_cache_tokens``: KV positions kept between generations (None: 2 GiB
    worth). ``max_step_tokens``: prompt ids prefilled per engine step (longer prompts are chunked).
    ``max_context_tokens``: the model's context (None: ``max_position_embeddings``); a longer prompt
    is a ``ValueError`` before anything runs, and generation stops at the context's end.
    ``bf16``: generate under bf16 autocast, the learner's numerics when it trains in bf16
    (``gem_adapters.runtime.precision``); False: the model's own dtype.
    """

    accepts_seeds = True  # generate/agenerate take per-prompt ``seeds`` (rollout drivers pass them)

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        max_batch_size: int | None = None,
        seed: int | None = None,
        cache: str = "auto",
        max_cache_tokens: int | None = None,
        max_step_tokens: int = 4096,
        max_context_tokens: int | None = None,
        bf16: bool = False,
    ):
        import torch

        if cache not in CACHE_MODES:
            raise ValueError(f"cache must be one of {CACHE_MODES}, got {cache!r}")
        if max_cache_tokens is not None and max_cache_tokens < 0:
            raise ValueError("max_cache_tokens must be >= 0 (0 keeps no cache between generations)")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.bf16 = bf16
        self.device = next(model.parameters()).device
        self.generator = torch.Generator().manual_seed(secrets.randbits(63) if seed is None else seed)
        self.pad_token_id = _first_id(
            getattr(tokenizer, "pad_token_id", None),
            model.generation_config.pad_token_id if model.generation_config else None,
            getattr(tokenizer, "eos_token_id", None),
            0,
        )
        self.default_stop_ids = _as_tuple(
            getattr(tokenizer, "eos_token_id", None)
            if tokenizer is not None
            else (model.generation_config.eos_token_id if model.generation_config else None)
        )
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.max_context_tokens = max_context_tokens or getattr(config, "max_position_embeddings", None)
        self._version = 0
        self._legacy_stats: collections.Counter = collections.Counter(
            {"forward_calls": 0, "tokens_processed": 0, "generated_tokens": 0}
        )
        self._engine = None
        if cache != "none":
            reason = engine_unsupported(model)
            if reason is not None and cache == "kv":
                raise ValueError(f"cache='kv' cannot run this model: {reason}")
            if reason is not None:
                warnings.warn(f"TransformersPolicy falls back to cache='none': {reason}", stacklevel=2)
            else:
                from gem_adapters.policies.kv_engine import KVEngine

                self._engine = KVEngine(
                    model,
                    default_stop_ids=self.default_stop_ids,
                    max_batch_size=max_batch_size,
                    max_cache_tokens=max_cache_tokens,
                    max_step_tokens=max_step_tokens,
                    max_context_tokens=self.max_context_tokens,
                    bf16=bf16,
                    # Through a weak reference: a bound method would make policy and engine a cycle,
                    # whose key/value memory only the cyclic GC frees (a new policy per rollout piled
                    # up ~180 MB per step in a TRL run).
                    weights_version=functools.partial(_weights_version_of, weakref.ref(self)),
                )
        self.cache = "kv" if self._engine is not None else "none"

    # ---- versions and caches ----------------------------------------------------------------------
    @property
    def version(self) -> tuple[int, int]:
        """(this policy's counter, the model's ``mark_weights_updated`` counter)."""
        return self._version, int(getattr(self.model, "_gem_weights_version", 0))

    def weights_updated(self) -> None:
        """The model's weights changed: never reuse a key/value cache computed before."""
        self._version += 1

    def _weights_version(self) -> tuple:
        params = list(self.model.parameters())
        return (*self.version, sum(p._version for p in params), sum(p.data_ptr() for p in params))

    def rollout_engine(self) -> Any:
        """The ``KVEngine`` the rollout drivers play through (None with ``cache="none"``)."""
        return self._engine

    def release(self, prompt_ids: Sequence[int]) -> None:
        if self._engine is not None:
            self._engine.release_prompt(prompt_ids)

    def clear_cache(self) -> None:
        """Drop every cached key/value row (and the engine's memory when it is idle)."""
        if self._engine is not None:
            self._engine.clear()

    def stats(self) -> dict[str, float]:
        """Counters: ``tokens_processed`` (ids through the model), ``generated_tokens``, and for the
        engine ``reused_tokens`` (prompt ids served from a cached row), ``shared_prefix_tokens``
        (prompt ids served by a batch's shared prefix), ``evictions``/``evicted_tokens``,
        ``invalidations``, ``cached_tokens`` (held now), ``memory_bytes``/``peak_memory_bytes``."""
        if self._engine is None:
            return dict(self._legacy_stats)
        out = dict(self._engine.stats)
        out["cached_tokens"] = self._engine.cached_tokens
        out["memory_bytes"] = self._engine.memory_bytes()
        return out

    def draw_seed(self) -> int:
        """A base seed from the policy's generator (one per call or rollout)."""
        import torch

        return int(torch.randint(0, 2**62, (1,), generator=self.generator))

    def _seeds(self, n: int, params: SamplingParams, seeds: Sequence[int] | None) -> list[int]:
        if seeds is not None:
            if len(seeds) != n:
                raise ValueError(f"{len(seeds)} seeds for {n} prompts")
            return [int(s) for s in seeds]
        base = params.seed if params.seed is not None else self.draw_seed()
        return [stream_seed(base, i) for i in range(n)]

    # ---- generation -------------------------------------------------------------------------------
    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, *, seeds: Sequence[int] | None = None
    ) -> list[Generation]:
        """One ``Generation`` per prompt; ``seeds``: one random stream per prompt (see the module
        docstring). Bad prompts (empty, too long, ids outside the vocabulary) raise ``ValueError``
        before anything is generated."""
        if not prompts:
            return []
        seeds = self._seeds(len(prompts), params, seeds)
        if self._engine is not None:
            return [r.generation for r in self._engine.generate(prompts, params, seeds)]  # type: ignore[misc]
        self._check_prompts(prompts)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        size = self.max_batch_size or len(prompts)
        results: list[Generation | None] = [None] * len(prompts)
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(order), size):
                chunk = order[start : start + size]
                generations = self._generate_batch(
                    [prompts[i] for i in chunk], params, [seeds[i] for i in chunk]
                )
                for i, generation in zip(chunk, generations):
                    results[i] = generation
        finally:
            self.model.train(was_training)
        return results  # type: ignore[return-value]

    async def agenerate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, *, seeds: Sequence[int] | None = None
    ) -> list[Generation]:
        """``generate`` for asyncio callers. With the engine, every call's sequences join the
        decoding batch in flight (continuous batching); with ``cache="none"``, calls that arrive
        together are merged into one ``generate``."""
        seeds = self._seeds(len(prompts), params, seeds)
        if self._engine is not None:
            requests = await self._engine.agenerate(prompts, params, seeds)
            return [r.generation for r in requests]  # type: ignore[misc]
        coalescer = self.__dict__.get("_seeded_coalescer")
        if coalescer is None:
            coalescer = self.__dict__["_seeded_coalescer"] = Coalescer(
                lambda key, items: self.generate([p for p, _ in items], key, seeds=[s for _, s in items])
            )
        return await coalescer.submit(params, list(zip(prompts, seeds)))

    def _check_prompts(self, prompts: Sequence[Sequence[int]]) -> None:
        vocab = self.model.get_input_embeddings().num_embeddings
        for prompt in prompts:
            if len(prompt) == 0:
                raise ValueError("every prompt needs at least one token")
            if min(prompt) < 0 or max(prompt) >= vocab:
                raise ValueError(f"prompt ids must lie in [0, {vocab}) (the model's vocabulary)")
            if self.max_context_tokens is not None and len(prompt) >= self.max_context_tokens:
                raise ValueError(
                    f"a prompt of {len(prompt)} ids leaves no room to generate within the model's context of "
                    f"{self.max_context_tokens} positions"
                )

    def _generate_batch(
        self, prompts: list[Sequence[int]], params: SamplingParams, seeds: list[int]
    ) -> list[Generation]:
        """The re-prefill path: left-padded prompts, one decoding step for all rows until all stop."""
        import torch

        from gem_adapters.policies.sampling import choose_tokens

        stop_ids = params.stop_token_ids if params.stop_token_ids is not None else self.default_stop_ids
        batch, width = len(prompts), max(len(p) for p in prompts)
        input_ids = torch.full((batch, width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((batch, width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
            attention_mask[row, width - len(prompt) :] = 1
        input_ids, attention_mask = input_ids.to(self.device), attention_mask.to(self.device)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        stop = torch.tensor(stop_ids or (), dtype=torch.long, device=self.device)

        tokens, logprobs = [], []
        work = None  # the sampler's buffer, reused every step
        finished = torch.zeros(batch, dtype=torch.bool, device=self.device)
        past = None
        step_ids = input_ids
        with torch.no_grad(), precision.autocast(self.bf16, self.device):
            for step in range(params.max_new_tokens):
                out = self.model(
                    input_ids=step_ids,
                    attention_mask=attention_mask,
                    position_ids=position_ids,
                    past_key_values=past,
                    use_cache=True,
                    logits_to_keep=1,  # only the last position is sampled: prefill skips a (B, T, vocab) matmul
                )
                self._legacy_stats["forward_calls"] += 1
                self._legacy_stats["tokens_processed"] += step_ids.numel()
                past = out.past_key_values
                logits = out.logits[:, -1, :].float()
                uniforms = None
                if params.temperature != 0:
                    uniforms = torch.tensor([stream_uniform(s, step) for s in seeds], dtype=torch.float64)
                if work is None:
                    work = torch.empty_like(logits)
                next_ids, logprob = choose_tokens(logits, params, uniforms, work)
                next_ids = torch.where(finished, torch.full_like(next_ids, self.pad_token_id), next_ids)
                tokens.append(next_ids)
                logprobs.append(logprob)
                finished = finished | torch.isin(next_ids, stop)
                if bool(finished.all()):
                    break
                step_ids = next_ids[:, None]
                attention_mask = torch.cat([attention_mask, attention_mask.new_ones((batch, 1))], dim=1)
                position_ids = position_ids[:, -1:] + 1

        token_rows = torch.stack(tokens, dim=1).tolist()
        logprob_rows = torch.stack(logprobs, dim=1).tolist()
        stop_set = set(stop_ids or ())
        generations = []
        for ids, lps in zip(token_rows, logprob_rows):
            end = next((k + 1 for k, t in enumerate(ids) if t in stop_set), None)
            if end is None:
                generations.append(Generation(ids, lps, "length"))
            else:
                generations.append(Generation(ids[:end], lps[:end], "stop"))
        self._legacy_stats["generated_tokens"] += sum(len(g.token_ids) for g in generations)
        return generations


def _weights_version_of(policy: weakref.ref) -> tuple | None:
    alive = policy()
    return None if alive is None else alive._weights_version()


def engine_unsupported(model: Any) -> str | None:
    """None if ``KVEngine`` runs ``model`` exactly, else why not: the config is checked, then (once
    per model) a short greedy generation through the engine is compared with a plain forward pass."""
    cached = getattr(model, "_gem_kv_engine_check", None)
    if cached is not None:
        return cached or None
    from gem_adapters.policies.kv_engine import supports_model

    reason = supports_model(model)
    if reason is None:
        try:
            reason = _probe_engine(model)
        except Exception as exc:
            reason = f"the engine failed on this model ({type(exc).__name__}: {exc})"
    with contextlib.suppress(AttributeError):  # a model that takes no attributes is probed every time
        model._gem_kv_engine_check = reason or ""
    return reason


def _probe_engine(model: Any) -> str | None:
    """Generate greedily through a throwaway engine (a shared prefix, a taken-over row, a decoding
    run) and compare the logprobs with one plain forward pass per sequence. Both run in the model's own
    dtype whatever autocast the caller holds (a trainer's rollout under bf16 autocast builds its policy
    there); where the forward itself computes in 16 bits (its weights, or a forward wrapped in autocast
    as accelerate's mixed precision does), the tolerance is bf16's, since its rounding alone sets two
    correct paths apart by more than fp32's: SmolLM2's gap was under 0.1 nats on a CPU with bf16 units and
    0.11 on one that emulates bf16 (AVX2 only), where a wrong cache row or position costs nats."""
    import torch

    from gem_adapters.policies.kv_engine import KVEngine

    with torch.autocast(next(model.parameters()).device.type, enabled=False):
        engine = KVEngine(model, max_cache_tokens=1 << 20)
        vocab = engine.vocab_size
        rng = torch.Generator().manual_seed(0)
        a = torch.randint(0, vocab, (6,), generator=rng).tolist()
        b = a[:4] + torch.randint(0, vocab, (3,), generator=rng).tolist()
        params = SamplingParams(max_new_tokens=3, temperature=0, stop_token_ids=())
        first = engine.generate([a, b, a], params, [0, 1, 2])
        a2 = a + first[0].generation.token_ids + b[-2:]
        second = engine.generate([a2], params, [3])
        head_dtypes: list[torch.dtype] = []  # what the forward computes the logits in

        def record(_module: Any, _inputs: Any, out: Any) -> None:
            head_dtypes.append(out.dtype)

        head = model.get_output_embeddings()
        hook = head.register_forward_hook(record) if head is not None else None
        was_training = model.training
        model.eval()
        gap = 0.0
        try:
            for prompt, request in [(a, first[0]), (b, first[1]), (a, first[2]), (a2, second[0])]:
                ids = list(prompt) + request.generation.token_ids
                with torch.no_grad():
                    logits = model(input_ids=torch.tensor([ids], device=model.device)).logits[0].float()
                logp = torch.log_softmax(logits, dim=-1)
                expected = [
                    logp[len(prompt) - 1 + k, t].item() for k, t in enumerate(request.generation.token_ids)
                ]
                gap = max(gap, *(abs(x - y) for x, y in zip(expected, request.generation.logprobs)))
        finally:
            if hook is not None:
                hook.remove()
            model.train(was_training)
        tolerance = 1e-3 if set(head_dtypes or [next(model.parameters()).dtype]) == {torch.float32} else 0.25
        return "its logprobs through the engine differ from a plain forward pass" if gap > tolerance else None


def sample(logits: Any, params: SamplingParams, generator: Any) -> Any:
    """Token ids drawn from ``logits`` (batch, vocab) with temperature, top-k and top-p (nucleus),
    from ``generator`` (used by ``multimodal.VisionLanguagePolicy``)."""
    import torch

    from gem_adapters.policies.sampling import filter_scores

    if params.temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(filter_scores(logits / params.temperature, params), dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def _first_id(*candidates: Any) -> int:
    for c in candidates:
        if isinstance(c, (list, tuple)):
            c = c[0] if c else None
        if c is not None:
            return int(c)
    return 0


def _as_tuple(ids: Any) -> tuple[int, ...]:
    if ids is None:
        return ()
    if isinstance(ids, (list, tuple)):
        return tuple(int(i) for i in ids)
    return (int(ids),)

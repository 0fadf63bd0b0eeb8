"""KVEngine: the generation engine behind ``TransformersPolicy(cache="kv")``.

Goal: every token enters the model once. A multi-turn rollout asks for turn ``k + 1`` with a prompt
that extends turn ``k``'s whole sequence (prompt + generated ids; ``ChatRenderer`` renders
incrementally and keeps the generated ids as sampled), and every episode of a batch starts with the
same system prompt and worked game. The engine therefore keeps key/value rows between requests and
computes only what no row holds yet.

**Rows.** The KV cache is a pool: per layer two tensors ``(slots, kv_heads, length, head_dim)``;
one slot holds one sequence, column ``c`` its position ``c``. A finished generation leaves its slot
as an idle *entry* (its token ids and how many of them have KV: all but the last sampled id). A new
request looks for the idle entry sharing the longest prefix with its prompt (token by token, so a
template that rewrites history simply matches less): an entry that is entirely a prefix of the
prompt is taken over (no copy), otherwise the shared columns are copied into a fresh slot. At least
the prompt's last id is always computed (its logits are needed).

**Shared prefixes.** Requests admitted together that share a prefix no entry holds (the system
prompt and worked game of a batch of first turns, the identical first prompts of a GRPO group) get
it computed once: a *prefix node* is prefilled into its own slot, then copied into each dependent's
slot (copy-on-extend). Nodes nest (a whole batch's prefix, then a group's). The outermost node
stays as an idle entry, so the next batch of the same weights reuses it.

**Continuous batching.** Each step is one forward over a *packed* row: the one new id of every
decoding sequence and the prompt ids (in chunks of at most ``max_step_tokens``) of sequences that
joined, concatenated, each with its own position id; the linear layers see no padding at all. A
sequence that stops leaves at once (its slot becomes an entry); queued requests join at the next
step, whatever the length of their history. Logits are computed only at each sequence's last id.

**Attention** is this module's own attention function (registered with transformers'
``AttentionInterface`` and switched on only for the engine's forwards): keys and values are written
into the pool at ``(slot, position)``; decoding sequences in consecutive slots attend in one
``scaled_dot_product_attention`` call over a view of the pool (no copy; one query a sequence with the
kernel's grouped-query heads, so no ``repeat_kv``), each prefilling sequence in its own call with its
causal mask (its grouped-query heads folded into the query axis). No mask is concatenated and no cache
tensor is reallocated per step.

**Forward.** Where the engine computes in bf16, Llama-style models run its own fused forward
(``policies.decoder_forward``: fused projections, weights cast once per weights version); every other
model, and fp32, runs the model's forward with the attention function above. Both write and attend
through the same pool and plan.

**Memory.** ``max_cache_tokens`` bounds the KV kept *between* generations (idle entries and prefix
nodes, each costing one slot of ``length`` positions): beyond it, the least recently used entries
are evicted (counted in ``stats``), and a request that finds no entry simply prefills. The running
sequences always get their slots (bounded by ``max_batch_size``). ``max_cache_tokens=0`` keeps
nothing between generations.

**Invalidation.** ``weights_version()`` (supplied by the policy: an explicit counter plus the
parameters' in-place version counters) is checked before every step; when it changes, every entry
is dropped and the running sequences recompute their KV from their token ids.

**Sampling** is per sequence: the ``k``-th id of a request is chosen with ``stream_uniform(seed, k)``
(see ``policies.sampling``), so which sequences share a step never changes what is sampled.

Supported models: decoder-only transformers models whose attention layers call
``past_key_values.update`` and the configured attention function (Llama, Qwen2/3, Mistral without
sliding window, SmolLM, ...); no sliding-window or soft-capped attention (``supports_model``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import itertools
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AttentionInterface

from gem_adapters.policies import decoder_forward
from gem_adapters.policies.base import Generation, SamplingParams, stream_uniform
from gem_adapters.policies.sampling import choose_tokens
from gem_adapters.runtime import precision

ATTENTION = "gem_kv_engine"
REQUEST, PREFIX = "request", "prefix"
STATS = (
    "forward_calls", "tokens_processed", "prefill_tokens", "decode_tokens", "generated_tokens",
    "reused_tokens", "shared_prefix_tokens", "evictions", "evicted_tokens", "released", "invalidations",
    "peak_slots", "peak_memory_bytes", "prefill_seconds", "decode_seconds", "decode_steps", "decode_step_rows",
)  # fmt: skip


def _engine_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    plan = kwargs.get("gem_plan")
    if plan is None:
        raise RuntimeError(f"the {ATTENTION!r} attention only runs inside KVEngine's forward passes")
    for name in ("sliding_window", "softcap", "s_aux", "sinks"):
        if kwargs.get(name) is not None:
            raise NotImplementedError(f"KVEngine does not support attention with {name}")
    return plan.attend(query[0].transpose(0, 1), key, value, scaling)[None], None


AttentionInterface.register(ATTENTION, _engine_attention)


def supports_model(model: Any) -> str | None:
    """None if ``KVEngine`` can run ``model``, else why not."""
    config = getattr(model, "config", None)
    if config is None:
        return "the model has no config"
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder models are not supported"
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if any(t != "full_attention" for t in getattr(text, "layer_types", None) or ()):
        return "models with sliding-window or linear-attention layers are not supported"
    if getattr(text, "sliding_window", None) is not None and getattr(text, "use_sliding_window", True):
        return "sliding-window attention is not supported"
    for name in ("attn_logit_softcapping", "final_logit_softcapping"):
        if getattr(text, name, None):
            return f"{name} is not supported"
    return None


class Request:
    """One generation (or, with ``kind == PREFIX``, a shared prefix being prefilled). The caller reads
    ``done``, ``generation`` (a ``Generation``) and ``error``."""

    def __init__(
        self,
        tokens: list[int],
        kind: str = REQUEST,
        params: SamplingParams | None = None,
        seed: int = 0,
        max_new: int = 0,
        stop: frozenset[int] = frozenset(),
    ):
        self.tokens = tokens  # prompt + generated so far (for a prefix node: the prefix)
        self.kind, self.params, self.seed, self.max_new, self.stop = kind, params, seed, max_new, stop
        self.prompt_len = len(tokens)
        self.generated: list[int] = []
        self.logprobs: list[float] = []
        self.slot: int | None = None
        self.n_kv = 0  # tokens[:n_kv] have their keys/values in the slot
        self.cached = 0  # prompt ids whose KV came from the cache
        self.src: _Entry | None = None  # admission: the entry to copy from, and how many columns
        self.src_len = 0
        self.node: Request | None = None  # admission: the prefix node above this request
        self.parent: Request | None = None  # prefix nodes: the node above
        self.wait: Request | None = None  # waiting for this prefix node to finish
        self.dependents: list[Request] = []
        self.done = False
        self.generation: Generation | None = None
        self.error: BaseException | None = None
        self.callbacks: list[Callable[[Request], Any]] = []
        self.order = 0

    @property
    def depth(self) -> int:
        return len(self.tokens)


class _Entry:
    """An idle slot: ``tokens[:n_kv]`` have their KV in it."""

    __slots__ = ("kind", "n_kv", "owner", "slot", "tick", "tokens")

    def __init__(self, slot: int, tokens: list[int], n_kv: int, kind: str, tick: int, owner: Request | None):
        self.slot, self.tokens, self.n_kv, self.kind, self.tick, self.owner = (
            slot,
            tokens,
            n_kv,
            kind,
            tick,
            owner,
        )


class _Pool:
    """Per layer, keys and values ``(slots, kv_heads, length, head_dim)``; allocated at the first
    forward (shapes and dtype from the layer's keys), grown by reallocation."""

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.slots = 0
        self.length = 0
        self._free: list[int] = []  # a heap: the lowest free slot first keeps running slots together

    def layer(self, index: int, keys: Any, values: Any) -> tuple[Any, Any]:
        """The pool's tensors of layer ``index``, allocated like that layer's new ``keys`` and ``values``
        (T, kv_heads, dim) (under autocast both in its dtype: ``_PoolCache.update``)."""
        while len(self.keys) <= index:
            self.keys.append(None)
            self.values.append(None)
        if self.keys[index] is None:
            shape = (self.slots, keys.shape[1], self.length, keys.shape[2])
            # zeros, not empty: masked-out columns must hold finite numbers (0 * NaN is NaN)
            self.keys[index], self.values[index] = keys.new_zeros(shape), values.new_zeros(shape)
        return self.keys[index], self.values[index]

    def resize(self, slots: int, length: int) -> None:
        slots, length = max(slots, self.slots), max(length, self.length)
        if (slots, length) == (self.slots, self.length):
            return
        keep_s, keep_l = self.slots, self.length
        for store in (self.keys, self.values):
            for i, old in enumerate(store):
                if old is not None:
                    new = old.new_zeros((slots, old.shape[1], length, old.shape[3]))
                    new[:keep_s, :, :keep_l] = old
                    store[i] = new
        for slot in range(self.slots, slots):
            heapq.heappush(self._free, slot)
        self.slots, self.length = slots, length

    def reserve(self, count: int) -> None:
        """At least ``count`` free slots, growing the pool at most once (by doubling or to what is needed)."""
        if len(self._free) < count:
            self.resize(max(8, 2 * self.slots, self.slots + count - len(self._free)), self.length)

    def alloc(self) -> int:
        self.reserve(1)
        return heapq.heappop(self._free)

    def release(self, slot: int) -> None:
        heapq.heappush(self._free, slot)

    def copy(self, src: int, dst: int, n: int) -> None:
        if n <= 0 or src == dst:
            return
        for store in (self.keys, self.values):
            for t in store:
                if t is not None:
                    t[dst, :, :n] = t[src, :, :n]

    @property
    def in_use(self) -> int:
        return self.slots - len(self._free)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values) if t is not None)

    def clear(self) -> None:
        self.keys, self.values, self._free = [], [], []
        self.slots = self.length = 0


class _Plan:
    """Where one packed forward's ids go and what each attends to (shared by all layers)."""

    def __init__(self, pool: _Pool, slots: Any, positions: Any, runs: list, prefills: list):
        self.pool = pool
        self.slots, self.positions = slots, positions  # (T,) write coordinates of each packed id
        self.runs = (
            runs  # decoding rows in consecutive slots: (first slot, end slot, packed start, length, mask)
        )
        self.prefills = prefills  # (slot, packed start, count, first position)
        # the masks as the kernel takes them, additive (0 or -inf) in the keys' dtype: made once a step, not
        # converted from booleans in every layer's call
        self._masks: dict[tuple, list[Any]] = {}

    def run_masks(self, dtype: torch.dtype) -> list[Any]:
        """Per decoding run, its key mask (n, 1, 1, length), None where every row has the same length."""
        masks = self._masks.get(("runs", dtype))
        if masks is None:
            masks = self._masks["runs", dtype] = [_additive(run[4], dtype) for run in self.runs]
        return masks

    def prefill_masks(self, groups: int, dtype: torch.dtype) -> list[Any]:
        """Per prefilling row, its causal mask with the query axis repeated ``groups`` times (the
        grouped-query heads are folded into the query axis), shape (1, 1, groups * count, length)."""
        masks = self._masks.get((groups, dtype))
        if masks is None:
            masks = []
            for _, _, count, start in self.prefills:
                length = start + count
                keys = torch.arange(length, device=self.slots.device)
                queries = torch.arange(start, length, device=self.slots.device)
                mask = keys[None, :] <= queries[:, None]
                masks.append(_additive(mask.repeat(groups, 1)[None, None], dtype))
            self._masks[groups, dtype] = masks
        return masks

    def store(self, index: int, keys: Any, values: Any) -> tuple[Any, Any]:
        """Write the packed ids' ``keys``/``values`` (T, kv_heads, dim) of layer ``index`` into the pool;
        returns the pool's tensors of that layer."""
        pool_keys, pool_values = self.pool.layer(index, keys, values)
        pool_keys[self.slots, :, self.positions] = keys
        pool_values[self.slots, :, self.positions] = values
        return pool_keys, pool_values

    def attend(self, query: Any, keys: Any, values: Any, scaling: float | None) -> Any:
        """``query`` (T, heads, dim) of the packed ids against the pool's ``keys``/``values`` of this
        layer; returns (T, heads, dim) in the keys' dtype.

        A decoding row is one query against its slot's keys, the grouped-query heads left to the kernel
        (``enable_gqa``); a prefilling row folds them into its query axis instead (one causal mask for
        its kv heads)."""
        total, heads, dim = query.shape
        query = query.to(keys.dtype)  # under autocast, rotary embeddings leave queries in fp32
        kv_heads = keys.shape[1]
        groups = heads // kv_heads
        out = query.new_empty((total, heads, dim))
        for (first, end, at, length, _), mask in zip(self.runs, self.run_masks(keys.dtype)):
            n = end - first
            out[at : at + n] = F.scaled_dot_product_attention(
                query[at : at + n, :, None], keys[first:end, :, :length], values[first:end, :, :length],
                attn_mask=mask, scale=scaling, enable_gqa=groups > 1,
            ).reshape(n, heads, dim)  # fmt: skip
        if self.prefills:
            for (slot, at, count, start), mask in zip(self.prefills, self.prefill_masks(groups, keys.dtype)):
                length = start + count
                qq = query[at : at + count].reshape(count, kv_heads, groups, dim).permute(1, 2, 0, 3)
                o = F.scaled_dot_product_attention(
                    qq.reshape(1, kv_heads, groups * count, dim),
                    keys[slot : slot + 1, :, :length], values[slot : slot + 1, :, :length],
                    attn_mask=mask, scale=scaling,
                )  # fmt: skip
                out[at : at + count] = (
                    o[0].reshape(kv_heads, groups, count, dim).permute(2, 0, 1, 3).reshape(count, heads, dim)
                )
        return out


class _PoolCache:
    """What the model sees as ``past_key_values``: ``update`` writes the new keys/values into the pool
    and hands the attention function the pool's whole tensors for this layer."""

    is_compileable = False

    def __init__(self, plan: _Plan):
        self.plan = plan

    def update(self, key_states: Any, value_states: Any, layer_idx: int, cache_kwargs: Any = None) -> tuple:
        plan = self.plan
        device = key_states.device.type
        if torch.is_autocast_enabled(device):  # stored as attention reads them (it casts to this dtype)
            dtype = torch.get_autocast_dtype(device)
            key_states, value_states = key_states.to(dtype), value_states.to(dtype)
        return plan.store(layer_idx, key_states[0].transpose(0, 1), value_states[0].transpose(0, 1))

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return 0


class KVEngine:
    """See the module docstring. Thread-safe: requests may be submitted from any thread; one thread at
    a time steps (a caller of ``wait``, or the background runner that ``asubmit`` starts)."""

    def __init__(
        self,
        model: Any,
        *,
        default_stop_ids: Sequence[int] = (),
        max_batch_size: int | None = None,
        max_cache_tokens: int | None = None,
        max_step_tokens: int = 4096,
        max_context_tokens: int | None = None,
        share_prefixes: bool = True,
        bf16: bool = False,
        weights_version: Callable[[], Any] = lambda: 0,
        fused_forward: bool | None = None,
    ):
        if max_cache_tokens is not None and max_cache_tokens < 0:
            raise ValueError("max_cache_tokens must be >= 0")
        if max_step_tokens < 1:
            raise ValueError("max_step_tokens must be at least 1")
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError("max_batch_size must be at least 1")
        self.model = model
        self.default_stop_ids = frozenset(int(t) for t in default_stop_ids)
        self.max_batch_size = max_batch_size
        self.max_cache_tokens = default_cache_tokens(model) if max_cache_tokens is None else max_cache_tokens
        self.max_step_tokens = max_step_tokens
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.max_context_tokens = max_context_tokens or getattr(config, "max_position_embeddings", None)
        self.vocab_size = model.get_input_embeddings().num_embeddings
        self.share_prefixes = share_prefixes
        self.bf16 = bf16
        self.weights_version = weights_version
        # None: where it pays, in bf16 (fp32 takes the same time through the model's modules)
        wanted = bf16 if fused_forward is None else fused_forward
        self.fused_forward = wanted and decoder_forward.supports(model) is None
        self._fused: decoder_forward.DecoderForward | None = None
        self.stats: collections.Counter = collections.Counter({key: 0 for key in STATS})
        self._pool = _Pool()
        self._entries: dict[int, _Entry] = {}
        self._running: list[Request] = []
        self._queue: collections.deque[Request] = collections.deque()
        self._state = threading.RLock()  # the engine's state; held while stepping
        self._inbox_lock = threading.Lock()  # new requests and deferred operations; never held long
        self._inbox: list[Request] = []
        self._ops: list[tuple[str, Any]] = []
        self._runner: threading.Thread | None = None
        self._tick = itertools.count()
        self._order = itertools.count()
        self._version = weights_version()
        self._work: Any = None  # the sampler's (batch, vocab) buffer, reused every step
        self._peak_positions = 0

    # ---- requests -------------------------------------------------------------------------------
    def request(self, prompt: Sequence[int], params: SamplingParams, seed: int) -> Request:
        """A checked request (not yet submitted). ``ValueError`` for an empty prompt, an id outside the
        vocabulary or a prompt that leaves no room under ``max_context_tokens``; ``max_new_tokens``
        is cut to what fits the context."""
        tokens = [int(t) for t in prompt]
        if not tokens:
            raise ValueError("every prompt needs at least one token")
        if min(tokens) < 0 or max(tokens) >= self.vocab_size:
            raise ValueError(f"prompt ids must lie in [0, {self.vocab_size}) (the model's vocabulary)")
        max_new = params.max_new_tokens
        if self.max_context_tokens is not None:
            room = self.max_context_tokens - len(tokens)
            if room < 1:
                raise ValueError(
                    f"a prompt of {len(tokens)} ids leaves no room to generate within the model's context of "
                    f"{self.max_context_tokens} positions"
                )
            max_new = min(max_new, room)
        stop = self.default_stop_ids if params.stop_token_ids is None else frozenset(params.stop_token_ids)
        return Request(tokens, REQUEST, params, int(seed), max_new, stop)

    def submit(self, requests: Sequence[Request], callback: Callable[[Request], Any] | None = None) -> None:
        """Queue ``requests`` (all or none; see ``request``); ``callback(request)`` runs when each is done
        (in the stepping thread)."""
        for r in requests:
            if callback is not None:
                r.callbacks.append(callback)
        with self._inbox_lock:
            self._inbox.extend(requests)

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, seeds: Sequence[int]
    ) -> list[Request]:
        """Submit one request per prompt and step until all are done (in this thread)."""
        requests = [self.request(p, params, s) for p, s in zip(prompts, seeds)]
        self.submit(requests)
        self.wait(requests)
        return requests

    def wait(self, requests: Sequence[Request], any_done: bool = False) -> list[Request]:
        """Step until every request (with ``any_done``: at least one) is done; returns the done ones in
        the order they finished. Raises the error of a failed request."""
        requests = list(requests)
        with self.autocast():  # held across the steps: one bf16 copy of the weights for all of them
            while True:
                with self._state:
                    done = [r for r in requests if r.done]
                    if (done and any_done) or len(done) == len(requests):
                        break
                    if not self._step():
                        raise RuntimeError("KVEngine made no progress on pending requests")
        return _finished(done)

    def poll(self, requests: Sequence[Request]) -> list[Request]:
        """Run at most one step (none when every request is done); returns the done ones in the order
        they finished. Raises the error of a failed request."""
        with self._state:
            if not all(r.done for r in requests) and not self._step():
                raise RuntimeError("KVEngine made no progress on pending requests")
        return _finished([r for r in requests if r.done])

    async def agenerate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, seeds: Sequence[int]
    ) -> list[Request]:
        """Generate in the background runner (continuous batching with every other request in
        flight); returns the done requests."""
        requests = [self.request(p, params, s) for p, s in zip(prompts, seeds)]
        if not requests:
            return []
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        remaining = [len(requests)]
        count_lock = threading.Lock()

        def resolve(_: Request) -> None:  # in the stepping thread
            with count_lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                    loop.call_soon_threadsafe(_set_result, future, requests)

        self.submit(requests, resolve)
        # Start stepping once the coroutines that are ready now have submitted too (one admission).
        loop.call_soon(self._ensure_runner)
        try:
            await future
        except asyncio.CancelledError:
            self.cancel(requests)
            raise
        for r in requests:
            if r.error is not None:
                raise r.error
        return requests

    def release(self, request: Request) -> None:
        """Drop the entry ``request`` left (its episode ended), unless another request took it over."""
        self._defer("release", request)

    def release_prompt(self, prompt: Sequence[int]) -> None:
        """Drop the entries of finished requests whose prompt was exactly ``prompt``."""
        self._defer("release_prompt", [int(t) for t in prompt])

    def cancel(self, requests: Sequence[Request]) -> None:
        """Stop requests that are not done; their slots are freed."""
        self._defer("cancel", list(requests))

    def clear(self) -> None:
        """Drop every idle entry, and the pool's memory when nothing is running."""
        with self._state:
            self._drain_ops()
            for slot in list(self._entries):
                self._drop(slot)
            if not self._running and not self._queue:
                self._pool.clear()
                self._work = None
                self._fused = None
                self._peak_positions = 0

    def flush(self) -> None:
        """Apply deferred releases and cancellations now."""
        with self._state:
            self._drain_ops()
            self._enforce_budget()

    @property
    def cached_tokens(self) -> int:
        """Positions held by idle entries."""
        return sum(e.n_kv for e in self._entries.values())

    def memory_bytes(self) -> int:
        return self._pool.nbytes()

    # ---- deferred operations and the background runner -----------------------------------------
    def _defer(self, op: str, arg: Any) -> None:
        if self._state.acquire(blocking=False):  # idle (or this thread steps): apply now
            try:
                self._apply(op, arg)
            finally:
                self._state.release()
        else:
            with self._inbox_lock:
                self._ops.append((op, arg))

    def _drain_ops(self) -> None:
        with self._inbox_lock:
            ops, self._ops = self._ops, []
            inbox, self._inbox = self._inbox, []
        self._queue.extend(inbox)
        for op, arg in ops:
            self._apply(op, arg)

    def _apply(self, op: str, arg: Any) -> None:
        if op == "release":
            entry = self._entries.get(arg.slot) if arg.slot is not None else None
            if entry is not None and entry.owner is arg:
                self._drop(arg.slot)
                self.stats["released"] += 1
        elif op == "release_prompt":
            n = len(arg)
            for slot, entry in list(self._entries.items()):
                owner = entry.owner
                if owner is not None and owner.prompt_len == n and entry.tokens[:n] == arg:
                    self._drop(slot)
                    self.stats["released"] += 1
        elif op == "cancel":
            self._drain_inbox_into_queue()
            for request in arg:
                if request.done:
                    continue
                if request in self._queue:
                    self._queue.remove(request)
                elif request in self._running:
                    self._running.remove(request)
                    if request.slot is not None:
                        self._pool.release(request.slot)
                request.error = asyncio.CancelledError("request cancelled")
                self._complete(request)

    def _drain_inbox_into_queue(self) -> None:
        with self._inbox_lock:
            inbox, self._inbox = self._inbox, []
        self._queue.extend(inbox)

    def _ensure_runner(self) -> None:
        with self._inbox_lock:
            if self._runner is None:
                self._runner = threading.Thread(target=self._run, name="gem-kv-engine", daemon=True)
                self._runner.start()

    def autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast when the engine computes in bf16 (``gem_adapters.runtime.precision``), else nothing. A
        caller that holds it across many steps (a rollout) also shares one bf16 copy of the weights."""
        return precision.autocast(self.bf16, self.model.get_input_embeddings().weight.device)

    def _run(self) -> None:
        with self.autocast():
            self._run_steps()

    def _run_steps(self) -> None:
        while True:
            with self._state:
                self._drain_ops()
                if not self._queue and not self._running:
                    with self._inbox_lock:
                        if not self._inbox and not self._ops:
                            self._runner = None
                            return
                    continue
                with contextlib.suppress(BaseException):  # _step has failed its requests with the error
                    self._step()

    # ---- one step -------------------------------------------------------------------------------
    def _step(self) -> bool:
        """Admit queued requests, run one forward, sample; False when there was nothing to do."""
        try:
            with torch.no_grad():
                self._drain_ops()
                self._check_version()
                self._admit()
                rows = self._schedule()
                if rows:
                    self._forward(rows)
                self._enforce_budget()
                return bool(rows)
        except BaseException as exc:
            self._fail_all(exc)
            raise

    def _check_version(self) -> None:
        version = self.weights_version()
        if version == self._version:
            return
        self._version = version
        self._fused = None
        self.stats["invalidations"] += 1
        if self.bf16:  # a region held across the change would keep casts of the old weights
            torch.clear_autocast_cache()
        for slot in list(self._entries):
            self._drop(slot)
        for r in self._running:  # recompute from the ids: their keys/values are from the old weights
            if r.wait is None:
                r.n_kv = 0
            r.src, r.src_len = None, 0

    def _admit(self) -> None:
        if not self._queue:
            return
        limit = len(self._queue)
        if self.max_batch_size is not None:
            limit = min(limit, self.max_batch_size - sum(r.kind == REQUEST for r in self._running))
        if limit <= 0:
            return
        batch = [self._queue.popleft() for _ in range(limit)]
        need = max(len(r.tokens) + r.max_new for r in batch)
        if need > self._pool.length:  # doubling: a growing episode reallocates the pool a few times only
            grown = max(need, self._pool.length * 2)
            if self.max_context_tokens is not None:
                grown = max(need, min(grown, self.max_context_tokens))
            self._pool.resize(self._pool.slots, -(-grown // 64) * 64)
        rest = []
        taken: set[int] = set()
        for r in batch:  # an entry that is all prefix of the prompt: take its slot over (no copy)
            # Not one a request before took over: GRPO twins that played alike have identical entries,
            # and each must take over one (a twin left to copy would leave its own entry idle).
            e, n = self._best_entry(r.tokens, len(r.tokens) - 1, exclude=taken)
            if e is not None and e.kind == REQUEST and n == e.n_kv:
                taken.add(e.slot)
                r.slot, r.n_kv, r.cached = e.slot, e.n_kv, e.n_kv
                self.stats["reused_tokens"] += r.n_kv
            else:
                rest.append(r)
        # Taken-over rows stay valid up to their n_kv until their first forward: copies below may read them.
        for r in rest:
            r.src, r.src_len = self._best_entry(r.tokens, len(r.tokens) - 1)
        nodes = self._plan_nodes(rest) if self.share_prefixes else []
        self._pool.reserve(len(nodes) + len(rest))
        for node in nodes:  # parents come before their children
            node.slot = self._pool.alloc()
            self._start(node, node.parent)
        for r in rest:
            r.slot = self._pool.alloc()
            self._start(r, r.node)
        for slot in taken:
            del self._entries[slot]
        self._running.extend(nodes)
        self._running.extend(batch)
        self.stats["peak_slots"] = max(self.stats["peak_slots"], self._pool.in_use)

    def _start(self, r: Request, node: Request | None) -> None:
        """Give ``r`` its first columns: wait for ``node`` if it holds more, else copy from its entry."""
        if node is not None and node.depth > r.src_len:
            r.wait = node
            node.dependents.append(r)
        elif r.src is not None and r.src_len > 0:
            self._pool.copy(r.src.slot, r.slot, r.src_len)
            r.n_kv = r.cached = r.src_len
            r.src.tick = next(self._tick)
            self.stats["reused_tokens"] += r.src_len
        r.src = None

    def _best_entry(
        self, tokens: list[int], cap: int, exclude: set[int] = frozenset()
    ) -> tuple[_Entry | None, int]:
        """The idle entry (not in the slots ``exclude``) sharing the longest prefix with ``tokens`` (at most
        ``cap`` ids); on a tie, one that can be taken over whole."""
        best, best_len = None, 0
        for e in self._entries.values():
            if e.slot in exclude:
                continue
            n = _common_prefix(e.tokens, tokens, min(e.n_kv, cap))
            if n > best_len or (n == best_len > 0 and e.kind == REQUEST and n == e.n_kv):
                best, best_len = e, n
        return best, best_len

    def _plan_nodes(self, requests: list[Request]) -> list[Request]:
        """Prefix nodes for prefixes shared by several ``requests`` beyond what their entries hold
        (sorted prompts: a group sharing ``d`` ids is a run of neighbours whose common prefixes are
        all >= ``d``)."""
        if len(requests) < 2:
            return []
        keys = [r.tokens[:-1] for r in requests]
        order = sorted(range(len(requests)), key=keys.__getitem__)
        shared = [_common_prefix(keys[order[k]], keys[order[k + 1]]) for k in range(len(order) - 1)]
        nodes: list[Request] = []
        stack: list[tuple[int, int, int, Request | None]] = [(0, len(order), 0, None)]
        while stack:
            lo, hi, depth, parent = stack.pop()
            i = lo
            while i < hi:
                j = i
                while j < hi - 1 and shared[j] > depth:
                    j += 1
                if j == i:
                    requests[order[i]].node = parent
                    i += 1
                    continue
                d = min(shared[i:j])
                members = [requests[order[k]] for k in range(i, j + 1)]
                src_len, src = max(((min(r.src_len, d), r.src) for r in members), key=lambda x: x[0])
                node = parent
                if src_len < d:
                    node = Request(keys[order[i]][:d], PREFIX)
                    node.parent = parent
                    node.src, node.src_len = (src, src_len) if src_len > 0 else (None, 0)
                    nodes.append(node)
                stack.append((i, j + 1, d, node))
                i = j + 1
        return nodes

    def _schedule(self) -> list[tuple[Request, int, int]]:
        """This step's rows ``(request, first position, count)``: every decoding sequence (one id, in
        slot order) and prefill chunks within ``max_step_tokens``."""
        ready = [r for r in self._running if r.wait is None]
        decode = sorted((r for r in ready if len(r.tokens) - r.n_kv == 1), key=lambda r: r.slot)
        rows = [(r, r.n_kv, 1) for r in decode]
        budget = self.max_step_tokens - len(rows)
        for r in ready:
            pending = len(r.tokens) - r.n_kv
            if pending <= 1:
                continue
            take = min(pending, budget)
            if take <= 0:
                if rows:
                    break
                take = min(pending, self.max_step_tokens)
            rows.append((r, r.n_kv, take))
            budget -= take
        return rows

    def _forward(self, rows: list[tuple[Request, int, int]]) -> None:
        device = self.model.get_input_embeddings().weight.device
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        keep: list[int] = []
        sampled: list[Request] = []
        runs: list = []  # [first slot, end slot, packed start, lengths]
        prefills: list = []
        for r, start, count in rows:
            at = len(ids)
            ids.extend(r.tokens[start : start + count])
            positions.extend(range(start, start + count))
            slots.extend([r.slot] * count)
            if count > 1:
                prefills.append((r.slot, at, count, start))
            elif runs and runs[-1][1] == r.slot and runs[-1][2] + len(runs[-1][3]) == at:
                runs[-1][1] += 1  # the next slot, the next packed id: same run
                runs[-1][3].append(start + 1)
            else:
                runs.append([r.slot, r.slot + 1, at, [start + 1]])
            if r.kind == REQUEST and start + count == len(r.tokens):
                keep.append(at + count - 1)
                sampled.append(r)
        runs = [
            (first, end, at, max(lengths), _run_mask(lengths, device)) for first, end, at, lengths in runs
        ]
        need = max(start + count for _, start, count in rows)
        if need > self._pool.length:
            self._pool.resize(self._pool.slots, -(-need // 64) * 64)
        plan = _Plan(
            self._pool,
            torch.tensor(slots, dtype=torch.long, device=device),
            torch.tensor(positions, dtype=torch.long, device=device),
            runs,
            prefills,
        )
        input_ids = torch.tensor(ids, dtype=torch.long, device=device)
        keep_at = torch.tensor(keep, dtype=torch.long, device=device) if keep else None
        started = time.perf_counter()
        with self.autocast():
            own = self._own_forward()
            if own is not None:
                logits = own(input_ids, plan, keep_at)
            else:
                logits = self._model_forward(input_ids, plan, keep_at)
        # A step that prefills any prompt counts as prefill; decode_step_rows / decode_steps is the
        # average batch of the steps that only decoded.
        if prefills:
            self.stats["prefill_seconds"] += time.perf_counter() - started
        else:
            self.stats["decode_seconds"] += time.perf_counter() - started
            self.stats["decode_steps"] += 1
            self.stats["decode_step_rows"] += len(rows)
        self.stats["forward_calls"] += 1
        self.stats["tokens_processed"] += len(ids)
        if self.stats["forward_calls"] == 1 or self._pool.slots * self._pool.length > self._peak_positions:
            self._peak_positions = self._pool.slots * self._pool.length
            self.stats["peak_memory_bytes"] = max(self.stats["peak_memory_bytes"], self._pool.nbytes())
        self.stats["decode_tokens"] += sum(1 for _, _, c in rows if c == 1)
        self.stats["prefill_tokens"] += sum(c for _, _, c in rows if c > 1)
        for r, _, count in rows:
            r.n_kv += count
        for r, _, _ in rows:
            if r.kind == PREFIX and r.n_kv == len(r.tokens):
                self._node_done(r)
        if sampled:
            self._sample(logits, sampled)

    def _own_forward(self) -> decoder_forward.DecoderForward | None:
        """The engine's fused forward for this weights version, or None where the model's own runs."""
        if not self.fused_forward:
            return None
        if self._fused is None:
            if decoder_forward.supports(self.model) is not None:  # changed since: hooks, adapters
                self.fused_forward = False
                return None
            params = self.model.get_input_embeddings().weight
            self._fused = decoder_forward.DecoderForward(
                self.model, torch.bfloat16 if self.bf16 else params.dtype
            )
        return self._fused

    def _model_forward(self, input_ids: Any, plan: _Plan, keep_at: Any) -> Any:
        model, config = self.model, self.model.config
        was_training, previous = model.training, config._attn_implementation
        if was_training:
            model.eval()
        config._attn_implementation = ATTENTION
        try:
            out = model(
                input_ids=input_ids[None],
                position_ids=plan.positions[None],
                past_key_values=_PoolCache(plan),
                use_cache=True,
                logits_to_keep=1 if keep_at is None else keep_at,
                gem_plan=plan,
            )
        finally:
            config._attn_implementation = previous
            if was_training:
                model.train()
        return out.logits[0]

    def _sample(self, logits: Any, requests: list[Request]) -> None:
        by_params: dict[SamplingParams, list[int]] = {}
        for k, r in enumerate(requests):
            by_params.setdefault(r.params, []).append(k)  # type: ignore[arg-type]
        choices: list[tuple[int, float]] = [(0, 0.0)] * len(requests)
        for params, rows in by_params.items():
            part = logits if len(by_params) == 1 else logits[rows]
            uniforms = None
            if params.temperature != 0:
                uniforms = torch.tensor(
                    [stream_uniform(requests[k].seed, len(requests[k].generated)) for k in rows],
                    dtype=torch.float64,
                )
            part = part.float()
            if (
                self._work is None
                or self._work.shape[0] < part.shape[0]
                or self._work.shape[1] < part.shape[1]
            ):
                self._work = part.new_empty((max(part.shape[0], 8), part.shape[1]))
            ids, logprobs = choose_tokens(part, params, uniforms, self._work)
            for k, t, lp in zip(rows, ids.tolist(), logprobs.tolist()):
                choices[k] = (t, lp)
        finished = []
        for r, (t, lp) in zip(requests, choices):
            r.generated.append(t)
            r.logprobs.append(lp)
            r.tokens.append(t)
            self.stats["generated_tokens"] += 1
            if t in r.stop:
                finished.append((r, "stop"))
            elif len(r.generated) >= r.max_new:
                finished.append((r, "length"))
        if finished:
            done = {id(r) for r, _ in finished}
            self._running = [r for r in self._running if id(r) not in done]
            for r, reason in finished:
                r.generation = Generation(r.generated, r.logprobs, reason, {"cached_tokens": r.cached})
                self._entries[r.slot] = _Entry(r.slot, r.tokens, r.n_kv, REQUEST, next(self._tick), r)  # type: ignore[index]
                self._complete(r)

    def _node_done(self, node: Request) -> None:
        for r in node.dependents:
            if r.done or r.wait is not node:
                continue
            self._pool.copy(node.slot, r.slot, node.depth)  # type: ignore[arg-type]
            r.n_kv = node.depth
            r.wait = None
            if r.kind == REQUEST:
                r.cached = node.depth
                self.stats["shared_prefix_tokens"] += node.depth
        node.dependents = []
        self._running.remove(node)
        if node.parent is None:  # a batch's common prefix: kept for the next batch of these weights
            self._entries[node.slot] = _Entry(
                node.slot, node.tokens, node.depth, PREFIX, next(self._tick), None
            )  # type: ignore[index]
        else:  # a group's prefix (e.g. a GRPO group's first prompt): its dependents have it now
            self._pool.release(node.slot)  # type: ignore[arg-type]

    def _complete(self, r: Request) -> None:
        r.done = True
        r.order = next(self._order)
        for callback in r.callbacks:
            callback(r)
        r.callbacks = []

    def _enforce_budget(self) -> None:
        """Evict least recently used idle entries beyond ``max_cache_tokens`` (one slot costs the pool's
        row length)."""
        rows = self.max_cache_tokens // max(self._pool.length, 1)
        if len(self._entries) <= rows:
            return
        for e in sorted(self._entries.values(), key=lambda e: e.tick)[: len(self._entries) - rows]:
            self._drop(e.slot)
            self.stats["evictions"] += 1
            self.stats["evicted_tokens"] += e.n_kv

    def _drop(self, slot: int) -> None:
        del self._entries[slot]
        self._pool.release(slot)

    def _fail_all(self, exc: BaseException) -> None:
        """An unexpected error inside a step: every pending request fails with it, the cache is reset."""
        self._drain_inbox_into_queue()
        pending = [*self._queue, *self._running]
        self._queue.clear()
        self._running = []
        self._entries.clear()
        self._pool.clear()
        for r in pending:
            if not r.done:
                r.error = exc
                self._complete(r)


def default_cache_tokens(model: Any, budget_bytes: int = 2 << 30) -> int:
    """How many key/value positions fit ``budget_bytes`` (2 GiB) for ``model``."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    layers = getattr(config, "num_hidden_layers", 1)
    heads = getattr(config, "num_attention_heads", 1)
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or getattr(config, "hidden_size", heads) // heads
    dtype_bytes = next(model.parameters()).element_size()
    return max(1, budget_bytes // (layers * 2 * kv_heads * head_dim * dtype_bytes))


def _run_mask(lengths: list[int], device: Any) -> Any:
    """(n, 1, 1, max length) key mask of a run of decoding rows; None when all have the same length."""
    if min(lengths) == max(lengths):
        return None
    lengths_t = torch.tensor(lengths, device=device)
    return (torch.arange(max(lengths), device=device)[None, :] < lengths_t[:, None])[:, None, None, :]


def _additive(mask: Any, dtype: Any) -> Any:
    """A boolean attention mask as the additive one the kernel would convert it to (0 or -inf)."""
    if mask is None:
        return None
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, -math.inf)


def _common_prefix(a: Sequence[int], b: Sequence[int], limit: int | None = None) -> int:
    """How many leading ids ``a`` and ``b`` share (at most ``limit``)."""
    n = min(len(a), len(b)) if limit is None else min(len(a), len(b), limit)
    if n <= 0 or a[0] != b[0]:
        return 0
    if a[:n] == b[:n]:
        return n
    lo, hi = 1, n - 1  # a[:lo] == b[:lo] and a[:hi + 1] != b[:hi + 1]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _finished(done: list[Request]) -> list[Request]:
    """``done`` in the order the requests finished; raises the error of a failed one."""
    for r in done:
        if r.error is not None:
            raise r.error
    return sorted(done, key=lambda r: r.order)


def _set_result(future: asyncio.Future, result: Any) -> None:
    if not future.done():
        future.set_result(result)

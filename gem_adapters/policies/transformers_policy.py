"""TransformersPolicy: batched sampling from a local transformers causal LM, CPU or GPU.

Prompts are left-padded into one batch and decoded with a key/value cache, one token per step for
all sequences; a sequence stops at its first stop token or after ``max_new_tokens``. The decoding
loop is written out here (instead of ``model.generate``) so that it returns exactly what a trainer
needs and nothing it must reconstruct:

* the ids exactly as sampled (never re-tokenised text), the stop token included when one was hit;
* the logprob of each sampled id under the model's raw distribution: ``log_softmax`` of the logits
  at temperature 1, before top-k/top-p filtering. This is what a trainer recomputes from the same
  weights, and what vLLM returns by default (``logprobs_mode="raw_logprobs"``);
* reproducible sampling from a ``torch.Generator`` owned by the policy (or seeded per call by
  ``SamplingParams.seed``); the global torch RNG is never touched.

The model is switched to eval mode while generating and restored afterwards.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from gem_adapters.policies.base import Generation, Policy, SamplingParams


class TransformersPolicy(Policy):
    """``model``: a transformers causal LM; ``tokenizer`` (optional) supplies the pad and EOS ids.

    ``max_batch_size`` splits large requests into chunks of similar prompt lengths (None: one batch).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        max_batch_size: int | None = None,
        seed: int | None = None,
    ):
        import torch

        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.device = next(model.parameters()).device
        self.generator = torch.Generator(self.device).manual_seed(
            secrets.randbits(63) if seed is None else seed
        )
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

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        import torch

        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        generator = self.generator
        if params.seed is not None:
            generator = torch.Generator(self.device).manual_seed(params.seed)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        size = self.max_batch_size or len(prompts)
        results: list[Generation | None] = [None] * len(prompts)
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(order), size):
                chunk = order[start : start + size]
                for i, generation in zip(
                    chunk, self._generate_batch([prompts[i] for i in chunk], params, generator)
                ):
                    results[i] = generation
        finally:
            self.model.train(was_training)
        return results  # type: ignore[return-value]

    def _generate_batch(
        self, prompts: list[Sequence[int]], params: SamplingParams, generator: Any
    ) -> list[Generation]:
        import torch

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
        finished = torch.zeros(batch, dtype=torch.bool, device=self.device)
        past = None
        step_ids = input_ids
        with torch.no_grad():
            for _ in range(params.max_new_tokens):
                out = self.model(
                    input_ids=step_ids,
                    attention_mask=attention_mask,
                    position_ids=position_ids,
                    past_key_values=past,
                    use_cache=True,
                    logits_to_keep=1,  # only the last position is sampled: prefill skips a (B, T, vocab) matmul
                )
                past = out.past_key_values
                logits = out.logits[:, -1, :].float()
                next_ids = sample(logits, params, generator)
                logprob = torch.log_softmax(logits, dim=-1).gather(1, next_ids[:, None]).squeeze(1)
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
        return generations


def sample(logits: Any, params: SamplingParams, generator: Any) -> Any:
    """Token ids drawn from ``logits`` (batch, vocab) with temperature, top-k and top-p (nucleus)."""
    import torch

    if params.temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / params.temperature
    if 0 < params.top_k < scores.shape[-1]:
        kth = torch.topk(scores, params.top_k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_scores, sorted_index = torch.sort(scores, dim=-1, descending=True)
        probs = torch.softmax(sorted_scores, dim=-1)
        # Drop a token when the tokens ranked above it already hold top_p of the mass (the first always stays).
        drop = probs.cumsum(dim=-1) - probs > params.top_p
        sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
        scores = torch.full_like(scores, float("-inf")).scatter(1, sorted_index, sorted_scores)
    probs = torch.softmax(scores, dim=-1)
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

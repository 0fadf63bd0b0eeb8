"""StripSpecialTokens: remove chat-template control tokens from the ends of an action before stepping.

Trainers that decode a response with ``skip_special_tokens=False`` (ROLL's env managers do, so that
tool-call markup survives) hand the env text such as ``"\\boxed{3}<|im_end|>"``, with pad tokens
after it when responses were batched, or a BOS token in front when text was re-tokenised. The
wrapper removes every leading and trailing run of the given tokens (and the whitespace between
them) and leaves the middle of the text alone: a token that the model wrote inside its answer is
part of the answer, and the env judges it.
"""

from __future__ import annotations

from collections.abc import Iterable

from gem_core.core import Env, StepResult, Wrapper

# End-of-turn, end-of-text, padding and begin-of-text tokens of common chat templates:
# ChatML (Qwen, SmolLM2), Llama 3, Gemma, Mistral/Llama 2, Phi-3, GLM, DeepSeek.
DEFAULT_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|begin_of_text|>",
    "<end_of_turn>",
    "<eos>",
    "<bos>",
    "<pad>",
    "</s>",
    "<s>",
    "<|end|>",
    "<|user|>",
    "<|assistant|>",
    "<｜end▁of▁sentence｜>",
    "<｜begin▁of▁sentence｜>",
)


def strip_special_tokens(text: str, tokens: Iterable[str] = DEFAULT_SPECIAL_TOKENS) -> str:
    """``text`` without its leading and trailing runs of ``tokens``; whitespace between (or outside)
    the removed tokens goes with them, and text without such a run is returned unchanged."""
    # Longest first, so that a token that ends another (``</s>`` in ``<|x</s>``) never wins early.
    ordered = sorted({t for t in tokens if t}, key=len, reverse=True)
    start, end = 0, len(text)
    while True:  # trailing run
        inner = end
        while inner > start and text[inner - 1].isspace():
            inner -= 1
        token = next((t for t in ordered if text.endswith(t, start, inner)), None)
        if token is None:
            break
        end = inner - len(token)
    while True:  # leading run
        inner = start
        while inner < end and text[inner].isspace():
            inner += 1
        token = next((t for t in ordered if text.startswith(t, inner, end)), None)
        if token is None:
            break
        start = inner + len(token)
    return text[start:end]


class StripSpecialTokens(Wrapper):
    """Steps the inner env with ``strip_special_tokens(action, tokens)``."""

    def __init__(self, env: Env, tokens: Iterable[str] = DEFAULT_SPECIAL_TOKENS):
        super().__init__(env)
        self.tokens = tuple(tokens)

    def step(self, action: str) -> StepResult:
        if isinstance(action, str):
            action = strip_special_tokens(action, self.tokens)
        return self.env.step(action)

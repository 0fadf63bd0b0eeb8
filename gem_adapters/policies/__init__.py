"""Policy backends: token ids in, generated token ids (+ logprobs) out. See ``policies.base``."""

from gem_adapters.policies.base import Generation, Policy, SamplingParams

__all__ = ["Generation", "OpenAICompletionsPolicy", "Policy", "SamplingParams", "TransformersPolicy"]


def __getattr__(name: str):
    # Backends import heavy libraries (torch), so they load on first use.
    if name == "TransformersPolicy":
        from gem_adapters.policies.transformers_policy import TransformersPolicy

        return TransformersPolicy
    if name == "OpenAICompletionsPolicy":
        from gem_adapters.policies.openai_http import OpenAICompletionsPolicy

        return OpenAICompletionsPolicy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

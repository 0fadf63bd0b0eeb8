"""Oat glue: GEM episodes inside oat-llm 0.2.4's multi-turn PPO.

The pure parts, tested on the CPU CI: ``episode_to_transitions`` / ``episodes_to_transitions`` (one
``oat.types.Transition`` per turn; ``oat.types`` and so torch are imported when called),
``transition_advantages`` (the learner's advantage step: a shared estimator, ReBN by default), and ``OatVLLMPolicy`` /
``generation_from_vllm`` / ``vllm_sampling_kwargs`` (an Oat actor's vLLM engine as a ``Policy``;
vLLM is imported when it generates).

``gem_adapters.oat.program`` holds the classes Oat launches (``GEMActor``, ``GEMLearner``,
``GEMArgs``); it needs Oat's full stack (Python 3.10, vLLM, Launchpad, DeepSpeed) and is not
imported here. See ``examples/train_oat.py``.
"""

from gem_adapters.oat.advantages import transition_advantages
from gem_adapters.oat.transitions import INFO_KEYS, episode_to_transitions, episodes_to_transitions
from gem_adapters.oat.vllm_policy import OatVLLMPolicy, generation_from_vllm, vllm_sampling_kwargs

__all__ = [
    "INFO_KEYS",
    "OatVLLMPolicy",
    "episode_to_transitions",
    "episodes_to_transitions",
    "generation_from_vllm",
    "transition_advantages",
    "vllm_sampling_kwargs",
]

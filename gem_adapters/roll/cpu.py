"""ROLL's own agentic pipeline (``roll.pipeline.agentic.agentic_pipeline.AgenticPipeline``) on a machine without a
GPU: ``fsdp2_train`` for the actor and ROLL's ``hf_infer`` (transformers ``generate``) for inference.

    python -m gem_adapters.roll.cpu --config_path DIR --config_name NAME [--devices 2] [--num-cpus 8]

composes the Hydra config ``DIR/NAME.yaml`` into ROLL's ``AgenticConfig`` and runs the pipeline as ROLL's
``examples/start_agentic_pipeline.py`` does, except that Ray is a private local instance started here (ROLL's
``init()`` runs ``ray start --head``, a cluster that outlives the job) whose ``worker_process_setup_hook``
(``setup_worker``) installs ``PATCHES`` in every Ray worker; the driver installs them itself. ROLL places
every cluster by device index: the "devices" are ``--devices`` Ray logical GPUs (``DEVICES_ENV``), e.g.
``actor_train`` on device 0 and ``actor_infer`` on device 1 (``device_mapping``). Train and inference on
different devices sync weights through ROLL's broadcast path (a gloo group); colocated train and
inference are not supported on CPU (ROLL's CUDA-IPC serialiser, ``roll/utils/send_recv_utils.py``:
``benchmarks/results/roll_cpu/README.md``). ``run_pipeline(config)`` does the same from Python.

ROLL (github.com/alibaba/ROLL) is not on PyPI: put a checkout on ``PYTHONPATH`` with its requirements
installed (``scripts/roll_cpu_attempt.sh`` says how). ``PATCHES`` were written against ROLL commit
``ROLL_COMMIT``; each names the ROLL lines it works around (``gem_adapters.runtime.patching``), and
``tests/adapters/roll/test_cpu.py`` reads those lines from the checkout (``ROLL_SRC``) and fails when one
changes. Nothing of ROLL is copied or edited: each patch wraps or adds methods when ROLL's module is imported.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import threading
import uuid
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from gem_adapters.runtime.patching import Line, Patch, PatchSet, wrap

ROLL_COMMIT = "8eb27cc2dc34c4d1310b169d9b86d339004d811a"
DEVICES_ENV = "GEM_ROLL_CPU_DEVICES"  # how many Ray logical GPUs stand for ROLL's devices
SETUP_HOOK = f"{__name__}.setup_worker"


# --- roll/platforms/cpu.py ------------------------------------------------------------------------------


def patch_cpu_platform(module: ModuleType) -> None:
    """``CpuPlatform``'s devices are Ray logical GPUs (``ray_device_key``, a visible-devices variable,
    ``device_count()`` from ``DEVICES_ENV``), and the memory and RNG calls that ``Platform.__getattr__``
    would find missing on ``torch.cpu`` (and answer None) get CPU answers."""
    cls = module.CpuPlatform
    cls.ray_device_key = "GPU"  # Ray logical GPUs, one per "device" in the config's device_mapping
    cls.device_control_env_var = "CUDA_VISIBLE_DEVICES"  # inert for a CPU torch
    cls.ray_experimental_noset = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"
    cls.device_count = classmethod(lambda c: int(os.environ.get(DEVICES_ENV, "1")))

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
    # the checkpoint's RNG state: current_platform.random.*_rng_state_all
    cls.random = SimpleNamespace(
        get_rng_state_all=lambda: [torch.get_rng_state()],
        set_rng_state_all=lambda states: torch.set_rng_state(states[0]),
    )


# --- roll/pipeline/agentic/agentic_config.py --------------------------------------------------------------


def patch_agentic_config(module: ModuleType) -> None:
    """``AgenticConfig`` accepts ``hf_infer`` for ``actor_infer``: its checks run with the name "vllm" and the
    real name is put back."""

    def build(post_init):
        @functools.wraps(post_init)
        def __post_init__(self) -> None:
            args = getattr(getattr(self, "actor_infer", None), "strategy_args", None)
            if args is None or args.strategy_name != "hf_infer":
                return post_init(self)
            args.strategy_name = "vllm"
            try:
                post_init(self)
            finally:
                args.strategy_name = "hf_infer"

        return __post_init__

    wrap(module.AgenticConfig, "__post_init__", build)


# --- roll/distributed/strategy/hf_strategy.py -------------------------------------------------------------


def patch_hf_infer(module: ModuleType) -> None:
    """``HfInferStrategy`` as ``InferWorker`` uses an inference strategy in the agentic pipeline: its
    methods become coroutines (blocking work in a thread; the worker awaits every strategy call), it gains
    ``generate_request`` (``model.generate``, one request at a time, per-token log-probs of the raw logits as
    vLLM reports them), ``abort_requests`` and the ``setup_collective_group`` signature the FSDP2 weight
    updater calls, its ``device`` is set (``broadcast_parameter`` allocates on it and nothing sets it: the
    receiver raised before joining the broadcast and the trainer waited forever), and loading/offloading
    states does nothing (ROLL's helpers import TRL's value-head model, gone from TRL; on a CPU the model
    never leaves host memory)."""
    cls = module.HfInferStrategy
    if getattr(cls, "_gem_cpu", False):
        return
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
    cls._gem_cpu = True


def _generate_one(strategy, payload: dict) -> dict:
    """One ``generate_request`` (the payload of ``patch_router``) with ``model.generate``; returns what
    ``RouterClient._postprocess_generate`` reads: ``output_token_ids``, ``finish_reasons`` and
    ``output_logprobs`` (one per generated token)."""
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
    """``RouterClient`` builds request payloads for vllm and sglang only; for hf_infer the payload carries
    ROLL's generation config (completed in place by ROLL's own preprocessing) and the unpadded prompt ids."""

    def build(preprocess):
        @functools.wraps(preprocess)
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

        return _preprocess_generate

    wrap(module.RouterClient, "_preprocess_generate", build)


_STRATEGY = "roll/distributed/strategy/hf_strategy.py"
_WORKER = "roll/pipeline/base_worker.py"
_ASSERT = 'assert strategy_name in ["vllm", "sglang"]'
PATCHES = PatchSet(
    "ROLL",
    [
        Patch(
            "roll.platforms.cpu",
            patch_cpu_platform,
            (
                Line("roll/platforms/cpu.py", 12, 'ray_device_key: str = "CPU"'),
                Line("roll/distributed/scheduler/resource_manager.py", 56, 'else {"resources": {current_platform.ray_device_key: self.gpu_per_node}}'),
                Line("roll/platforms/platform.py", 143, 'cls.device_control_env_var: ",".join(map(str, gpu_ranks)),'),
                Line("roll/configs/base_config.py", 352, "self.num_gpus_per_node = current_platform.device_count()"),
                Line("roll/platforms/platform.py", 90, "return None"),
                Line("roll/utils/worker_state.py", 55, "current_platform.device_type: current_platform.random.get_rng_state_all(),"),
            ),
            "the CPU platform asks Ray for resources={'CPU': n} per device (competing with the env workers' "
            "CPUs), has no visible-devices variable ({None: ...} in the workers' env), and device_count() "
            "(1) overwrites num_gpus_per_node; memory and RNG calls fall through to torch.cpu as None",
        ),
        Patch(
            "roll.pipeline.agentic.agentic_config",
            patch_agentic_config,
            (
                Line("roll/pipeline/agentic/agentic_config.py", 368, _ASSERT),
                Line("roll/configs/base_config.py", 390, _ASSERT),
            ),
            "the config asserts that actor_infer is vllm or sglang (no CPU build fits ROLL's pins)",
        ),
        Patch(
            "roll.distributed.strategy.hf_strategy",
            patch_hf_infer,
            (
                Line(_STRATEGY, 151, "weight = torch.empty(shape, dtype=target_dtype, device=self.device)"),
                Line(_WORKER, 363, "await self.strategy.initialize(model_provider=default_actor_model_provider)"),
                Line(_WORKER, 470, "await self.strategy.broadcast_parameter(*args, **kwargs)"),
                Line(_WORKER, 473, "await self.strategy.setup_collective_group(*args, **kwargs)"),
                Line(_WORKER, 536, "return await self.strategy.generate_request(payload=payload)"),
                Line(_WORKER, 539, "await self.strategy.abort_requests(request_ids)"),
                Line("roll/third_party/fsdp2/model_update.py", 201, "infer_worker.setup_collective_group.remote("),
                Line("roll/utils/offload_states.py", 39, "from trl import AutoModelForCausalLMWithValueHead"),
            ),
            "InferWorker awaits synchronous hf_infer methods and calls generate_request, abort_requests and "
            "setup_collective_group(master_address=...) that hf_infer lacks; broadcast_parameter allocates on "
            "self.device, which nothing sets (the receiver raises and the trainer's broadcast hangs); "
            "load/offload import TRL's removed value-head model",
        ),
        Patch(
            "roll.distributed.scheduler.router",
            patch_router,
            (Line("roll/distributed/scheduler/router.py", 604, 'raise NotImplementedError(f"strategy {self.strategy_name} is not supported")'),),
            "request payloads are built for vllm and sglang only",
        ),
    ],
)  # fmt: skip


def install() -> None:
    """Patch ROLL in this process for CPU with ``hf_infer`` (idempotent; each patch lands when its module
    is imported)."""
    PATCHES.install()


def setup_worker() -> None:
    """Ray's ``worker_process_setup_hook`` of ``run_pipeline``: ``install()`` in every Ray worker."""
    install()


def run_pipeline(config: Any, devices: int = 2, num_cpus: int = 8) -> None:
    """Run ROLL's ``AgenticPipeline`` (or ``config``'s ``pipeline_cls``) for ``config`` (an ``AgenticConfig``)
    on a private local Ray with ``devices`` logical GPUs and ``num_cpus`` logical CPUs; returns when the
    pipeline's ``run()`` does, and stops that Ray."""
    os.environ[DEVICES_ENV] = str(devices)
    install()
    import ray
    from roll.platforms import current_platform
    from roll.utils.constants import RAY_NAMESPACE
    from roll.utils.import_utils import safe_import_class

    env_vars = {**current_platform.get_custom_env_vars(), DEVICES_ENV: str(devices)}
    ray.init(
        address="local",
        num_cpus=num_cpus,
        num_gpus=devices,
        namespace=RAY_NAMESPACE,
        include_dashboard=False,
        runtime_env={"env_vars": env_vars, "worker_process_setup_hook": SETUP_HOOK},
    )
    try:
        pipeline_cls = (
            getattr(config, "pipeline_cls", None) or "roll.pipeline.agentic.agentic_pipeline.AgenticPipeline"
        )
        if isinstance(pipeline_cls, str):
            pipeline_cls = safe_import_class(pipeline_cls)
        pipeline_cls(pipeline_config=config).run()
    finally:
        ray.shutdown()


def load_config(config_path: str | Path, config_name: str, devices: int = 2) -> Any:
    """ROLL's ``AgenticConfig`` of the Hydra config ``config_path/config_name.yaml`` (as ROLL's
    ``examples/start_agentic_pipeline.py`` builds it) on ``devices`` CPU "devices", ``PATCHES`` installed
    first (the config's checks and its device count are patched)."""
    os.environ[DEVICES_ENV] = str(devices)
    install()
    from dacite import from_dict
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from roll.pipeline.agentic.agentic_config import AgenticConfig

    with initialize_config_dir(config_dir=str(Path(config_path).resolve()), version_base=None):
        cfg = compose(config_name=config_name)
    return from_dict(data_class=AgenticConfig, data=OmegaConf.to_container(cfg, resolve=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m gem_adapters.roll.cpu", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--config_path", required=True, help="folder of the Hydra config")
    parser.add_argument("--config_name", required=True, help="the config's file name without .yaml")
    parser.add_argument("--devices", type=int, default=2, help="Ray logical GPUs standing for ROLL's devices")
    parser.add_argument("--num-cpus", type=int, default=8, help="Ray's logical CPUs (not cores)")
    args = parser.parse_args(argv)
    config = load_config(args.config_path, args.config_name, args.devices)
    run_pipeline(config, args.devices, args.num_cpus)


if __name__ == "__main__":
    from gem_adapters.roll.cpu import main as _main  # the module's own globals, not __main__'s copy

    _main()

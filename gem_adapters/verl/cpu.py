"""verl 0.9.1's own trainer (``python -m verl.trainer.main_ppo``) on CPU: debug an agent loop, a reward or
an estimator through the real trainer without a GPU.

Installed in every verl process (driver, TaskRunner, workers) when ``VERL_PLATFORM=cpu``: verl loads
``gem_adapters.verl.plugin`` there (gem-core's ``verl.plugins`` entry point, or
``VERL_USE_EXTERNAL_MODULES=gem_adapters.verl.plugin``), which calls ``install()``.
``examples/train_verl.py machine=cpu`` sets it all up; ``CPU_OVERRIDES`` are the Hydra overrides such a
run needs. A script that drives verl's workers in its own process (``benchmarks/learning/verl_cpu.py``)
calls ``install()`` and ``verl.plugin.platform.platform_manager.set_platform(CPUPlatform())`` itself.

What it adds, through verl's own seams:

* ``CPUPlatform``: verl's platform layer (``PlatformRegistry``, picked by ``VERL_PLATFORM=cpu``) for
  torch's CPU device and the gloo backend. verl counts only GPU/NPU resources in Ray, so the platform
  names Ray's ``GPU`` resource and the run gives Ray one logical GPU (``ray_init.num_gpus=1``); no
  CUDA is ever touched.
* a ``transformers`` rollout (``actor_rollout_ref.rollout.name=transformers``): ``TransformersReplica``
  (verl's ``RolloutReplicaRegistry``) starts one Ray actor, ``TransformersServer``, that generates
  with a transformers model (``gem_adapters.policies.TransformersPolicy``: batched, logprob of each
  sampled id) and answers verl's ``generate`` with a ``TokenOutput``; ``TransformersServerAdapter``
  (verl's rollout-class registry) lives in the trainer's worker and hands it the trainer's weights at
  every sync (verl's "naive" checkpoint engine, the one its sync trainer uses).
* ``VERL_ENGINE_DEVICE=cuda`` (verl's own override) so that the FSDP engines, registered for cuda/npu
  only, are found; they run on whatever device the platform names.

And the narrow patches in ``PATCHES`` (``gem_adapters.runtime.patching``: each names the verl lines it works
around; ``tests/adapters/verl/test_main_ppo_cpu.py`` fails when one of those lines changes).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from types import ModuleType
from typing import Any

import torch

from gem_adapters.runtime.patching import Line, Patch, PatchSet, wrap

logger = logging.getLogger(__name__)

PLATFORM = "cpu"
ROLLOUT = "transformers"

_FP32 = "{param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}"

# Hydra overrides for main_ppo on CPU (examples/train_verl.py adds them when trainer.device is cpu).
CPU_OVERRIDES = [
    "trainer.device=cpu",
    "trainer.use_v1=True",
    "trainer.n_gpus_per_node=1",
    "trainer.nnodes=1",
    f"actor_rollout_ref.rollout.name={ROLLOUT}",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.calculate_log_probs=True",
    "actor_rollout_ref.actor.strategy=fsdp2",  # FSDP1 fails on CPU parameters
    "actor_rollout_ref.ref.strategy=fsdp2",
    # fp32 compute (FSDP's default mixed precision is bf16): faster on CPUs, and the trainer's logprobs then
    # match the fp32 rollout's
    f"+actor_rollout_ref.actor.fsdp_config.mixed_precision={_FP32}",
    f"+actor_rollout_ref.ref.fsdp_config.mixed_precision={_FP32}",
    "actor_rollout_ref.actor.fsdp_config.use_torch_compile=False",  # no compile time for small CPU runs
    "actor_rollout_ref.ref.fsdp_config.use_torch_compile=False",
    "actor_rollout_ref.model.use_remove_padding=False",  # needs flash-attn's varlen kernels
    "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    "+ray_kwargs.ray_init.address=local",  # never join a stale cluster
    "+ray_kwargs.ray_init.num_gpus=1",  # the logical GPU verl's resource pools ask for
    "ray_kwargs.ray_init.num_cpus=16",  # logical CPUs: verl's actors each reserve some
    # verl's default of 8 storage units reserves 8 CPUs, and the job then waits forever for its workers
    "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    "actor_rollout_ref.rollout.agent.num_workers=1",
    "reward.num_workers=1",
    "data.dataloader_num_workers=0",
]


# --------------------------------------------------------------------------------------------------
# The platform
# --------------------------------------------------------------------------------------------------


class _CPUDevice(ModuleType):
    """``torch.cpu`` plus the ``torch.cuda`` calls verl makes through ``get_torch_device()``, as no-ops."""

    def __init__(self) -> None:
        super().__init__("gem_adapters.verl.cpu.device")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    @staticmethod
    def empty_cache() -> None:
        pass

    ipc_collect = empty_cache

    @staticmethod
    def set_per_process_memory_fraction(*_: Any, **__: Any) -> None:
        pass

    @staticmethod
    def memory_allocated(*_: Any, **__: Any) -> int:
        return 0

    memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated

    @staticmethod
    def mem_get_info(*_: Any, **__: Any) -> tuple[int, int]:
        pages, size = os.sysconf("SC_AVPHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return pages * size, os.sysconf("SC_PHYS_PAGES") * size

    @staticmethod
    def get_device_name(*_: Any) -> str:
        return "cpu"

    get_rng_state = staticmethod(torch.get_rng_state)
    set_rng_state = staticmethod(torch.set_rng_state)
    manual_seed = manual_seed_all = staticmethod(torch.manual_seed)


DEVICE = _CPUDevice()


@functools.cache
def _platform_cls() -> type:
    """``CPUPlatform``, defined and registered with verl's ``PlatformRegistry`` on first use: importing this
    module imports no verl (verl imports ``gem_adapters.verl.plugin``, which installs this module, while
    verl itself is being imported)."""
    from verl.plugin.platform import PlatformBase, PlatformRegistry

    @PlatformRegistry.register(platform=PLATFORM)
    class CPUPlatform(PlatformBase):
        """torch's CPU device with gloo; Ray's ``GPU`` resource stands for the worker slots (see module doc)."""

        device_name = "cpu"
        vendor_name = "cpu"
        device_module = DEVICE

        def is_available(self) -> bool:
            return True

        def is_platform_available(self, use_smi_check: bool = False) -> bool:
            return False  # never auto-detected: only VERL_PLATFORM=cpu selects it

        def current_device(self) -> str:
            return "cpu"  # verl moves tensors with .to(current_device())

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            pass

        def synchronize(self, device_index: int | None = None) -> None:
            pass

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        manual_seed_all = manual_seed

        def set_allocator_settings(self, settings: str) -> None:
            pass

        def empty_cache(self) -> None:
            pass

        def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"  # what Ray sets for its (logical) GPU resource

        @contextlib.contextmanager
        def nvtx_range(self, msg: str):
            yield

        def profiler_start(self) -> None:
            pass

        def profiler_stop(self) -> None:
            pass

        def ray_resource_name(self) -> str:
            return "GPU"  # verl's resource check counts only GPU/NPU (single_controller/ray/base.py)

        def ray_noset_envvars(self) -> list[str]:
            return []

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self) -> None:
            return None

    return CPUPlatform


# --------------------------------------------------------------------------------------------------
# The transformers rollout
# --------------------------------------------------------------------------------------------------


def server_name(replica_rank: int) -> str:
    """The Ray actor name of a replica's server (the adapter in the trainer's worker looks it up)."""
    return f"{ROLLOUT}_server_{replica_rank}"


class TransformersServer:
    """A rollout server (Ray actor): verl's ``generate`` answered by a transformers model on CPU.

    Concurrent requests with equal sampling parameters are generated as one batch; the logprob of each
    sampled id is the model's raw one (temperature 1), what the trainer recomputes when
    ``rollout.temperature=1``. Weights arrive as a name -> tensor dict from the trainer's worker.
    """

    def __init__(self, config: Any, model_config: Any, replica_rank: int):
        from transformers import AutoModelForCausalLM
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.config import HFModelConfig

        from gem_adapters.policies.transformers_policy import TransformersPolicy
        from gem_adapters.verl.policy_server import PolicyServer

        model_config = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        self.model = AutoModelForCausalLM.from_pretrained(
            model_config.local_path, dtype=torch.float32, attn_implementation="sdpa"
        )
        self.model.eval()
        tokenizer = model_config.tokenizer
        seed = None if config.seed is None else int(config.seed) + replica_rank
        self.server = PolicyServer(
            TransformersPolicy(self.model, tokenizer, seed=seed), max_tokens=int(config.response_length)
        )
        self.replica_rank = replica_rank
        if config.temperature != 1.0:
            logger.warning(
                "rollout.temperature=%s: the %s rollout reports temperature-1 logprobs, so verl's "
                "rollout-vs-actor logprob metrics will differ (training uses the actor's own logprobs)",
                config.temperature,
                ROLLOUT,
            )

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kwargs: Any):
        return await self.server.generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)

    async def update_weights(self, weights: dict[str, torch.Tensor], global_steps: int | None = None) -> dict:
        """Load the trainer's weights; returns a fingerprint (sum of all parameters) for logs and tests."""
        missing, unexpected = self.model.load_state_dict(weights, strict=False)
        tied = {"lm_head.weight"} if self.model.config.tie_word_embeddings else set()
        if unexpected or set(missing) - tied:
            raise RuntimeError(f"weights do not fit the rollout model: {missing=} {unexpected=}")
        if global_steps is not None:
            self.server.global_steps = global_steps
        fingerprint = float(sum(p.detach().double().sum() for p in self.model.parameters()))
        print(
            f"[{ROLLOUT} rollout] weights synced: global_steps={global_steps} fingerprint={fingerprint!r}",
            flush=True,
        )
        return {"global_steps": global_steps, "fingerprint": fingerprint}

    async def set_global_steps(self, global_steps: int) -> None:
        self.server.global_steps = global_steps

    # verl's memory and scheduling controls: nothing to free or pause on CPU.
    async def wake_up(self, tags: list[str] | None = None) -> None:
        pass

    async def sleep(self) -> None:
        pass

    async def clear_kv_cache(self) -> None:
        pass

    async def release_kv_cache(self) -> None:
        pass

    async def resume_kv_cache(self) -> None:
        pass

    async def abort_all_requests(self, reject_request: bool = False) -> dict:
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self) -> None:
        pass

    async def start_profile(self, **kwargs: Any) -> None:
        pass

    async def stop_profile(self) -> None:
        pass


@functools.cache
def _replica_cls():
    from verl.workers.rollout.replica import RolloutReplica

    class TransformersReplica(RolloutReplica):
        """One ``TransformersServer`` per replica (tensor parallel size 1)."""

        async def launch_servers(self):
            import ray

            if self.world_size != 1:
                raise ValueError(
                    f"the {ROLLOUT} rollout runs one process per replica: set tensor_model_parallel_size=1"
                )
            server = (
                ray.remote(TransformersServer)
                .options(
                    name=server_name(self.replica_rank), max_concurrency=self.max_concurrency, num_cpus=1
                )
                .remote(self.config, self.model_config, self.replica_rank)
            )
            self.servers = [server]
            self._server_handle = server
            self._server_address = f"{ROLLOUT}://replica-{self.replica_rank}"

    return TransformersReplica


def __getattr__(name: str) -> Any:
    if name == "CPUPlatform":
        return _platform_cls()
    if name == "TransformersReplica":  # built lazily: verl's replica module is heavy to import
        return _replica_cls()
    raise AttributeError(name)


class TransformersServerAdapter:
    """verl's rollout object inside the trainer's worker (``BaseRollout``'s interface): at each weight
    sync it gathers the trainer's full tensors and sends them to its replica's server."""

    def __init__(
        self, config: Any, model_config: Any, device_mesh: Any = None, replica_rank: int = -1, **_: Any
    ):
        from verl.utils.config import omega_conf_to_dataclass

        self.config = omega_conf_to_dataclass(config)
        self.model_config = model_config
        rank = int(os.environ.get("RANK", 0))
        world = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.is_leader_rank = rank % world == 0
        self._server = None

    async def resume(self, tags: list[str]) -> None:
        pass

    async def release(self) -> None:
        pass

    @torch.no_grad()
    async def update_weights(
        self, weights: Any, global_steps: int | None = None, wire_format: str = "named_tensors", **kwargs: Any
    ):
        from verl.workers.rollout.utils import ensure_async_iterator

        if wire_format != "named_tensors":
            raise NotImplementedError(f"the {ROLLOUT} rollout takes full tensors, not {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise NotImplementedError(f"the {ROLLOUT} rollout takes merged weights (model.lora.merge=True)")
        # every rank walks the generator: gathering a sharded tensor is a collective
        state = {
            name: tensor.detach().to("cpu").clone() async for name, tensor in ensure_async_iterator(weights)
        }
        if self.is_leader_rank:
            import ray

            if self._server is None:
                self._server = ray.get_actor(server_name(self.replica_rank))
            await self._server.update_weights.remote(state, global_steps)

    def generate_sequences(self, prompts: Any) -> Any:
        raise NotImplementedError(f"the {ROLLOUT} rollout serves verl's agent loops (async server mode)")


def _register_rollout() -> None:
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    RolloutReplicaRegistry.register(ROLLOUT, _replica_cls)
    _ROLLOUT_REGISTRY[(ROLLOUT, "async")] = f"{__name__}.TransformersServerAdapter"


# --------------------------------------------------------------------------------------------------
# Narrow patches, each pinned to the verl line it works around (tests/adapters/verl/test_main_ppo_cpu.py)
# --------------------------------------------------------------------------------------------------


def _init_process_group_gloo(module: ModuleType) -> None:
    """``initialize_global_process_group_ray`` with ``backend="gloo"`` unless the caller names one."""

    def build(original):
        @functools.wraps(original)
        def initialize_global_process_group_ray(timeout_second=None, backend=None):
            return original(timeout_second=timeout_second, backend=backend or "gloo")

        return initialize_global_process_group_ray

    wrap(module, "initialize_global_process_group_ray", build)


def _trl_has_value_head() -> bool:
    try:
        from trl.experimental.ppo import AutoModelForCausalLMWithValueHead
    except ImportError:
        try:
            from trl import AutoModelForCausalLMWithValueHead  # noqa: F401
        except ImportError:
            return False
    return True


def _trl_check(module: ModuleType) -> None:
    """``monkey_patch``'s ``is_trl_available`` also asks for TRL's value-head model."""

    def build(original):
        @functools.wraps(original)
        def is_trl_available() -> bool:
            return original() and _trl_has_value_head()

        return is_trl_available

    wrap(module, "is_trl_available", build)


PATCHES = PatchSet(
    "verl",
    [
        Patch(
            "verl.utils.distributed",
            _init_process_group_gloo,
            (
                Line(
                    "verl/utils/distributed.py",
                    89,
                    'backend = backend or f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"',
                ),
            ),
            "the default backend becomes 'cpu:gloo,cpu:gloo' on CPU, which torch rejects (one backend per "
            "device); the patch passes 'gloo'. It is applied when verl.utils.distributed is imported, "
            "before its callers (engine_workers.py) import the function by name",
        ),
        Patch(
            "verl.models.transformers.monkey_patch",
            _trl_check,
            (
                Line("verl/models/transformers/monkey_patch.py", 352, "if is_trl_available():"),
                Line(
                    "verl/models/transformers/monkey_patch.py",
                    356,
                    "from trl import AutoModelForCausalLMWithValueHead  # type: ignore",
                ),
            ),
            "with TRL >= 1 installed (no value-head model any more) is_trl_available() is true and the "
            "import fails; the patch reports TRL absent when its value-head model cannot be imported",
        ),
    ],
)


def install() -> None:
    """Make this process run verl on CPU (idempotent): the FSDP engines' device key
    (``VERL_ENGINE_DEVICE=cuda``), the transformers rollout in verl's registries, and ``PATCHES``.
    ``gem_adapters.verl.plugin`` calls it in every verl process when ``VERL_PLATFORM=cpu``; a script
    that drives verl's workers in its own process calls it, then ``set_platform(CPUPlatform())``."""
    os.environ.setdefault("VERL_ENGINE_DEVICE", "cuda")  # FSDP engines register for cuda/npu only
    _platform_cls()
    _register_rollout()
    PATCHES.install()

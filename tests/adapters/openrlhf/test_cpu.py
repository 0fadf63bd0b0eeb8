"""gem_adapters.openrlhf.cpu without running the trainer: each patched OpenRLHF line is still there, word for
word, in the installed OpenRLHF (these fail when OpenRLHF changes one); the weight broadcast is bit-exact
over gloo; the flash-attn stand-in lets OpenRLHF's trainer modules import and pads as flash-attn does. The
2-step run of ``train_ppo_ray`` itself is ``test_train_ppo_ray_cpu.py``."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

pytest.importorskip("openrlhf")

import torch

from gem_adapters.openrlhf import cpu
from gem_adapters.runtime.patching import source_root

LINES = cpu.PATCHES.lines()


@pytest.mark.parametrize("patch, line", LINES, ids=[str(line) for _, line in LINES])
def test_patched_openrlhf_line_is_unchanged(patch, line):
    found = line.read(source_root("openrlhf"))
    assert found == line.text, f"OpenRLHF changed {line} (now {found!r}); re-check {patch.name}: {patch.why}"


def test_the_patches_cover_every_cuda_call_of_the_trainer_processes():
    """Every ``torch.cuda.<call>`` / ``device="cuda"`` line in the OpenRLHF modules a CPU run executes is
    named by a patch (or sits in a branch the CPU run does not take: listed here with its reason)."""
    root = source_root("openrlhf")
    named = {(line.file, line.number) for _, line in LINES}
    not_run = {
        # CUDA-IPC weight sync and NCCL paths (--vllm.sync_backend gloo takes the broadcast path)
        "openrlhf/trainer/ray/vllm_worker_wrap.py": "update_weight_cuda_ipc",
        "openrlhf/trainer/ray/ppo_actor.py": "_handle_cuda_ipc",
    }
    files = [
        "openrlhf/utils/deepspeed/deepspeed.py",
        "openrlhf/trainer/ppo_utils/replay_buffer.py",
        "openrlhf/trainer/ray/vllm_worker_wrap.py",
    ]
    unnamed = []
    for relative in files:
        lines = (root / relative).read_text().splitlines()
        function = ""
        for number, text in enumerate(lines, 1):
            stripped = text.strip()
            if stripped.startswith("def "):
                function = stripped[4:].split("(")[0]
            uses_cuda = "torch.cuda." in stripped or 'device="cuda"' in stripped
            if not uses_cuda or stripped.startswith("#") or (relative, number) in named:
                continue
            if not_run.get(relative) == function or "torch.cuda.is_available" in stripped:
                continue
            if relative.endswith("deepspeed.py") and function not in {
                "setup_distributed",
                "all_reduce",
                "all_gather",
            }:
                continue  # checkpointing, ring attention, offload: not on the CPU run's path
            unnamed.append(f"{relative}:{number} ({function}): {stripped}")
    assert not unnamed, "CUDA calls no patch names:\n" + "\n".join(unnamed)


def test_the_weight_broadcast_is_bit_exact_over_gloo(free_port):
    """The trainer's rank 0 and a vLLM worker, as two ranks of ``GlooBroadcastGroup`` (threads here)."""
    sent = torch.randn(3, 5, dtype=torch.bfloat16)
    received = torch.empty_like(sent)
    errors = []

    def rank(index: int, tensor: torch.Tensor) -> None:
        try:
            group = cpu.stateless_init_process_group("127.0.0.1", free_port, index, 2, device=None)
            group.broadcast(tensor, src=0, stream=None)
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=rank, args=(0, sent)),
        threading.Thread(target=rank, args=(1, received)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and torch.equal(received.view(torch.int16), sent.view(torch.int16))
    with pytest.raises(ValueError, match="contiguous"):
        cpu.GlooBroadcastGroup.broadcast(None, sent.t(), src=0)


def test_flash_attn_stand_in_pads_as_flash_attn_does():
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0]])
    rows, indices, cu_seqlens, max_seqlen, used = cpu.unpad_input(hidden, mask)
    assert rows.shape == (5, 3) and indices.tolist() == [0, 1, 4, 5, 6]
    assert cu_seqlens.tolist() == [0, 2, 5] and max_seqlen == 3 and used.tolist() == [2, 3]
    padded = cpu.pad_input(rows, indices, 2, 4)
    assert torch.equal(padded, hidden * mask[..., None])


def test_openrlhf_trainer_modules_import_with_the_stand_in():
    """In a fresh process: ``install()``, then OpenRLHF's model code (which imports flash-attn at module
    level) imports; transformers still sees no flash-attn."""
    pytest.importorskip("deepspeed")
    pytest.importorskip("einops")
    code = (
        "from gem_adapters.openrlhf import cpu\n"
        "cpu.install()\n"
        "import openrlhf.models.ring_attn_utils as ring\n"
        "from transformers.utils import is_flash_attn_2_available\n"
        "print(ring.unpad_input is cpu.unpad_input, is_flash_attn_2_available())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-2:] == ["True", "False"]


def test_the_command_takes_its_estimator_as_a_flag_not_from_the_environment(monkeypatch):
    from gem_adapters.openrlhf.config import ESTIMATOR_ENV, GemOpenRLHFConfig

    monkeypatch.delenv(ESTIMATOR_ENV, raising=False)
    flags = ["--actor.num_nodes", "1", "--algo.advantage.estimator", "reinforce"]
    config, rest = cpu.parse_gem_flags(["--gem.estimator", "rebn", *flags])
    assert config == GemOpenRLHFConfig(estimator="rebn", cpu=True) and rest == flags
    assert cpu.parse_gem_flags(["--gem.estimator=grpo"])[0].estimator == "grpo"
    assert cpu.parse_gem_flags(flags) == (GemOpenRLHFConfig(cpu=True), flags)  # OpenRLHF's own estimator
    with pytest.raises(ValueError, match="choose one of"):
        cpu.parse_gem_flags(["--gem.estimator", "no_such_estimator"])
    monkeypatch.setenv(ESTIMATOR_ENV, "rebn")  # configuration through the environment is refused
    with pytest.raises(SystemExit, match=r"--gem\.estimator rebn"):
        cpu.parse_gem_flags(flags)

"""Which precision the learner and the generation engine compute in: bf16 where the hardware computes it
natively, fp32 elsewhere.

bf16 here means autocast with fp32 master weights: parameters, gradients and optimizer state stay fp32,
matrix products run in bf16 (fp32 accumulation), and the generation engine runs under the same autocast as
the learner, so the logprobs a rollout samples with are the learner's numerics. Native bf16:

* a CUDA device that supports it (``torch.cuda.is_bf16_supported()``);
* an x86 CPU with AVX-512-BF16 or AMX-BF16 (``avx512_bf16`` / ``amx_bf16`` in its flags, read at run
  time: machines of one kind differ). Elsewhere bf16 is emulated and slower than fp32, so fp32 is used.

``GEMGRPOConfig(bf16=None)`` (the default) asks ``native_bf16``; ``bf16=False`` (``--bf16 false``)
forces fp32 for that run and ``bf16=True`` bf16. The environment variable ``GEM_PRECISION=fp32`` (or
``bf16``) answers ``native_bf16`` for every run of the process and its children (the test suite sets
fp32, so that its numbers do not depend on the machine it runs on).

bf16 pays where matrix products are large: on an AMX CPU a learner pass of SmolLM2-135M (hidden size 576)
ran 2.27x faster in bf16, one of a 128-wide, 4-layer policy 0.82x as fast
(``benchmarks/bf16_by_model_size.py``): pass ``bf16=False`` for such small models.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
PRECISION_VARIABLE = "GEM_PRECISION"


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def native_bf16(device: Any = "cpu") -> bool:
    """True where ``device`` computes bf16 matrix products natively (see the module docstring)."""
    import torch

    forced = os.environ.get(PRECISION_VARIABLE, "auto")
    if forced not in ("auto", "fp32", "bf16"):
        raise ValueError(f"{PRECISION_VARIABLE} must be auto, fp32 or bf16, not {forced!r}")
    if forced != "auto":
        return forced == "bf16"
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return any(flag in cpu_flags() for flag in BF16_CPU_FLAGS)
    return False


def describe(device: Any = "cpu") -> str:
    """One line for logs: the precision ``native_bf16`` chooses on ``device`` and why."""
    import torch

    device = torch.device(device)
    if os.environ.get(PRECISION_VARIABLE, "auto") != "auto":
        return f"{'bf16 autocast' if native_bf16(device) else 'fp32'} ({PRECISION_VARIABLE} set)"
    if device.type == "cpu":
        found = [flag for flag in BF16_CPU_FLAGS if flag in cpu_flags()]
        return (
            f"bf16 autocast (CPU flags: {', '.join(found)})" if found else "fp32 (no native bf16 on this CPU)"
        )
    return "bf16 autocast" if native_bf16(device) else "fp32"


@contextlib.contextmanager
def autocast(enabled: bool, device: Any = "cpu") -> Iterator[None]:
    """bf16 autocast on ``device`` when ``enabled``. Held around a whole rollout, it also keeps each weight's
    bf16 copy for the rollout's every forward (autocast caches the casts of parameters until its outermost
    region ends) instead of casting the weights again at each decoding step."""
    import torch

    if not enabled:
        yield
        return
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        yield

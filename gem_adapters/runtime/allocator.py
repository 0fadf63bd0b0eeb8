"""Keep glibc's malloc from handing freed training buffers back to the kernel between steps.

glibc serves a buffer above its mmap threshold with a fresh ``mmap`` and unmaps it on ``free``, and it
trims the top of its heap back to the kernel as soon as enough of it is free. A training step allocates
and frees the same buffers every time (activations, gradients, optimizer temporaries, the generation
engine's work), so each step faults the same memory in again: minor page faults and system time.
``reuse_freed_memory`` sets, in this process (``mallopt``, no restart): buffers up to 32 MiB (glibc's
largest mmap threshold) come from the heap, the heap is never trimmed, and it grows 256 MiB at a time.
The process keeps its high-water mark of memory instead of returning it between steps.

Measured on the default ``examples/train_trl.py`` run (``benchmarks/results/train_step_profile.txt``),
against glibc's defaults and against jemalloc, which on this workload faulted more than glibc.

    from gem_adapters.runtime.allocator import reuse_freed_memory

    reuse_freed_memory()  # at the start of a training script; a no-op where the C library is not glibc

``GEM_MALLOC=default`` leaves glibc's settings as they are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc's malloc.h
MMAP_THRESHOLD = 32 * 2**20  # glibc's maximum (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)
TOP_PAD = 256 * 2**20
NEVER_TRIM = 2**62


def reuse_freed_memory() -> bool:
    """Apply the settings above; True if glibc accepted them."""
    if os.environ.get("GEM_MALLOC") == "default":
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False  # not glibc (musl, macOS): nothing to tune
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all(
        mallopt(option, min(value, 2**31 - 1)) == 1
        for option, value in (
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (M_TRIM_THRESHOLD, NEVER_TRIM),
            (M_TOP_PAD, TOP_PAD),
        )
    )

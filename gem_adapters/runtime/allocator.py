"""Keep glibc's malloc from handing freed training buffers back to the kernel between steps.

glibc serves a buffer above its mmap threshold with a fresh ``mmap`` and unmaps it on ``free``, and it
trims the top of its heap back to the kernel as soon as enough of it is free. A training step allocates
and frees the same buffers every time (activations, gradients, optimizer temporaries, the generation
engine's work), so each step faults the same memory in again: minor page faults and system time.
``reuse_freed_memory`` sets, in this process (``mallopt``, no restart): buffers up to 32 MiB (glibc's
largest mmap threshold) come from the heap, the heap is never trimmed, and it grows 256 MiB at a time.
The process keeps its high-water mark of memory instead of returning it between steps.

That mark creeps up where buffers change size from step to step (episodes of varying length): freed chunks
of the never-trimmed heap fragment, and a long run grows without bound (a 24-step SmolLM2 run on the web
shop reached 24 GB and was killed by the kernel; a Mastermind run held 4.7 GB during its first step and 11 GB
after its eighth, against 1.5-3.2 GB between steps with the free pages returned). ``trim_above`` bounds
it: called between steps, it hands every free page back (``malloc_trim``) once the process holds more than
a share of the machine's memory, so short runs keep the saved faults and long ones stay under the bound.
GEMGRPOTrainer calls it after each training step.

Measured on the default ``examples/train_trl.py`` run (``benchmarks/results/train_step_profile.txt``),
against glibc's defaults and against jemalloc, which on this workload faulted more than glibc.

    from gem_adapters.runtime.allocator import reuse_freed_memory, trim_above

    reuse_freed_memory()  # at the start of a training script; a no-op where the C library is not glibc
    trim_above(0.5)  # between steps: free pages back to the kernel once RSS is over half the memory

``GEM_MALLOC=default`` leaves glibc's settings as they are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc's malloc.h
MMAP_THRESHOLD = 32 * 2**20  # glibc's maximum (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)
TOP_PAD = 256 * 2**20
NEVER_TRIM = 2**62
TRIM_ABOVE = 0.5  # GEMGRPOTrainer's bound: the share of the machine's memory a process may hold between steps


@functools.cache
def glibc() -> ctypes.CDLL | None:
    """The C library where it is glibc (it has ``mallopt`` and ``malloc_trim``), else None (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
    except (OSError, TypeError):
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def resident_bytes() -> int:
    """This process's resident memory (``/proc/self/statm``; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def memory_bytes() -> int:
    """The machine's physical memory (0 where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return 0


def trim_above(share: float = TRIM_ABOVE) -> bool:
    """Hand glibc's free pages back to the kernel (``malloc_trim(0)``) if this process holds more than
    ``share`` of the machine's memory; True if it did."""
    libc, limit = glibc(), share * memory_bytes()
    if libc is None or not limit or resident_bytes() <= limit:
        return False
    libc.malloc_trim(0)
    return True


def reuse_freed_memory() -> bool:
    """Apply the settings above; True if glibc accepted them."""
    if os.environ.get("GEM_MALLOC") == "default":
        return False
    libc = glibc()
    if libc is None:
        return False  # not glibc: nothing to tune
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all(
        mallopt(option, min(value, 2**31 - 1)) == 1
        for option, value in (
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (M_TRIM_THRESHOLD, NEVER_TRIM),
            (M_TOP_PAD, TOP_PAD),
        )
    )

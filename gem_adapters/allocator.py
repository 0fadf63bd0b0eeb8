"""jemalloc for CPU training, the way PyTorch's CPU performance guide recommends it.

glibc's malloc serves every buffer above its mmap threshold (at most 32 MiB) with a fresh ``mmap`` and
gives it back to the kernel on ``free``; smaller ones come from heaps it trims back to the kernel as
soon as their top is free. A training step allocates and frees the same large buffers every time
(gradients, optimizer temporaries, the LM head's logit chunks, the generation engine's work
buffers), so each step faults the same memory in again: tens of thousands of minor page faults a
second and hundreds of seconds of system time over a run. jemalloc keeps freed pages for reuse
instead. It must be loaded before the process starts (``LD_PRELOAD``), so ``use_jemalloc`` re-executes
the current command with it, once, before anything heavy is imported:

    if __name__ == "__main__":
        from gem_adapters.allocator import use_jemalloc

        use_jemalloc()  # re-runs this command with jemalloc preloaded, if the library is installed

``scripts/install.sh`` installs Debian's ``libjemalloc2`` where it can. Nothing happens when jemalloc is
already loaded, when the library is not found, or with ``GEM_ALLOCATOR=system`` (keep glibc's malloc).
The settings (``MALLOC_CONF``, unless set) keep freed pages for reuse (``dirty_decay_ms``,
``muzzy_decay_ms``) and let a background thread purge them once they have gone unused for that long.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LIBRARY = "libjemalloc.so.2"
SEARCH = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
)
MALLOC_CONF = "background_thread:true,metadata_thp:auto,dirty_decay_ms:60000,muzzy_decay_ms:60000"


def find_jemalloc() -> str | None:
    """The path of the jemalloc shared library, or None."""
    for folder in SEARCH:
        path = Path(folder) / LIBRARY
        if path.exists():
            return str(path)
    return None


def jemalloc_loaded() -> bool:
    """Whether this process runs with jemalloc (read from its memory maps)."""
    try:
        return "jemalloc" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def use_jemalloc(argv: list[str] | None = None) -> None:
    """Re-execute this command (``sys.argv``, or ``argv``) with jemalloc preloaded; returns only when
    that is not needed or not possible (see the module docstring)."""
    if os.environ.get("GEM_ALLOCATOR", "jemalloc") == "system" or jemalloc_loaded():
        return
    library = find_jemalloc()
    if library is None or os.environ.get("_GEM_JEMALLOC_TRIED"):
        return
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(filter(None, [library, env.get("LD_PRELOAD")]))
    env.setdefault("MALLOC_CONF", MALLOC_CONF)
    env["_GEM_JEMALLOC_TRIED"] = "1"  # never loop if the preload does not take
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *(sys.argv if argv is None else argv)], env)

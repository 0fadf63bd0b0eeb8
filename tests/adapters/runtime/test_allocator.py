"""reuse_freed_memory: buffers freed between steps are reused instead of being faulted in again."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

STEPS = """
import json, resource, sys
import numpy as np
from gem_adapters.runtime.allocator import reuse_freed_memory
tuned = reuse_freed_memory() if sys.argv[1] == "tuned" else None
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def step():  # eight 16 MB buffers, filled, then freed (activations and gradients of a step)
    buffers = [np.ones(4_000_000, dtype=np.float32) for _ in range(8)]
    del buffers
for _ in range(3):  # warm up: the heap grows to its high-water mark
    step()
before = faults()
for _ in range(10):
    step()
print(json.dumps({"tuned": tuned, "faults": faults() - before}))
"""


def steps(mode: str, env: dict | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", STEPS, mode], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_buffers_are_reused_instead_of_faulted_in_again():
    default, tuned = steps("default"), steps("tuned")
    assert tuned["tuned"] is True
    pages_per_step = 8 * 16_000_000 // 4096
    assert default["faults"] > pages_per_step  # glibc gives memory back and faults it in again
    assert tuned["faults"] < pages_per_step / 100  # ten steps fault almost nothing


def test_gem_malloc_default_leaves_glibc_alone():
    import os

    assert steps("tuned", {**os.environ, "GEM_MALLOC": "default"})["tuned"] is False


TRIM = """
import json, sys
import numpy as np
from gem_adapters.runtime.allocator import memory_bytes, resident_bytes, reuse_freed_memory, trim_above
reuse_freed_memory()
buffers = [np.ones(4_000_000, dtype=np.float32) for _ in range(8)]  # 128 MB from the never-trimmed heap
del buffers
held = resident_bytes()
under = trim_above(1.0)  # a process that holds less than the whole machine is left alone
kept = resident_bytes()
over = trim_above(held / memory_bytes() / 2)  # one that holds more than its share gives free pages back
print(json.dumps({"held": held, "kept": kept, "after": resident_bytes(), "under": under, "over": over}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_trim_above_returns_free_pages_only_past_its_share_of_memory():
    done = subprocess.run([sys.executable, "-c", TRIM], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    trimmed = json.loads(done.stdout)
    assert trimmed["under"] is False and trimmed["over"] is True
    assert trimmed["kept"] > trimmed["held"] - 16_000_000  # not trimmed: the freed 128 MB stay resident
    assert trimmed["after"] < trimmed["held"] - 100_000_000  # trimmed: they go back to the kernel

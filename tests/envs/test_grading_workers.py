"""Grading workers never outlive the process that started them, whatever they are computing."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

# Starts a call that never returns, prints the worker's pid, then ends as the test says.
PARENT = """
import os, sys, threading, time
from gem_core.envs import grading
threading.Thread(target=grading.call, args={target!r} + {args!r}, kwargs={{"timeout": 600}}, daemon=True).start()
while not list(grading._STARTED):
    time.sleep(0.05)
time.sleep(1.0)  # the call is running
print(next(iter(grading._STARTED)).process.pid, flush=True)
{ending}
"""


def worker_of(target: str, args: tuple, ending: str, **env: str) -> int:
    code = PARENT.format(target=(target,), args=args, ending=ending)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={**os.environ, **env}
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    os.kill(pid, 9)  # leave nothing behind
    return False


@pytest.mark.parametrize("ending", ["sys.exit(0)", "os._exit(0)"], ids=["exit", "killed-like"])
def test_a_busy_worker_dies_with_its_parent(ending):
    """A normal exit kills it (atexit); without one (as after SIGKILL) it notices it was orphaned."""
    assert gone_within(worker_of("time:sleep", (3600,), ending), 10)


def test_an_orphan_stuck_in_c_code_is_ended_by_its_cpu_limit():
    """``math.factorial`` of a huge number never returns to the interpreter: the CPU limit ends it."""
    pid = worker_of("math:factorial", (10**9,), "os._exit(0)", GEM_GRADER_CPU_SECONDS="2")
    assert gone_within(pid, 30)

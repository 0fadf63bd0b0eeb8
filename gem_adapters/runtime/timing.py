"""PhaseClock: wall seconds and minor page faults spent in named phases of a run.

    clock = PhaseClock()
    with clock.phase("forward"):
        loss = model(...)
    clock.count("tokens", 512)
    clock.take()  # Taken(seconds={"forward": 0.81}, faults={"forward": 1204}, counts={"tokens": 512})

Minor page faults count memory the process touched for the first time since the kernel mapped it: an
allocator that returns large buffers to the OS and gets them back on the next step shows up here as
tens of thousands of faults per second (and as system time). Phases may nest; each keeps its own total.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import resource
import time
from collections.abc import Iterator


def minor_faults() -> int:
    """Minor page faults of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@dataclasses.dataclass
class Taken:
    """What a ``PhaseClock`` accumulated: seconds and minor page faults per phase, and counts."""

    seconds: dict[str, float]
    faults: dict[str, int]
    counts: dict[str, int]


class PhaseClock:
    def __init__(self) -> None:
        self.seconds: collections.Counter[str] = collections.Counter()
        self.faults: collections.Counter[str] = collections.Counter()
        self.counts: collections.Counter[str] = collections.Counter()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started, faults = time.perf_counter(), minor_faults()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - started
            self.faults[name] += minor_faults() - faults

    def add(self, name: str, seconds: float, faults: int = 0) -> None:
        self.seconds[name] += seconds
        self.faults[name] += faults

    def count(self, name: str, amount: int) -> None:
        self.counts[name] += amount

    def take(self) -> Taken:
        """What was accumulated since the last ``take``; the clock starts again from zero."""
        taken = Taken(dict(self.seconds), dict(self.faults), dict(self.counts))
        self.seconds.clear()
        self.faults.clear()
        self.counts.clear()
        return taken

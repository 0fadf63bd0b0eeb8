"""The reference gem's ``gem.utils.seeding``.

gem_core's envs never read the process-global ``random``/``numpy.random`` state: each env owns its
generators, seeded by ``env.reset(seed=...)``. ``set_seed`` seeds those global generators for the
caller's own code, as the reference's does; ``np_random`` gives a seeded numpy generator.
"""

from __future__ import annotations

import random

import numpy as np

RNG = RandomNumberGenerator = np.random.Generator


def np_random(seed: int | None = None) -> tuple[np.random.Generator, int]:
    """A numpy ``Generator`` seeded with ``seed`` (fresh entropy if None) and the seed it used."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed_seq = np.random.SeedSequence(seed)
    return np.random.Generator(np.random.PCG64(seed_seq)), seed_seq.entropy


def set_seed(seed: int | None = None) -> None:
    """Seed the process-global ``random`` and ``numpy.random`` generators."""
    random.seed(seed)
    np.random.seed(seed)

"""SyncVectorEnv: steps its envs one after another in the calling thread."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from gem_core.vector.base import Call, EnvFailure, VectorEnv, run_guarded


class SyncVectorEnv(VectorEnv):
    """The reference backend. ``step_timeout`` cannot interrupt a running call here: an env that
    overran is reported and replaced after it returns (use ``AsyncVectorEnv`` to abandon hung envs)."""

    def _call(self, calls: Mapping[int, Call], timeout: float | None) -> dict[int, Any]:
        results = {}
        for i, call in calls.items():
            start = time.monotonic()
            result = run_guarded(call, self.envs[i], None if timeout is None else start + timeout)
            elapsed = time.monotonic() - start
            if timeout is not None and elapsed > timeout and not isinstance(result, EnvFailure):
                result = EnvFailure(f"step took {elapsed:.3f}s, over the {timeout}s step timeout")
            results[i] = result
        return results

"""RayVectorEnv: the envs live in Ray actors, so a trainer's Ray cluster (verl, OpenRLHF, ROLL) hosts them.

Each of ``num_workers`` actors (default: one per CPU of the cluster, at most one per env) owns a
contiguous slice of the envs, exactly as a worker process of ``ProcessVectorEnv`` does (see
``gem_core.vector.remote``). The vector env joins the Ray instance already initialised in this
process, else ``ray.init(address=address)``: an existing cluster at ``address`` (or ``RAY_ADDRESS``),
or a new local instance. ``actor_options`` go to ``ActorClass.options`` (default ``num_cpus=1``: an
actor waits for a free CPU, and the constructor gives up after ``start_timeout``). Ray runs its workers
at nice 15 (``RAY_worker_niceness``), so on a busy machine they yield the CPU to other processes.

An actor that dies (``RayActorError``) or whose calls overran ``step_timeout`` is killed with
``ray.kill`` and replaced by a new actor with fresh envs. Ray is optional: ``pip install gem-core[ray]``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from gem_core.core import Env
from gem_core.vector.remote import EnvHost, WorkerPoolVectorEnv


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError(
            "the Ray vector env backend needs Ray: pip install 'gem-core[ray]' (or pip install ray)"
        ) from exc
    return ray


class RayVectorEnv(WorkerPoolVectorEnv):
    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        num_workers: int | None = None,
        address: str | None = None,
        actor_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        self._ray = ray = import_ray()
        if not ray.is_initialized():
            ray.init(address=address)
        self._actor_cls = ray.remote(EnvHost)
        self._actor_options = {"num_cpus": 1, **(actor_options or {}), "max_concurrency": 1}
        self._actors: dict[int, Any] = {}
        self._pings: dict[int, Any] = {}
        self._pending: dict[int, Any] = {}
        super().__init__(env_fns, num_workers=num_workers, **kwargs)

    def _default_num_workers(self) -> int:
        return int(self._ray.cluster_resources().get("CPU", 1))

    def _launch(self, w: int) -> None:
        actor = self._actor_cls.options(**self._actor_options).remote(self._payloads[w])
        self._actors[w], self._pings[w] = actor, actor.ping.remote()

    def _await_ready(self, w: int) -> None:
        ray = self._ray
        ready, _ = ray.wait([self._pings[w]], timeout=self.start_timeout)
        if not ready:
            self._kill(w)
            raise RuntimeError(
                f"Ray actor {w} did not start within {self.start_timeout}s: does the cluster have the "
                f"resources for {self.num_workers} actors with {self._actor_options}?"
            )
        try:
            ray.get(ready[0])
        except ray.exceptions.RayError as exc:
            self._kill(w)
            cause = str(exc).strip().splitlines()[-1]  # Ray's message ends with the creation error
            raise RuntimeError(f"Ray actor {w} could not build its envs: {cause}") from exc

    def _submit(self, w: int, request: bytes) -> None:
        self._pending[w] = self._actors[w].run.remote(request)

    def _receive(self, workers: Sequence[int], timeout: float | None) -> dict[int, bytes | str]:
        ray = self._ray
        owner = {self._pending[w]: w for w in workers}
        # All at once: the reply of a dead actor is ready too (it raises), and a live actor answers by
        # the step timeout itself, so waiting for every reply never hides a fault for long.
        ready, _ = ray.wait(list(owner), num_returns=len(owner), timeout=timeout)
        replies: dict[int, bytes | str] = {}
        for ref in ready:
            w = owner[ref]
            try:
                replies[w] = ray.get(ref)
            except ray.exceptions.RayError as exc:
                replies[w] = f"died ({type(exc).__name__})"
        return replies

    def _kill(self, w: int) -> None:
        actor = self._actors.pop(w, None)
        self._pending.pop(w, None)
        self._pings.pop(w, None)
        if actor is not None:
            with contextlib.suppress(Exception):
                self._ray.kill(actor, no_restart=True)

    def _shutdown(self, workers: Sequence[int]) -> None:
        closing = [self._actors[w].close.remote() for w in workers if w in self._actors]
        with contextlib.suppress(Exception):
            self._ray.wait(closing, num_returns=len(closing), timeout=5.0)  # their envs close first
        for w in workers:
            self._kill(w)

"""RayVectorEnv: the envs live in Ray actors, so a trainer's Ray cluster (verl, OpenRLHF, ROLL) hosts them.

Each of ``num_workers`` actors (default: one per CPU of the cluster, at most one per env) owns a
contiguous slice of the envs, exactly as a worker process of ``ProcessVectorEnv`` does (see
``gem_core.vector.env_host``). The vector env joins the Ray instance already initialised in this
process, else ``ray.init(address=address)``: an existing cluster at ``address`` (or ``RAY_ADDRESS``),
or a new local instance. ``actor_options`` go to ``ActorClass.options`` (default ``num_cpus=1``: an
actor waits for a free CPU, and the constructor gives up after ``start_timeout``). Ray runs its workers
at nice 15 (``RAY_worker_niceness``), so on a busy machine they yield the CPU to other processes: beside
two CPU-bound processes at nice 0, actors of this machine kind got ~3% of a core, missed their step
deadlines (each miss replaces the actor) or did not start at all. Where the envs share the machine with
such work, start Ray with ``RAY_worker_niceness=0`` in its environment (the tests do).

Ray places, starts and kills the actors. With ``transport="connection"`` (the default) the batches
go over a TCP connection from this process to each actor (on its node's IP, a port the OS picks,
authenticated with a key made for this vector env): a Ray method call costs 0.7-0.9 ms of round trip
on a 2-core machine, against 0.03 ms for the connection, and made 20 ms I/O-bound batch steps 8-16%
slower than the thread backend, against 1-2% now (``benchmarks/vector_backends.py``: rows "ray" and
"ray calls"). The actors' nodes must then accept TCP connections from this process, as they do from a
driver on the cluster; where they cannot (a driver connected through Ray Client, ``ray://``),
``transport="ray"`` sends each batch as a Ray method call.

An actor that dies (its connection closes; Ray's reason is reported) or answers nothing past
``step_timeout`` is killed with ``ray.kill`` and replaced by a new actor, and its envs are restored
from their snapshots; the calls an actor was running when it died run again in the new one, so only
the call that killed it fails; a call that merely overran ``step_timeout`` costs only its own env
(see ``gem_core.vector.worker_pool``). With ``transport="ray"`` an actor's results come back with its
batch's last message, so every call of a batch an actor died in runs again. Ray is optional:
``pip install gem-core[ray]``.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection as mpc
import os
from collections.abc import Callable, Sequence
from typing import Any

from gem_core.core import Env
from gem_core.vector.env_host import EnvHost, describe, serve
from gem_core.vector.worker_pool import WorkerPoolVectorEnv


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError(
            "the Ray vector env backend needs Ray: pip install 'gem-core[ray]' (or pip install ray)"
        ) from exc
    return ray


TRANSPORTS = ("connection", "ray")


class EnvActor:
    """One worker as a Ray actor: its ``EnvHost``, answering over a TCP connection it listens for when
    given an ``authkey``, else through Ray method calls (``run``, ``close``)."""

    def __init__(self, factories: bytes, authkey: bytes | None = None, keep_states: bool = False):
        self.host = EnvHost(factories, keep_states)
        self.listener = None
        if authkey is not None:
            self.listener = mpc.Listener((import_ray().util.get_node_ip_address(), 0), authkey=authkey)

    def address(self) -> tuple[str, int] | None:
        """Where it listens (``None`` without a key); a call that returns once the envs are built."""
        return None if self.listener is None else self.listener.address

    def run(self, request: bytes) -> bytes:
        return self.host.run(request)

    def close(self) -> None:
        self.host.close()

    def serve(self) -> None:
        """Accept the vector env's connection, stop listening, and answer its batches until it says
        stop or is gone."""
        try:
            while True:
                with contextlib.suppress(mpc.AuthenticationError):  # a stranger: wait for ours
                    conn = self.listener.accept()
                    break
        finally:
            self.listener.close()
        with conn:
            serve(self.host, conn)


class RayVectorEnv(WorkerPoolVectorEnv):
    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        num_workers: int | None = None,
        address: str | None = None,
        actor_options: dict[str, Any] | None = None,
        transport: str = "connection",
        **kwargs: Any,
    ):
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r}; choose from {TRANSPORTS}")
        self.transport = transport
        self._ray = ray = import_ray()
        if not ray.is_initialized():
            ray.init(address=address)
        self._actor_cls = ray.remote(EnvActor)
        # One method at a time, on the actor's main thread (``serve`` runs until the vector env closes).
        self._actor_options = {"num_cpus": 1, **(actor_options or {}), "max_concurrency": 1}
        self._authkey = os.urandom(32) if transport == "connection" else None
        self._actors: dict[int, Any] = {}
        self._addresses: dict[int, Any] = {}
        self._serving: dict[int, Any] = {}  # "connection": each actor's ``serve`` call
        self._pending: dict[int, Any] = {}  # "ray": each actor's ``run`` call in flight
        super().__init__(env_fns, num_workers=num_workers, **kwargs)

    def _default_num_workers(self) -> int:
        return int(self._ray.cluster_resources().get("CPU", 1))

    def _launch(self, h: int, w: int) -> None:
        actor = self._actor_cls.options(**self._actor_options).remote(
            self._payloads[w], self._authkey, self.keep_states
        )
        self._actors[h], self._addresses[h] = actor, actor.address.remote()

    def _has_started(self, h: int) -> bool:
        ready, _ = self._ray.wait([self._addresses[h]], timeout=0)
        return bool(ready)

    def _await_ready(self, h: int) -> None:
        ray = self._ray
        ready, _ = ray.wait([self._addresses[h]], timeout=self.start_timeout)
        if not ready:
            self._kill(h)
            raise RuntimeError(
                f"Ray actor {h} did not start within {self.start_timeout}s: does the cluster have the "
                f"resources for {self.num_workers} actors with {self._actor_options}?"
            )
        try:
            address = ray.get(ready[0])
        except ray.exceptions.RayError as exc:
            self._kill(h)
            cause = str(exc).strip().splitlines()[-1]  # Ray's message ends with the creation error
            raise RuntimeError(f"Ray actor {h} could not build its envs: {cause}") from exc
        if self.transport == "ray":
            return
        self._serving[h] = self._actors[h].serve.remote()
        try:
            self._conns[h] = mpc.Client(address, authkey=self._authkey)
        except (OSError, EOFError, mpc.AuthenticationError) as exc:
            self._kill(h)
            raise RuntimeError(
                f"could not connect to Ray actor {h} at {address}: {describe(exc)}; where this process "
                'cannot reach the actors\' nodes, use transport="ray"'
            ) from exc

    def _submit(self, h: int, request: bytes) -> None:
        if self.transport == "ray":
            self._pending[h] = self._actors[h].run.remote(request)
        else:
            super()._submit(h, request)

    def _receive(self, handles: Sequence[int], timeout: float | None) -> dict[int, bytes | str]:
        if self.transport == "connection":
            return super()._receive(handles, timeout)
        ray = self._ray
        owner = {self._pending[h]: h for h in handles}
        # All at once: the reply of a dead actor is ready too (it raises), and a live actor answers by
        # the step timeout itself, so waiting for every reply never hides a fault for long.
        ready, _ = ray.wait(list(owner), num_returns=len(owner), timeout=timeout)
        replies: dict[int, bytes | str] = {}
        for ref in ready:
            h = owner[ref]
            try:
                replies[h] = ray.get(ref)
            except ray.exceptions.RayError as exc:
                replies[h] = f"died ({type(exc).__name__})"
        return replies

    def _death(self, h: int) -> str:
        ray = self._ray
        ready, _ = ray.wait([self._serving[h]], timeout=5.0)  # Ray learns of a death a moment later
        if ready:
            try:
                ray.get(ready[0])
            except ray.exceptions.RayError as exc:
                return f"died ({type(exc).__name__})"
        return "closed its connection"

    def _kill(self, h: int) -> None:
        actor, conn = self._actors.pop(h, None), self._conns.pop(h, None)
        for calls in (self._addresses, self._serving, self._pending):
            calls.pop(h, None)
        if conn is not None:
            conn.close()
        if actor is not None:
            with contextlib.suppress(Exception):
                self._ray.kill(actor, no_restart=True)

    def _shutdown(self, handles: Sequence[int]) -> None:
        if self.transport == "ray":
            ending = [self._actors[h].close.remote() for h in handles if h in self._actors]
        else:  # told to stop by close(), ``serve`` returns once the envs are closed
            ending = [self._serving[h] for h in handles if h in self._serving]
        with contextlib.suppress(Exception):
            self._ray.wait(ending, num_returns=len(ending), timeout=5.0)  # their envs close first
        for h in handles:
            self._kill(h)

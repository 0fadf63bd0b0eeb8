"""ProcessVectorEnv: the envs live in a pool of worker processes, so CPU-bound steps run in parallel.

``num_workers`` processes (default: one per CPU this process may use, at most one per env) each own a
contiguous slice of the envs and run them on a thread per env (see ``gem_core.vector.env_host`` for
serialisation, ``gem_core.vector.worker_pool`` for fault handling). Workers start with ``forkserver`` where the platform has it, else
``spawn``: plain ``fork`` of a parent that runs threads or torch is unsafe. The fork server (a fresh
interpreter, not a copy of this one) preloads the worker code. A worker talks to the parent over a
pipe. Workers are daemons: they end with the parent, and their envs may start subprocesses but not
``multiprocessing`` children.

A worker that dies (``os._exit``, a segfault, the OOM killer) is seen as end-of-file on its pipe (or,
between batches, as a pipe with something to read before anything was asked); one that answers
nothing past ``step_timeout`` is killed. Either way it is started anew and its envs are restored from
their snapshots, and the calls a dead worker was running run again, so that only the call that
killed it fails (see ``gem_core.vector.worker_pool``). A call that merely overran ``step_timeout`` costs
only its own env: the worker abandons it to its thread.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pickle
import signal
from collections.abc import Callable, Sequence
from typing import Any

from gem_core.core import Env
from gem_core.vector.env_host import EnvHost, describe, serve
from gem_core.vector.worker_pool import WorkerPoolVectorEnv


class ProcessVectorEnv(WorkerPoolVectorEnv):
    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        num_workers: int | None = None,
        context: str | None = None,
        **kwargs: Any,
    ):
        context = context or ("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
        if context == "fork":
            raise ValueError("fork is unsafe with threads and torch; use spawn or forkserver")
        self._ctx = mp.get_context(context)
        if context == "forkserver":
            _preload_forkserver(self._ctx)
        self._procs: dict[int, Any] = {}
        super().__init__(env_fns, num_workers=num_workers, **kwargs)

    def _default_num_workers(self) -> int:
        if hasattr(os, "sched_getaffinity"):  # the CPUs this process may use (taskset, cpusets)
            return len(os.sched_getaffinity(0))
        return os.cpu_count() or 1

    def _launch(self, h: int, w: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=_worker_main,
            args=(child, self._payloads[w], self.keep_states),
            name=f"gem-vec-worker-{w}",
            daemon=True,
        )
        proc.start()
        child.close()
        self._procs[h], self._conns[h] = proc, parent

    def _has_started(self, h: int) -> bool:
        return bool(mpc.wait([self._conns[h], self._procs[h].sentinel], 0))

    def _await_ready(self, h: int) -> None:
        conn, proc = self._conns[h], self._procs[h]
        name = proc.name
        if not mpc.wait([conn, proc.sentinel], self.start_timeout):
            self._kill(h)
            raise RuntimeError(f"{name} did not start within {self.start_timeout}s")
        try:
            status, detail = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            status, detail = "error", self._death(h)
        if status != "ready":
            self._kill(h)
            raise RuntimeError(f"{name} could not build its envs: {detail}")

    def _sentinels(self, h: int) -> list[Any]:
        return [self._procs[h].sentinel]

    def _death(self, h: int) -> str:
        proc = self._procs[h]
        proc.join(timeout=1.0)
        code = proc.exitcode
        if code is None:
            return "closed its pipe"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"died (killed by {signal.Signals(-code).name})"
        return f"died (exit code {code})"

    def _kill(self, h: int) -> None:
        proc, conn = self._procs.pop(h, None), self._conns.pop(h, None)
        if proc is not None:
            proc.kill()
            proc.join(timeout=5.0)
            with contextlib.suppress(ValueError):  # still running after SIGKILL: leave it to the OS
                proc.close()
        if conn is not None:
            conn.close()

    def _shutdown(self, handles: Sequence[int]) -> None:
        for h in handles:
            if h in self._procs:
                self._procs[h].join(timeout=5.0)  # its envs close first
                self._kill(h)


_preloaded = False


def _preload_forkserver(ctx: Any) -> None:
    """Have the fork server import the worker's code once, so that each worker starts in milliseconds
    (it takes effect if the server has not started yet; ``__main__`` is in Python's default list)."""
    global _preloaded
    if not _preloaded:
        _preloaded = True
        ctx.set_forkserver_preload(["__main__", "gem_core.vector.env_host"])


def _worker_main(conn: mpc.Connection, factories: bytes, keep_states: bool = False) -> None:
    """A worker process: build the envs, then answer batches until told to stop (or the parent is gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us
    try:
        host = EnvHost(factories, keep_states)
    except BaseException as exc:
        conn.send_bytes(pickle.dumps(("error", describe(exc))))
        return
    conn.send_bytes(pickle.dumps(("ready", None)))
    serve(host, conn)

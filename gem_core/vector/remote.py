"""Envs hosted in worker processes: what the process and Ray backends share.

The envs are cut into contiguous slices, one per worker. Inside a worker an ``EnvHost`` owns its slice
and gives each env a thread of its own, as ``AsyncVectorEnv`` does: steps that wait overlap within the
worker, and CPU work spreads over the workers. A worker talks to the vector env over one
``multiprocessing`` connection (a pipe to a local process, an authenticated TCP socket to a Ray actor):
one batch of calls in, one reply out (``serve``).

Serialisation: env factories travel to the workers once, with cloudpickle where it is installed (it
accepts lambdas and classes defined in ``__main__``) and pickle otherwise. Each batch of calls (plain
tuples, see ``gem_core.vector.base``) goes to a worker as one pickled request (highest protocol), and
comes back as one reply holding each env's pickled result (observation, reward, flags, info): so
observations and infos must pickle, and a result that does not is reported as that env's failure.

Faults: an env that raises is rebuilt inside its worker. A call still running at ``step_timeout``
makes its worker report it, and a worker that died or answers nothing ``_GRACE`` seconds later counts
the same. Such a worker is killed and started anew with fresh envs: the calls it was running fail with
the reason, and every other env it hosted lost its episode too; those are reported as failures in the
same batch when they were part of it, otherwise at their next ``step`` (``VectorEnv._lost``).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing.connection as mpc
import pickle
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gem_core.core import Env
from gem_core.vector.base import Call, EnvFailure, VectorEnv, run_guarded
from gem_core.vector.threads import _Worker

# Seconds past ``step_timeout`` that a worker gets to report its hung calls before it counts as hung.
_GRACE = 2.0

# The GIL switch interval in a worker process (Python's default is 0.005 s). A worker's env threads doing
# pure-Python work would otherwise hand the GIL round every 5 ms; at 20 ms the CPU-bound benchmark
# (benchmarks/vector_backends.py, "processes" vs "processes @5ms") ran 5% faster on average over 7 runs
# (-5% to +15%), and its worst run went from 1.62x to 1.76x over sync. A batch step waits for all its
# calls anyway, so the longer turns do not delay it; threads that wait on I/O release the GIL as before.
WORKER_SWITCH_INTERVAL = 0.02


def dumps_factories(env_fns: Sequence[Callable[[], Env]]) -> bytes:
    """The env factories as bytes a worker can load (cloudpickle when installed, else pickle)."""
    try:
        import cloudpickle
    except ImportError:
        try:
            from ray import cloudpickle
        except ImportError:
            cloudpickle = pickle
    try:
        return cloudpickle.dumps(list(env_fns), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise TypeError(
            "env factories must pickle to run in worker processes: use functools.partial over a "
            f"module-level class or function (or install cloudpickle); {type(exc).__name__}: {exc}"
        ) from exc


def describe(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


class EnvHost:
    """The envs of one worker, built from their factories, each called on its own thread. Built in a
    process of its own (a worker), it sets that process's GIL switch interval (``WORKER_SWITCH_INTERVAL``)."""

    def __init__(self, factories: bytes):
        sys.setswitchinterval(WORKER_SWITCH_INTERVAL)
        self.factories: list[Callable[[], Env]] = pickle.loads(factories)
        self.envs: list[Env | None] = [fn() for fn in self.factories]
        self.threads = [_Worker(f"gem-env-{k}") for k in range(len(self.envs))]

    def run(self, request: bytes) -> bytes:
        """Run a pickled ``(batch, timeout)``: the calls ``[(k, call), ...]`` go concurrently, each on its
        env's thread; the answer is the pickled ``{k: pickled result}`` of those done by ``timeout``."""
        batch, timeout = pickle.loads(request)
        futures = {self.threads[k].submit(self._run, k, call): k for k, call in batch}
        done, _ = cf.wait(futures, timeout=timeout)
        replies = {}
        for future in done:
            exc = future.exception()  # only a BaseException (SystemExit, ...) escapes _run
            replies[futures[future]] = self._dumps(EnvFailure(describe(exc))) if exc else future.result()
        return pickle.dumps(replies, protocol=pickle.HIGHEST_PROTOCOL)

    def close(self) -> None:
        for env, thread in zip(self.envs, self.threads):
            if env is not None:
                with contextlib.suppress(Exception):
                    env.close()
            thread.shutdown()

    def _run(self, k: int, call: Call) -> bytes:
        env = self.envs[k]
        if env is None:  # its rebuild failed after the last failure; try again
            env = self._rebuild(k)
        if isinstance(env, EnvFailure):
            return self._dumps(env)
        result = run_guarded(call, env)
        try:
            payload = self._dumps(result)
        except Exception as exc:
            result = EnvFailure(f"the result of {call[0]} does not pickle: {describe(exc)}")
            payload = self._dumps(result)
        if isinstance(result, EnvFailure) and call[0] in ("reset", "step"):
            self._rebuild(k)
        return payload

    def _rebuild(self, k: int) -> Env | EnvFailure:
        old, self.envs[k] = self.envs[k], None
        if old is not None:
            with contextlib.suppress(Exception):
                old.close()
        try:
            self.envs[k] = self.factories[k]()
        except Exception as exc:
            return EnvFailure(f"could not rebuild the env: {describe(exc)}")
        return self.envs[k]

    @staticmethod
    def _dumps(result: Any) -> bytes:
        return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)


def serve(host: EnvHost, conn: mpc.Connection) -> None:
    """A worker's loop: answer each batch that comes over ``conn`` until an empty request or until the
    vector env is gone (end-of-file), then close the envs."""
    try:
        while request := conn.recv_bytes():
            conn.send_bytes(host.run(request))
    except (EOFError, OSError):
        pass  # the vector env is gone
    finally:
        host.close()


class WorkerPoolVectorEnv(VectorEnv):
    """A vector env whose envs live in ``num_workers`` workers; subclasses supply the transport.

    Requests and replies go over ``self._conns[w]``, worker ``w``'s connection. The subclass hooks:
    ``_launch(w)`` starts worker ``w`` without waiting, ``_await_ready(w)`` waits for it and sets its
    connection (raising ``RuntimeError`` if it failed), ``_sentinels(w)`` are further handles that
    become ready when it dies, ``_death(w)`` says why its connection closed, ``_kill(w)`` stops it at
    once, and ``_shutdown(ws)`` gives workers told to stop a moment to close their envs, then kills them.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        num_workers: int | None = None,
        start_timeout: float = 120.0,
        **kwargs: Any,
    ):
        self.num_workers = num_workers
        self.start_timeout = start_timeout
        self._conns: dict[int, mpc.Connection] = {}
        self._closed = True
        super().__init__(env_fns, **kwargs)

    def _default_num_workers(self) -> int:
        raise NotImplementedError

    def _start(self) -> None:
        n = self.num_envs
        workers = max(1, min(n, self.num_workers or self._default_num_workers()))
        self.num_workers = workers
        self._slices = [list(range(w * n // workers, (w + 1) * n // workers)) for w in range(workers)]
        self._where = {i: (w, k) for w, ids in enumerate(self._slices) for k, i in enumerate(ids)}
        self._payloads = [dumps_factories([self.env_fns[i] for i in ids]) for ids in self._slices]
        self._starting: set[int] = set()
        self._closed = False
        try:
            self._restart(range(workers), fresh=True)
            self._ready(range(workers))
        except BaseException:
            self.close()
            raise

    @property
    def envs(self) -> list[Env]:
        raise AttributeError(
            f"the envs of a {type(self).__name__} live in its workers; read them with get_attr(name)"
        )

    def _replace(self, i: int) -> None:
        """Nothing to do: a worker rebuilds an env that raised, and a restarted worker has fresh envs."""

    def _call(self, calls: Mapping[int, Call], timeout: float | None) -> dict[int, Any]:
        if self._closed:
            raise RuntimeError(f"this {type(self).__name__} is closed")
        batches: dict[int, list[int]] = {}
        for i in calls:
            batches.setdefault(self._where[i][0], []).append(i)
        self._ready(batches)
        for w, ids in batches.items():
            batch = [(self._where[i][1], calls[i]) for i in ids]
            self._submit(w, pickle.dumps((batch, timeout), protocol=pickle.HIGHEST_PROTOCOL))

        results: dict[int, Any] = {}
        failed: dict[int, tuple[list[int], str]] = {}  # worker -> (its envs whose call failed, reason)
        waiting = set(batches)
        deadline = None if timeout is None else time.monotonic() + timeout + _GRACE
        while waiting:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            replies = self._receive(sorted(waiting), left)
            if not replies and left == 0.0:  # a worker that cannot even report its hung calls
                for w in waiting:
                    failed[w] = (batches[w], f"worker did not answer within the {timeout}s step timeout")
                break
            for w, reply in replies.items():
                waiting.discard(w)
                if isinstance(reply, str):
                    failed[w] = (batches[w], f"worker {reply} while running this call")
                    continue
                done = pickle.loads(reply)
                for i in batches[w]:
                    k = self._where[i][1]
                    if k in done:
                        results[i] = pickle.loads(done[k])
                hung = [i for i in batches[w] if self._where[i][1] not in done]
                if hung:
                    failed[w] = (hung, f"step exceeded the {timeout}s step timeout")

        for w, (culprits, reason) in failed.items():
            lost = f"lost its episode: its worker was restarted because env(s) {culprits} failed ({reason})"
            for i in self._slices[w]:
                why = reason if i in culprits else lost
                if i in calls:
                    results[i] = EnvFailure(why)
                if i not in calls or calls[i][0] not in ("step", "reset"):
                    self._lost[i] = why  # not reported by this call: reported at the env's next step
        if failed:
            self._restart(sorted(failed))
        return results

    def _restart(self, workers: Iterable[int], fresh: bool = False) -> None:
        """Start workers anew without waiting for them: they boot while the caller gets on with it."""
        for w in workers:
            if not fresh:
                self._kill(w)
            self._launch(w)
            self._starting.add(w)

    def _ready(self, workers: Iterable[int]) -> None:
        for w in sorted(self._starting.intersection(workers)):
            self._starting.discard(w)
            self._await_ready(w)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        workers = range(len(self._slices))
        for w in workers:
            if w in self._conns:
                with contextlib.suppress(OSError, ValueError):
                    self._conns[w].send_bytes(b"")  # the request to stop: a worker closes its envs
        self._shutdown(workers)

    # ---- transport ------------------------------------------------------------------------------
    def _submit(self, w: int, request: bytes) -> None:
        with contextlib.suppress(OSError, EOFError):
            self._conns[w].send_bytes(request)  # if it died, _receive sees that and reports it

    def _receive(self, workers: Sequence[int], timeout: float | None) -> dict[int, bytes | str]:
        """``{w: reply, or the reason it died}`` for the workers that answered by ``timeout``."""
        owner: dict[Any, int] = {}
        for w in workers:
            owner[self._conns[w]] = w
            owner.update(dict.fromkeys(self._sentinels(w), w))
        replies: dict[int, bytes | str] = {}
        for ready in mpc.wait(list(owner), timeout):
            w = owner[ready]
            if w in replies:
                continue
            conn = self._conns[w]
            try:
                if conn.poll():  # a dead worker may still have left its reply behind
                    replies[w] = conn.recv_bytes()
                    continue
            except (EOFError, OSError):
                pass
            replies[w] = self._death(w)
        return replies

    def _sentinels(self, w: int) -> list[Any]:
        return []

    def _launch(self, w: int) -> None:
        raise NotImplementedError

    def _await_ready(self, w: int) -> None:
        raise NotImplementedError

    def _death(self, w: int) -> str:
        raise NotImplementedError

    def _kill(self, w: int) -> None:
        raise NotImplementedError

    def _shutdown(self, workers: Sequence[int]) -> None:
        raise NotImplementedError

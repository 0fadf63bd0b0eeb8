"""AsyncVectorEnv: each env has its own worker thread, so steps that wait (tools, HTTP, sandboxes) overlap.

Threads do not speed up pure-Python CPU work (the GIL); for that use a process backend. Each env owns
its RNG, so the interleaving of threads never changes an episode.

A call that exceeds ``step_timeout`` cannot be killed (Python threads are not interruptible): its
thread is abandoned with its env (the thread closes the env if the call ever returns), and a fresh env
on a fresh thread takes the slot. Only that env's episode is lost: every other env runs on a thread of
its own. Worker threads are daemons, so an abandoned, hung env never keeps the interpreter from exiting.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gem_core.core import Env
from gem_core.vector.base import Call, EnvFailure, VectorEnv, run_guarded


class AsyncVectorEnv(VectorEnv):
    def __init__(self, env_fns: Sequence[Callable[[], Env]], **kwargs: Any):
        self._workers: list[_Worker] = []
        self._abandoned: dict[int, _Worker] = {}  # env -> the thread still running its hung call
        super().__init__(env_fns, **kwargs)
        self._workers = [self._new_worker(i) for i in range(self.num_envs)]

    @staticmethod
    def _new_worker(i: int) -> _Worker:
        return _Worker(f"gem-env-{i}")

    def _call(self, calls: Mapping[int, Call], timeout: float | None) -> dict[int, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        futures = {
            i: self._workers[i].submit(run_guarded, call, self.envs[i], deadline) for i, call in calls.items()
        }
        done, pending = cf.wait(futures.values(), timeout=timeout)
        results: dict[int, Any] = {}
        for i, future in futures.items():
            if future in done:
                results[i] = future.result()
                continue
            kind = calls[i][0]
            results[i] = EnvFailure(f"{kind} exceeded the {timeout}s step timeout")
            self._abandoned[i] = self._workers[i]  # it keeps the hung env until _replace
            self._workers[i] = self._new_worker(i)
            if kind not in ("step", "reset"):  # the caller replaces envs only after a step or reset
                self._replace(i)
                self._lost[i] = f"lost its episode: its {kind} call exceeded the {timeout}s step timeout"
        return results

    def _replace(self, i: int) -> None:
        old = self.envs[i]
        self.envs[i] = self.env_fns[i]()
        hung = self._abandoned.pop(i, None)
        if hung is not None:  # closed on its own thread once the hung call returns (if ever)
            hung.submit(_quiet_close, old)
            hung.shutdown()
        else:
            self._workers[i].submit(_quiet_close, old)

    def close(self) -> None:
        for i, worker in enumerate(self._workers):
            worker.submit(_quiet_close, self.envs[i])
            worker.shutdown()


def _quiet_close(env: Env) -> None:
    with contextlib.suppress(Exception):
        env.close()


class _Worker:
    """One daemon thread running submitted calls in order (a ThreadPoolExecutor's threads are joined at
    interpreter exit, so one hung env would hang the program's exit)."""

    def __init__(self, name: str):
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> cf.Future:
        future: cf.Future = cf.Future()
        self._calls.put((future, fn, args))
        return future

    def shutdown(self) -> None:
        """Stop after the calls already queued (a hung call keeps its thread; it is a daemon)."""
        self._calls.put(None)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            future, fn, args = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:
                    future.set_exception(exc)

"""The vector env side of the process and Ray backends: ``WorkerPoolVectorEnv`` cuts the envs into
contiguous slices, one per worker, sends each worker its batches and replaces workers that die or hang.

The worker side (an ``EnvHost`` per worker, ``serve``, how calls and results are serialised) is
``gem_core.vector.env_host``; the transports (a pipe to a local process, a socket to a Ray actor) are
``gem_core.vector.processes`` and ``gem_core.vector.ray_backend``.

Faults, and why a healthy env never loses its episode to another env's fault:

- An env that raises is rebuilt inside its worker; nothing else is touched.
- A call still running at ``step_timeout`` is reported by its worker at the timeout, and its env is
  abandoned to its thread, as in ``AsyncVectorEnv``: a fresh env on a fresh thread takes its place,
  and the worker's other envs go on. Abandoned calls that are still running ``recycle_hung_after``
  seconds later (a hung thread may spin forever) get their worker replaced: the replacement starts
  in the background while the old worker serves on, and takes over between two batches.
- State snapshots (``keep_states``, on by default): with each result of a ``reset`` or ``step`` a
  worker sends the env's ``get_state()``, and the vector env keeps the latest one per env. A worker
  that must be replaced (it died: ``os._exit``, a segfault, the OOM killer; it answers nothing
  ``_GRACE`` seconds past the timeout; or it is recycled) is started anew and every env it hosted is
  restored with ``set_state`` from its snapshot, so its episode goes on.
- A worker that dies in the middle of a batch: results that had come back are kept, and the calls
  it was running (any of which may have killed it) run again in the new worker, from their envs'
  snapshots, in halves (``_replay``): a group that runs through keeps its results, a group that kills
  the worker again is halved, and the call that kills it alone fails, ending its env's episode. Envs
  are deterministic given their state and action, so a healthy env gets the result it would have
  had: a crash costs only the crashing env's episode. Such a batch step takes longer than the others:
  a worker's start and one more round of the calls per halving (at most about ``2 log2(k)`` rounds
  for ``k`` calls in flight, each within ``step_timeout``). A worker that stops answering altogether
  is different: its running calls fail (running them again would hang again).
- An env whose state cannot be snapshot (``get_state`` raises, or the state does not pickle) or
  restored loses its episode, reported as a failure at its next ``step`` (or, if its step was in
  flight when its worker died, at once).
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing.connection as mpc
import pickle
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gem_core.core import Env
from gem_core.vector.base import Call, EnvFailure, VectorEnv
from gem_core.vector.env_host import EPISODE_CALLS, dumps, dumps_factories

# Seconds past ``step_timeout`` that a worker gets to report its hung calls before it counts as hung
# itself (it reports them at the timeout; this covers a worker whose every thread is stuck).
_GRACE = 1.0

# Seconds that a worker's background replacement may take to start before the worker is replaced in
# place instead (a Ray cluster may have no room for one more actor until the old one is gone).
_SPARE_PATIENCE = 10.0


class WorkerPoolVectorEnv(VectorEnv):
    """A vector env whose envs live in ``num_workers`` workers; subclasses supply the transport.

    ``keep_states`` (default on): keep each env's latest ``get_state()`` here, so that the envs of a
    worker that must be replaced keep their episodes (it costs a snapshot and its pickling per reset
    and step). ``recycle_hung_after``: seconds an abandoned, still running call may keep its worker
    busy before the worker is replaced (a Ray replacement starts in the background where the cluster
    has room for one more actor, else in place after ``_SPARE_PATIENCE`` seconds, and the next batch
    on that worker waits for it).

    Worker ``w`` (a slice of the envs) is served by one process or actor at a time, known by a handle
    ``h`` (a new one each time ``w`` is replaced): ``self._handles[w]``. Requests and replies go over
    ``self._conns[h]``. The subclass hooks, each given a handle: ``_launch(h, w)`` starts a worker for
    slice ``w`` without waiting, ``_has_started(h)`` says (without waiting) whether it has started,
    ``_await_ready(h)`` waits for it and sets its connection (raising ``RuntimeError`` if it failed),
    ``_sentinels(h)`` are further handles that become ready when it dies, ``_death(h)`` says why its
    connection closed, ``_kill(h)`` stops it at once, and ``_shutdown(hs)`` gives workers told to stop a
    moment to close their envs, then kills them.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        num_workers: int | None = None,
        start_timeout: float = 120.0,
        keep_states: bool = True,
        recycle_hung_after: float = 120.0,
        **kwargs: Any,
    ):
        self.num_workers = num_workers
        self.start_timeout = start_timeout
        self.keep_states = keep_states
        self.recycle_hung_after = recycle_hung_after
        self._conns: dict[int, mpc.Connection] = {}
        self._handles: dict[int, int] = {}
        self._new_handle = itertools.count().__next__
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
        self._states: list[bytes | None] = [None] * n  # each env's latest snapshot (``keep_states``)
        self._starting: set[int] = set()  # workers started anew, not awaited yet
        self._spares: dict[int, tuple[int, float]] = {}  # worker -> (its replacement, launched at)
        self._closed = False
        try:
            for w in range(workers):
                self._handles[w] = self._launch_new(w)
                self._starting.add(w)
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
        """Nothing to do: a worker rebuilds an env that raised or hung, and restores a restarted worker's."""

    def _call(self, calls: Mapping[int, Call], timeout: float | None) -> dict[int, Any]:
        if self._closed:
            raise RuntimeError(f"this {type(self).__name__} is closed")
        self._swap_spares()
        batches: dict[int, list[int]] = {}
        for i in calls:
            batches.setdefault(self._where[i][0], []).append(i)
        self._restart_dead(batches)
        self._ready(batches)
        results = self._report_lost(batches, calls)
        done, crashed = self._run_batches(batches, calls, timeout)
        results.update(done)
        for w, (reason, running) in crashed.items():
            results.update(self._replay(w, reason, running, calls, timeout))
        return results

    def _report_lost(self, batches: dict[int, list[int]], calls: Mapping[int, Call]) -> dict[int, Any]:
        """Take out of ``batches`` the steps of envs whose episode was lost (their restore failed just
        now): their failures, reported instead of running them."""
        results: dict[int, Any] = {}
        for w, ids in list(batches.items()):
            for i in [i for i in ids if i in self._lost and calls[i][0] in EPISODE_CALLS]:
                reason = self._lost.pop(i)
                if calls[i][0] == "step":
                    results[i] = EnvFailure(reason)
                    ids.remove(i)
            if not ids:
                del batches[w]
        return results

    def _run_batches(
        self, batches: dict[int, list[int]], calls: Mapping[int, Call], timeout: float | None
    ) -> tuple[dict[int, Any], dict[int, tuple[str, list[int]]]]:
        """Run each worker's batch; ``(results, crashed)``. A call that overran ``timeout`` fails (its
        worker abandoned it); a worker that does not answer at all is restarted and its running calls
        fail. ``crashed`` maps each worker that died mid-batch to why and the calls it was running
        (those with no result yet), for ``_replay``."""
        for w, ids in batches.items():
            batch = [(self._where[i][1], calls[i]) for i in ids]
            self._submit(self._handles[w], dumps((batch, timeout)))
        results: dict[int, Any] = {}
        crashed: dict[int, tuple[str, list[int]]] = {}
        hung: dict[int, str] = {}
        waiting = set(batches)
        deadline = None if timeout is None else time.monotonic() + timeout + _GRACE
        while waiting:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            owner = {self._handles[w]: w for w in waiting}
            replies = self._receive(sorted(owner), left)
            if not replies and left == 0.0:  # a worker that cannot even report its hung calls
                for w in waiting:
                    hung[w] = f"did not answer within the {timeout}s step timeout"
                break
            for h, reply in replies.items():
                w = owner[h]
                if isinstance(reply, str):
                    crashed[w] = (reply, [i for i in batches[w] if i not in results])
                    waiting.discard(w)
                    continue
                done, end, stale = pickle.loads(reply)
                for k, payload in done.items():
                    i = self._slices[w][k]
                    results[i], state = pickle.loads(payload)
                    self._keep(i, calls[i], results[i], state)
                if not end:
                    continue
                waiting.discard(w)
                for i in batches[w]:
                    if i not in results:  # hung: its worker replaced it
                        results[i] = EnvFailure(f"{calls[i][0]} exceeded the {timeout}s step timeout")
                        self._keep(i, calls[i], results[i], None)
                if stale is not None and stale > self.recycle_hung_after and w not in self._spares:
                    self._spares[w] = (self._launch_new(w), time.monotonic())
        for w, reason in hung.items():
            for i in batches[w]:
                if i not in results:  # it was running when its worker stopped answering
                    results[i] = EnvFailure(f"worker {w} {reason} while running this call")
                    self._keep(i, calls[i], results[i], None)
            self._restart(w, f"worker {w} {reason}")
        return results, crashed

    def _replay(
        self, w: int, reason: str, running: list[int], calls: Mapping[int, Call], timeout: float | None
    ) -> dict[int, Any]:
        """Worker ``w`` died (``reason``) while running the calls ``running``: any one of them may have
        killed it. Start it anew, its envs restored from their snapshots (as they were before these
        calls), and run the calls again, in halves: a group that runs through keeps its results, a group
        that kills the worker again is halved, and a call that kills it alone is the cause: it alone
        fails. Envs are deterministic given their state and action, so the healthy ones get the results
        they would have had. A step whose env has no snapshot cannot be run again and fails."""
        results: dict[int, Any] = {}
        suspects = []
        for i in running:
            if calls[i][0] == "step" and self._states[i] is None:
                results[i] = EnvFailure(f"worker {w} {reason} while running this call")
            else:
                suspects.append(i)
        todo = [(suspects, True)] if suspects else []  # (calls, whether together they kill the worker)
        dead = True
        while todo:
            group, kills = todo.pop()
            if kills and len(group) == 1:  # the cause: its episode ends, nothing of it is restored
                (i,) = group
                alone = " (and again when run alone)" if len(running) > 1 else ""
                results[i] = EnvFailure(f"worker {w} {reason} while running this call{alone}")
                self._keep(i, calls[i], results[i], None)
                continue
            if kills:
                half = len(group) // 2
                todo += [(group[half:], False), (group[:half], False)]
                continue
            if dead:
                self._restart(w, f"worker {w} {reason}")
                dead = False
            self._ready([w])
            batch = {w: list(group)}
            results.update(self._report_lost(batch, calls))
            if not batch:
                continue
            done, crashed = self._run_batches(batch, calls, timeout)
            results.update(done)
            if w in crashed:
                reason, left = crashed[w]
                todo += [(left, True)] if left else []
                dead = True
        if dead:
            self._restart(w, f"worker {w} {reason}")
        return results

    def _keep(self, i: int, call: Call, result: Any, state: bytes | None) -> None:
        """Keep env ``i``'s snapshot after ``call``: the new one, none after a failure that ended the
        episode (its env is fresh), and the previous one after calls that do not change the episode."""
        if call[0] in EPISODE_CALLS:
            self._states[i] = None if isinstance(result, EnvFailure) else state

    def _restart_dead(self, workers: Iterable[int]) -> None:
        """Replace the workers that died since their last batch (nothing to read is pending otherwise):
        none of their calls was running, so every env they hosted keeps its episode."""
        for w in workers:
            if w in self._starting:
                continue
            conn = self._conns.get(self._handles[w])
            if conn is None:  # Ray method calls: a death shows in the batch's reply
                continue
            try:
                dead = conn.poll()
            except (OSError, EOFError):
                dead = True
            if dead:
                self._restart(w, f"worker {self._death(self._handles[w])}")

    def _restart(self, w: int, reason: str) -> None:
        """Start worker ``w`` anew (without waiting for it); ``_ready`` restores its envs' states."""
        for i in self._slices[w]:
            if self._states[i] is None:  # nothing to restore: an episode in progress is lost
                why = "keep_states is off" if not self.keep_states else "its state could not be snapshot"
                self._lost[i] = f"lost its episode: its {reason} ({why})"
        spare = self._spares.pop(w, None)
        if spare is not None:
            self._kill(spare[0])
        self._kill(self._handles[w])
        self._handles[w] = self._launch_new(w)
        self._starting.add(w)

    def _launch_new(self, w: int) -> int:
        h = self._new_handle()
        self._launch(h, w)
        return h

    def _ready(self, workers: Iterable[int]) -> None:
        todo = set(workers)
        while starting := sorted(self._starting & todo):  # a restore that fails starts its worker again
            for w in starting:
                self._starting.discard(w)
                self._await_ready(self._handles[w])
                self._restore(w)

    def _swap_spares(self) -> None:
        """Hand each worker whose replacement has started over to it (restoring its envs' states); a
        replacement that takes too long to start replaces its worker in place."""
        for w, (h, launched) in list(self._spares.items()):
            if not self._has_started(h) and time.monotonic() - launched < _SPARE_PATIENCE:
                continue
            del self._spares[w]
            old, self._handles[w] = self._handles[w], h
            self._kill(old)
            self._starting.add(w)  # awaited (and restored) by _ready when its envs are next called

    def _restore(self, w: int) -> None:
        """Give a new worker's envs their snapshots; those it cannot restore lose their episodes."""
        h = self._handles[w]
        batch = [
            (k, ("set_state", self._states[i])) for k, i in enumerate(self._slices[w]) if self._states[i]
        ]
        if not batch:
            return
        self._submit(h, dumps((batch, self.start_timeout)))
        done: dict[int, bytes] = {}
        deadline = time.monotonic() + self.start_timeout + _GRACE
        reason = None
        while reason is None:
            reply = self._receive([h], max(0.0, deadline - time.monotonic())).get(h)
            if reply is None:
                reason = "did not answer"
            elif isinstance(reply, str):
                reason = reply
            else:
                part, end, _ = pickle.loads(reply)
                done.update(part)
                if end:
                    break
        for k, _ in batch:
            i = self._slices[w][k]
            failure = f"its new worker {reason}" if reason is not None else None
            if reason is None and k in done:
                result, _ = pickle.loads(done[k])
                failure = None if result is None else str(result)
            if failure is not None:
                self._states[i] = None
                self._lost[i] = f"lost its episode: {failure}"
        if reason is not None:  # the new worker is gone too: start it again, fresh (nothing to restore)
            self._kill(h)
            self._handles[w] = self._launch_new(w)
            self._starting.add(w)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for h, _ in self._spares.values():
            self._kill(h)
        self._spares.clear()
        handles = list(self._handles.values())
        for h in handles:
            if h in self._conns:
                with contextlib.suppress(OSError, ValueError):
                    self._conns[h].send_bytes(b"")  # the request to stop: a worker closes its envs
        self._shutdown(handles)

    # ---- transport ------------------------------------------------------------------------------
    def _submit(self, h: int, request: bytes) -> None:
        with contextlib.suppress(OSError, EOFError):
            self._conns[h].send_bytes(request)  # if it died, _receive sees that and reports it

    def _receive(self, handles: Sequence[int], timeout: float | None) -> dict[int, bytes | str]:
        """``{h: one message, or the reason it died}`` for the workers that sent one by ``timeout``."""
        owner: dict[Any, int] = {}
        for h in handles:
            owner[self._conns[h]] = h
            owner.update(dict.fromkeys(self._sentinels(h), h))
        replies: dict[int, bytes | str] = {}
        for ready in mpc.wait(list(owner), timeout):
            h = owner[ready]
            if h in replies:
                continue
            conn = self._conns[h]
            try:
                if conn.poll():  # a dead worker may still have left messages behind
                    replies[h] = conn.recv_bytes()
                    continue
            except (EOFError, OSError):
                pass
            replies[h] = self._death(h)
        return replies

    def _sentinels(self, h: int) -> list[Any]:
        return []

    def _launch(self, h: int, w: int) -> None:
        raise NotImplementedError

    def _has_started(self, h: int) -> bool:
        raise NotImplementedError

    def _await_ready(self, h: int) -> None:
        raise NotImplementedError

    def _death(self, h: int) -> str:
        raise NotImplementedError

    def _kill(self, h: int) -> None:
        raise NotImplementedError

    def _shutdown(self, handles: Sequence[int]) -> None:
        raise NotImplementedError

"""The worker side of the process and Ray backends: an ``EnvHost`` runs a slice of the envs inside a
worker process or actor, and ``serve`` answers the vector env's batches over one connection.

Inside a worker an ``EnvHost`` owns its slice and gives each env a thread of its own, as
``AsyncVectorEnv`` does: steps that wait overlap within the worker, and CPU work spreads over the
workers. A worker talks to the vector env over one ``multiprocessing`` connection (a pipe to a local
process, an authenticated TCP socket to a Ray actor): one batch of calls in; out, the results as they
complete (those done within a few milliseconds of each other travel together) and a last message when
the batch is over (``serve``). The other side, the vector env that cuts the envs into slices and
replaces workers, is ``gem_core.vector.worker_pool``; its docstring says how faults are handled.

Serialisation: env factories travel to the workers once (``dumps_factories``), with cloudpickle where
it is installed (it accepts lambdas and classes defined in ``__main__``) and pickle otherwise. Each
batch of calls (plain tuples, see ``gem_core.vector.base``) goes to a worker as one pickled request
(highest protocol), and each env's result (observation, reward, flags, info) comes back pickled: so
observations and infos must pickle, and a result that does not is reported as that env's failure.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing.connection as mpc
import pickle
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from gem_core.core import Env, EnvBase, Wrapper
from gem_core.vector.base import Call, EnvFailure, run_guarded
from gem_core.vector.threads import _Worker

# A worker sends results that completed within this many seconds of each other as one message: a
# batch costs a few messages, not one per env, and a worker that dies takes at most the results of
# its last few milliseconds with it.
_FLUSH = 0.005

# The GIL switch interval in a worker process (Python's default is 0.005 s). A worker's env threads doing
# pure-Python work would otherwise hand the GIL round every 5 ms; at 20 ms the CPU-bound benchmark
# (benchmarks/vector_backends.py, "processes" vs "processes @5ms") ran 5% faster on average over 7 runs
# (-5% to +15%), and its worst run went from 1.62x to 1.76x over sync. A batch step waits for all its
# calls anyway, so the longer turns do not delay it; threads that wait on I/O release the GIL as before.
WORKER_SWITCH_INTERVAL = 0.02

EPISODE_CALLS = ("reset", "step")  # the calls whose failure ends the env's episode


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


def dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def snapshot(env: Env) -> bytes:
    """``pickle.dumps(env.get_state())``, without the deep copy of the default ``get_state`` (pickling
    copies anyway): an env and each wrapper that keep ``EnvBase``'s / ``Wrapper``'s snapshot give their
    attributes to pickle as they are. The deep copy was most of the cost: 650 us of 750 us for
    GuessTheNumber (copying its ``random.Random``s), paid per env and step."""
    return dumps(_state_tree(env))


def _state_tree(env: Env) -> Any:
    """What ``env.get_state()`` returns, less the copying where the env keeps the default snapshot."""
    cls = type(env)
    if isinstance(env, Wrapper):
        if cls.get_state is not Wrapper.get_state:
            return env.get_state()
        skip = {"_init_args", "env", *env._static_attributes}
        return {"env": _state_tree(env.env), "wrapper": {k: v for k, v in vars(env).items() if k not in skip}}
    if cls.get_state is not EnvBase.get_state:
        return env.get_state()
    skip = {"_init_args", "spec", *env._static_attributes}
    return {k: v for k, v in vars(env).items() if k not in skip}


class _Slot:
    """One env of a worker and the thread that runs its calls. When a call hangs, the whole slot is
    abandoned (its thread closes the env if the call ever returns) and a new slot takes its place."""

    def __init__(self, factory: Callable[[], Env], name: str, restore: bytes | None = None):
        self.factory = factory
        self.thread = _Worker(name)
        self.env: Env | None = None  # built by the first call that needs it
        self.state = restore  # the env's latest snapshot
        self.pending_restore = restore is not None  # restore ``state`` into the env before its next call
        self.lost: str | None = None  # why the episode is gone: the next step reports it
        self.snapshots = True  # False once this env's get_state failed: not tried again
        self.abandoned_at: float | None = None


class EnvHost:
    """The envs of one worker, built from their factories, each called on its own thread. Built in a
    process of its own (a worker), it sets that process's GIL switch interval (``WORKER_SWITCH_INTERVAL``).
    With ``keep_states`` each result of a reset or step carries the env's pickled ``get_state()``."""

    def __init__(self, factories: bytes, keep_states: bool = False):
        sys.setswitchinterval(WORKER_SWITCH_INTERVAL)
        self.keep_states = keep_states
        self.slots = [_Slot(fn, f"gem-env-{k}") for k, fn in enumerate(pickle.loads(factories))]
        for slot in self.slots:
            slot.env = slot.factory()
        self.abandoned: list[_Slot] = []

    def run(self, request: bytes, send: Callable[[bytes], None] | None = None) -> bytes:
        """Run a pickled ``(batch, timeout)``: the calls ``[(k, call), ...]`` go concurrently, each on its
        env's thread. Returns the last message of the batch; with ``send``, results that complete before
        the last ones go ahead through it. A message is the pickled ``(done, end, stale)``: ``done`` maps
        ``k`` to the pickled ``(result, state)`` of each call finished since the last message; the last
        one has ``end`` set (the calls missing by then ran past ``timeout`` and their envs were replaced)
        and ``stale``, how long the oldest abandoned call still running has been abandoned (or None)."""
        batch, timeout = pickle.loads(request)
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        futures = {
            self.slots[k].thread.submit(self._run, self.slots[k], call, deadline): (k, call)
            for k, call in batch
        }
        pending, ready, last_sent = set(futures), {}, start
        while pending:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            if ready and send is not None and now - last_sent >= _FLUSH:
                send(dumps((ready, False, None)))
                ready, last_sent = {}, now
            limits = [] if deadline is None else [deadline - now]
            if ready and send is not None:
                limits.append(last_sent + _FLUSH - now)
            done, pending = cf.wait(
                pending, timeout=min(limits, default=None), return_when=cf.FIRST_COMPLETED
            )
            for future in done:
                exc = future.exception()  # only a BaseException (SystemExit, ...) escapes _run
                ready[futures[future][0]] = (
                    dumps((EnvFailure(describe(exc)), None)) if exc else future.result()
                )
        for future in pending:
            self._abandon(*futures[future])
        return dumps((ready, True, self._stale()))

    def close(self) -> None:
        for slot in self.slots:  # between batches: no call is running on them
            _close_quietly(slot.env)
            slot.thread.shutdown()

    # ---- on an env's thread ---------------------------------------------------------------------
    def _run(self, slot: _Slot, call: Call, deadline: float | None = None) -> bytes:
        kind = call[0]
        if kind == "set_state":
            return dumps((self._restore(slot, call[1]), None))
        if kind == "reset":
            slot.lost, slot.pending_restore = None, False
        elif slot.lost is not None and kind == "step":
            failure, slot.lost = EnvFailure(slot.lost), None
            return dumps((failure, None))
        env = slot.env
        if env is None or slot.pending_restore:
            env = self._build(slot)
            if isinstance(env, EnvFailure):
                return dumps((env, None))
        result = run_guarded(call, env, deadline)
        failed = isinstance(result, EnvFailure)
        state = (
            self._snapshot(slot, env) if self.keep_states and kind in EPISODE_CALLS and not failed else None
        )
        try:
            payload = dumps((result, state))
        except Exception as exc:
            failed = True
            payload = dumps((EnvFailure(f"the result of {kind} does not pickle: {describe(exc)}"), None))
        if failed and kind in EPISODE_CALLS:  # the episode is over: a fresh env for the next one
            slot.env, slot.state = None, None
            _close_quietly(env)
        return payload

    def _build(self, slot: _Slot) -> Env | EnvFailure:
        """The slot's env, built if it has none, and given its snapshot if a restore is pending."""
        if slot.env is None:
            try:
                slot.env = slot.factory()
            except Exception as exc:
                return EnvFailure(f"could not rebuild the env: {describe(exc)}")
            slot.snapshots = True
        if slot.pending_restore:
            slot.pending_restore = False
            failure = self._restore(slot, slot.state)
            if failure is not None:
                slot.lost = f"lost its episode: {failure}"
        return slot.env

    def _restore(self, slot: _Slot, state: bytes) -> EnvFailure | None:
        try:
            if slot.env is None:
                slot.env = slot.factory()
            slot.env.set_state(pickle.loads(state))
        except Exception as exc:
            _close_quietly(slot.env)
            slot.env, slot.state = None, None
            return EnvFailure(f"could not restore its state: {describe(exc)}")
        slot.state, slot.lost = state, None
        return None

    def _snapshot(self, slot: _Slot, env: Env) -> bytes | None:
        if not slot.snapshots:
            return None
        try:
            slot.state = snapshot(env)
        except Exception:
            slot.snapshots, slot.state = False, None
        return slot.state

    # ---- on the worker's main thread --------------------------------------------------------------
    def _abandon(self, k: int, call: Call) -> None:
        """Call ``call`` on env ``k`` overran the timeout: leave the env to its thread and give the slot
        a new thread and env (restored from the latest snapshot unless the call ended the episode)."""
        old = self.slots[k]
        old.thread.submit(_close_env, old)  # once the hung call returns, if ever
        old.thread.shutdown()
        old.abandoned_at = time.monotonic()
        self.abandoned.append(old)
        keep = old.state if call[0] not in EPISODE_CALLS else None
        self.slots[k] = new = _Slot(old.factory, f"gem-env-{k}", restore=keep)
        if call[0] not in EPISODE_CALLS and keep is None:
            new.lost = f"lost its episode: its {call[0]} call exceeded the step timeout"

    def _stale(self) -> float | None:
        self.abandoned = [slot for slot in self.abandoned if slot.thread.is_alive()]
        if not self.abandoned:
            return None
        return time.monotonic() - min(slot.abandoned_at for slot in self.abandoned)


def _close_quietly(env: Env | None) -> None:
    if env is not None:
        with contextlib.suppress(Exception):
            env.close()


def _close_env(slot: _Slot) -> None:
    _close_quietly(slot.env)


def serve(host: EnvHost, conn: mpc.Connection) -> None:
    """A worker's loop: answer each batch that comes over ``conn`` until an empty request or until the
    vector env is gone (end-of-file), then close the envs."""
    try:
        while request := conn.recv_bytes():
            conn.send_bytes(host.run(request, conn.send_bytes))
    except (EOFError, OSError):
        pass  # the vector env is gone
    finally:
        host.close()

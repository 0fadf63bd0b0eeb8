"""One caller's hostile calls never starve another's (issue 43, item 1), against the real sandbox:
fair queueing on the worker time each caller used, per-caller quotas, a deadline on the wait for a
worker, and calls cut to the deadline of the step they run in (so a step abandoned at its timeout
leaves nothing running in the pool)."""

from __future__ import annotations

import collections
import itertools
import threading
import time

import pytest

import gem_core
from gem_core.deadline import step_deadline
from gem_core.tools.base import calling_for
from gem_core.tools.python import PythonTool
from gem_core.tools.sandbox import SandboxLimits, SandboxPool
from gem_core.wrappers.tools import ToolEnvWrapper

pytestmark = pytest.mark.timeout(120)

SPIN = "while True: pass"


class Attackers:
    """``n`` threads, each its own caller, sending ``code`` to ``pool`` again and again until stopped."""

    def __init__(self, pool: SandboxPool, n: int, code: str = SPIN):
        self.pool, self.code = pool, code
        self.stop = threading.Event()
        self.started = threading.Barrier(n + 1)
        self.results: list = []
        self.served = collections.Counter()  # attacker -> its calls that ran
        self.threads = [threading.Thread(target=self._attack, args=(k,), daemon=True) for k in range(n)]

    def _attack(self, k: int) -> None:
        self.started.wait()
        while not self.stop.is_set():
            result = self.pool.run(self.code)
            self.results.append(result)
            self.served[k] += result.error is None

    def wait_all_served(self, timeout: float = 60.0) -> None:
        """Until every attacker has had a call run (each has used the pool: the attack is in full swing)."""
        deadline = time.monotonic() + timeout
        while len(+self.served) < len(self.threads):
            assert time.monotonic() < deadline, f"only {len(+self.served)} attackers were ever served"
            time.sleep(0.05)

    def __enter__(self) -> Attackers:
        for thread in self.threads:
            thread.start()
        self.started.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)
        assert not any(t.is_alive() for t in self.threads), "an attacker's call never came back"


def busy_until_all_running(pool: SandboxPool, running: int) -> None:
    """Wait until ``running`` calls hold workers (the attack is in full swing)."""
    with pool._cond:
        assert pool._cond.wait_for(
            lambda: sum(c.running for c in pool._callers.values()) >= running, timeout=30
        ), "the attackers never got their workers"


@pytest.mark.parametrize("max_workers", [2, 17], ids=["no-growth", "growth"])
def test_a_benign_call_runs_while_16_threads_spin(max_workers):
    """The issue's scenario: 16 threads sending ``while True: pass`` made one ``print(1)`` wait 40 s,
    or forever (an unfair queue: a thread giving a worker back took it again at once). With 2 workers
    and no growth, the victim gets the next worker that frees (it has used less worker time than any
    attacker); with room to grow, a worker of its own. Either way it runs, within its own deadline."""
    limits = SandboxLimits(timeout=1.0)
    with SandboxPool(size=2, limits=limits, max_workers=max_workers) as pool:
        with Attackers(pool, 16) as attack:
            attack.wait_all_served()
            for _ in range(3):
                result = pool.run("print(1)")
                assert result.ok and result.stdout == "1\n", result
        # The attackers take turns too: each call spun to its limit, or waited its turn past max_wait.
        spun = [r.timed_out or "busy" in (r.error or "") for r in attack.results]
        assert spun and all(spun), attack.results[:3]


def test_one_caller_runs_one_call_at_a_time_and_never_blocks_another():
    """Per-caller quota: four concurrent calls of one caller run one after another (their intervals,
    taken inside the sandbox, never overlap), while another caller's call runs beside them."""
    code = "import time\nstart = time.time()\ntime.sleep(0.4)\nprint(start, time.time())"
    with SandboxPool(size=2, max_workers=4, max_calls_per_caller=1) as pool:
        results: list = []

        def as_hog() -> None:
            with calling_for("hog"):
                results.append(pool.run(code))

        threads = [threading.Thread(target=as_hog) for _ in range(4)]
        for thread in threads:
            thread.start()
        busy_until_all_running(pool, 1)
        with calling_for("other"):
            other = pool.run(code)
        for thread in threads:
            thread.join()
        assert other.ok and all(r.ok for r in results), results
        spans = sorted(tuple(map(float, r.stdout.split())) for r in results)
        assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans)), spans
        other_start, _ = map(float, other.stdout.split())
        assert other_start < spans[-1][0], "the other caller waited for the hog's calls"


def test_the_wait_for_a_worker_has_a_deadline():
    """All workers held: a call gives up at ``max_wait`` (or its step's deadline) with a clear error,
    and never runs late."""
    with (
        SandboxPool(size=1, max_workers=1, max_wait=0.5) as pool,
        Attackers(pool, 1, "import time\ntime.sleep(3)"),
    ):
        busy_until_all_running(pool, 1)
        result = pool.run("print(1)")
        assert result.error is not None and "busy" in result.error and "did not run" in result.error
        with step_deadline(0.8):
            result = pool.run("print(1)", timeout=10)
        assert result.error is not None and "before its step's deadline" in result.error


def test_a_call_is_cut_to_its_steps_deadline():
    """Under a step deadline a call runs at most until just before it: its worker is free again when
    the step is over, for a caller with no patience at all."""
    with SandboxPool(size=1, max_workers=1, max_wait=0.0) as pool:
        with step_deadline(1.0):
            spun = pool.run(SPIN, timeout=30)
        assert spun.timed_out and spun.time_limit_s < 1.0
        assert pool.run("print(2)").stdout == "2\n"


def test_hostile_envs_cost_no_benign_episode_in_a_threads_vector():
    """The issue's vector scenario: 16 envs with ToolEnvWrapper(PythonTool()), 8 sending
    ``while True: pass`` and 8 a benign call, batch after batch: every benign call runs and returns its
    result, and no step of any env is lost to the step timeout (the spinning calls are cut to it)."""
    with SandboxPool(size=2, limits=SandboxLimits(timeout=2.0)) as pool:
        tool = PythonTool(timeout=2.0, pool=pool)
        vec = gem_core.make_vec(
            "game:GuessTheNumber-v1-easy",
            num_envs=16,
            backend="threads",
            step_timeout=6.0,
            wrappers=[lambda env: ToolEnvWrapper(env, [tool], max_tool_uses=None)],
        )
        try:
            vec.reset(seed=0)
            actions = [f"<python>{SPIN}</python>"] * 8 + ["<python>print(6 * 7)</python>"] * 8
            for _ in range(3):
                obs, _, _, truncated, infos = vec.step(actions)
                assert not truncated.any() and not any("error" in info for info in infos), infos
                assert all("\n42\n" in o for o in obs[8:]), obs[8:]
                assert all("timed out" in o or "busy" in o for o in obs[:8]), obs[:8]
        finally:
            vec.close()


def test_closing_while_workers_start_in_the_background_leaves_no_thread_failing(monkeypatch):
    """A pool closed while extra workers are still starting: each starting thread finds the pool
    closed, kills its worker and ends quietly (it raised ``KeyError`` on the slot close() had cleared)."""
    failures: list = []
    monkeypatch.setattr(threading, "excepthook", failures.append)
    pool = SandboxPool(size=1, max_workers=4)
    with pool._cond:
        for _ in range(3):
            pool._start_in_background()
    pool.close()
    starting = [t for t in threading.enumerate() if t.name == "gem-sandbox-start"]
    for thread in starting:
        thread.join(timeout=60)
    assert starting and not any(t.is_alive() for t in starting)
    assert not failures, [f.exc_value for f in failures]

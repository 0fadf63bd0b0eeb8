"""Every vector env backend keeps one semantics: the same tests run on sync, threads, processes and Ray."""

import functools
import multiprocessing.connection as mpc
import os
import pickle
import signal
import socket
import sys
import time

import pytest

import gem_core
from gem_core.vector import BACKENDS, RayVectorEnv
from gem_core.wrappers.budget import TimeLimit
from tests.core.toy_envs import CountdownEnv

from .faulty_envs import FaultyEnv

# Each backend under test: its name for make_vec and its keyword arguments ("ray-calls": the Ray
# backend sending batches as Ray method calls).
VARIANTS = {name: (name, {}) for name in BACKENDS} | {"ray-calls": ("ray", {"transport": "ray"})}
REMOTE = ["processes", "ray", "ray-calls"]


@pytest.fixture(params=list(VARIANTS))
def backend(request):
    """The name of the backend under test (Ray backends share one local Ray instance)."""
    if VARIANTS[request.param][0] == "ray":
        request.getfixturevalue("ray_cluster")
    return request.param


@pytest.fixture
def build(backend):
    """Builds vector envs of the backend under test, and closes them after the test."""
    made = []

    def build(env_fns, **kwargs):
        if backend in REMOTE:
            kwargs.setdefault("num_workers", 2)  # two envs or more per worker: slices are exercised
        name, options = VARIANTS[backend]
        vec = BACKENDS[name](env_fns, **options, **kwargs)
        made.append(vec)
        return vec

    yield build
    for vec in made:
        vec.close()


def countdown(n, **kwargs):
    return [functools.partial(CountdownEnv, **kwargs)] * n


def test_reset_seeds_env_i_with_seed_plus_i(build):
    vec = build(countdown(3))
    obs, infos = vec.reset(seed=10)
    assert obs == [CountdownEnv().reset(seed=10 + i)[0] for i in range(3)]
    assert infos == [CountdownEnv().reset(seed=10 + i)[1] for i in range(3)]


def test_next_step_autoreset_keeps_final_observation(build):
    vec = build(countdown(3, length=1), autoreset_mode="next_step")
    vec.reset(seed=0)
    obs, rew, term, trunc, infos = vec.step(["x"] * 3)
    assert all(o.startswith("t=1") for o in obs) and (term | trunc).all() and vec.done.all()
    obs, rew, term, trunc, infos = vec.step(["ignored"] * 3)
    assert all(o.startswith("guess a digit") for o in obs)
    assert all(info["autoreset"] for info in infos) and not (term | trunc).any()
    assert not vec.done.any() and (rew == 0).all()


def test_same_step_autoreset_keeps_final_obs_and_info_in_info(build):
    vec = build(countdown(3, length=1), autoreset_mode="same_step")
    vec.reset(seed=0)
    obs, rew, term, trunc, infos = vec.step(["x"] * 3)
    assert (term | trunc).all() and all(o.startswith("guess a digit") for o in obs)
    for info in infos:
        assert info["final_obs"].startswith("t=1") and info["final_info"]["t"] == 1
    assert not vec.done.any()


def test_disabled_autoreset_requires_explicit_reset(build):
    vec = build(countdown(3, length=1), autoreset_mode="disabled")
    vec.reset(seed=0)
    vec.step(["x"] * 3)
    with pytest.raises(RuntimeError, match="autoreset is disabled"):
        vec.step(["x"] * 3)
    obs, _ = vec.reset(seed=[5], indices=[1])
    assert vec.done.tolist() == [True, False, True]
    assert obs[1] == CountdownEnv().reset(seed=5)[0]
    _, _, term, trunc, infos = vec.step({1: "x"})
    assert infos[0] == {"stepped": False} and infos[1]["stepped"]


def test_subset_stepping_leaves_other_envs_untouched(build):
    vec = build(countdown(3, length=5))
    first, _ = vec.reset(seed=0)
    obs, rew, term, trunc, infos = vec.step({1: "3"})
    assert obs[0] == first[0] and obs[2] == first[2] and obs[1] != first[1]
    assert [i["stepped"] for i in infos] == [False, True, False]
    assert vec.get_attr("t") == [0, 1, 0]
    with pytest.raises(IndexError):
        vec.step({7: "x"})
    with pytest.raises(ValueError, match="2 actions for 3 envs"):
        vec.step(["a", "b"])


def test_raising_env_is_reported_replaced_and_batch_goes_on(build):
    vec = build(
        [
            functools.partial(CountdownEnv, length=5),
            functools.partial(CountdownEnv, length=5, raise_on_step=1),
        ]
        * 2
    )
    vec.reset(seed=0)
    obs, rew, term, trunc, infos = vec.step(["x"] * 4)
    for i in (1, 3):
        assert "ValueError: boom" in infos[i]["error"] and trunc[i] and not term[i]
    for i in (0, 2):  # an env that raises is rebuilt alone: its neighbours keep their episodes
        assert "error" not in infos[i] and infos[i]["t"] == 1
    obs, rew, term, trunc, infos = vec.step(["x"] * 4)
    assert infos[1]["autoreset"] and obs[1].startswith("guess a digit")
    assert infos[0]["t"] == 2


def _episodes_one_by_one(env_id, seeds, steps):
    transcripts = []
    for seed in seeds:
        env = gem_core.make(env_id)
        obs, _ = env.reset(seed=seed)
        t = [obs]
        for _ in range(steps):
            action = env.sample_random_action()
            obs, r, term, trunc, _ = env.step(action)
            t.append((action, obs, r, term, trunc))
            if term or trunc:
                break
        transcripts.append(t)
    return transcripts


def _run(vec, steps):
    """Random-action transcript of a vector env, autoresets included."""
    obs, _ = vec.reset(seed=1000)
    transcript = [obs]
    for _ in range(steps):
        actions = vec.sample_random_actions()
        obs, rew, term, trunc, infos = vec.step(actions)
        transcript.append((actions, obs, rew.tolist(), term.tolist(), trunc.tolist()))
    return transcript


def test_same_seeds_give_the_same_trajectories_on_every_backend(backend, build):
    env_id, n, steps = "game:GuessTheNumber-v1-hard", 16, 7
    expected = _episodes_one_by_one(env_id, range(1000, 1000 + n), steps)
    name, options = VARIANTS[backend]
    if backend in REMOTE:
        options = {**options, "num_workers": 2}
    vec = gem_core.make_vec(env_id, n, backend=name, autoreset_mode="disabled", **options)
    try:
        obs, _ = vec.reset(seed=1000)
        got = [[o] for o in obs]
        for _ in range(steps):
            active = [i for i in range(n) if not vec.done[i]]
            if not active:
                break
            sampled = vec.sample_random_actions()
            actions = {i: sampled[i] for i in active}
            obs, rew, term, trunc, _ = vec.step(actions)
            for i in active:
                got[i].append((actions[i], obs[i], float(rew[i]), bool(term[i]), bool(trunc[i])))
        assert got == expected
        # Autoresets continue each env's own generators: long runs match the sync backend too.
        vec.autoreset_mode = gem_core.vector.AutoresetMode.NEXT_STEP
        assert _run(vec, 20) == _run(gem_core.make_vec(env_id, n, backend="sync"), 20)
    finally:
        vec.close()


@pytest.mark.parametrize("backend", ["threads", *REMOTE], indirect=True)
def test_hung_env_times_out_and_only_its_episode_ends(backend, build):
    # Envs 0 and 1 share a worker (of the remote backends), as do 2 and 3; env 1 hangs.
    vec = build(
        [
            functools.partial(FaultyEnv, length=5),
            functools.partial(FaultyEnv, length=5, hang_on_step=1),
            functools.partial(FaultyEnv, length=5),
            functools.partial(FaultyEnv, length=5),
        ],
        step_timeout=0.5,
    )
    vec.reset(seed=0)
    pids = vec.get_attr("pid")
    start = time.perf_counter()
    obs, rew, term, trunc, infos = vec.step({0: "x", 1: "x", 2: "x"})
    assert time.perf_counter() - start < 0.5 + 1.5  # the timeout and a small constant
    assert "timeout" in infos[1]["error"] and trunc[1] and not term[1]
    assert infos[2]["t"] == 1 and not trunc[2] and infos[3] == {"stepped": False}
    assert infos[0]["t"] == 1 and not trunc[0] and "error" not in infos[0]  # its neighbour goes on
    obs, rew, term, trunc, infos = vec.step(["x"] * 4)
    assert infos[1]["autoreset"] and obs[1].startswith("guess a digit")
    assert [infos[i]["t"] for i in (0, 2, 3)] == [2, 2, 1]
    assert vec.get_attr("t") == [2, 0, 2, 1]
    assert vec.get_attr("pid") == pids  # no worker was restarted: the hung call was abandoned in it


@pytest.mark.parametrize("backend", ["threads", *REMOTE], indirect=True)
def test_no_batch_step_overruns_and_no_healthy_episode_is_lost_under_random_faults(backend, build):
    """4 envs per worker raise on 5% and hang (3 s) on 5% of their steps: every failed episode is
    a faulty env's own, and every batch step ends within the timeout and a small constant."""
    faults = {"raise_prob": 0.05, "hang_prob": 0.05, "hang_seconds": 3.0}
    fns = [functools.partial(faulty_countdown, length=4, faults=faults)] * 8
    vec = build(fns, step_timeout=0.3)
    vec.reset(seed=0)
    slowest, errors, faulty_steps = 0.0, [], 0
    for _ in range(40):
        start = time.perf_counter()
        *_, infos = vec.step(["x"] * 8)
        slowest = max(slowest, time.perf_counter() - start)
        errors += [info["error"] for info in infos if "error" in info]
    faulty_steps = sum(1 for e in errors if "InjectedFault" in e or "timeout" in e)
    assert errors and faulty_steps == len(errors), errors  # no "lost its episode"
    assert slowest < 0.3 + 1.5


def faulty_countdown(length, faults):
    from gem_core.vector.faults import InjectFaults

    return InjectFaults(CountdownEnv(length=length), **faults)


@pytest.mark.parametrize("backend", REMOTE, indirect=True)
def test_crashed_worker_is_detected_and_rebuilt_and_its_other_envs_restored(backend, build):
    # Env 2 kills its own process (os._exit); env 3 shares that worker and is not stepped then.
    fns = [functools.partial(FaultyEnv, length=5)] * 4
    fns[2] = functools.partial(FaultyEnv, length=5, exit_on_step=1)
    vec = build(fns)
    vec.reset(seed=0)
    pids = vec.get_attr("pid")
    obs, rew, term, trunc, infos = vec.step({0: "x", 1: "x", 2: "x"})
    assert "died" in infos[2]["error"] and trunc[2] and not term[2]
    if backend == "processes":
        assert "exit code 3" in infos[2]["error"]
    assert infos[0]["t"] == 1 and infos[1]["t"] == 1 and infos[3] == {"stepped": False}
    before = obs[3]
    obs, rew, term, trunc, infos = vec.step(["x"] * 4)
    assert infos[2]["autoreset"] and obs[2].startswith("guess a digit")
    assert infos[3]["t"] == 1 and "error" not in infos[3] and obs[3] != before  # restored, stepped on
    assert infos[0]["t"] == 2
    new_pids = vec.get_attr("pid")
    assert new_pids[:2] == pids[:2] and new_pids[2] == new_pids[3] != pids[2]
    assert vec.get_attr("t") == [2, 2, 0, 1]


@pytest.mark.parametrize("backend", ["processes", "ray"], indirect=True)
def test_results_that_came_back_before_a_worker_died_are_kept(backend, build):
    # Env 1 kills its worker 0.5 s into its step; env 0, in the same worker, answered long before.
    fns = [functools.partial(FaultyEnv, length=5)] * 4
    fns[1] = functools.partial(FaultyEnv, length=5, exit_on_step=1, exit_delay=0.5)
    vec = build(fns)
    vec.reset(seed=0)
    obs, rew, term, trunc, infos = vec.step(["x"] * 4)
    assert "died" in infos[1]["error"] and trunc[1]
    assert [infos[i]["t"] for i in (0, 2, 3)] == [1, 1, 1] and not trunc[[0, 2, 3]].any()
    obs, rew, term, trunc, infos = vec.step(["x"] * 4)
    assert infos[1]["autoreset"] and [infos[i]["t"] for i in (0, 2, 3)] == [2, 2, 2]


def reference_run(fns, action_batches):
    """What each env returns for the same actions when nothing crashes (the sync backend)."""
    vec = BACKENDS["sync"](fns)
    try:
        vec.reset(seed=0)
        return [vec.step(actions) for actions in action_batches]
    finally:
        vec.close()


@pytest.mark.parametrize("backend", REMOTE, indirect=True)
@pytest.mark.parametrize("crashers", [[1], [1, 6]], ids=["one-crash", "two-crashes"])
def test_a_crash_mid_batch_costs_only_the_crashing_envs_episode(backend, build, crashers):
    """Issue 43: envs that share a worker with an env that kills it, and are in the middle of their own
    steps when it does, keep their episodes: they are restored from their snapshots in the new worker
    and their steps run again, giving what they would have given without the crash."""
    healthy = functools.partial(FaultyEnv, length=6, sleep=0.3)
    fns = [healthy] * 8
    for i in crashers:
        fns[i] = functools.partial(FaultyEnv, length=6, exit_on_step=2, exit_delay=0.05)
    vec = build(fns, num_workers=1, step_timeout=10)
    vec.reset(seed=0)
    batches = [["x"] * 8, ["y"] * 8]  # never the hidden digit: no episode ends on its own
    vec.step(batches[0])
    obs, rew, term, trunc, infos = vec.step(batches[1])  # the crashers die while the others sleep
    for i in crashers:
        assert "died" in infos[i]["error"] and trunc[i] and not term[i], infos[i]
    survivors = [i for i in range(8) if i not in crashers]
    assert not any("error" in infos[i] for i in survivors), infos
    assert [infos[i]["t"] for i in survivors] == [2] * len(survivors)
    expected = reference_run([functools.partial(FaultyEnv, length=6)] * 8, batches)[-1]
    assert [obs[i] for i in survivors] == [expected[0][i] for i in survivors]
    assert [rew[i] for i in survivors] == [expected[1][i] for i in survivors]
    obs, rew, term, trunc, infos = vec.step(["x"] * 8)  # the crashers start over, the others go on
    assert all(infos[i]["autoreset"] for i in crashers)
    assert [infos[i]["t"] for i in survivors] == [3] * len(survivors)


@pytest.mark.parametrize("backend", ["processes"], indirect=True)
@pytest.mark.parametrize("keep_states", [True, False])
def test_an_env_without_a_snapshot_reports_its_lost_episode_at_its_next_step(backend, build, keep_states):
    # Env 0 cannot be snapshot (it holds a lock), or snapshots are off; env 1 kills their worker.
    fns = [functools.partial(FaultyEnv, length=5)] * 4
    fns[0] = functools.partial(FaultyEnv, length=5, stateless=keep_states)
    fns[1] = functools.partial(FaultyEnv, length=5, exit_on_step=1)
    vec = build(fns, keep_states=keep_states)
    vec.reset(seed=0)
    obs, rew, term, trunc, infos = vec.step({1: "x", 2: "x"})
    assert "died" in infos[1]["error"] and infos[2]["t"] == 1
    obs, rew, term, trunc, infos = vec.step(["x"] * 4)
    why = "its state could not be snapshot" if keep_states else "keep_states is off"
    assert "lost its episode" in infos[0]["error"] and why in infos[0]["error"] and trunc[0]
    assert infos[1]["autoreset"] and infos[2]["t"] == 2
    obs, rew, term, trunc, infos = vec.step({0: "x", 2: "x"})
    assert infos[0]["autoreset"] and infos[2]["t"] == 3


@pytest.mark.parametrize("backend", ["processes"], indirect=True)
def test_a_worker_that_dies_outside_a_step_keeps_its_envs_episodes(backend, build):
    fns = [functools.partial(FaultyEnv, length=5)] * 4
    fns[1] = functools.partial(FaultyEnv, length=5, exit_on_sample=True)
    vec = build(fns)
    vec.reset(seed=0)
    actions = vec.sample_random_actions()  # env 1 kills the worker it shares with env 0
    assert actions[1] == "" and all(a.isdigit() for a in actions[2:])
    obs, rew, term, trunc, infos = vec.step(["x"] * 4)
    assert [info["t"] for info in infos] == [1, 1, 1, 1] and not trunc.any()


@pytest.mark.parametrize("backend", ["threads", *REMOTE], indirect=True)
def test_a_hung_sample_costs_at_most_its_own_envs_episode(backend, build):
    fns = [functools.partial(FaultyEnv, length=5)] * 4
    fns[1] = functools.partial(FaultyEnv, length=5, hang_on_sample=True)
    vec = build(fns, step_timeout=0.5)
    vec.reset(seed=0)
    vec.step(["x"] * 4)
    actions = vec.sample_random_actions()
    assert actions[1] == "" and all(a.isdigit() for i, a in enumerate(actions) if i != 1)
    obs, rew, term, trunc, infos = vec.step(["x"] * 4)
    assert [infos[i]["t"] for i in (0, 2, 3)] == [2, 2, 2]
    if backend == "threads":  # its env was abandoned to the hung thread: the episode is lost
        assert "lost its episode" in infos[1]["error"] and trunc[1]
    else:  # the worker restored the abandoned env's snapshot into its replacement
        assert infos[1]["t"] == 2 and not trunc[1]


@pytest.mark.parametrize("backend", ["processes", "ray"], indirect=True)
def test_a_worker_with_a_long_hung_call_is_replaced_without_losing_an_episode(backend, build):
    fns = [functools.partial(FaultyEnv, length=1000)] * 4
    fns[1] = functools.partial(FaultyEnv, length=1000, hang_on_step=2)
    # A Ray replacement starts in the background where the cluster has room for one more actor.
    options = {"actor_options": {"num_cpus": 0.5}} if backend == "ray" else {}
    vec = build(fns, step_timeout=0.3, recycle_hung_after=0.5, **options)
    vec.reset(seed=0)
    pids = vec.get_attr("pid")
    vec.step(["x"] * 4)
    *_, infos = vec.step(["x"] * 4)  # env 1 hangs
    assert "timeout" in infos[1]["error"]
    time.sleep(0.6)
    vec.step(["x"] * 4)  # its worker reports the call still running: a replacement starts
    deadline = time.monotonic() + 60
    t = 3
    while vec.get_attr("pid")[0] == pids[0]:
        assert time.monotonic() < deadline, "the worker was not replaced"
        time.sleep(0.05)
        start = time.perf_counter()
        *_, trunc, infos = vec.step(["x"] * 4)
        assert time.perf_counter() - start < 0.3 + 1.5  # the replacement started in the background
        t += 1
        assert [infos[i]["t"] for i in (0, 2, 3)] == [t] * 3 and not trunc[[0, 2, 3]].any()
    new_pids = vec.get_attr("pid")
    assert new_pids[0] == new_pids[1] != pids[0] and new_pids[2:] == pids[2:]
    *_, trunc, infos = vec.step(["x"] * 4)
    assert [infos[i]["t"] for i in (0, 2, 3)] == [t + 1] * 3 and not trunc[[0, 2, 3]].any()


@pytest.mark.parametrize("backend", ["processes"], indirect=True)
def test_worker_killed_between_steps_is_replaced_and_its_envs_restored(backend, build):
    vec = build([functools.partial(FaultyEnv, length=5)] * 4)
    vec.reset(seed=0)
    vec.step(["x"] * 4)
    os.kill(vec.get_attr("pid")[3], signal.SIGKILL)  # as the OOM killer would
    time.sleep(0.2)
    obs, rew, term, trunc, infos = vec.step(["x"] * 4)
    assert [info["t"] for info in infos] == [2, 2, 2, 2] and not trunc.any()


@pytest.mark.parametrize("backend", ["ray"], indirect=True)
def test_ray_actor_answers_only_the_holder_of_its_key(backend):
    from gem_core.vector.env_host import dumps_factories
    from gem_core.vector.ray_backend import EnvActor

    ray = pytest.importorskip("ray")
    key = os.urandom(32)
    actor = ray.remote(EnvActor).options(num_cpus=1).remote(dumps_factories([FaultyEnv]), key)
    address = ray.get(actor.address.remote())
    serving = actor.serve.remote()
    try:
        with pytest.raises(mpc.AuthenticationError):
            mpc.Client(address, authkey=b"a stranger's key")
        with mpc.Client(address, authkey=key) as conn:
            conn.send_bytes(pickle.dumps(([(0, ("reset", 3, {}))], None)))
            done, end, _ = pickle.loads(conn.recv_bytes())
            (reply,) = done.values()
            assert end and pickle.loads(reply)[0] == FaultyEnv().reset(seed=3)
            with pytest.raises(ConnectionRefusedError):  # it stopped listening once ours connected
                socket.create_connection(address, timeout=5)
            conn.send_bytes(b"")
        ray.get(serving, timeout=10)
    finally:
        ray.kill(actor)


@pytest.mark.parametrize("backend", ["ray"], indirect=True)
def test_ray_vector_env_talks_to_its_actors_over_their_own_connections(backend, build):
    vec = build([functools.partial(FaultyEnv, length=5)] * 4)
    vec.reset(seed=0)
    for conn in vec._conns.values():
        with socket.socket(fileno=os.dup(conn.fileno())) as sock:
            address = sock.getpeername()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(address, timeout=5)
    obs, rew, term, trunc, infos = vec.step(["x"] * 4)
    assert [info["t"] for info in infos] == [1, 1, 1, 1]


@pytest.mark.parametrize("backend", REMOTE, indirect=True)
def test_result_that_does_not_pickle_is_reported(backend, build):
    vec = build([functools.partial(FaultyEnv, length=5, unpicklable_on_step=1)] * 2)
    vec.reset(seed=0)
    obs, rew, term, trunc, infos = vec.step(["x", "x"])
    assert all("does not pickle" in info["error"] for info in infos) and trunc.all()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_envs_live_where_the_backend_says_and_close_leaves_nothing(backend, build):
    vec = build([functools.partial(FaultyEnv)] * 4)
    pids = vec.get_attr("pid")
    if backend in REMOTE:
        assert len(set(pids)) == 2 and os.getpid() not in pids
        with pytest.raises(AttributeError, match="get_attr"):
            vec.envs  # noqa: B018
    else:
        assert set(pids) == {os.getpid()}
    vec.close()
    vec.close()  # twice is fine
    if backend in REMOTE:
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids)
        with pytest.raises(RuntimeError, match="closed"):
            vec.reset(seed=0)


@pytest.mark.parametrize("backend", REMOTE, indirect=True)
def test_make_vec_factories_cross_the_process_boundary(backend):
    custom = "test:VectorBackendCountdown-v0"
    gem_core.register(custom, "tests.core.toy_envs:CountdownEnv", length=4)  # in this process only
    name, options = VARIANTS[backend]
    try:  # the factories carry the spec to the workers
        vec = gem_core.make_vec(
            [custom, "game:GuessTheNumber-v1-easy"],
            backend=name,
            wrappers=[lambda env: TimeLimit(env, 2)],  # a lambda: cloudpickle carries it
            num_workers=2,
            **options,
        )
    finally:
        gem_core.unregister(custom)
    try:
        assert [s.id for s in vec.get_attr("spec")] == [custom, "game:GuessTheNumber-v1-easy"]
        assert vec.get_attr("max_turns") == [2, 2]
        obs, _ = vec.reset(seed=0)
        assert obs[0] == CountdownEnv(length=4).reset(seed=0)[0]
        *_, trunc, infos = vec.step(["x", "x"])
        *_, trunc, infos = vec.step(["x", "x"])
        assert all(info.get("time_limit") for info in infos) and trunc.all()
    finally:
        vec.close()


def test_ray_backend_says_how_to_install_ray(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets where Ray is not installed
    with pytest.raises(ImportError, match=r"pip install 'gem-core\[ray\]'"):
        RayVectorEnv(countdown(2))


def test_ray_backend_names_its_transports():
    with pytest.raises(ValueError, match=r"unknown transport 'grpc'; choose from \('connection', 'ray'\)"):
        RayVectorEnv(countdown(2), transport="grpc")


@pytest.mark.parametrize("backend", REMOTE, indirect=True)
def test_env_that_cannot_be_built_fails_the_constructor(backend, build):
    with pytest.raises(RuntimeError, match=r"could not build its envs.*TypeError"):
        build([functools.partial(CountdownEnv, no_such_argument=1)] * 2)


def test_spawned_workers_match_the_sync_backend():
    from gem_core.vector import ProcessVectorEnv, SyncVectorEnv

    with pytest.raises(ValueError, match="fork is unsafe"):
        ProcessVectorEnv(countdown(2), context="fork")
    vec = ProcessVectorEnv(countdown(4, length=3), num_workers=2, context="spawn")
    try:
        assert _run(vec, 6) == _run(SyncVectorEnv(countdown(4, length=3)), 6)
    finally:
        vec.close()


@pytest.mark.parametrize("env_id", ["game:GuessTheNumber-v1", "game:Mastermind-v1", "game:Hangman-v1"])
def test_a_workers_snapshot_restores_as_get_state_does(env_id):
    """``snapshot`` skips the default ``get_state``'s deep copy: it must restore the same future."""
    from gem_core.vector.env_host import snapshot

    env = TimeLimit(gem_core.make(env_id), 6)
    env.reset(seed=3)
    env.step(env.sample_random_action())
    assert pickle.loads(snapshot(env)).keys() == env.get_state().keys()
    clones = []
    for state in (pickle.loads(snapshot(env)), env.get_state()):
        clone = TimeLimit(gem_core.make(env_id), 6)
        clone.set_state(state)
        clones.append(clone)
    for _ in range(3):
        actions = [c.sample_random_action() for c in (env, *clones)]
        assert actions[0] == actions[1] == actions[2]
        results = [c.step(actions[0]) for c in (env, *clones)]
        assert results[0] == results[1] == results[2]
        if results[0][2] or results[0][3]:
            break

"""``gem serve`` end to end: real servers in subprocesses on free localhost ports, openenv's own
clients and our ``Env`` client, concurrent and killed sessions, faulty envs, bad requests, shutdown."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("openenv")
psutil = pytest.importorskip("psutil")

from openenv.core.generic_client import GenericEnvClient  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

import gem_core  # noqa: E402
from gem_core.openenv import OpenEnvClientEnv  # noqa: E402
from gem_core.openenv.client import OpenEnvError  # noqa: E402
from gem_core.openenv.codec import to_jsonable  # noqa: E402
from tests.openenv import support  # noqa: E402

GUESS = "game:GuessTheNumber-v1-easy"
ACTIONS = ["\\boxed{5}", "\\boxed{3}", "\\boxed{8}", "no box here", "\\boxed{2}", "\\boxed{9}"]


# ---- helpers ------------------------------------------------------------------------------------
def play_local(env_id: str, seed: int, actions=ACTIONS) -> list:
    """An episode in process, infos made JSON-safe as they travel: [(obs, info), (obs, r, term, trunc, info)...]."""
    env = gem_core.make(env_id)
    obs, info = env.reset(seed=seed)
    record: list = [(obs, to_jsonable(info))]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        record.append((obs, reward, terminated, truncated, to_jsonable(info)))
        if terminated or truncated:
            break
    env.close()
    return record


def play_remote(env, seed: int, actions=ACTIONS) -> list:
    obs, info = env.reset(seed=seed)
    record: list = [(obs, info)]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        record.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return record


def http(url: str, method: str = "GET", body: bytes | None = None, content_type: str = "application/json"):
    """(status, parsed JSON body) of one request."""
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def ws_request(ws, message) -> dict:
    """Send one message, return the reply (or the error a server sent before closing the connection)."""
    with contextlib.suppress(ConnectionClosed):
        ws.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
    return json.loads(ws.recv(timeout=30))


def descendants(pid: int) -> list:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@pytest.fixture(scope="module")
def guess_server():
    with support.running(["serve", GUESS, "--port", "0", "--max-sessions", "34"]) as server:
        yield server


# ---- the protocol through openenv's own clients -------------------------------------------------
def test_health_metadata_and_schema(guess_server):
    assert http(guess_server.url + "/health") == (200, {"status": "healthy"})
    status, metadata = http(guess_server.url + "/metadata")
    assert status == 200 and metadata["name"] == GUESS and "gem_core" in metadata["version"]
    status, schema = http(guess_server.url + "/schema")
    assert status == 200
    assert schema["action"]["required"] == ["action"]
    assert {"text", "terminated", "truncated", "info", "seed"} <= set(schema["observation"]["properties"])


def test_openenv_client_plays_full_episodes_like_in_process(guess_server):
    for seed in (0, 1, 2):
        expected = play_local(GUESS, seed)
        with GenericEnvClient(base_url=guess_server.url).sync() as client:
            result = client.reset(seed=seed)
            assert result.observation["text"] == expected[0][0]
            assert result.observation["seed"] == seed and result.done is False
            for action, step in zip(ACTIONS, expected[1:]):
                result = client.step({"action": action})
                obs = result.observation
                assert (obs["text"], result.reward, obs["terminated"], obs["truncated"], obs["info"]) == step
                assert result.done == (step[2] or step[3])
            assert result.done
            state = client.state()
            assert state["step_count"] == len(expected) - 1 and state["seed"] == seed and state["done"]


def test_http_reset_is_seeded_and_stateless_step_is_a_json_error(guess_server):
    status, body = http(guess_server.url + "/reset", "POST", json.dumps({"seed": 4}).encode())
    assert status == 200 and body["observation"]["text"] == play_local(GUESS, 4)[0][0]
    status, body = http(
        guess_server.url + "/step", "POST", json.dumps({"action": {"action": "\\boxed{1}"}}).encode()
    )
    assert status == 409 and "/ws" in body["detail"]


# ---- our Env client -----------------------------------------------------------------------------
def test_make_openenv_id_plays_the_same_episodes_as_in_process(guess_server):
    env = gem_core.make(f"openenv:{guess_server.url}")
    assert isinstance(env.unwrapped, OpenEnvClientEnv) and env.spec.id == f"openenv:{guess_server.url}"
    try:
        for seed in (0, 1, 2, 3, 12345678901):
            assert play_remote(env, seed) == play_local(GUESS, seed)
            assert env.unwrapped.seed == seed
        # A seedless reset continues the server-side generator, like a local env; the seed comes back.
        env.reset()
        assert isinstance(env.unwrapped.seed, int)
    finally:
        env.close()
    env.close()  # twice is fine


def test_32_sessions_through_make_vec(guess_server):
    vec = gem_core.make_vec(f"openenv:{guess_server.url}", 32, backend="threads", autoreset_mode="disabled")
    try:
        observations, infos = vec.reset(seed=100)
        assert vec.get_attr("seed") == list(range(100, 132))
        records = [[(obs, info)] for obs, info in zip(observations, infos)]
        turn = 0
        while not vec.done.all():
            live = [i for i in range(32) if not vec.done[i]]
            obs, rewards, terminated, truncated, infos = vec.step({i: ACTIONS[turn] for i in live})
            for i in live:
                info = {k: v for k, v in infos[i].items() if k != "stepped"}
                records[i].append((obs[i], float(rewards[i]), bool(terminated[i]), bool(truncated[i]), info))
            turn += 1
        for i in range(32):
            assert records[i] == play_local(GUESS, 100 + i), i
    finally:
        vec.close()


def test_a_session_killed_mid_episode_does_not_disturb_others(guess_server):
    victim_code = (
        "import sys, time\n"
        "from openenv.core.generic_client import GenericEnvClient\n"
        f"c = GenericEnvClient(base_url={guess_server.url!r}).sync(); c.connect()\n"
        "c.reset(seed=9); c.step({'action': '\\\\boxed{5}'})\n"
        "print('mid-episode', flush=True); time.sleep(600)\n"
    )
    a, b = OpenEnvClientEnv(guess_server.url), OpenEnvClientEnv(guess_server.url)
    victim = subprocess.Popen([sys.executable, "-c", victim_code], stdout=subprocess.PIPE, text=True)
    try:
        a_record, b_record = [a.reset(seed=21)], [b.reset(seed=22)]
        a_record.append(a.step(ACTIONS[0]))
        assert victim.stdout.readline().strip() == "mid-episode"
        victim.kill()  # no close message, no clean disconnect
        victim.wait()
        for env, record in ((a, a_record), (b, b_record)):
            for action in ACTIONS[len(record) - 1 :]:
                record.append(env.step(action))
                if record[-1][2] or record[-1][3]:
                    break
        assert a_record == play_local(GUESS, 21)
        assert b_record == play_local(GUESS, 22)
    finally:
        victim.kill()
        a.close()
        b.close()
    # Its slot is free again: all 34 sessions can be opened, a 35th is refused.
    deadline = time.monotonic() + 20
    while True:
        with contextlib.ExitStack() as stack:
            sockets = [stack.enter_context(connect(guess_server.ws_url)) for _ in range(35)]
            replies = [ws_request(ws, {"type": "reset", "data": {"seed": 0}}) for ws in sockets]
        refused = [r for r in replies if r["type"] == "error"]
        if len(refused) == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(refused) == 1 and refused[0]["data"]["code"] == "CAPACITY_REACHED"
    assert sum(r["type"] == "observation" for r in replies) == 34


# ---- bad requests -------------------------------------------------------------------------------
# What gem serve answers to each kind of bad frame (gem_core.openenv.guard's table); the session lives on.
BAD_FRAMES = [
    ("{not json", "INVALID_JSON", "not JSON"),
    (b"\x00binary", "INVALID_JSON", "binary frames"),
    ("[]", "VALIDATION_ERROR", "got an array"),
    ('"str"', "VALIDATION_ERROR", "got a string"),
    ("null", "VALIDATION_ERROR", "got null"),
    ("123", "VALIDATION_ERROR", "got a number"),
    ({"data": {}}, "UNKNOWN_TYPE", "no 'type' field"),
    ({"type": "dance"}, "UNKNOWN_TYPE", "reset, step, state, close"),
    ({"type": "step", "data": {"message": "hi"}}, "VALIDATION_ERROR", "missing field 'action'"),
    ({"type": "step", "data": {"message": "hi"}}, "VALIDATION_ERROR", "unexpected field 'message'"),
    ({"type": "step", "data": {"action": 5}}, "VALIDATION_ERROR", "field 'action'"),
    ({"type": "step", "data": {"action": "x"}, "extra": 1}, "VALIDATION_ERROR", "unexpected field 'extra'"),
    ({"type": "step"}, "VALIDATION_ERROR", "missing field 'data'"),
    ({"type": "reset", "data": {"seed": "abc"}}, "VALIDATION_ERROR", "seed must be an integer"),
    ({"type": "reset", "data": {"seed": True}}, "VALIDATION_ERROR", "seed must be an integer"),
    ({"type": "step", "data": {"action": "x" * (2 << 20)}}, "PAYLOAD_TOO_LARGE", "limit"),
    ({"type": "step", "data": {"action": "x" * (8 << 20)}}, "PAYLOAD_TOO_LARGE", "limit"),
    (b"\x00" * (2 << 20), "PAYLOAD_TOO_LARGE", "limit"),
]


def test_each_kind_of_bad_frame_gets_its_documented_error_and_the_session_lives_on(guess_server):
    expected = play_local(GUESS, 5)
    with connect(guess_server.ws_url, max_size=None) as ws:
        # Before the first reset, a step is a request the session cannot serve yet.
        reply = ws_request(ws, {"type": "step", "data": {"action": "\\boxed{5}"}})
        assert reply["data"]["code"] == "EXECUTION_ERROR" and "reset" in reply["data"]["message"]
        reply = ws_request(ws, {"type": "reset", "data": {"seed": 5}})
        assert reply["data"]["observation"]["text"] == expected[0][0]
        for frame, code, says in BAD_FRAMES:
            reply = ws_request(ws, frame)
            assert reply["type"] == "error" and reply["data"]["code"] == code, (frame, reply)
            assert says in reply["data"]["message"], (frame, reply)
            if code == "VALIDATION_ERROR" and '"step"' in str(frame):
                assert "the action field is 'action'" in reply["data"]["message"]
        # The same session, still in the same episode, plays on.
        for action, step in zip(ACTIONS, expected[1:]):
            reply = ws_request(ws, {"type": "step", "data": {"action": action}})
            observation = reply["data"]["observation"]
            assert (observation["text"], reply["data"]["reward"], observation["info"]) == (
                step[0],
                step[1],
                step[4],
            )
        reply = ws_request(ws, {"type": "step", "data": {"action": ACTIONS[0]}})
        assert reply["data"]["code"] == "EXECUTION_ERROR" and "episode is over" in reply["data"]["message"]


def test_a_frame_past_the_hard_limit_is_refused_with_close_code_1009_naming_the_limit():
    with support.running(["serve", GUESS, "--port", "0", "--max-payload-bytes", "65536"]) as server:
        with connect(server.ws_url, max_size=None) as ws:
            ws.send("x" * (17 * 65536 + 65536 + 1))
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=30)
        assert closed.value.rcvd.code == 1009 and "limit" in closed.value.rcvd.reason
        env = OpenEnvClientEnv(server.url)  # the server itself is fine
        try:
            assert play_remote(env, 2) == play_local(GUESS, 2)
        finally:
            env.close()


def test_every_connection_past_max_sessions_is_told_capacity_reached():
    with (
        support.running(["serve", GUESS, "--port", "0", "--max-sessions", "2"]) as server,
        contextlib.ExitStack() as stack,
    ):
        held = [stack.enter_context(connect(server.ws_url)) for _ in range(2)]
        for i, ws in enumerate(held):
            assert ws_request(ws, {"type": "reset", "data": {"seed": i}})["type"] == "observation"

        def refused(sends_first: bool) -> tuple[str, str, int, str]:
            """The refusal sent as the connection opens, the reply to the client's first message, and
            the close; a client that sends before it reads gets the same."""
            with connect(server.ws_url) as ws:
                if sends_first:
                    ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
                opening = json.loads(ws.recv(timeout=30))["data"]["code"]
                if not sends_first:
                    ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
                reply = json.loads(ws.recv(timeout=30))["data"]["code"]
                with pytest.raises(ConnectionClosed) as closed:
                    ws.recv(timeout=30)
                return opening, reply, closed.value.rcvd.code, closed.value.rcvd.reason

        results: list = []
        threads = [
            threading.Thread(target=lambda first=i % 2 == 0: results.append(refused(first)))
            for i in range(12)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(results) == 12
        for opening, reply, close_code, reason in results:
            assert opening == reply == "CAPACITY_REACHED"
            assert close_code == 1013 and reason.startswith("CAPACITY_REACHED") and "2/2" in reason
        # openenv's own client and ours say so too.
        with (
            pytest.raises(RuntimeError, match="CAPACITY_REACHED"),
            GenericEnvClient(base_url=server.url).sync() as client,
        ):
            client.reset(seed=0)
        env = OpenEnvClientEnv(server.url)
        with pytest.raises(OpenEnvError, match="CAPACITY_REACHED"):
            env.reset(seed=0)
        env.close()
        # The held sessions never noticed.
        for i, ws in enumerate(held):
            reply = ws_request(ws, {"type": "step", "data": {"action": ACTIONS[0]}})
            assert reply["data"]["reward"] == play_local(GUESS, i)[1][1]


def test_bad_http_requests_get_json_errors_and_the_server_keeps_serving(guess_server):
    url = guess_server.url
    status, body = http(url + "/step", "POST", b"{broken")
    assert status == 422 and "detail" in body
    status, body = http(url + "/reset", "POST", json.dumps({"seed": -1}).encode())
    assert status == 422
    status, body = http(url + "/reset", "POST", b"x" * (2 << 20))
    assert status == 413 and body["code"] == "PAYLOAD_TOO_LARGE"
    call = {
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"session_id": "no-such-session", "name": "x"},
        "id": 1,
    }
    status, body = http(url + "/mcp", "POST", json.dumps(call).encode())
    assert status == 200 and "Unknown session_id" in body["error"]["message"]
    status, body = http(url + "/nowhere")
    assert status == 404
    assert http(url + "/health") == (200, {"status": "healthy"})
    env = OpenEnvClientEnv(url)
    try:
        assert play_remote(env, 6) == play_local(GUESS, 6)
    finally:
        env.close()


def test_server_errors_reach_our_client_as_openenv_errors(guess_server):
    env = OpenEnvClientEnv(guess_server.url)
    try:
        with pytest.raises(RuntimeError, match="reset"):  # refused by gem_core's episode guard or the server
            env.step("\\boxed{1}")
        env.reset(seed=1)
        with pytest.raises(OpenEnvError, match="limit"):
            env.step("x" * (2 << 20))
        assert env.step(ACTIONS[0]) == play_local(GUESS, 1)[1]  # same session, still in its episode
    finally:
        env.close()


# ---- faulty envs, deadlines, shutdown -----------------------------------------------------------
@pytest.fixture(scope="module")
def moody_server():
    server = support.start(
        ["serve", support.MOODY, "--port", "0", "--step-timeout", "4", "--tools", "python"], register=True
    )
    yield server
    support.stop(server)


def test_an_env_that_raises_affects_only_its_session(moody_server):
    broken, other = OpenEnvClientEnv(moody_server.url), OpenEnvClientEnv(moody_server.url)
    try:
        broken.reset(seed=1)
        other.reset(seed=2)
        with pytest.raises(OpenEnvError, match=r"ValueError.*broke on purpose"):
            broken.step("raise")
        assert other.step("1")[4]["t"] == 1
        with pytest.raises(OpenEnvError, match="send a reset"):
            broken.step("1")
        # The next reset starts a fresh env in the same session.
        assert broken.reset(seed=1)[0].startswith(support.MoodyEnv().reset(seed=1)[0])
        assert broken.step("1")[4]["t"] == 1
    finally:
        broken.close()
        other.close()


def test_an_env_that_hangs_hits_the_deadline_and_others_keep_playing(moody_server):
    hung, other = OpenEnvClientEnv(moody_server.url), OpenEnvClientEnv(moody_server.url)
    errors: list = []
    try:
        hung.reset(seed=3)
        other.reset(seed=4)

        def hang() -> None:
            started = time.monotonic()
            try:
                hung.step("hang")
            except OpenEnvError as exc:
                errors.append((str(exc), time.monotonic() - started))

        thread = threading.Thread(target=hang)
        thread.start()
        time.sleep(0.2)
        step_times = []
        for _ in range(4):  # while the other session's step hangs
            started = time.monotonic()
            other.step("slow")
            step_times.append(time.monotonic() - started)
        thread.join(30)
        assert errors and "deadline" in errors[0][0] and 3.9 < errors[0][1] < 20
        assert max(step_times) < 1.0, step_times  # the hang did not hold up the other session
        # The hung session goes on with a fresh env after a reset.
        assert hung.reset(seed=3)[0].startswith(support.MoodyEnv().reset(seed=3)[0])
        assert hung.step("1")[4]["t"] == 1
    finally:
        hung.close()
        other.close()


def test_tools_are_served(moody_server):
    env = OpenEnvClientEnv(moody_server.url)
    try:
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("<python>print(6 * 7)</python>")
        assert "42" in obs and not terminated
    finally:
        env.close()


def test_shutdown_closes_sessions_and_leaves_no_process_behind(moody_server):
    # A live session, a step hung in an env, and the Python tool's sandbox workers running.
    env, hung = OpenEnvClientEnv(moody_server.url), OpenEnvClientEnv(moody_server.url)
    env.reset(seed=0)
    env.step("<python>print(1)</python>")
    hung.reset(seed=0)

    def hang() -> None:
        with pytest.raises(OpenEnvError):
            hung.step("hang")

    threading.Thread(target=hang, daemon=True).start()
    time.sleep(0.3)
    children = descendants(moody_server.proc.pid)
    assert children, "the sandbox workers should be running"
    started = time.monotonic()
    assert support.stop(moody_server) == 0
    assert time.monotonic() - started < 15
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, alive
    with pytest.raises(OpenEnvError):  # the session ended with the server
        env.step("1")
    env.close()
    hung.close()


def test_idle_sessions_expire():
    with support.running(["serve", GUESS, "--port", "0", "--session-timeout", "1"]) as server:
        env = OpenEnvClientEnv(server.url)
        try:
            env.reset(seed=0)
            time.sleep(7)  # openenv's reaper looks every 5 s at the earliest
            with pytest.raises(OpenEnvError, match=r"session has ended.*expire"):
                env.step(ACTIONS[0])
            # A new session (the next reset reconnects only after a broken connection, so open one).
            fresh = OpenEnvClientEnv(server.url)
            assert play_remote(fresh, 0) == play_local(GUESS, 0)
            fresh.close()
        finally:
            env.close()


# ---- wrappers and options -----------------------------------------------------------------------
def test_wrappers_and_env_kwargs_are_applied_per_session():
    argv = ["serve", "game:GuessTheNumber-v1", "--port", "0", "--wrapper", "TimeLimit:max_turns=2"]
    argv += ["--wrapper", "ConcatObservations", "--env-kwargs", '{"max_turns": 9}']
    with support.running(argv) as server:
        from gem_core.wrappers import ConcatObservations, TimeLimit

        local = ConcatObservations(
            TimeLimit(gem_core.make("game:GuessTheNumber-v1", max_turns=9), max_turns=2)
        )
        env = OpenEnvClientEnv(server.url)
        try:
            for seed in (0, 1):
                expected = [local.reset(seed=seed)]
                for action in ACTIONS[:2]:
                    obs, r, term, trunc, info = local.step(action)
                    expected.append((obs, r, term, trunc, to_jsonable(info)))
                assert play_remote(env, seed) == expected
                assert expected[-1][3] or expected[-1][2]  # the time limit ended it
        finally:
            env.close()


# ---- a third-party OpenEnv server ---------------------------------------------------------------
def test_our_client_wraps_a_third_party_openenv_server():
    with support.running([], command=[sys.executable, "-c", support.THIRD_PARTY_SERVER]) as server:
        env = gem_core.make(f"openenv:{server.url}")
        try:
            obs, info = env.reset(seed=4)
            assert obs == "ready (seed 4)" and info["openenv_observation"]["length"] == 0
            assert env.step("hi")[:4] == ("HI", 2.0, False, False)
            assert env.step("abc")[1] == 3.0
            obs, reward, terminated, truncated, info = env.step("done")
            assert (obs, reward, terminated, truncated) == ("DONE", 4.0, True, False)
            assert info["openenv_observation"] == {"shouted": "DONE", "length": 4, "metadata": {}}
        finally:
            env.close()
        vec = gem_core.make_vec(f"openenv:{server.url}", 3, backend="threads")
        try:
            observations, _ = vec.reset(seed=0)
            assert observations == ["ready (seed 0)", "ready (seed 1)", "ready (seed 2)"]
            assert list(vec.step(["a", "bb", "ccc"])[1]) == [1.0, 2.0, 3.0]
        finally:
            vec.close()


# ---- the CLI ------------------------------------------------------------------------------------
def gem(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gem_core.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=support.REPO,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "game:NoSuchGame-v1"], "No env registered"),
        (["serve", GUESS, "--wrapper", "Bogus"], "unknown wrapper 'Bogus'"),
        (["serve", GUESS, "--tools", "hammer"], "unknown tool 'hammer'"),
        (["serve", GUESS, "--env-kwargs", "[1]"], "must be a JSON object"),
        (["serve", GUESS, "--env-kwargs", '{"no_such_arg": 1}'], "cannot serve"),
        (["serve", GUESS, "--max-sessions", "0"], "must be positive"),
    ],
)
def test_serve_errors_are_one_line_with_status_2(args, message):
    proc = gem(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("gem: error:") and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_serve_on_a_busy_port_is_a_one_line_error():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        proc = gem("serve", GUESS, "--port", str(sock.getsockname()[1]))
    assert proc.returncode == 2 and "cannot listen" in proc.stderr, proc.stderr


def test_gem_core_stays_light():
    code = (
        "import sys, gem_core, gem_core.openenv\n"
        "env = gem_core.make('openenv:http://127.0.0.1:9')\n"
        "print(type(env.unwrapped).__name__, any(m == 'openenv' or m.startswith('openenv.') for m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=support.REPO
    )
    assert proc.stdout.split() == ["OpenEnvClientEnv", "False"], proc.stderr

"""Issue 43's hostile-load scenarios: does a benign call or grading step stay bounded whatever others send?

    python benchmarks/hostile_load.py [--scenarios starvation,vector,grading,serve] [--out FILE]

``starvation``  the default ``PythonTool()``; 16 threads send ``while True: pass`` again and again; once
                they are running, one ``print(1)`` is sent 3 times: its latency, and whether it ran
                (given up after ``--give-up`` seconds: "not served").
``vector``      ``make_vec("math:Arithmetic-v0", 16, backend="threads", step_timeout=6)`` with
                ``ToolEnvWrapper(PythonTool())``: 8 envs send ``while True: pass``, 8 send
                ``print(6 * 7)``, for 4 batches (a reset before each): how many benign steps failed
                (``info["error"]``: their episode is lost), ran (``42`` in the observation) or neither.
``serve``       ``gem serve math:Arithmetic-v0 --tools python`` in a subprocess; 8 client sessions send
                ``while True: pass`` again and again (resetting when their episode ends), and once they
                are running a victim session sends ``print(1)`` 3 times: its latency and result.
``grading``     ``math:Arithmetic-v0`` and ``math:Fractions-v0`` (seed 0, 5 s grading deadline) answered
                with power towers, one at a time after a warm-up step, then 16 threads at once (twice):
                each step's time against the deadline.

The numbers are counts and seconds against the scenario's own bound (the grading deadline, the step
timeout), so they compare across runs of this script on other code (the "before" of
``benchmarks/results/hostile_load.txt`` ran it against the code before issue 43). The machine's other
load changes the seconds, not the counts.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import statistics
import subprocess
import sys
import threading
import time

import gem_core
from gem_core.tools.python import PythonTool
from gem_core.wrappers.tools import ToolEnvWrapper

SPIN = "while True: pass"


def starvation(args: argparse.Namespace) -> list[str]:
    tool = PythonTool()
    tool.execute("print(0)")  # the pool is up
    stop = threading.Event()

    def attack() -> None:
        while not stop.is_set():
            tool.execute(SPIN)

    for _ in range(16):
        threading.Thread(target=attack, daemon=True).start()
    time.sleep(1.0)
    lines = []
    with cf.ThreadPoolExecutor(1) as victim:
        for n in range(3):
            start = time.monotonic()
            future = victim.submit(tool.execute, "print(1)")
            try:
                obs, ok = future.result(timeout=args.give_up)
            except cf.TimeoutError:
                lines.append(f"starvation: victim print(1) #{n + 1}: not served within {args.give_up:g} s")
                break
            last = obs.strip().splitlines()[-1]
            lines.append(
                f"starvation: victim print(1) #{n + 1}: {time.monotonic() - start:.2f} s, ran={ok}, "
                f"last line {last[:60]!r}"
            )
            print(lines[-1], flush=True)
    stop.set()  # the attackers' calls still queued are left to the daemon threads
    return lines


def vector(args: argparse.Namespace) -> list[str]:
    vec = gem_core.make_vec(
        "math:Arithmetic-v0",
        num_envs=16,
        backend="threads",
        step_timeout=6.0,
        wrappers=[lambda env: ToolEnvWrapper(env, [PythonTool()])],
    )
    failed = ran = other = 0
    times = []
    try:
        for batch in range(4):
            vec.reset(seed=batch)
            actions = [f"<python>{SPIN}</python>"] * 8 + ["<python>print(6 * 7)</python>"] * 8
            start = time.monotonic()
            obs, _, _, _, infos = vec.step(actions)
            times.append(time.monotonic() - start)
            for i in range(8, 16):
                if "error" in infos[i]:
                    failed += 1
                elif "42" in obs[i]:
                    ran += 1
                else:
                    other += 1
    finally:
        vec.close()
    return [
        f"vector: 32 benign steps beside 32 hostile ones (step_timeout 6 s): {failed} failed (episode lost), "
        f"{ran} ran, {other} neither; batch steps {', '.join(f'{t:.1f}' for t in times)} s"
    ]


def grading(args: argparse.Namespace) -> list[str]:
    lines = []
    for env_id in ("math:Arithmetic-v0", "math:Fractions-v0"):
        env = gem_core.make(env_id)
        env.reset(seed=0)
        env.step(f"\\boxed{{{env.unwrapped.example['answer']}}}")  # the grading worker is warm
        for bomb in ("10^{10^{10}}", "9^{9^{9^{9}}}"):
            env.reset(seed=0)
            start = time.monotonic()
            env.step(f"\\boxed{{{bomb}}}")
            elapsed = time.monotonic() - start
            lines.append(
                f"grading: {env_id} \\boxed{{{bomb}}}: {elapsed:.2f} s (deadline 5 s, over by {elapsed - 5:+.2f})"
            )
            print(lines[-1], flush=True)
    envs = [gem_core.make("math:Arithmetic-v0") for _ in range(16)]

    def bomb(env):
        env.reset(seed=0)
        start = time.monotonic()
        env.step("\\boxed{10^{10^{10}}}")
        return time.monotonic() - start

    for rep in range(2):
        start = time.monotonic()
        with cf.ThreadPoolExecutor(16) as threads:
            durations = list(threads.map(bomb, envs))
        lines.append(
            f"grading: 16 threads, \\boxed{{10^{{10^{{10}}}}}} #{rep + 1}: batch {time.monotonic() - start:.2f} s, "
            f"slowest step {max(durations):.2f} s, median {statistics.median(durations):.2f} s (deadline 5 s)"
        )
        print(lines[-1], flush=True)
    return lines


def serve(args: argparse.Namespace) -> list[str]:
    code = "import sys; from gem_core.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = ["serve", "math:Arithmetic-v0", "--tools", "python", "--port", "0"]
    server = subprocess.Popen(  # its log (sessions closed under it at the end) stays out of the table
        [sys.executable, "-c", code, *argv], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    url = None
    for line in server.stdout:  # "gem serve: ... on http://127.0.0.1:PORT (OpenEnv: ..."
        if " on http://" in line:
            url = line.split(" on ", 1)[1].split()[0]
            break
    if url is None:
        server.kill()
        return [f"serve: the server did not start (exit status {server.wait()})"]
    stop, lines = threading.Event(), []

    def attack() -> None:
        env = gem_core.make(f"openenv:{url}")
        try:
            while not stop.is_set():
                env.reset(seed=0)
                done = False
                while not done and not stop.is_set():
                    *_, terminated, truncated, _ = env.step(f"<python>{SPIN}</python>")
                    done = terminated or truncated
        except Exception as exc:  # the server may close the session when we stop it
            if not stop.is_set():
                lines.append(f"serve: an attacker's session failed: {type(exc).__name__}: {exc}")

    try:
        for _ in range(8):
            threading.Thread(target=attack, daemon=True).start()
        time.sleep(2.0)
        victim = gem_core.make(f"openenv:{url}")
        victim.reset(seed=0)
        for n in range(3):
            start = time.monotonic()
            try:
                obs, *_ = victim.step("<python>print(1)</python>")
                result = f"ran={chr(10) + '1' + chr(10) in obs}, {obs.strip().splitlines()[-1][:70]!r}"
            except Exception as exc:
                result = f"failed ({type(exc).__name__}: {str(exc)[:80]})"
            lines.append(
                f"serve: victim session print(1) #{n + 1}: {time.monotonic() - start:.2f} s, {result}"
            )
            print(lines[-1], flush=True)
    finally:
        stop.set()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    return lines


SCENARIOS = {"starvation": starvation, "vector": vector, "grading": grading, "serve": serve}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--give-up", type=float, default=120.0, help="seconds to wait for the victim's call")
    parser.add_argument("--out", default=None, help="also append the lines to this file")
    args = parser.parse_args()
    lines = [f"$ python benchmarks/hostile_load.py {' '.join(sys.argv[1:])}".rstrip()]
    for name in args.scenarios.split(","):
        lines += SCENARIOS[name](args)
    lines.append(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("\n".join(lines), flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(lines) + "\n\n")
    os._exit(0)  # attackers still queued in the old pool would hold the exit for minutes


if __name__ == "__main__":
    main()

"""Python tool latency: gem_core's warm sandbox vs the reference GEM's PythonCodeTool, in one run.

Both tools execute the same actions (a ``<python>`` block) and return the same result. Calls are
interleaved round by round, so both see the same machine load; the script prints per-call latency
(median, mean, p90) and the ratio of medians. The reference runs in its default mode
(``sandbox_type="none"``: a fresh ``python`` subprocess per call with a substring blocklist) and,
for a like-for-like isolation comparison, in its ``bwrap`` mode when bubblewrap is installed.

    python benchmarks/python_tool_latency.py [--rounds 100]

Needs ``gem-llm`` (the reference GEM, module ``gem``) and bubblewrap for the full comparison.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

from gem_core.tools.python import PythonTool

ACTIONS = [
    "<python>print(sum(range(100)))</python>",
    "<python>import math\nprint(math.factorial(20))</python>",
    "<python>xs = [i * i for i in range(1000)]\nprint(len(xs), xs[-1])</python>",
]


def timed(fn, action: str) -> tuple[float, str]:
    start = time.perf_counter()
    out = fn(action)
    return time.perf_counter() - start, out


def summary(name: str, times: list[float]) -> str:
    times = sorted(times)
    p90 = times[int(0.9 * (len(times) - 1))]
    return (
        f"{name:38s} median {statistics.median(times) * 1e3:8.2f} ms   mean {statistics.mean(times) * 1e3:8.2f} ms"
        f"   p90 {p90 * 1e3:8.2f} ms   (n={len(times)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=100, help="calls per tool (each round calls every tool once)"
    )
    args = parser.parse_args()

    from gem.tools.python_code_tool import PythonCodeTool  # the reference GEM (pip install gem-llm)

    start = time.perf_counter()
    ours = PythonTool(timeout=5.0, workers=1)
    ours.execute("pass")  # the pool's first call waits for the worker to start
    cold = time.perf_counter() - start

    def run_ours(action: str) -> str:
        return ours.execute(ours.parse(action))[0]

    tools = {"gem_core PythonTool (warm, bwrap)": run_ours}
    reference = PythonCodeTool(timeout=5)
    tools["gem-llm PythonCodeTool (default: none)"] = lambda a: reference.execute_action(a)[2]
    if PythonCodeTool(timeout=5, sandbox_type="bwrap").execute_action(ACTIONS[0])[2].strip().endswith("4950"):
        reference_bwrap = PythonCodeTool(timeout=5, sandbox_type="bwrap")
        tools["gem-llm PythonCodeTool (bwrap)"] = lambda a: reference_bwrap.execute_action(a)[2]

    # Same answers from every tool, then interleaved timing rounds.
    for action in ACTIONS:
        answers = {name: fn(action).split("result:", 1)[1].split() for name, fn in tools.items()}
        assert len({tuple(a) for a in answers.values()}) == 1, answers
    for fn in tools.values():
        fn(ACTIONS[0])  # warm-up
    times: dict[str, list[float]] = {name: [] for name in tools}
    for i in range(args.rounds):
        action = ACTIONS[i % len(ACTIONS)]
        for name, fn in tools.items():
            times[name].append(timed(fn, action)[0])

    load = os.getloadavg()
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f}"
    )
    iso = ours.pool.isolation
    print(
        f"sandbox isolation: {iso['mode']}, seccomp {iso['seccomp']}, uid drop {iso['uid_drop']}, "
        f"per-call namespaces {iso['call_namespaces']}"
    )
    print(f"gem_core pool start + first call (cold): {cold * 1e3:.0f} ms")
    for name, ts in times.items():
        print(summary(name, ts))
    ours_median = statistics.median(times["gem_core PythonTool (warm, bwrap)"])
    for name, ts in times.items():
        if not name.startswith("gem_core"):
            print(f"speed-up vs {name}: {statistics.median(ts) / ours_median:.1f}x (ratio of medians)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

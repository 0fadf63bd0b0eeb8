"""How long a math env's grading of a power tower takes against its deadline, the first call included.

Each run is a fresh Python process: ``make("math:Arithmetic-v0")`` (which waits for a grading worker
to import math-verify), ``reset``, then ``\\boxed{10^{10^{10}}}`` graded at once under the default
5 s deadline, and a second time. Prints each run's seconds and the range over the runs.

    python -m benchmarks.math_grader_deadline [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

from benchmarks.train_step_profile import cpu_name

RUN = """
import json, time
import gem_core
from gem_core.envs.math import GRADE_TIMEOUT

start = time.monotonic()
env = gem_core.make("math:Arithmetic-v0")
seconds = {"deadline": GRADE_TIMEOUT, "make": time.monotonic() - start}
for call in ("first", "second"):
    env.reset(seed=0)
    start = time.monotonic()
    _, reward, _, _, info = env.step("\\\\boxed{10^{10^{10}}}")
    seconds[call] = time.monotonic() - start
    assert reward == 0.0 and "longer than" in info["error"], info
print(json.dumps(seconds))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}, {cpu_name()}")
    print(f"python {platform.python_version()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    runs = []
    for index in range(args.runs):
        done = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        r = runs[-1]
        print(
            f"run {index}: make {r['make']:.2f} s, first call {r['first']:.2f} s, second call {r['second']:.2f} s"
        )
    deadline = runs[0]["deadline"]
    for key in ("make", "first", "second"):
        values = [r[key] for r in runs]
        print(
            f"{key:>6}: {min(values):.2f}-{max(values):.2f} s over {len(runs)} runs (deadline {deadline:g} s)"
        )


if __name__ == "__main__":
    main()

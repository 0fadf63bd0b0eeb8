"""Code: write a program that passes a problem's tests, run in the project's sandbox.

The solution is the last fenced code block of the action (```python ... ```). It runs against each
of the problem's tests in the Python sandbox (``gem_core.tools.sandbox``) with a per-test time limit:

* ``stdio`` problems feed a test's ``input`` on stdin and compare stdout with its ``output``
  (whitespace-insensitive, numbers with a small tolerance);
* ``function`` problems call ``fn_name(*args)`` (or ``Solution().fn_name``) and compare the result
  with ``expected``.

| outcome                                 | reward                                      |
|-----------------------------------------|---------------------------------------------|
| every test passes                       | 1.0                                         |
| some test fails                         | 0.0 (``partial_credit=True``: the fraction) |
| no fenced code block in the reply       | -0.1                                        |

The episode is single-turn by default; ``max_attempts > 1`` shows the first failing test and lets
the agent try again. Per-test results are in ``info["test_results"]``. Without partial credit the
tests stop at the first failure (the rest are ``not_run``), so a hopeless program costs one time-out.

Ids: ``code:PythonBasics-v0`` (41 problems written for this project, shipped with the package);
``code:CodeContest`` and ``code:Taco`` (``code:Taco8k``) load the reference GEM's datasets from the
Hugging Face hub with ``datasets``, or local copies through ``data_files=``. Rows may be in the
reference GEM's format (``problem`` + ``tests``), DeepMind CodeContests' or BAAI TACO's.
"""

from __future__ import annotations

import functools
import json
import math
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gem_core.core import Env, StepResult
from gem_core.parsing import extract_last_code_block, preview
from gem_core.registry import register

PROBLEMS_FILE = Path(__file__).resolve().parents[1] / "data" / "code" / "problems.jsonl"
FORMAT_PENALTY = -0.1
RESULT_MARKER = "__gem_code_result__"
HUB_DATASETS = {"code_contests": "axon-rl/CodeContest", "taco": "axon-rl/TACO-8k"}


# ---- problems ------------------------------------------------------------------------------------
def load_problems(path: str | Path = PROBLEMS_FILE) -> list[dict[str, Any]]:
    """Problems from a JSONL file in this module's format (see ``gem_core/data/code/problems.jsonl``)."""
    with open(path, encoding="utf-8") as f:
        return [convert_row(json.loads(line)) for line in f if line.strip()]


def _as_text(value: Any) -> str:
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def convert_row(row: dict[str, Any]) -> dict[str, Any]:
    """One problem ``{id, statement, kind, tests, fn_name?, reference?}`` from a row in any known format."""
    if "kind" in row and "statement" in row:  # this module's own format
        return row
    if "description" in row and "public_tests" in row:  # deepmind/code_contests
        tests = []
        for group in ("public_tests", "private_tests", "generated_tests"):
            block = row.get(group) or {}
            tests += [
                {"input": i, "output": o} for i, o in zip(block.get("input", []), block.get("output", []))
            ]
        solutions = row.get("solutions") or {}
        python3 = [
            s for lang, s in zip(solutions.get("language", []), solutions.get("solution", [])) if lang == 3
        ]
        return {
            "id": str(row.get("name", "")),
            "statement": row["description"],
            "kind": "stdio",
            "tests": tests,
            "reference": python3[0] if python3 else None,
        }
    if "question" in row and "input_output" in row:  # BAAI/TACO, APPS
        spec = row["input_output"]
        spec = json.loads(spec) if isinstance(spec, str) else spec
        solutions = row.get("solutions") or "[]"
        solutions = json.loads(solutions) if isinstance(solutions, str) else solutions
        problem = _from_inputs_outputs(spec, row["question"], str(row.get("name", row.get("id", ""))))
        problem["reference"] = solutions[0] if solutions else None
        return problem
    if "problem" in row and "tests" in row:  # the reference GEM's axon-rl datasets
        spec = row["tests"]
        spec = json.loads(spec) if isinstance(spec, str) else spec
        return _from_inputs_outputs(spec, row["problem"], str(row.get("id", "")))
    raise ValueError(f"unknown code problem format (keys: {sorted(row)})")


def _from_inputs_outputs(spec: dict[str, Any], statement: str, problem_id: str) -> dict[str, Any]:
    inputs, outputs = spec.get("inputs", []), spec.get("outputs", [])
    if spec.get("fn_name"):
        tests = [{"args": i, "expected": o} for i, o in zip(inputs, outputs)]
        return {
            "id": problem_id,
            "statement": statement,
            "kind": "function",
            "fn_name": spec["fn_name"],
            "tests": tests,
        }
    tests = [{"input": _as_text(i), "output": _as_text(o)} for i, o in zip(inputs, outputs)]
    return {"id": problem_id, "statement": statement, "kind": "stdio", "tests": tests}


class _HubProblems(Sequence):
    """Rows of a ``datasets.Dataset``, converted on access (hub datasets are large)."""

    def __init__(self, dataset: Any):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:  # type: ignore[override]
        return convert_row(self.dataset[int(index)])


def load_hub_problems(
    dataset: str, split: str = "train", data_files: str | Sequence[str] | None = None
) -> Sequence[dict[str, Any]]:
    """Problems from the hub dataset ``dataset``, or from local ``data_files`` (json/jsonl/parquet).

    Offline (``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE`` set, or the hub unreachable) this fails at
    once with a message saying how to use a local copy, rather than waiting on the network.
    """
    try:
        import datasets
    except ImportError as exc:
        raise ImportError("hub code datasets need `datasets`: pip install datasets") from exc
    how = (
        f"Download {dataset!r} where there is network access and pass the local files, e.g. "
        "gem_core.make('code:CodeContest', data_files='path/to/train.parquet') (json, jsonl or parquet), "
        "or dataset='path/to/a/local/dataset/dir'."
    )
    if data_files is not None:
        files = [data_files] if isinstance(data_files, str) else list(data_files)
        missing = [f for f in files if not os.path.exists(f)]
        if missing:
            raise FileNotFoundError(f"data_files not found: {missing}")
        builder = "parquet" if str(files[0]).endswith(".parquet") else "json"
        return _HubProblems(datasets.load_dataset(builder, data_files=files, split=split))
    if not os.path.exists(dataset):
        if _offline():
            raise RuntimeError(f"cannot load {dataset!r}: the Hugging Face hub is offline here. {how}")
        if not _hub_reachable():
            raise RuntimeError(f"cannot load {dataset!r}: huggingface.co is not reachable. {how}")
    return _HubProblems(datasets.load_dataset(dataset, split=split))


def _offline() -> bool:
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes")
        for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def _hub_reachable(timeout: float = 3.0) -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


@functools.lru_cache(maxsize=8)
def _shared_problems(path: str) -> tuple[dict[str, Any], ...]:
    """One copy per file per process: spawned envs share it (it is read-only)."""
    return tuple(load_problems(path))


@functools.lru_cache(maxsize=8)
def _shared_hub_problems(
    dataset: str, split: str, data_files: tuple[str, ...] | None
) -> Sequence[dict[str, Any]]:
    return load_hub_problems(dataset, split, list(data_files) if data_files else None)


# ---- judging ------------------------------------------------------------------------------------
def outputs_match(got: str, expected: str) -> bool:
    """Token-wise equality; tokens that are both numbers may differ by 1e-6 (relative or absolute)."""
    a, b = got.split(), expected.split()
    if len(a) != len(b):
        return False
    return all(x == y or _close(x, y) for x, y in zip(a, b))


def _close(x: str, y: str) -> bool:
    try:
        fx, fy = float(x), float(y)
    except ValueError:
        return False
    return math.isfinite(fx) and math.isfinite(fy) and math.isclose(fx, fy, rel_tol=1e-6, abs_tol=1e-6)


def values_match(got: Any, expected: Any) -> bool:
    if isinstance(got, bool) or isinstance(expected, bool):
        return got is expected or (got == expected and type(got) is type(expected))
    if isinstance(got, (int, float)) and isinstance(expected, (int, float)):
        return math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-6)
    if isinstance(got, list) and isinstance(expected, list):
        return len(got) == len(expected) and all(values_match(g, e) for g, e in zip(got, expected))
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(values_match(got[k], expected[k]) for k in got)
    return got == expected


def function_harness(solution: str, fn_name: str) -> str:
    """The solution followed by code that calls ``fn_name`` with the JSON arguments on stdin."""
    return (
        f"{solution}\n\n"
        "import json as _gem_json, sys as _gem_sys\n"
        "_gem_args = _gem_json.loads(_gem_sys.stdin.read())\n"
        "_gem_fn = globals().get('Solution')\n"
        f"_gem_fn = getattr(_gem_fn(), {fn_name!r}) if _gem_fn is not None else globals()[{fn_name!r}]\n"
        "_gem_result = _gem_fn(*_gem_args)\n"
        "if isinstance(_gem_result, tuple):\n"
        "    _gem_result = list(_gem_result)\n"
        f"print({RESULT_MARKER!r} + _gem_json.dumps(_gem_result))\n"
    )


def _function_result(stdout: str) -> tuple[bool, Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                return True, json.loads(line[len(RESULT_MARKER) :])
            except ValueError:
                return False, None
    return False, None


# ---- the env ------------------------------------------------------------------------------------
class CodeEnv(Env[str]):
    """Programming problems judged by running the agent's code against tests in the sandbox.

    ``problems`` is a list of problems or a JSONL path (default: the shipped PythonBasics set);
    ``dataset`` (a hub id or local dataset directory) or ``data_files`` load a hub-format dataset
    instead. ``pool`` shares a ``SandboxPool``; otherwise the process-wide shared pool is used.
    """

    _static_attributes = ("problems", "_pool", "_converted")

    def __init__(
        self,
        problems: str | Path | Sequence[dict[str, Any]] | None = None,
        dataset: str | None = None,
        data_files: str | Sequence[str] | None = None,
        split: str = "train",
        timeout_per_test: float = 4.0,
        memory_mb: int = 512,
        partial_credit: bool = False,
        max_tests: int | None = None,
        max_attempts: int = 1,
        workers: int = 2,
        pool: Any = None,
    ):
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if dataset is not None or data_files is not None:
            files = (data_files,) if isinstance(data_files, str) else tuple(data_files or ())
            self.problems = _shared_hub_problems(dataset or "local files", split, files or None)
        elif problems is None or isinstance(problems, (str, Path)):
            self.problems = _shared_problems(str(Path(problems or PROBLEMS_FILE).resolve()))
        else:
            self.problems = [convert_row(p) for p in problems]
        if len(self.problems) == 0:
            raise ValueError("no code problems to draw from")
        self._pool, self._workers = pool, workers
        self.timeout_per_test, self.memory_mb = timeout_per_test, memory_mb
        self.partial_credit, self.max_tests, self.max_attempts = partial_credit, max_tests, max_attempts
        self._converted: dict[int, dict[str, Any]] = {}
        self.problem_index = 0
        self.attempts = 0
        self.done = True

    @property
    def pool(self) -> Any:
        """The sandbox pool, started on first use (the process-wide shared one unless given)."""
        if self._pool is None:
            from gem_core.tools.sandbox import shared_pool

            self._pool = shared_pool(self._workers)
        return self._pool

    @property
    def problem(self) -> dict[str, Any]:
        if self.problem_index not in self._converted:
            if len(self._converted) > 256:
                self._converted.clear()
            self._converted[self.problem_index] = self.problems[self.problem_index]
        return self._converted[self.problem_index]

    def tests(self) -> list[dict[str, Any]]:
        tests = self.problem["tests"]
        return tests[: self.max_tests] if self.max_tests is not None else tests

    def prompt(self) -> str:
        p = self.problem
        if p["kind"] == "function":
            how = f"Write a Python function `{p['fn_name']}` as described; it is called with the test arguments."
        else:
            how = "Write a complete Python 3 program that reads from standard input and writes to standard output."
        return (
            f"{p['statement'].strip()}\n\n{how} Reply with your solution in a single ```python code block; "
            "the last code block in your reply is the one that is run."
        )

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self.problem_index = self.rng.randrange(len(self.problems))
        self.attempts = 0
        self.done = False
        return self.prompt(), {"problem_id": self.problem.get("id", str(self.problem_index))}

    def step(self, action: str) -> StepResult:
        self.attempts += 1
        last_try = self.attempts >= self.max_attempts
        code = extract_last_code_block(action, language="python")
        if code is None or not code.strip():
            self.done = last_try
            feedback = "No code found: put your solution in a ```python code block."
            return feedback, FORMAT_PENALTY, self.done, False, {"format_error": True, "success": False}
        results = self.judge(code)
        passed = sum(r["passed"] for r in results)
        total = len(results)
        success = passed == total
        reward = 1.0 if success else (passed / total if self.partial_credit and total else 0.0)
        self.done = success or last_try
        info = {"success": success, "tests_passed": passed, "tests_total": total, "test_results": results}
        if success:
            feedback = f"All {total} tests passed."
        else:
            feedback = f"{passed}/{total} tests passed. {self._describe_failure(results)}"
            if not self.done:
                feedback += (
                    f"\nFix your program and reply with it again ({self.max_attempts - self.attempts} left)."
                )
        return feedback, float(reward), self.done, False, info

    def judge(self, code: str) -> list[dict[str, Any]]:
        """Run ``code`` on each test; one result per test (``passed``, ``status``, details)."""
        problem = self.problem
        program = function_harness(code, problem["fn_name"]) if problem["kind"] == "function" else code
        results: list[dict[str, Any]] = []
        stop = False
        for test in self.tests():
            if stop:
                results.append({"passed": False, "status": "not_run"})
                continue
            results.append(self._run_test(problem, program, test))
            stop = not results[-1]["passed"] and (
                not self.partial_credit or results[-1]["status"] == "timeout"
            )
        return results

    def _run_test(self, problem: dict[str, Any], program: str, test: dict[str, Any]) -> dict[str, Any]:
        stdin = json.dumps(test["args"]) if problem["kind"] == "function" else test["input"]
        run = self.pool.run(program, stdin=stdin, timeout=self.timeout_per_test, memory_mb=self.memory_mb)
        result: dict[str, Any] = {"passed": False, "time_s": round(run.duration_s, 4)}
        if run.error is not None:
            return {**result, "status": "sandbox_error", "error": run.error}
        if run.timed_out:
            return {**result, "status": "timeout"}
        if run.exit_code != 0:
            return {**result, "status": "runtime_error", "error": run.stderr[-500:]}
        if problem["kind"] == "function":
            found, value = _function_result(run.stdout)
            ok = found and (
                values_match(value, test["expected"])
                # TACO/APPS wrap a function's expected value in a one-element list.
                or (
                    isinstance(test["expected"], list)
                    and len(test["expected"]) == 1
                    and values_match(value, test["expected"][0])
                )
            )
            got = json.dumps(value) if found else "(no return value)"
        else:
            ok = outputs_match(run.stdout, test["output"])
            got = run.stdout
        return {**result, "passed": bool(ok), "status": "passed" if ok else "wrong_answer", "got": got[:500]}

    def _describe_failure(self, results: list[dict[str, Any]]) -> str:
        index, result = next((i, r) for i, r in enumerate(results) if not r["passed"])
        test = self.tests()[index]
        given = json.dumps(test["args"]) if "args" in test else test["input"]
        expected = json.dumps(test["expected"]) if "expected" in test else test["output"]
        text = f"First failure: test {index + 1} ({result['status'].replace('_', ' ')}). Input: {preview(given, 200)}"
        if result["status"] == "wrong_answer":
            text += f" Expected: {preview(expected, 200)} Got: {preview(result['got'], 200)}"
        elif result["status"] == "runtime_error":
            last = result["error"].strip().splitlines()[-1:] or [""]
            text += f" Error: {preview(last[0], 200)}"
        elif result["status"] == "timeout":
            text += f" (over {self.timeout_per_test:g} s)"
        return text

    def sample_random_action(self) -> str:
        """A wrong program or prose without code (drawn from ``action_rng``): a random policy never
        submits the reference solution, so random baselines and random data stay honest."""
        if self.action_rng.randrange(2):
            return "I am not sure how to solve this."
        wrong = (
            f"def {self.problem['fn_name']}(*args):\n    return None\n"
            if self.problem["kind"] == "function"
            else "print('no idea')\n"
        )
        return f"```python\n{wrong}```"


def register_code_envs() -> None:
    register(
        "code:PythonBasics-v0",
        "gem_core.envs.code:CodeEnv",
        description="41 small Python problems (stdin/stdout and functions) with tests, offline",
        multi_turn=False,
    )
    for env_id, key in (
        ("code:CodeContest", "code_contests"),
        ("code:Taco", "taco"),
        ("code:Taco8k", "taco"),
    ):
        register(
            env_id,
            "gem_core.envs.code:CodeEnv",
            description=f"{HUB_DATASETS[key]} from the Hugging Face hub (or data_files=)",
            multi_turn=False,
            data_source="hub",
            dataset=HUB_DATASETS[key],
            max_tests=12,
        )


register_code_envs()

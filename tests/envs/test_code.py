"""The code env: every shipped reference solution passes its tests in the real sandbox, wrong ones fail;
rewards, per-test results, attempts, snapshots, check_env, and the hub ids (offline and local files)."""

from __future__ import annotations

import json
import time

import pytest

import gem_core
from gem_core.core import EpisodeOverError
from gem_core.envs.code import CodeEnv, load_problems, outputs_match, values_match

pytestmark = pytest.mark.timeout(180)

PROBLEMS = load_problems()


@pytest.fixture(scope="module")
def env():
    return gem_core.make("code:PythonBasics-v0", timeout_per_test=2.0)


def solve(env: CodeEnv, problem_id: str, code: str, **reset_kwargs):
    env.reset(seed=0)
    env.unwrapped.problem_index = next(
        i for i, p in enumerate(env.unwrapped.problems) if p["id"] == problem_id
    )
    return env.step(f"Here you go.\n```python\n{code}```")


def fenced(code: str) -> str:
    return f"```python\n{code}```"


def test_the_shipped_set():
    assert len(PROBLEMS) >= 30
    assert len({p["id"] for p in PROBLEMS}) == len(PROBLEMS)
    kinds = {p["kind"] for p in PROBLEMS}
    assert kinds == {"stdio", "function"}
    assert all(len(p["tests"]) >= 3 and p["reference"] for p in PROBLEMS)
    assert "code:PythonBasics-v0" in gem_core.list_envs("code:")


@pytest.mark.parametrize("problem", PROBLEMS, ids=[p["id"] for p in PROBLEMS])
def test_reference_passes_and_wrong_solutions_fail(env, problem):
    obs, reward, terminated, truncated, info = solve(env, problem["id"], problem["reference"])
    assert (reward, terminated, truncated) == (1.0, True, False), obs
    assert info["success"] and info["tests_passed"] == info["tests_total"] == len(problem["tests"])
    assert all(r["status"] == "passed" for r in info["test_results"])
    if problem["kind"] == "function":
        wrong = f"def {problem['fn_name']}(*args):\n    return None\n"
    else:
        wrong = problem["reference"] + "print('one more line')\n"  # right answer plus junk
    obs, reward, _, _, info = solve(env, problem["id"], wrong)
    assert reward == 0.0 and not info["success"] and "tests passed" in obs


def test_subtly_wrong_solution_fails(env):
    off_by_one = "n = int(input())\na, b = 1, 1\nfor _ in range(n):\n    a, b = b, a + b\nprint(a)\n"
    obs, reward, _, _, info = solve(env, "fibonacci", off_by_one)
    assert reward == 0.0 and info["test_results"][0]["status"] == "wrong_answer"
    assert "First failure: test 1 (wrong answer). Input: 0 Expected: 0 Got: 1" in obs


def test_partial_credit_and_per_test_results():
    env = gem_core.make("code:PythonBasics-v0", partial_credit=True, timeout_per_test=1.0)
    half_right = "n = int(input())\nprint(n if n < 2 else 55)\n"  # right for 0, 1 and 10 only
    obs, reward, terminated, _, info = solve(env, "fibonacci", half_right)
    assert [r["status"] for r in info["test_results"]] == ["passed"] * 3 + ["wrong_answer"] * 2
    assert reward == pytest.approx(3 / 5) and terminated


def test_runtime_errors_time_outs_and_the_rest_not_run(env):
    _, reward, _, _, info = solve(env, "gcd", "raise ValueError('nope')\n")
    statuses = [r["status"] for r in info["test_results"]]
    assert reward == 0.0 and statuses[0] == "runtime_error" and set(statuses[1:]) == {"not_run"}
    assert "ValueError: nope" in info["test_results"][0]["error"]
    start = time.monotonic()
    obs, reward, _, _, info = solve(env, "gcd", "while True:\n    pass\n")
    assert info["test_results"][0]["status"] == "timeout" and "over 2 s" in obs
    assert time.monotonic() - start < 6  # one time-out, not one per test


def test_function_problems_accept_a_solution_class(env):
    code = (
        "class Solution:\n    def max_subarray(self, nums):\n"
        "        best = cur = nums[0]\n        for x in nums[1:]:\n"
        "            cur = max(x, cur + x)\n            best = max(best, cur)\n        return best\n"
    )
    assert solve(env, "max-subarray", code)[1] == 1.0


def test_the_solution_is_the_last_code_block(env):
    env.reset(seed=0)
    env.unwrapped.problem_index = next(
        i for i, p in enumerate(env.unwrapped.problems) if p["id"] == "sum-of-two"
    )
    action = "First try:\n```python\nprint(0)\n```\nBetter:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    assert env.step(action)[1] == 1.0


def test_no_code_block_is_a_format_error(env):
    env.reset(seed=1)
    obs, reward, terminated, _, info = env.step("The answer is obviously 42.")
    assert reward == -0.1 and terminated and info["format_error"] and "```python" in obs
    with pytest.raises(EpisodeOverError, match=r"the episode is over; call reset\(\)"):
        env.step("again")


def test_several_attempts_with_feedback():
    env = gem_core.make("code:PythonBasics-v0", max_attempts=2)
    obs, reward, terminated, _, _ = solve(env, "leap-year", "print('YES')\n")
    assert not terminated and reward == 0.0 and "1 left" in obs and "Expected: NO" in obs
    ref = next(p for p in PROBLEMS if p["id"] == "leap-year")["reference"]
    _, reward, terminated, _, _ = env.step(fenced(ref))
    assert reward == 1.0 and terminated


def test_seeds_snapshots_and_check_env(env):
    obs_a, _ = env.reset(seed=7)
    clone = env.spawn(same_state=True)
    assert clone.unwrapped.problem["id"] == env.unwrapped.problem["id"] and clone.unwrapped.prompt() == obs_a
    assert clone.unwrapped.pool is env.unwrapped.pool and clone.unwrapped.problems is env.unwrapped.problems
    assert env.reset(seed=7)[0] == obs_a
    assert len({env.reset(seed=s)[0] for s in range(10)}) > 3
    gem_core.check_env(env)


def test_output_comparison():
    assert outputs_match("1 2\n3\n", "1 2 3")
    assert outputs_match("0.3333333\n", "0.33333333")
    assert not outputs_match("1 2", "1 2 3")
    assert not outputs_match("YES", "yes")
    assert values_match([1, [2.0000001]], [1, [2]]) and not values_match(True, 1)
    assert values_match({"a": 1}, {"a": 1}) and not values_match({"a": 1}, {"b": 1})


# ---- hub ids ------------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ["code:CodeContest", "code:Taco"])
def test_hub_ids_fail_fast_offline_with_a_hint(env_id, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="data_files="):
        gem_core.make(env_id)
    assert time.monotonic() - start < 5
    assert gem_core.spec(env_id).data_source == "hub"


def test_hub_ids_load_local_files_in_each_format(tmp_path):
    pytest.importorskip("datasets")
    gem_format = tmp_path / "gem.jsonl"
    gem_format.write_text(
        json.dumps(
            {
                "problem": "Print the sum of two integers.",
                "tests": json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]}),
            }
        )
        + "\n"
    )
    contests = tmp_path / "code_contests.jsonl"
    contests.write_text(
        json.dumps(
            {
                "name": "double",
                "description": "Read n and print 2n.",
                "public_tests": {"input": ["2\n"], "output": ["4\n"]},
                "private_tests": {"input": ["7\n"], "output": ["14\n"]},
                "generated_tests": {"input": ["0\n"], "output": ["0\n"]},
                "solutions": {"language": [2, 3], "solution": ["int main(){}", "print(2 * int(input()))\n"]},
            }
        )
        + "\n"
    )
    taco = tmp_path / "taco.jsonl"
    taco.write_text(
        json.dumps(
            {
                "question": "Return the square of x.",
                "input_output": json.dumps(
                    {"fn_name": "square", "inputs": [[3], [-2]], "outputs": [[9], [4]]}
                ),
                "solutions": json.dumps(["def square(x):\n    return x * x\n"]),
            }
        )
        + "\n"
    )
    cases = [
        ("code:CodeContest", gem_format, "a, b = map(int, input().split())\nprint(a + b)\n"),
        ("code:CodeContest", contests, None),
        ("code:Taco", taco, None),
    ]
    for env_id, path, solution in cases:
        env = gem_core.make(env_id, data_files=str(path))
        obs, _ = env.reset(seed=0)
        assert "python code block" in obs
        code = solution or env.unwrapped.problem["reference"]
        obs, reward, *_ = env.step(fenced(code))
        assert reward == 1.0, (env_id, path.name, obs)
        with pytest.raises(EpisodeOverError):
            env.step("x")
    env = gem_core.make("code:CodeContest", data_files=str(contests))
    env.reset(seed=0)
    assert [t["input"] for t in env.unwrapped.tests()] == ["2\n", "7\n", "0\n"]
    with pytest.raises(FileNotFoundError):
        gem_core.make("code:Taco", data_files=str(tmp_path / "missing.parquet"))

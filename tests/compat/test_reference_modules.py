"""The reference gem's public module paths on gem_core (``gem.X`` -> ``gem_core.X``), run side by side with
the installed reference (``gem-llm`` 0.1.0): the same info keys and values, the same tool answers; and
``docs/migrating-from-gem.md``'s table names every public name of the reference and where it lives."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import random
import re
from pathlib import Path

import pytest

import gem_core
from tests.compat.test_reference_games import make_ours, reset_both, solver_move, step_both

DOC = Path(__file__).resolve().parents[2] / "docs" / "migrating-from-gem.md"
TRACKED_KEYS = ("step_counter", "cumulative_rewards", "prev_ep_step_counter", "prev_ep_cumulative_rewards")
TOOL_KEYS = (
    "tool_use_counter",
    "tool_success_counter",
    "prev_ep_tool_use_counter",
    "prev_ep_tool_success_counter",
    "use_tool",
    "tool_type",
)


def picked(info: dict, keys) -> dict:
    return {k: info[k] for k in keys if k in info}


@pytest.mark.parametrize("env_id", ["game:GuessTheNumber-v0-easy", "game:Mastermind-v0-easy"])
def test_episode_tracking_wrapper_gives_the_references_info(reference_gem, env_id):
    from gem.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper as Reference

    from gem_core.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper
    from gem_core.wrappers.wrapper_factory import WRAPPER_FACTORY

    for ours in (
        EpisodeTrackingWrapper(make_ours(env_id)),
        WRAPPER_FACTORY["episode_tracking"](make_ours(env_id)),
    ):
        ref, rng = Reference(reference_gem.make(env_id)), random.Random(0)
        for seed in range(3):
            expected, got = reset_both(ref, ours, seed)
            assert picked(got[1], TRACKED_KEYS) == picked(expected[1], TRACKED_KEYS)
            assert set(TRACKED_KEYS) <= set(got[1])
            for _ in range(12):
                expected, got = step_both(ref, ours, f"My move: {solver_move(ref.unwrapped, rng)}")
                assert got[:4] == expected[:4]
                assert picked(got[4], TRACKED_KEYS) == picked(expected[4], TRACKED_KEYS)
                assert {"step_counter", "cumulative_rewards"} <= set(got[4])
                if expected[2] or expected[3]:
                    break
        assert (ours.step_counter, ours.cumulative_rewards) == (ref.step_counter, ref.cumulative_rewards)


TOOL_ACTIONS = [
    "Let me compute. <python>print(6 * 7)</python> then answer",
    "```python\nprint(sum(range(10)))\n```",
    "<python>raise ValueError('no')</python>",
    "no code here, \\boxed{3}",
    "<python>import sys; sys.exit(3)</python>",
]


@pytest.mark.parametrize("action", TOOL_ACTIONS)
def test_python_code_tool_answers_the_references_calls(reference_gem, action):
    from gem.tools.python_code_tool import PythonCodeTool as Reference

    from gem_core.tools.base import Tool
    from gem_core.tools.python_code_tool import PythonCodeTool

    ours = PythonCodeTool(timeout=5)
    ref_valid, ref_error, ref_obs, ref_parsed = Reference(timeout=5).execute_action(action)
    valid, error, observation, parsed = ours.execute_action(action)
    assert (valid, error, parsed) == (ref_valid, ref_error, ref_parsed)
    if valid and not error:  # the same printed result
        printed = ref_obs.removeprefix("Code execution result: ").strip()
        assert printed and printed in observation and observation.startswith("Code execution result:")
    assert ours.tool_type == "python_code" and isinstance(ours, Tool)
    assert "Python" in ours.instruction_string()


def test_a_tool_written_for_the_reference_runs_in_gem_cores_tool_wrapper():
    from gem_core.tools.base_tool import BaseTool
    from gem_core.tools.tool_env_wrapper import ToolEnvWrapper

    class Echo(BaseTool):
        tool_type = "echo"

        def instruction_string(self) -> str:
            return "Say <echo>text</echo> to hear it back."

        def execute_action(self, action):
            match = re.search(r"<echo>(.*?)</echo>", action, re.DOTALL)
            if match is None:
                return False, True, "", ""
            return True, match.group(1) == "fail", f"echo: {match.group(1)}", action[: match.end()]

    env = ToolEnvWrapper(
        gem_core.make("game:GuessTheNumber-v0-easy"), tools=[Echo()], tool_success_reward=0.5
    )
    obs, info = env.reset(seed=1)
    assert obs.endswith("Say <echo>text</echo> to hear it back.") and info["tool_use_counter"] == 0
    obs, reward, terminated, truncated, info = env.step("<echo>hi</echo>")
    # gem_core holds a working call's reward back until the task is solved (the reference pays it at once)
    assert (obs, reward, terminated, truncated) == ("echo: hi", 0.0, False, False)
    assert info["tool_bonus_pending"] == 0.5
    assert picked(info, TOOL_KEYS) == {
        "tool_use_counter": 1,
        "tool_success_counter": 1,
        "use_tool": True,
        "tool_type": "echo",
    }
    obs, reward, *_ = env.step("<echo>fail</echo>")
    assert obs == "echo: fail" and reward == 0.0
    obs, reward, terminated, truncated, info = env.step("\\boxed{3}")  # no call: the game plays it
    assert info["tool_use_counter"] == 2 and info["tool_success_counter"] == 1
    _, info = env.reset(seed=2)
    assert (info["prev_ep_tool_use_counter"], info["prev_ep_tool_success_counter"]) == (2, 1)


def test_tool_env_wrapper_gives_the_references_info_keys(reference_gem):
    from gem.tools.python_code_tool import PythonCodeTool as ReferenceTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper as Reference

    from gem_core.tools.python_code_tool import PythonCodeTool
    from gem_core.tools.tool_env_wrapper import ToolEnvWrapper

    env_id = "game:GuessTheNumber-v0-easy"
    settings = {"max_tool_uses": 3}
    ref = Reference(reference_gem.make(env_id), tools=[ReferenceTool()], **settings)
    ours = ToolEnvWrapper(make_ours(env_id), tools=[PythonCodeTool()], **settings)
    actions = ["<python>print(1)</python>", "<python>1/0</python>", "\\boxed{3}", "<python>print(2)</python>"]
    for seed in (0, 1):
        expected, got = ref.reset(seed=seed), ours.reset(seed=seed)
        assert picked(got[1], TOOL_KEYS) == picked(expected[1], TOOL_KEYS)
        for action in actions:
            expected, got = ref.step(action), ours.step(action)
            assert got[1:4] == expected[1:4]
            assert picked(got[4], TOOL_KEYS) == picked(expected[4], TOOL_KEYS)
            if expected[2] or expected[3]:
                break


def test_utils_give_the_references_answers(reference_gem):
    from gem.utils import parsing as ref_parsing
    from gem.utils import qa_em as ref_qa_em
    from gem.utils import seeding as ref_seeding
    from gem.utils.constants import LanguageGameReward as RefReward

    from gem_core.utils import parsing, qa_em, seeding
    from gem_core.utils.constants import LanguageGameReward

    texts = [
        "so \\boxed{42}",
        "a \\boxed{1} then \\boxed{\\frac{1}{2}}",
        "none",
        "<answer> Paris </answer> and <answer>Lyon</answer>",
        "```python\nprint(1)\n```\ntext\n```\nx = 2\n```",
        "```\nonly\n```",
    ]
    for text in texts:
        for name in ("extract_last_boxed_answer", "extract_code_from_model", "extract_last_tagged_answer"):
            assert getattr(parsing, name)(text) == getattr(ref_parsing, name)(text), (name, text)
    pairs = [("The Cat!", "cat"), ("an apple", ["Apple", "pear"]), ("dog", ["cat"]), ("  A  b ", "a b")]
    for prediction, golds in pairs:
        assert qa_em.em_check(prediction, golds) == ref_qa_em.em_check(prediction, golds)
        assert qa_em.normalize_answer(prediction) == ref_qa_em.normalize_answer(prediction)
    for seed in (0, 7, 123456789):
        ours, ours_seed = seeding.np_random(seed)
        ref, ref_seed = ref_seeding.np_random(seed)
        assert ours_seed == ref_seed and list(ours.integers(0, 1000, 8)) == list(ref.integers(0, 1000, 8))
    assert seeding.RNG is ref_seeding.RNG
    assert (
        vars(LanguageGameReward).items()
        >= {k: v for k, v in vars(RefReward).items() if not k.startswith("_")}.items()
    )


def test_math_grader_and_run_python_answer_as_the_reference():
    from gem_core.utils.math_grader import boxed_reward_fn, grade
    from gem_core.utils.sandbox import run_python

    assert grade("0.5", "\\frac{1}{2}") and grade("\\frac{1}{2}", "The answer is \\boxed{0.5}")
    assert not grade("3", "4")
    assert boxed_reward_fn("so \\boxed{4}", "4") == ({"formatted": True}, 1.0)
    assert boxed_reward_fn("so \\boxed{5}", ["4", 4.0]) == ({"formatted": True}, 0.0)
    assert boxed_reward_fn("no box", "4") == ({"formatted": False}, 0.0)
    assert run_python("print(input() * 2)", "none", stdin="ab") == (True, "abab\n", "")
    success, stdout, stderr = run_python("import sys; sys.exit('bad')", "bwrap")
    assert not success and "bad" in stderr


def test_envs_registration_and_core_names():
    from gem_core.core import EnvWrapper, Wrapper
    from gem_core.envs import registration

    assert EnvWrapper is Wrapper
    assert registration.make is gem_core.make and registration.print_envs is gem_core.print_envs


# ---- the migration guide's table ----------------------------------------------------------------
def reference_public_names() -> dict[str, list[str]]:
    """Each module of the installed reference and its public names (classes, functions, CONSTANTS;
    ``__all__`` for a package), read from its source without importing it."""
    spec = importlib.util.find_spec("gem")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the reference gem (gem-llm) is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    names: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = ("gem", *path.relative_to(root).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = []
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append(node.name)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id == "__all__":
                        found.extend(ast.literal_eval(node.value))
                    elif isinstance(target, ast.Name) and target.id.isupper():
                        found.append(target.id)
        found = [n for n in dict.fromkeys(found) if not n.startswith("_")]
        if found:
            names[module] = found
    return names


def doc_rows() -> dict[str, tuple[list[str], str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`gem(\.[\w.]+)?`", cells[0]):
            rows[cells[0].strip("`")] = (re.findall(r"`(\w+)`", cells[1]), cells[2])
    return rows


def resolve(path: str):
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(path)


def test_the_migration_table_names_every_reference_name_and_where_it_lives():
    rows = doc_rows()
    for module, names in reference_public_names().items():
        assert module in rows, f"docs/migrating-from-gem.md has no row for {module}"
        listed, here = rows[module]
        assert sorted(listed) == sorted(names), module
        renamed = dict(re.findall(r"`(\w+)` → `(gem_core[\w.]*)`", here))
        missing = (
            set(re.findall(r"`(\w+)`", here.split("no counterpart:", 1)[1]))
            if "no counterpart:" in here
            else set()
        )
        paths = [p for p in re.findall(r"`(gem_core[\w.]*)`", here) if p not in renamed.values()]
        for name in names:
            if name in renamed:
                resolve(renamed[name])
            elif name not in missing:
                targets = [resolve(p) for p in paths]
                assert any(p.endswith(f".{name}") for p in paths) or any(hasattr(t, name) for t in targets), (
                    f"{module}.{name}: the table names no gem_core home and no 'no counterpart' for it"
                )

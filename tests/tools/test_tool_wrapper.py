"""ToolEnvWrapper with real tools: a math-like env + the Python sandbox, a game + Python, a QA-like
env + BM25 search, anything + a real MCP server; limits, rewards, snapshots and check_env."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

import gem_core
from gem_core.core import Env
from gem_core.parsing import extract_boxed, preview
from gem_core.tools.base import Tool
from gem_core.tools.python import PythonTool
from gem_core.wrappers.tools import ToolEnvWrapper

pytestmark = pytest.mark.timeout(120)


class AnswerEnv(Env):
    """A single-turn question with one right answer in ``\\boxed{}`` (drawn per episode from ``self.rng``)."""

    def __init__(self, questions: list[tuple[str, str]]):
        self.questions = questions
        self.question, self.answer, self.done = "", "", True

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        self.question, self.answer = self.rng.choice(self.questions)
        self.done = False
        return f"{self.question} Put your final answer in \\boxed{{}}.", {}

    def step(self, action):
        self.done = True
        given = extract_boxed(action)
        if given is None:
            return (
                f"No \\boxed{{}} answer in: {preview(action) or '(empty)'}",
                -0.1,
                True,
                False,
                {"format_error": True},
            )
        correct = given.replace(" ", "").lower() == self.answer.lower()
        return ("Correct!" if correct else "Wrong."), float(correct), True, False, {"success": correct}

    def sample_random_action(self):
        return f"\\boxed{{{self.action_rng.randint(0, 10**6)}}}"


def product_env() -> AnswerEnv:
    return AnswerEnv(
        [(f"What is {a} * {b}?", str(a * b)) for a, b in [(123457, 654321), (98765, 43210), (31337, 1337)]]
    )


@pytest.fixture(scope="module")
def python_tool():
    return PythonTool(timeout=2.0, workers=1)


def test_math_env_solved_with_the_python_sandbox(python_tool):
    env = ToolEnvWrapper(product_env(), [python_tool])
    obs, info = env.reset(seed=3)
    assert "<python>" in obs and info["tool_uses"] == 0 and info["use_tool"] is False
    a, b = env.unwrapped.question[len("What is ") : -1].split(" * ")
    obs, reward, terminated, truncated, info = env.step(
        f"I will compute it.\n<python>print({a} * {b})</python>"
    )
    assert obs == f"Code execution result:\n```\n{int(a) * int(b)}\n```\n"
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info == {
        "tool_uses": 1,
        "tool_successes": 1,
        "tool_errors": 0,
        "tool_bonus_pending": 0.0,
        "use_tool": True,
        "tool": "python",
        "tool_ok": True,
    }
    assert env.unwrapped.done is False  # the inner env was not stepped
    answer = obs.split("\n")[2]
    obs, reward, terminated, truncated, info = env.step(f"The product is \\boxed{{{answer}}}")
    assert (obs, reward, terminated) == ("Correct!", 1.0, True)
    assert info["success"] and info["tool_uses"] == 1 and info["use_tool"] is False


def test_a_game_with_a_tool(python_tool):
    env = ToolEnvWrapper(gem_core.make("game:GuessTheNumber-v1-easy"), [python_tool], max_tool_uses=3)
    obs, _ = env.reset(seed=0)
    assert "Guess The Number" in obs and "Code execution result" in obs
    obs, reward, terminated, _, info = env.step("<python>print((1 + 10) // 2)</python>")
    assert obs.startswith("Code execution result:\n```\n5") and info["tool_ok"]
    assert env.unwrapped.turn == 0  # a tool call costs no game turn
    obs, reward, terminated, _, info = env.step("\\boxed{5}")
    assert env.unwrapped.turn == 1 and info["tool_uses"] == 1 and not info["use_tool"]


def test_max_tool_uses_then_answer_directly(python_tool):
    env = ToolEnvWrapper(gem_core.make("game:GuessTheNumber-v1-easy"), [python_tool], max_tool_uses=2)
    env.reset(seed=1)
    obs, *_ = env.step("<python>print(1)</python>")
    assert "give your final answer directly" not in obs
    obs, _, _, _, info = env.step("<python>print(2)</python>")
    assert "You have used all 2 tool calls" in obs and info["tool_uses"] == 2
    # A third call is not run: the action goes to the game, which finds no \boxed{} move in it.
    obs, reward, _, _, info = env.step("<python>print(3)</python>")
    assert "Code execution result" not in obs and info["format_error"] and not info["use_tool"]
    assert reward < 0 and info["tool_uses"] == 2 and env.unwrapped.turn == 1


def test_rewards_and_penalties(python_tool):
    """A working call's bonus is held back and paid with a solved task (at most one call's worth); a
    failed call's penalty is paid at once."""
    env = ToolEnvWrapper(
        product_env(), [python_tool], tool_reward=0.05, tool_success_reward=0.1, tool_error_penalty=0.2
    )
    env.reset(seed=0)
    _, reward, _, _, info = env.step("<python>print('fine')</python>")
    assert reward == 0.0 and info["tool_bonus_pending"] == pytest.approx(0.15)
    _, reward, _, _, info = env.step("<python>raise SystemExit(2)</python>")
    assert reward == pytest.approx(-0.15) and info["tool_errors"] == 1 and info["tool_ok"] is False
    _, reward, _, _, info = env.step("<python>print('again')</python>")
    assert reward == 0.0 and info["tool_bonus_pending"] == pytest.approx(0.3)
    _, reward, terminated, _, info = env.step(f"\\boxed{{{env.unwrapped.answer}}}")
    assert terminated and reward == pytest.approx(1.0 + 0.15) and info["tool_bonus"] == pytest.approx(0.15)


@pytest.mark.parametrize("max_tool_uses", [12, None])
@pytest.mark.parametrize("ending", ["wrong answer", "no answer", "game lost", "still going"])
def test_tool_rewards_cannot_be_farmed(max_tool_uses, ending):
    """Issue 43: twelve working calls used to earn 0.8 (and any number with ``max_tool_uses=None``)
    without touching the task. Now an episode that does not solve its task ends with a return of at
    most 0 from tools, however it ends (or while it goes on), and a solved one gains at most one
    call's worth, however many calls it pads itself with."""
    inner = gem_core.make("game:GuessTheNumber-v1-easy") if ending == "game lost" else product_env()
    env = ToolEnvWrapper(
        inner, [CountingTool()], tool_reward=0.05, tool_success_reward=0.25, max_tool_uses=max_tool_uses
    )
    env.reset(seed=0)
    from_tools = sum(env.step("<count>")[1] for _ in range(12 if max_tool_uses else 200))
    info = {"tool_bonus": 0.0}
    if ending == "wrong answer":
        *_, info = env.step("\\boxed{-1}")
    elif ending == "no answer":
        *_, info = env.step("I give up.")
    elif ending == "game lost":
        while not env.episode_over:
            *_, info = env.step("\\boxed{1}" if env.unwrapped.target != 1 else "\\boxed{2}")
    assert from_tools + info["tool_bonus"] <= 0.0 and info["tool_bonus"] == 0.0
    solved = ToolEnvWrapper(product_env(), [CountingTool()], tool_reward=0.05, tool_success_reward=0.25)
    solved.reset(seed=0)
    padded = sum(solved.step("<count>")[1] for _ in range(10))
    padded += solved.step(f"\\boxed{{{solved.unwrapped.answer}}}")[1]
    assert padded == pytest.approx(1.0 + 0.3)


class ExplodingTool(Tool):
    """A tool that breaks its contract and raises: the wrapper must still answer."""

    name = "exploding"

    def instruction(self) -> str:
        return "Write <boom>."

    def parse(self, action: str) -> Any | None:
        return "call" if "<boom>" in action else None

    def execute(self, call: Any) -> tuple[str, bool]:
        raise RuntimeError("the tool broke")


def test_a_raising_tool_becomes_an_error_observation(python_tool):
    env = ToolEnvWrapper(product_env(), [ExplodingTool(), python_tool])
    obs, _ = env.reset(seed=0)
    assert obs.count("Available tools:") == 1 and "<boom>" in obs and "<python>" in obs
    obs, reward, terminated, _, info = env.step("<boom>")
    assert obs == "Tool error (exploding): RuntimeError: the tool broke" and not terminated
    assert info["tool"] == "exploding" and not info["tool_ok"]


def test_check_env_on_wrapped_envs(python_tool):
    gem_core.check_env(ToolEnvWrapper(product_env(), [python_tool]))
    gem_core.check_env(ToolEnvWrapper(gem_core.make("game:GuessTheNumber-v1-easy"), [python_tool]))


def test_spawn_and_snapshots_share_tools_and_copy_counts(python_tool):
    env = ToolEnvWrapper(gem_core.make("game:GuessTheNumber-v1-easy"), [python_tool], max_tool_uses=4)
    env.reset(seed=5)
    env.step("<python>print(7)</python>")
    clone = env.spawn(same_state=True)
    assert clone.tools[0] is python_tool and clone.max_tool_uses == 4
    assert clone.tool_uses == 1 and clone.unwrapped.target == env.unwrapped.target
    state = env.get_state()
    env.step("<python>print(8)</python>")
    env.step("\\boxed{3}")
    assert env.tool_uses == 2
    env.set_state(state)
    assert env.tool_uses == 1 and env.unwrapped.turn == 0
    for action in ("<python>print(9)</python>", "\\boxed{5}", "\\boxed{2}"):  # both continue identically
        assert env.step(action) == clone.step(action)


def test_qa_env_with_bm25_search():
    pytest.importorskip("bm25s")
    from gem_core.tools.search import SearchIndex, SearchTool

    index = SearchIndex(
        [
            {
                "id": "1",
                "title": "Alpha Centauri",
                "text": "Alpha Centauri is the closest star system to the Sun.",
            },
            {
                "id": "2",
                "title": "Mariana Trench",
                "text": "The Mariana Trench is the deepest oceanic trench on Earth.",
            },
            {
                "id": "3",
                "title": "Ada Lovelace",
                "text": "Ada Lovelace wrote the first published computer program.",
            },
        ]
    )
    env = ToolEnvWrapper(
        AnswerEnv([("Which trench is the deepest on Earth?", "mariana")]), [SearchTool(index=index, k=1)]
    )
    obs, _ = env.reset(seed=0)
    assert "<search>" in obs
    obs, reward, terminated, _, info = env.step("<search>deepest trench on Earth</search>")
    assert obs.startswith("<information>Doc 1 (Title: Mariana Trench)") and info["tool"] == "search"
    _, reward, terminated, *_ = env.step("\\boxed{Mariana}")
    assert reward == 1.0 and terminated


def test_any_env_with_a_real_mcp_server(tmp_path):
    pytest.importorskip("mcp")
    from gem_core.tools.mcp import MCPTool

    config = {
        "command": sys.executable,
        "args": ["-m", "gem_core.tools.mcp_demo_server", "--db", str(tmp_path / "o.sqlite")],
    }
    with MCPTool(config) as mcp_tool:
        env = ToolEnvWrapper(AnswerEnv([("Which item did order 1006 contain?", "webcam")]), [mcp_tool])
        obs, _ = env.reset(seed=0)
        assert "lookup_order" in obs
        obs, _, _, _, info = env.step(
            f"<tool_call>{json.dumps({'name': 'lookup_order', 'arguments': {'order_id': 1006}})}</tool_call>"
        )
        assert info["tool_ok"] and json.loads(obs.split("\n", 1)[1])["item"] == "webcam"
        _, reward, terminated, *_ = env.step("\\boxed{webcam}")
        assert reward == 1.0 and terminated


class CountingTool(ExplodingTool):
    """Counts the calls it parses and runs (and never raises)."""

    name = "counting"

    def __init__(self):
        self.parsed = self.executed = 0

    def parse(self, action: str) -> Any | None:
        self.parsed += 1
        return "call" if "<count>" in action else None

    def execute(self, call: Any) -> tuple[str, bool]:
        self.executed += 1
        return "counted", True


def test_no_tool_runs_outside_an_episode():
    from gem_core import EpisodeOverError

    tool = CountingTool()
    env = ToolEnvWrapper(product_env(), [tool], tool_success_reward=0.25)
    with pytest.raises(EpisodeOverError):
        env.step("<count>")  # before the first reset
    env.reset(seed=0)
    obs, reward, *_, info = env.step("<count>")
    assert (obs, reward, info["tool_bonus_pending"]) == ("counted", 0.0, 0.25)
    *_, terminated, _, _ = env.step("\\boxed{0}")
    assert terminated and env.episode_over
    parsed, executed = tool.parsed, tool.executed
    for action in ("<count>", "\\boxed{0}", None):
        with pytest.raises(EpisodeOverError, match="call reset"):
            env.step(action)
    assert (tool.parsed, tool.executed) == (parsed, executed)  # checked before any tool looked at it
    clone = env.spawn(same_state=True)
    with pytest.raises(EpisodeOverError):
        clone.step("<count>")
    assert tool.executed == executed
    env.reset(seed=0)
    assert env.step("<count>")[0] == "counted"
    with pytest.raises(TypeError, match=r"^an action is a str, got int$"):
        env.step(3)

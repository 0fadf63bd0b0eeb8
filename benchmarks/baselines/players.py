"""The scripted players SmolLM2's warm-up imitates, and the tool envs the baselines train on.

A player takes the innermost env after ``reset`` (``gem_adapters.algorithms.warmup.Player``) and returns the next
action's text: the env's solver where it has one, else its reference answer (a math or QA dataset's
gold answer, a code problem's reference program, a terminal task's reference commands, a
customer-service scenario's reference conversation). Players of tool envs use the tool first (run
the computation in Python, search the question) and then answer, as an agent with the tool would.

Tool envs are registered here as ``tool:<Env>-<tool>`` ids (``ToolEnvWrapper``, no reward for calling
a tool: only the answer pays, so calling tools is never a reward by itself). The tools are made once
per process and shared by every env (they are static resources of ``ToolEnvWrapper``).
"""

from __future__ import annotations

import ast
import functools
import operator
import re
import weakref
from collections.abc import Callable
from typing import Any

import gem_core
from gem_core.envs.dataset import answers_of

Player = Callable[[Any], str]
MAX_TOOL_USES = 3

# ---- tool envs ---------------------------------------------------------------------------------


@functools.cache
def _python_tool():
    from gem_core.tools import PythonTool

    return PythonTool(timeout=5)


@functools.cache
def _search_tool():
    from gem_core.tools import SearchTool

    return SearchTool(k=2)


def with_python(env_id: str) -> gem_core.Env:
    from gem_core.wrappers.tools import ToolEnvWrapper

    return ToolEnvWrapper(gem_core.make(env_id), [_python_tool()], max_tool_uses=MAX_TOOL_USES)


def with_search(env_id: str) -> gem_core.Env:
    from gem_core.wrappers.tools import ToolEnvWrapper

    return ToolEnvWrapper(gem_core.make(env_id), [_search_tool()], max_tool_uses=MAX_TOOL_USES)


TOOL_ENVS = {  # id -> (factory, the env it wraps, description)
    "tool:Arithmetic-v0-python": (
        with_python,
        "math:Arithmetic-v0",
        "math:Arithmetic-v0 with the Python tool",
    ),
    "tool:LocalWiki-v0-search": (with_search, "qa:LocalWiki-v0", "qa:LocalWiki-v0 with the search tool"),
}


def register_tool_envs() -> None:
    for env_id, (factory, inner, description) in TOOL_ENVS.items():
        if env_id not in gem_core.list_envs(env_id):
            gem_core.register(
                env_id, functools.partial(factory, inner), description=description, multi_turn=True
            )


# ---- players -----------------------------------------------------------------------------------


def _planned(plan: Callable[[Any], list[str]]) -> Player:
    """A player that plays ``plan(env)`` one action per turn. The plan is made at an episode's first turn:
    when the env holds another example than the one planned for, or the last plan has been played out
    (a warm-up plays every game in one env, reset per seed)."""
    plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def play(env: Any) -> str:
        example, moves, done = plans.get(env, (None, [], 0))
        if example is not env.example or done >= len(moves):
            example, moves, done = env.example, plan(env), 0
        plans[env] = (example, moves, done + 1)
        return moves[done]

    return play


def _gold(env: Any) -> str:
    return answers_of(env.example[env.answer_key])[0]


_LATEX_TO_PYTHON = [(r"\times", "*"), (r"\div", "/"), (r"\cdot", "*"), ("^{", "**("), ("{", "("), ("}", ")")]


def _python_expression(problem: str) -> str:
    """The expression of a ``math:Arithmetic-v0`` problem ("Compute $2^{3} - 4 \\times 5$.") in Python."""
    found = re.search(r"\$(.+?)\$", problem)
    expression = found.group(1) if found else problem
    for latex, python in _LATEX_TO_PYTHON:
        expression = expression.replace(latex, python)
    return expression


_STEPS = {ast.Add: ("+", operator.add), ast.Sub: ("-", operator.sub), ast.Mult: ("*", operator.mul),
          ast.Div: ("/", operator.truediv), ast.Pow: ("^", operator.pow)}  # fmt: skip


def _arithmetic_steps(env: Any) -> str:
    """A ``math:Arithmetic-v0`` answer worked one operation at a time, in the order Python evaluates the
    problem's expression ("27 * 22 = 594, 15 + 594 = 609, 609 - 19 = 590"), then the gold answer boxed."""
    steps: list[str] = []

    def value(node: ast.expr) -> float:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        assert isinstance(node, ast.BinOp) and type(node.op) in _STEPS, ast.dump(node)
        symbol, apply = _STEPS[type(node.op)]
        left, right = value(node.left), value(node.right)
        result = apply(left, right)
        steps.append(f"{_number(left)} {symbol} {_number(right)} = {_number(result)}")
        return result

    value(ast.parse(_python_expression(env.example[env.question_key]), mode="eval").body)
    return f"{', '.join(steps)}. The answer is \\boxed{{{_gold(env)}}}."


def _number(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


_LETTER_QUESTION = re.compile(r'How many times does the letter "(\w)" appear in the text: "([^"]*)"\?')


def letter_question(question: str) -> tuple[str, str] | None:
    """An ``rg:letter_counting`` question's letter (lower-cased: the env grades case-insensitively) and text."""
    match = _LETTER_QUESTION.search(question)
    return (match[1].lower(), match[2]) if match else None


def _letters_by_word(env: Any) -> str:
    """An ``rg:letter_counting`` answer that names each word holding the letter with its count there
    (case-insensitive, as the env grades), then the total in the answer tags."""
    letter, text = letter_question(env.example["question"])
    found = [(word, word.lower().count(letter)) for word in text.split() if letter in word.lower()]
    words = ", ".join(f"{word} ({n})" for word, n in found) or "none"
    return f'"{letter}": {words}. <answer>{sum(n for _, n in found)}</answer>'


def _python_then_answer(env: Any) -> list[str]:
    expression = _python_expression(env.example[env.question_key])
    code = f"x = {expression}\nprint(int(x) if x == int(x) else x)"
    return [f"<python>\n{code}\n</python>", f"The answer is \\boxed{{{_gold(env)}}}."]


def _search_then_answer(env: Any) -> list[str]:
    return [f"<search>{env.example[env.question_key]}</search>", f"<answer>{_gold(env)}</answer>"]


def _terminal_solution(env: Any) -> str:
    commands = "\n".join(env.tasks[env.task_index]["solution"])
    return f"```bash\n{commands}\n```\n<done/>"


def _customer_service_reference(view: Any) -> str:
    conversation = view.env.scenario["solution"]
    return conversation[min(view.env.agent_turns, len(conversation) - 1)]


PLAYERS: dict[str, Callable[[], Player]] = {  # name -> a fresh player (planned players keep per-env turns)
    "solver": lambda: lambda env: env.solve_action(),
    "math_answer": lambda: lambda env: f"The answer is \\boxed{{{_gold(env)}}}.",
    "math_steps": lambda: _arithmetic_steps,
    "tag_answer": lambda: lambda env: f"<answer>{env.example['answer']}</answer>",
    "letters_by_word": lambda: _letters_by_word,
    "boxed_label": lambda: lambda env: f"\\boxed{{{env.example['answer']}}}",
    "code_reference": lambda: lambda env: f"```python\n{env.problems[env.problem_index]['reference']}```",
    "terminal_solution": lambda: _terminal_solution,
    "customer_service_reference": lambda: _customer_service_reference,
    "python_then_answer": lambda: _planned(_python_then_answer),
    "search_then_answer": lambda: _planned(_search_then_answer),
}

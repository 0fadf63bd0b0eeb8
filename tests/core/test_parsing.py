"""gem_core.parsing: the extractors' answers, and that their cost grows linearly with the text.

Linearity is checked by a ratio, not an absolute time: an input 4 times longer must not take more
than 10 times as long (a quadratic parser takes 16 times as long, and these shapes made the old
``extract_boxed`` take 11-20 s at N = 10,000).
"""

import time

import pytest

from gem_core.checker import HOSTILE_ACTIONS
from gem_core.parsing import extract_boxed, extract_last_code_block, extract_tag, preview

SHAPES = {
    "unclosed boxes": lambda n: "\\boxed{" * n,
    "one closing brace": lambda n: "\\boxed{" * n + "}",
    "open braces": lambda n: "{" * n,
    "deep nesting": lambda n: "\\boxed{" * n + "x" + "}" * n,
    "bare boxed": lambda n: "\\boxed" * n,
    "closing braces": lambda n: "}" * n + "\n" + "}" * n,
    "boxed then spaces": lambda n: "\\boxed" + " " * (8 * n),
    "boxes and spaces": lambda n: ("\\boxed" + " " * 20) * n,
    "fence then blanks": lambda n: "```" + " " * (8 * n) + "x",
    "fences with blanks": lambda n: ("```" + " " * 20 + "x") * n,
    "unclosed fences": lambda n: "```python\n" + "```" * n,
    "tags": lambda n: "<answer>" * n + "</answer" * n,
}

PARSERS = {
    "extract_boxed": extract_boxed,
    "extract_tag": lambda text: extract_tag(text, "answer"),
    "extract_last_code_block": extract_last_code_block,
    "extract_last_code_block(python)": lambda text: extract_last_code_block(text, "python"),
    "preview": preview,
}


def _seconds(parser, text, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        parser(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("shape", SHAPES)
def test_cost_grows_linearly(parser, shape):
    n = 10_000
    small, large = SHAPES[shape](n), SHAPES[shape](4 * n)
    for _ in range(3):  # retried: a busy machine can stall one measurement
        ratio = _seconds(PARSERS[parser], large) / max(_seconds(PARSERS[parser], small), 2e-3)
        if ratio < 10:
            return
    pytest.fail(f"{parser} on {shape}: 4x the text took {ratio:.1f}x the time")


def test_extract_boxed_reads_the_last_balanced_box():
    assert extract_boxed("\\boxed{1} and \\boxed{ 2 }") == "2"
    assert extract_boxed("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert extract_boxed("\\boxed {x}") == "x"
    assert extract_boxed("\\boxed{a \\boxed{b}}") == "b"  # the last by where it starts
    assert extract_boxed("\\boxed{a} \\boxed{b") == "a"  # an unclosed box is skipped
    assert extract_boxed("}}} \\boxed{a}") == "a"
    assert extract_boxed("\\boxed{" * 1000 + "}") == ""
    assert extract_boxed("\\boxed{" * 1000 + "x" + "}" * 1000) == "x"
    assert extract_boxed("\\boxed{" * 1000) is None
    assert extract_boxed("\\boxed x") is None and extract_boxed("") is None and extract_boxed(None) is None


def test_extract_last_code_block():
    text = "```python\nprint(1)\n``` then ```js\nx\n``` and ``` \nplain\n```"
    assert extract_last_code_block(text) == "plain\n"
    assert extract_last_code_block(text, "python") == "plain\n"  # an unnamed block counts as any language
    assert extract_last_code_block(text[: text.index(" and")], "python") == "print(1)\n"
    assert extract_last_code_block("```python\nunclosed") is None
    assert extract_last_code_block("```" + " " * 1000 + "x") is None


def test_extract_tag():
    assert extract_tag("<answer>1</answer> <answer> 2 </answer>", "answer") == "2"
    assert extract_tag("<answer>1", "answer") is None


def test_the_checker_tries_the_slow_shapes():
    assert "\\boxed{" * 20_000 in HOSTILE_ACTIONS.values()
    assert any(a.endswith("\\boxed{" * 1000 + "}") for a in HOSTILE_ACTIONS.values())

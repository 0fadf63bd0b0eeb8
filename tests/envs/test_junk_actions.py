"""Junk is never rewarded: every rg:* id and every offline id of the other categories gives junk actions
(NUL bytes, lone surrogates, a power tower, empty and blank replies, huge text, random printable
garbage, the prompt echoed back) a reward <= 0 (issue: 41 of the 104 rg ids paid 0.0002-0.33)."""

from __future__ import annotations

import random
import string

import pytest

import gem_core
from gem_core.parsing import extract_boxed, extract_tag

OFFLINE_IDS = [i for i in gem_core.list_envs() if gem_core.spec(i).data_source == "offline"]
RG_IDS = [i for i in OFFLINE_IDS if i.startswith("rg:")]
# The reference's Wordle (game:Wordle-v0*) scores any letter string, "nan" included, as the reference
# does; tests/compat checks its answers against the reference's.
OTHER_IDS = [i for i in OFFLINE_IDS if not i.startswith(("rg:", "game:Wordle-v0"))]

# Contents that are no dataset's answer, whatever the question ("0" or "True" can be right answers).
JUNK_ANSWERS = {
    "nul": "\x00",
    "nuls": "\x00" * 64,
    "lone surrogate": "\ud800",
    "surrogates": "\udfff x \ud800",
    "power tower": "9**9**9**9",
    "blank": " \n\t ",
    "not a number": "nan",
    "infinity": "inf",
    "escape codes": "\x1b[2J\x1b[H",
}


def junk_actions(prompt: str, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    garbage = "".join(rng.choice(string.printable) for _ in range(300))
    actions = {"empty": "", "whitespace": " \n\t \r\n", "huge": "A" * 100_000, "garbage": garbage}
    answers = {**JUNK_ANSWERS, "garbage": garbage[:60]}
    # A prompt that shows an example answer (a game's example move, "\boxed{True}" in logic) cannot be
    # echoed as junk: the echo plays that example, a well-formed answer that may be right.
    if not (extract_boxed(prompt) or extract_tag(prompt, "answer")):
        actions["prompt echoed"] = prompt
        answers["prompt"] = prompt[:5_000]
    for name, answer in answers.items():
        actions[f"<answer>{name}</answer>"] = f"<answer>{answer}</answer>"
        actions[f"\\boxed{{{name}}}"] = f"\\boxed{{{answer}}}"
    return actions


def assert_junk_earns_nothing(env_id: str, seeds=(0,), **kwargs) -> None:
    env = gem_core.make(env_id, **kwargs)
    try:
        for seed in seeds:
            prompt, _ = env.reset(seed=seed)
            prompt = prompt if isinstance(prompt, str) else str(getattr(prompt, "text", prompt))
            for name, action in junk_actions(prompt, seed).items():
                env.reset(seed=seed)
                _, reward, *_, info = env.step(action)
                assert reward <= 0, (env_id, seed, name, info)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", RG_IDS)
def test_rg_junk_earns_nothing(env_id):
    assert_junk_earns_nothing(env_id, grade_timeout=2.0)  # a shorter deadline for the power tower


@pytest.mark.parametrize("env_id", OTHER_IDS)
def test_other_junk_earns_nothing(env_id):
    assert_junk_earns_nothing(env_id)


def test_right_answers_are_still_rewarded():
    for name in ("basic_arithmetic", "complex_arithmetic", "word_sorting"):
        env = gem_core.make(f"rg:{name}")
        env.reset(seed=2)
        _, reward, _, _, info = env.step(f"<answer>{env.unwrapped.example['answer']}</answer>")
        assert reward == 1.0 and info["success"], (name, info)


def test_complex_arithmetic_nan_is_not_a_distance_of_zero():
    env = gem_core.make("rg:complex_arithmetic", partial_credit=True)
    for answer in ("nan", "nan+nanj", "inf", "-inf - infi", "1e999"):
        env.reset(seed=0)
        assert env.step(f"<answer>{answer}</answer>")[1] == 0.0, answer

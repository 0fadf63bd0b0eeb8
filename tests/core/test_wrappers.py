import pytest

import gem_core
from gem_core.wrappers import (
    ChatMessages,
    ChatTemplate,
    ConcatObservations,
    ContextBudget,
    EpisodeStatistics,
    LastKTurns,
    ObservationActionHistory,
    TimeLimit,
)

from .toy_envs import CountdownEnv


def test_concat_observations():
    env = ConcatObservations(CountdownEnv(length=5), separator=" | ")
    first, _ = env.reset(seed=0)
    obs, *_ = env.step("x")
    assert obs.startswith(first + " | t=1")


def test_observation_action_history_interleaves():
    env = ObservationActionHistory(CountdownEnv(length=5))
    env.reset(seed=0)
    env.step("A1")
    obs, *_ = env.step("B2")
    assert obs.index("Your action: A1") < obs.index("t=1") < obs.index("Your action: B2") < obs.index("t=2")


def test_last_k_turns_keeps_rules_and_recent_turns():
    env = LastKTurns(CountdownEnv(length=9), k=2)
    env.reset(seed=0)
    for a in "abcd":
        obs, *_ = env.step(a)
    assert obs.startswith("guess a digit") and "[2 earlier turns omitted]" in obs
    assert "Your action: c" in obs and "Your action: d" in obs and "Your action: a" not in obs


def test_chat_messages_roles():
    env = ChatMessages(CountdownEnv(length=5), system_prompt="be brief")
    msgs, _ = env.reset(seed=0)
    assert [m["role"] for m in msgs] == ["system", "user"]
    msgs, *_ = env.step("7")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2]["content"] == "7"


class TemplateTokenizer:
    """A minimal object with the Hugging Face ``apply_chat_template`` signature."""

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        text = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")


def test_chat_template_renders_with_generation_prompt():
    env = ChatTemplate(CountdownEnv(length=5), TemplateTokenizer())
    text, _ = env.reset(seed=0)
    assert text.startswith("<user>guess a digit") and text.endswith("<assistant>")
    state = env.get_state()
    assert "tokenizer" not in state["wrapper"]  # shared, not copied into snapshots
    clone = env.spawn(same_state=True)
    assert clone.tokenizer is env.tokenizer


def test_episode_statistics():
    env = EpisodeStatistics(gem_core.make("game:GuessTheNumber-v1-easy"))
    env.reset(seed=0)
    target = env.unwrapped.target
    env.step("no box")
    obs, r, term, trunc, info = env.step(f"\\boxed{{{target}}}")
    assert term and info["episode"]["success"]
    assert info["episode"]["turns"] == 2 and info["episode"]["format_errors"] == 1
    assert info["episode"]["return"] == pytest.approx(1.0 - 0.1)


def test_time_limit_truncates():
    env = TimeLimit(CountdownEnv(length=100), max_turns=2)
    env.reset(seed=0)
    assert not env.step("x")[3]
    _, _, term, trunc, info = env.step("x")
    assert trunc and not term and info["time_limit"]
    with pytest.raises(ValueError):
        TimeLimit(CountdownEnv(), max_turns=0)


def test_context_budget_chars_keeps_head_tail_and_marks_cut():
    env = ContextBudget(gem_core.make("game:GuessTheNumber-v1-easy"), max_chars=60)
    obs, info = env.reset(seed=0)
    assert "characters truncated" in obs and obs.startswith("You are playing")
    assert obs.rstrip().endswith("left.") and info["truncated_obs"]["removed"] > 0


class WhitespaceTokenizer:
    def encode(self, text, add_special_tokens=False):
        return text.split(" ")

    def decode(self, tokens):
        return " ".join(tokens)


def test_context_budget_tokens():
    env = ContextBudget(CountdownEnv(), max_tokens=2, tokenizer=WhitespaceTokenizer())
    obs, info = env.reset(seed=0)
    assert info["truncated_obs"] == {"unit": "tokens", "removed": 2}
    assert obs.startswith("guess") and "[... 2 tokens truncated ...]" in obs
    with pytest.raises(ValueError):
        ContextBudget(CountdownEnv(), max_tokens=5)
    with pytest.raises(ValueError):
        ContextBudget(CountdownEnv())

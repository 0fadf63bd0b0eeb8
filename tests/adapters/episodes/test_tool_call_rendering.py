"""Tool calls in each family's format, end to end: a model writes its call in its own format, the
tool (behind ``ToolEnvWrapper``) reads it, and its result comes back through the template's own tool
role, token-exact; malformed calls are penalised observations; history-rewriting templates are flagged
with the generated tokens kept. Templates follow each family's published format
(``tool_chat_templates``); the tokenizer is SmolLM2's real one."""

from __future__ import annotations

import asyncio

import pytest

import gem_core
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.policies import Generation
from gem_adapters.runtime.rollout import aplay_episode
from gem_core.tools.base import Tool
from gem_core.tools.call_formats import ParsedCalls, ToolCall, call_format_for, get_format
from gem_core.wrappers.tools import ToolEnvWrapper
from tests.adapters.tool_chat_templates import (
    LLAMA31_TEMPLATE,
    MISTRAL_TEMPLATE,
    NO_TOOL_ROLE_TEMPLATE,
    QWEN3_CODER_TEMPLATE,
    QWEN3_TOOLS_TEMPLATE,
    QWEN25_TEMPLATE,
)

ENV_ID = "game:GuessTheNumber-v1-easy"
# family -> (template, its format, the text the template wraps a tool's result in)
FAMILIES = {
    "qwen2.5": (QWEN25_TEMPLATE, "hermes", "<|im_start|>user\n<tool_response>\n"),
    "qwen3": (QWEN3_TOOLS_TEMPLATE, "hermes", "<|im_start|>user\n<tool_response>\n"),
    "qwen3-coder": (QWEN3_CODER_TEMPLATE, "qwen3_xml", "<|im_start|>user\n<tool_response>\n"),
    "llama3.1": (LLAMA31_TEMPLATE, "llama3_json", "<|start_header_id|>ipython<|end_header_id|>\n\n"),
    "mistral": (MISTRAL_TEMPLATE, "mistral", '[TOOL_RESULTS] {"content": '),
    "smollm2": (None, "hermes", "<|im_start|>tool\n"),  # SmolLM2's own template: a generic tool turn
}
# The markers each family's tokenizer holds as single tokens (SmolLM2's has ChatML's already).
MARKERS = {
    "llama3.1": ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|python_tag|>"],
    "mistral": [
        "[INST]",
        "[/INST]",
        "[TOOL_CALLS]",
        "[TOOL_RESULTS]",
        "[/TOOL_RESULTS]",
        "[AVAILABLE_TOOLS]",
    ],
}


@pytest.fixture(scope="module")
def family_tokenizers():
    """Per family, SmolLM2's real tokenizer with that family's marker tokens added (as its own has them)."""
    from gem_adapters.runtime.models import load_tokenizer

    out = {}
    for family in FAMILIES:
        tokenizer = load_tokenizer("smollm2")
        if family in MARKERS:
            tokenizer.add_special_tokens({"additional_special_tokens": MARKERS[family]})
        out[family] = tokenizer
    return out


def renderer_for(family_tokenizers, family):
    return ChatRenderer(family_tokenizers[family], chat_template=FAMILIES[family][0])


class AddTool(Tool):
    """Adds two numbers; reads calls in ``call_format`` (any family's)."""

    name = "add"

    def __init__(self, call_format):
        self.call_format = get_format(call_format)

    def instruction(self):
        return "Add with " + self.call_format.render([ToolCall("add", {"a": 1, "b": 2})])

    def parse(self, action):
        return self.call_format.parse(action)

    def execute(self, call: ParsedCalls):
        if call.error is not None:
            return f"Tool call error: {call.error}", False
        results = []
        for c in call.calls:
            if c.name != "add" or set(c.arguments) != {"a", "b"}:
                return f"Tool call error: add takes a and b, got {c.name} {sorted(c.arguments)}", False
            results.append(str(c.arguments["a"] + c.arguments["b"]))
        return "sum: " + ", ".join(results), True


def scripted(renderer, texts):
    """A generate callback that writes ``texts`` in turn, each ended by the template's end of turn."""
    queue = list(texts)

    async def generate(prompt_ids, params):
        ids = renderer.encode(queue.pop(0)) + list(renderer.closing_ids[:1])
        return Generation(ids, [-0.5] * len(ids), "stop")

    return generate


def play(renderer, format_name, texts, seed=1, **wrapper_kwargs):
    env = ToolEnvWrapper(gem_core.make(ENV_ID), [AddTool(format_name)], **wrapper_kwargs)
    return asyncio.run(
        aplay_episode(
            env, scripted(renderer, texts), renderer, seed=seed, max_turns=len(texts), max_new_tokens=200
        )
    )


def full_render_ids(renderer, episode):
    return renderer.encode(renderer.render(episode.messages(), add_generation_prompt=False))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_call_in_the_familys_format_runs_and_its_result_comes_back_through_the_tool_role(
    family_tokenizers, family
):
    template, format_name, tool_turn = FAMILIES[family]
    renderer = renderer_for(family_tokenizers, family)
    assert renderer.tool_role == "tool"
    # The format is read from the template (SmolLM2's names none: the default, hermes).
    assert call_format_for(template or family_tokenizers[family]).name == format_name
    call = get_format(format_name).render([ToolCall("add", {"a": 2, "b": 3})])
    # Qwen3 renders the last assistant turn with an (empty) think block: written so, it is not rewritten.
    last = "<think>\n\n</think>\n\n\\boxed{6}" if family == "qwen3" else "\\boxed{6}"
    episode = play(renderer, format_name, [call, "\\boxed{5}", last])
    first, second, third = episode.turns
    assert first.info["use_tool"] and first.info["tool_ok"] and first.reward == 0.0
    assert second.observation_role == "tool" and second.observation.startswith("sum: 5")
    assert first.observation_role == third.observation_role == "user"  # game observations
    # Token-exact: what the model saw before each action is the template's own tokenisation of the
    # conversation so far, and the whole sequence is the template's rendering of the whole of it.
    sequence = episode.to_sequence()
    messages = episode.messages()
    # (Llama's generation prompt ends in "\n\n": SmolLM2's GPT-2 pre-tokenizer splits that run when the
    # action follows it in one string, Llama 3's own keeps newline runs whole; there the text is compared.)
    exact_ids = family != "llama3.1"
    for k, (start, _) in enumerate(sequence.turn_spans):
        prompt = renderer.render(messages[: 2 * k + 1], add_generation_prompt=True)
        assert renderer.decode(sequence.token_ids[:start]) == prompt
        assert sequence.token_ids[:start] == renderer.encode(prompt) or not exact_ids
    assert renderer.decode(sequence.token_ids) == renderer.render(messages, add_generation_prompt=False)
    assert sequence.token_ids == full_render_ids(renderer, episode) or not exact_ids
    assert not episode.template_rewrites_history
    text = renderer.decode(second.prompt_ids)
    assert tool_turn in text and "sum: 5" in text  # the result sits in the template's tool turn
    # Only the generated ids are trained; the call is among them, as the model wrote it.
    assert sum(episode.to_sequence().loss_mask) == episode.num_generated_tokens
    assert renderer.decode(first.action_ids).startswith(call)


MALFORMED = {
    "hermes": '<tool_call>\n{"name": "add", "arguments": {"a": 2,}}\n</tool_call>',
    "qwen3_xml": "<tool_call>\n<function=add>\n<parameter=a>\n2\n</function>\n</tool_call>",
    "llama3_json": '{"name": "add", "parameters": [2, 3]}',
    "mistral": '[TOOL_CALLS][{"name": "add", "arguments": {"a": 2}',
}


@pytest.mark.parametrize("format_name", sorted(MALFORMED))
def test_a_malformed_call_is_a_penalised_observation(family_tokenizers, format_name):
    family = next(f for f, (_, name, _) in FAMILIES.items() if name == format_name and f != "qwen3")
    renderer = renderer_for(family_tokenizers, family)
    episode = play(renderer, format_name, [MALFORMED[format_name], "\\boxed{5}"], tool_error_penalty=0.5)
    first = episode.turns[0]
    assert first.info["use_tool"] and not first.info["tool_ok"] and first.reward == -0.5
    assert episode.turns[1].observation.startswith("Tool call error")
    assert episode.turns[1].observation_role == "tool"
    assert renderer.decode(episode.to_sequence().token_ids) == renderer.render(episode.messages(), False)


def test_a_template_without_a_tool_role_gets_tool_results_as_user_turns(tokenizer):
    renderer = ChatRenderer(tokenizer, chat_template=NO_TOOL_ROLE_TEMPLATE)
    assert renderer.tool_role == "user"
    call = get_format("hermes").render([ToolCall("add", {"a": 1, "b": 1})])
    episode = play(renderer, "hermes", [call, "\\boxed{2}"])
    assert episode.turns[1].observation_role == "user" and episode.turns[1].observation.startswith("sum: 2")
    assert episode.to_sequence().token_ids == full_render_ids(renderer, episode)


def test_history_rewriting_templates_are_detected_up_front(family_tokenizers):
    rewrites = {family: renderer_for(family_tokenizers, family).rewrites_history for family in FAMILIES}
    # Qwen3 drops earlier thinking, Llama 3 trims every assistant turn; the others keep turns as written.
    assert rewrites == {
        "qwen2.5": False,
        "qwen3": True,
        "qwen3-coder": False,
        "llama3.1": True,
        "mistral": False,
        "smollm2": False,
    }


def test_qwen3_agent_episode_what_the_trainer_receives(tokenizer):
    """Thinking before a call and after its result is kept by Qwen3's template (tool results are not
    queries), so that stretch is token-exact; once a user turn (the game's answer) follows, the template
    drops the earlier thinking: the episode is flagged and the trainer still gets the tokens the model
    generated and conditioned on, with loss on exactly those."""
    renderer = ChatRenderer(tokenizer, chat_template=QWEN3_TOOLS_TEMPLATE)
    call = "<think>\nadd them first\n</think>\n\n" + get_format("hermes").render(
        [ToolCall("add", {"a": 2, "b": 3})]
    )
    answer = "<think>\nthe sum is 5\n</think>\n\n\\boxed{5}"
    two_turns = play(renderer, "hermes", [call, answer])
    assert two_turns.turns[1].observation_role == "tool"
    assert two_turns.to_sequence().token_ids == full_render_ids(renderer, two_turns)
    assert not two_turns.template_rewrites_history

    three_turns = play(renderer, "hermes", [call, answer, "<think>\nlower then\n</think>\n\n\\boxed{2}"])
    assert three_turns.turns[2].observation_role == "user"
    assert three_turns.template_rewrites_history
    sequence = renderer.decode(three_turns.to_sequence().token_ids)
    assert "add them first" in sequence and "the sum is 5" in sequence  # kept, as generated
    assert "add them first" not in renderer.render(three_turns.messages(), False)  # the template drops it
    mask = three_turns.to_sequence().loss_mask
    assert sum(mask) == three_turns.num_generated_tokens


def test_smollm2_tokenizer_detects_no_format_and_renders_its_generic_tool_turn(tokenizer):
    renderer = ChatRenderer(tokenizer)
    assert call_format_for(tokenizer).name == "hermes" and not renderer.rewrites_history
    calls = get_format("hermes").render(
        [ToolCall("add", {"a": 1, "b": 2}), ToolCall("add", {"a": 3, "b": 4})]
    )
    episode = play(renderer, "hermes", [calls, "\\boxed{3}"])
    assert episode.turns[1].observation == "sum: 3, 7"  # two calls in one reply, run in order
    assert episode.to_sequence().token_ids == full_render_ids(renderer, episode)

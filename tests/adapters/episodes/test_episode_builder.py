"""Token-exact trajectories: the incremental renderer against full re-renders of the chat template."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode
from gem_adapters.episodes.episode_builder import EpisodeBuilder
from gem_adapters.episodes.jsonl import read_jsonl, write_jsonl
from tests.adapters.chat_templates import CHATML_TEMPLATE, QWEN3_TEMPLATE, TRIMMING_TEMPLATE

IM_END = 2  # <|im_end|> in the SmolLM2 vocabulary
TEMPLATES = {"smollm2": None, "chatml": CHATML_TEMPLATE}


def template_ids(tokenizer, messages, template, add_generation_prompt, **kwargs):
    """The template's own tokenisation of a whole conversation (the quadratic way)."""
    out = tokenizer.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=add_generation_prompt, chat_template=template, **kwargs
    )
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def play(renderer, observations, actions, finish_reasons=None):
    """Build an episode turn by turn; returns it and the context the policy saw before each action.

    ``observations`` has one more entry than ``actions`` (the env's final observation)."""
    builder = EpisodeBuilder(renderer, observations[0], env_id="test", seed=0)
    contexts = []
    for k, ids in enumerate(actions):
        contexts.append(list(builder.context()))
        reason = (finish_reasons or ["stop" if ids and ids[-1] == IM_END else "length"] * len(actions))[k]
        builder.add_action(ids, [-0.25] * len(ids), reason)
        last = k == len(actions) - 1
        builder.add_feedback(observations[k + 1], float(k), terminated=last, truncated=False, info={"k": k})
    return builder.finish(), contexts


def check_invariants(episode: Episode, contexts):
    """What must hold for any template and any generated ids."""
    seq = episode.to_sequence()
    ids, mask, spans = seq.token_ids, seq.loss_mask, seq.turn_spans
    assert len(ids) == len(mask) == len(seq.logprobs)
    assert len(spans) == len(episode.turns) == len(contexts)
    # Every mask=1 token is a generated token, in order, and every generated token has mask 1.
    assert [t for t, m in zip(ids, mask) if m == 1] == [t for turn in episode.turns for t in turn.action_ids]
    end = 0
    for turn, (start, stop), context, sample in zip(
        episode.turns, spans, contexts, episode.to_turn_samples()
    ):
        assert ids[end:start] == turn.prompt_ids and set(mask[end:start]) <= {0}
        assert ids[start:stop] == turn.action_ids and set(mask[start:stop]) <= {1}
        assert seq.logprobs[start:stop] == turn.logprobs and set(seq.logprobs[end:start]) <= {0.0}
        assert ids[:start] == context  # the policy saw exactly the sequence's prefix
        assert sample.prompt_ids == context and sample.response_ids == turn.action_ids
        end = stop
    assert ids[end:] == episode.closing_ids and set(mask[end:]) <= {0}


# ---- hand-checked example -----------------------------------------------------------------------
def test_two_turns_by_hand(tokenizer):
    renderer = ChatRenderer(tokenizer)
    assert renderer.closing_ids == tokenizer.encode("<|im_end|>\n", add_special_tokens=False)
    assert renderer.stop_token_ids == (IM_END,)
    stopped = [*tokenizer.encode("\\boxed{5}", add_special_tokens=False), IM_END]
    cut_off = tokenizer.encode("\\boxed{7", add_special_tokens=False)  # max_new_tokens ran out
    episode, _ = play(renderer, ["Guess.", "Higher.", "Correct!"], [stopped, cut_off])
    assert [t.action for t in episode.turns] == ["\\boxed{5}", "\\boxed{7"]
    assert [t.finish_reason for t in episode.turns] == ["stop", "length"]
    seq = episode.to_sequence()
    system = (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    )
    assert renderer.decode(seq.token_ids) == (
        system + "<|im_start|>user\nGuess.<|im_end|>\n<|im_start|>assistant\n\\boxed{5}<|im_end|>\n"
        "<|im_start|>user\nHigher.<|im_end|>\n<|im_start|>assistant\n\\boxed{7<|im_end|>\n"
    )
    # The generated <|im_end|> is trained (mask 1); the one closing the cut-off turn is template (mask 0).
    first, second = seq.turn_spans
    assert seq.token_ids[first[1] - 1] == IM_END and seq.loss_mask[first[1] - 1] == 1
    assert episode.closing_ids == renderer.closing_ids and seq.loss_mask[second[1] :] == [0, 0]
    assert episode.final_observation == "Correct!" and not episode.template_rewrites_history
    assert episode.total_reward == 1.0 and episode.group_id == ("test", 0)


def test_system_prompt_and_generated_closing(tokenizer):
    renderer = ChatRenderer(tokenizer, system_prompt="Play well.", chat_template=CHATML_TEMPLATE)
    action = tokenizer.encode("ok", add_special_tokens=False) + tokenizer.encode(
        "<|im_end|>\n", add_special_tokens=False
    )
    episode, contexts = play(renderer, ["a", "b", "c"], [action, action], ["stop", "stop"])
    assert renderer.decode(contexts[0]).startswith(
        "<|im_start|>system\nPlay well.<|im_end|>\n<|im_start|>user\na"
    )
    assert episode.turns[0].action == "ok" and episode.closing_ids == []  # the model wrote the whole closing
    check_invariants(episode, contexts)
    assert episode.to_sequence().token_ids == template_ids(
        tokenizer, episode.messages(), CHATML_TEMPLATE, False
    )


# ---- property tests: non-rewriting templates ----------------------------------------------------
# Any text, but the SmolLM2 vocabulary lacks byte tokens for a few bytes (those characters encode to
# <|endoftext|>), so text-level equalities are asserted only for text that survives encode -> decode.
characters = st.characters(exclude_categories=("Cs",))
observation_text = st.text(characters, max_size=40)


def representable(tokenizer, *texts):
    return all(tokenizer.decode(tokenizer.encode(t, add_special_tokens=False)) == t for t in texts if t)


# Actions start with a non-space character: a leading space or newline could merge with the generation
# prompt's final "\n" when the whole conversation is re-encoded (a model-side, not renderer-side, effect).
# Nor do they contain the end-of-turn token's text: a model that emits it has ended its turn.
action_text = st.text(characters, min_size=1, max_size=30).filter(
    lambda s: not s[0].isspace() and "<|im_end|>" not in s
)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_incremental_rendering_is_token_exact(tokenizer, name, data):
    template = TEMPLATES[name]
    system = data.draw(st.one_of(st.none(), observation_text), label="system")
    renderer = ChatRenderer(tokenizer, system_prompt=system, chat_template=template)
    n = data.draw(st.integers(1, 5), label="turns")
    observations = data.draw(st.lists(observation_text, min_size=n + 1, max_size=n + 1), label="observations")
    texts = data.draw(st.lists(action_text, min_size=n, max_size=n), label="actions")
    stops = data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="stops")
    assume(representable(tokenizer, *texts))  # generated ids that are the canonical encoding of their text
    actions = [
        tokenizer.encode(t, add_special_tokens=False) + ([IM_END] if s else []) for t, s in zip(texts, stops)
    ]
    episode, contexts = play(renderer, observations, actions)
    check_invariants(episode, contexts)
    messages = episode.messages()
    head = 1 if system is not None else 0
    # Token-exact against the template's full re-render, after every turn and at the end.
    for k, context in enumerate(contexts):
        assert context == template_ids(tokenizer, messages[: head + 2 * k + 1], template, True)
    assert episode.to_sequence().token_ids == template_ids(tokenizer, messages, template, False)
    assert not episode.template_rewrites_history
    assert [t.action for t in episode.turns] == texts
    if representable(tokenizer, system, *observations):
        assert renderer.decode(episode.to_sequence().token_ids) == renderer.render(messages, False)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_arbitrary_generated_ids_decode_to_the_conversation(tokenizer, data):
    """Sampled ids need not be the canonical encoding of their text; they are kept and still decode to
    exactly the conversation the template renders from the decoded actions."""
    renderer = ChatRenderer(tokenizer)
    n = data.draw(st.integers(1, 4), label="turns")
    observations = data.draw(st.lists(observation_text, min_size=n + 1, max_size=n + 1), label="observations")
    regular = st.integers(17, len(tokenizer) - 1)  # ids 0-16 are SmolLM2's special tokens
    actions = [
        data.draw(st.lists(regular, max_size=12), label="ids")
        + ([IM_END] if data.draw(st.booleans()) else [])
        for _ in range(n)
    ]
    episode, contexts = play(renderer, observations, actions)
    check_invariants(episode, contexts)
    assert [t.action_ids for t in episode.turns] == actions
    assert not episode.template_rewrites_history
    if representable(tokenizer, *observations):
        assert renderer.decode(episode.to_sequence().token_ids) == renderer.render(episode.messages(), False)


# ---- few-shot prefix messages ---------------------------------------------------------------------
DEMO = [
    {"role": "user", "content": "Guess a number between 1 and 10."},
    {"role": "assistant", "content": "\\boxed{5}"},
]


def test_prefix_messages_by_hand(tokenizer, tmp_path):
    renderer = ChatRenderer(tokenizer, system_prompt="Play well.", prefix_messages=DEMO)
    action = [*tokenizer.encode("\\boxed{3}", add_special_tokens=False), IM_END]
    episode, contexts = play(renderer, ["Guess.", "Higher."], [action])
    check_invariants(episode, contexts)
    assert renderer.decode(contexts[0]) == (
        "<|im_start|>system\nPlay well.<|im_end|>\n"
        "<|im_start|>user\nGuess a number between 1 and 10.<|im_end|>\n"
        "<|im_start|>assistant\n\\boxed{5}<|im_end|>\n"
        "<|im_start|>user\nGuess.<|im_end|>\n<|im_start|>assistant\n"
    )
    # The demonstration is context: its ids are in the first prompt, with mask 0.
    seq = episode.to_sequence()
    assert sum(seq.loss_mask) == len(action) and seq.token_ids[: len(contexts[0])] == contexts[0]
    assert episode.prefix_messages == DEMO and episode.messages()[1:3] == DEMO
    assert episode.messages()[3] == {"role": "user", "content": "Guess."}
    assert seq.token_ids == template_ids(tokenizer, episode.messages(), None, False)
    assert not episode.template_rewrites_history
    # Each episode holds its own copy; the renderer's messages are not shared with it or the caller.
    episode.prefix_messages[1]["content"] = "changed"
    assert renderer.prefix_messages == DEMO and EpisodeBuilder(renderer, "x").episode.prefix_messages == DEMO
    episode.prefix_messages[1]["content"] = "\\boxed{5}"
    # Recorded and replayed with the episode.
    write_jsonl(tmp_path / "e.jsonl", [episode])
    (back,) = read_jsonl(tmp_path / "e.jsonl")
    assert back.prefix_messages == DEMO and back.to_dict() == episode.to_dict()
    assert (
        Episode.from_dict(
            {k: v for k, v in episode.to_dict().items() if k != "prefix_messages"}
        ).prefix_messages
        == []
    )


@pytest.mark.parametrize("bad", [[{"role": "user"}], [{"role": "user", "content": 5}], ["hi"]])
def test_malformed_prefix_messages_are_refused(tokenizer, bad):
    with pytest.raises(ValueError, match="prefix message"):
        ChatRenderer(tokenizer, prefix_messages=bad)


PREFIX_TEMPLATES = {"smollm2": None, "chatml": CHATML_TEMPLATE, "qwen3": QWEN3_TEMPLATE}
no_think = st.text(characters, max_size=40).filter(lambda s: "think>" not in s)


@pytest.mark.parametrize("name", sorted(PREFIX_TEMPLATES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_prefix_messages_are_token_exact(tokenizer, name, data):
    """With few-shot messages before the first observation, every context is the template's own
    tokenisation of the conversation so far. Qwen3 (actions without thinking here) re-renders only the
    final turn, so its full sequence is the ChatML conversation the model saw, and flagged."""
    template = PREFIX_TEMPLATES[name]
    system = data.draw(st.one_of(st.none(), no_think), label="system")
    pairs = data.draw(st.lists(st.tuples(no_think, no_think), min_size=1, max_size=2), label="prefix")
    prefix = [
        message
        for question, answer in pairs
        for message in ({"role": "user", "content": question}, {"role": "assistant", "content": answer})
    ]
    renderer = ChatRenderer(tokenizer, system_prompt=system, chat_template=template, prefix_messages=prefix)
    n = data.draw(st.integers(1, 4), label="turns")
    observations = data.draw(st.lists(no_think, min_size=n + 1, max_size=n + 1), label="observations")
    texts = data.draw(st.lists(action_text, min_size=n, max_size=n), label="actions")
    stops = data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="stops")
    assume(representable(tokenizer, *texts) and not any("think>" in t for t in texts))
    actions = [
        tokenizer.encode(t, add_special_tokens=False) + ([IM_END] if s else []) for t, s in zip(texts, stops)
    ]
    episode, contexts = play(renderer, observations, actions)
    check_invariants(episode, contexts)
    messages = episode.messages()
    head = (system is not None) + len(prefix)
    assert messages[head - len(prefix) : head] == prefix == episode.prefix_messages
    for k, context in enumerate(contexts):
        assert context == template_ids(tokenizer, messages[: head + 2 * k + 1], template, True)
    as_seen = CHATML_TEMPLATE if name == "qwen3" else template
    assert episode.to_sequence().token_ids == template_ids(tokenizer, messages, as_seen, False)
    assert episode.template_rewrites_history == (name == "qwen3")
    # The prefix is context: only the generated ids are trained.
    assert sum(episode.to_sequence().loss_mask) == sum(map(len, actions))


def test_qwen3_drops_the_prefix_thinking_as_the_model_sees_it(tokenizer):
    """A demonstration with a <think> block is rendered as the template renders it (Qwen3 drops it
    before the last user message), the same way in the prompt and in the full re-render: no flag."""
    demo = [DEMO[0], {"role": "assistant", "content": "<think>\nthe middle\n</think>\n\n\\boxed{5}"}]
    renderer = ChatRenderer(tokenizer, chat_template=QWEN3_TEMPLATE, prefix_messages=demo)
    enc = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    actions = [[*enc("\\boxed{5}"), IM_END], [*enc("<think>\nso 7\n</think>\n\n\\boxed{7}"), IM_END]]
    episode, contexts = play(renderer, ["Guess.", "Higher.", "Correct!"], actions)
    check_invariants(episode, contexts)
    assert "the middle" not in renderer.decode(contexts[0])
    assert not episode.template_rewrites_history
    assert episode.to_sequence().token_ids == template_ids(
        tokenizer, episode.messages(), QWEN3_TEMPLATE, False
    )


# ---- templates that rewrite history (Qwen3) -----------------------------------------------------
def test_qwen3_dropping_earlier_thinking_is_flagged_and_tokens_kept(tokenizer):
    renderer = ChatRenderer(tokenizer, chat_template=QWEN3_TEMPLATE)
    enc = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    first = [*enc("<think>\nlow or high?\n</think>\n\n\\boxed{5}"), IM_END]
    last = [*enc("<think>\nso 7\n</think>\n\n\\boxed{7}"), IM_END]
    episode, contexts = play(renderer, ["Guess.", "Higher.", "Correct!"], [first, last])
    check_invariants(episode, contexts)
    assert episode.template_rewrites_history
    # The model conditioned on its earlier thinking, so the sequence keeps it, trained (mask 1).
    decoded = renderer.decode(episode.to_sequence().token_ids)
    assert "low or high?" in decoded
    assert "low or high?" not in renderer.render(episode.messages(), False)
    assert renderer.decode(contexts[1]).count("low or high?") == 1
    assert episode.num_generated_tokens == len(first) + len(last)
    assert sum(episode.to_sequence().loss_mask) == len(first) + len(last)


def test_qwen3_episode_in_the_templates_own_form_is_not_flagged(tokenizer):
    renderer = ChatRenderer(tokenizer, chat_template=QWEN3_TEMPLATE)
    enc = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    # Earlier turns without thinking, the last one exactly as Qwen3 renders a final turn.
    actions = [[*enc("\\boxed{5}"), IM_END], [*enc("<think>\nso 7\n</think>\n\n\\boxed{7}"), IM_END]]
    episode, contexts = play(renderer, ["Guess.", "Higher.", "Correct!"], actions)
    check_invariants(episode, contexts)
    assert not episode.template_rewrites_history
    assert episode.to_sequence().token_ids == template_ids(
        tokenizer, episode.messages(), QWEN3_TEMPLATE, False
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_qwen3_sequences_are_what_the_model_saw(tokenizer, data):
    """With any actions, the sequence is the ChatML conversation the model was actually prompted with;
    it is flagged exactly when Qwen3's own re-render of the episode differs from it."""
    thought = st.text(alphabet="abc \n", max_size=8).map(lambda t: f"<think>{t}</think>")
    action = st.tuples(st.one_of(st.just(""), thought), action_text).map("".join)
    renderer = ChatRenderer(tokenizer, chat_template=QWEN3_TEMPLATE)
    n = data.draw(st.integers(1, 4), label="turns")
    observations = data.draw(st.lists(observation_text, min_size=n + 1, max_size=n + 1), label="observations")
    texts = data.draw(st.lists(action, min_size=n, max_size=n), label="actions")
    assume(all(not t[0].isspace() for t in texts) and representable(tokenizer, *texts))
    actions = [[*tokenizer.encode(t, add_special_tokens=False), IM_END] for t in texts]
    episode, contexts = play(renderer, observations, actions)
    check_invariants(episode, contexts)
    as_seen = tokenizer.apply_chat_template(episode.messages(), tokenize=False, chat_template=CHATML_TEMPLATE)
    assert episode.to_sequence().token_ids == template_ids(
        tokenizer, episode.messages(), CHATML_TEMPLATE, False
    )
    if representable(tokenizer, *observations):
        assert renderer.decode(episode.to_sequence().token_ids) == as_seen
    assert episode.template_rewrites_history == (renderer.render(episode.messages(), False) != as_seen)
    # Qwen3 re-renders the final turn as "<think>\n...\n</think>\n\n...", so plain final turns differ.
    if "</think>" not in texts[-1]:
        assert episode.template_rewrites_history


def test_qwen3_without_thinking_keeps_the_empty_think_prompt(tokenizer):
    renderer = ChatRenderer(
        tokenizer, chat_template=QWEN3_TEMPLATE, template_kwargs={"enable_thinking": False}
    )
    enc = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    episode, contexts = play(renderer, ["Guess.", "Higher.", "Correct!"], [[*enc("\\boxed{5}"), IM_END]] * 2)
    check_invariants(episode, contexts)
    empty_think = enc("<think>\n\n</think>\n\n")
    for turn in episode.turns:  # the generation prompt's empty think block is template text, mask 0
        assert turn.prompt_ids[-len(empty_think) :] == empty_think
    assert contexts[0] == template_ids(
        tokenizer, episode.messages()[:1], QWEN3_TEMPLATE, True, enable_thinking=False
    )
    assert episode.template_rewrites_history  # Qwen3 drops the earlier turn's empty think block


# ---- cost ---------------------------------------------------------------------------------------
class RecordingTokenizer:
    """The real tokenizer, noting how many messages each template render receives."""

    def __init__(self, tokenizer):
        self.tokenizer, self.rendered = tokenizer, []

    def apply_chat_template(self, messages, **kwargs):
        self.rendered.append(len(messages))
        return self.tokenizer.apply_chat_template(messages, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


@pytest.mark.parametrize("check", [False, True])
def test_each_turn_renders_a_constant_size_conversation(tokenizer, check):
    recording = RecordingTokenizer(tokenizer)
    renderer = ChatRenderer(recording, check_template=check)
    recording.rendered.clear()
    n = 30
    action = [*tokenizer.encode("\\boxed{1}", add_special_tokens=False), IM_END]
    episode, contexts = play(renderer, [f"observation {k}" for k in range(n + 1)], [action] * n)
    check_invariants(episode, contexts)
    during, at_end = (
        recording.rendered[: len(recording.rendered) - check],
        recording.rendered[len(recording.rendered) - check :],
    )
    assert len(during) <= n and max(during) <= 4  # at most one small render per turn, never the history
    # With the check on, one render of the whole conversation when the episode finishes.
    assert at_end == ([2 * n] if check else [])


@pytest.mark.parametrize("template", [None, CHATML_TEMPLATE, QWEN3_TEMPLATE, TRIMMING_TEMPLATE])
def test_templates_that_change_user_text_are_rendered_per_turn(tokenizer, template):
    """A template that inserts user text verbatim is split once around it; one that changes the text
    (here: trims it) is rendered for every turn. Both give the template's own tokens."""
    renderer = ChatRenderer(tokenizer, chat_template=template)
    assert (renderer._continuation_parts["user"] is None) == (template is TRIMMING_TEMPLATE)
    action = [*tokenizer.encode("\\boxed{1}", add_special_tokens=False), IM_END]
    observations = ["  first  ", "\n second \n", " third"]
    episode, contexts = play(renderer, observations, [action, action])
    check_invariants(episode, contexts)
    for k, context in enumerate(contexts):
        assert context == template_ids(tokenizer, episode.messages()[: 2 * k + 1], template, True)


def test_text_the_tokenizer_cannot_represent_is_not_a_template_rewrite(tokenizer):
    renderer = ChatRenderer(tokenizer)
    episode, contexts = play(
        renderer, ["a\x16b", "c"], [[*tokenizer.encode("ok", add_special_tokens=False), IM_END]]
    )
    check_invariants(episode, contexts)
    assert not episode.template_rewrites_history
    assert episode.to_sequence().token_ids == template_ids(tokenizer, episode.messages(), None, False)
    assert renderer.decode(episode.to_sequence().token_ids) != renderer.render(episode.messages(), False)


def test_builder_misuse_is_an_error(tokenizer):
    renderer = ChatRenderer(tokenizer)
    builder = EpisodeBuilder(renderer, "hi")
    with pytest.raises(RuntimeError):
        builder.add_feedback("x", 0.0, False, False)
    builder.add_action([5, IM_END])
    with pytest.raises(RuntimeError):
        builder.context()
    with pytest.raises(ValueError):
        EpisodeBuilder(renderer, "hi").add_action([5, 6], logprobs=[0.0])


def test_shared_renderer_is_one_per_tokenizer_content_and_settings(tokenizer):
    import copy

    from gem_adapters.episodes.chat_renderer import shared_renderer

    first = shared_renderer(tokenizer, "sys", {"enable_thinking": False})
    # OpenRLHF sends a fresh copy of the tokenizer with every request: same content, same renderer.
    assert shared_renderer(copy.deepcopy(tokenizer), "sys", {"enable_thinking": False}) is first
    assert shared_renderer(tokenizer, "other", {"enable_thinking": False}) is not first
    assert shared_renderer(tokenizer, "sys") is not first
    assert first.system_prompt == "sys" and first.template_kwargs == {"enable_thinking": False}

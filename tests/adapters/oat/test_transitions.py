"""GEM episodes as real ``oat.types.Transition`` objects: one per turn, what Oat's learner trains on.

Two players drive the shared rollout driver on a real game: a scripted player (binary search that
sometimes forgets ``\\boxed{}``, so there are format errors, stop tokens and varied rewards) and a tiny
randomly initialised Llama through ``TransformersPolicy`` (cut-off turns and real sampler logprobs).
"""

from __future__ import annotations

import itertools
import pickle
import re

import pytest

pytest.importorskip("torch")
pytest.importorskip("oat.types")

import torch
from oat.types import Transition

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode, Turn
from gem_adapters.oat import INFO_KEYS, episode_to_transitions, episodes_to_transitions
from gem_adapters.policies import Generation, TransformersPolicy
from gem_adapters.runtime.rollout import rollout

ENV_ID = "game:GuessTheNumber-v1-easy"


class ForgetfulBinarySearch:
    """Plays binary search over token ids, but answers without ``\\boxed{}`` on every third turn."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, prompts, params):
        out = []
        for prompt in prompts:
            text = self.tokenizer.decode(prompt)
            low, high = map(int, re.search(r"between (\d+) and (\d+)", text).groups())
            for guess, direction in re.findall(r"(\d+) is wrong: the number is (higher|lower)", text):
                low, high = (int(guess) + 1, high) if direction == "higher" else (low, int(guess) - 1)
            turn = text.count("<|im_start|>assistant") - 1
            answer = "maybe five?" if turn % 3 == 1 else f"\\boxed{{{(low + high) // 2}}}"
            ids = [*self.tokenizer.encode(answer, add_special_tokens=False), params.stop_token_ids[0]]
            out.append(Generation(ids, [-0.25 - 0.01 * i for i in range(len(ids))], "stop"))
        return out


@pytest.fixture(scope="module")
def renderer(tokenizer):
    return ChatRenderer(tokenizer, system_prompt="Answer with \\boxed{N}.")


@pytest.fixture(scope="module")
def scripted_episodes(tokenizer, renderer):
    return rollout(ENV_ID, ForgetfulBinarySearch(tokenizer), renderer, num_envs=6, seeds=3, max_new_tokens=16)


def test_one_transition_per_turn_with_the_full_context(scripted_episodes, tokenizer):
    formatted, outcomes = set(), set()
    for episode in scripted_episodes:
        transitions = episode_to_transitions(episode, tokenizer=tokenizer)
        assert len(transitions) == episode.num_turns > 0
        assert all(type(t) is Transition for t in transitions)
        sequence = episode.to_sequence(include_closing=False)
        for k, (t, turn) in enumerate(zip(transitions, episode.turns)):
            start, end = sequence.turn_spans[k]
            # The prompt is every id before the action; the response is the action as generated.
            assert t.prompt_ids == sequence.token_ids[:start]
            assert t.response_ids == sequence.token_ids[start:end] == turn.action_ids
            assert t.response_ids[-1] == tokenizer.convert_tokens_to_ids("<|im_end|>")
            assert t.response_logprobs == turn.logprobs and len(t.response_logprobs) == len(t.response_ids)
            assert t.prompt == tokenizer.decode(t.prompt_ids)
            assert t.obs == turn.observation and t.action == t.response == turn.action
            assert t.rewards == turn.reward and t.done == (k == episode.num_turns - 1)
            assert t.response_is_truncated is False and t.loss_mask is True
            assert t.action_is_formatted == (not turn.info.get("format_error", False))
            formatted.add(t.action_is_formatted)
            # Oat averages info over all transitions with dm-tree: same keys, numbers only.
            assert tuple(t.info) == INFO_KEYS and all(type(v) is float for v in t.info.values())
            assert t.info["actor/turn_index"] == k and t.info["actor/episode_return"] == episode.total_reward
        # Turn k's sample is a prefix of turn k+1's: the context only grows.
        for a, b in itertools.pairwise(transitions):
            assert b.prompt_ids[: len(a.prompt_ids) + len(a.response_ids)] == a.prompt_ids + a.response_ids
        assert transitions[-1].info["actor/episode_success"] == float(episode.success)
        outcomes.add(episode.success)
    assert formatted == {True, False}  # the forgetful turns are flagged as format errors
    assert outcomes == {True, False}


def test_transitions_survive_oats_ipc_pickling(scripted_episodes):
    episodes = episodes_to_transitions(scripted_episodes)
    again = pickle.loads(pickle.dumps(episodes))
    assert again == episodes and [len(e) for e in again] == [e.num_turns for e in scripted_episodes]


def test_sampler_logprobs_are_what_the_learner_recomputes(tokenizer, tiny_model):
    """Oat's learner re-scores ``prompt_ids + response_ids`` with its model and compares with
    ``response_logprobs`` (PPO ratio, truncated importance sampling): with the same weights they agree."""
    policy = TransformersPolicy(tiny_model, tokenizer, seed=0)
    episodes = rollout(
        ENV_ID, policy, ChatRenderer(tokenizer), num_envs=2, seeds=0, max_turns=2, max_new_tokens=6
    )
    transitions = [t for e in episodes_to_transitions(episodes) for t in e]
    assert len(transitions) == 4
    for t in transitions:
        assert t.response_is_truncated  # 6 tokens never end a random model's turn
        ids = torch.tensor([t.prompt_ids + t.response_ids])
        with torch.no_grad():
            logits = tiny_model(ids).logits[0, len(t.prompt_ids) - 1 : -1]
        rescored = torch.log_softmax(logits.double(), -1).gather(-1, torch.tensor(t.response_ids)[:, None])[
            :, 0
        ]
        torch.testing.assert_close(
            rescored, torch.tensor(t.response_logprobs, dtype=torch.float64), atol=1e-4, rtol=0
        )
    # A cut-off turn's closing template ids open the next turn's prompt, never its response.
    first, second = transitions[0], transitions[1]
    closing = ChatRenderer(tokenizer).closing_ids
    boundary = len(first.prompt_ids) + len(first.response_ids)
    assert second.prompt_ids[boundary : boundary + len(closing)] == closing


def _episode(turns):
    return Episode(env_id="test", seed=0, turns=turns)


def test_cut_off_turns_can_be_masked_out_as_oats_ignore_no_eos():
    turns = [
        Turn("o1", "a", [1, 2], [3, 4], [-0.1, -0.2], reward=0.5, finish_reason="length"),
        Turn("o2", "b", [5], [6, 7], [-0.3, -0.4], reward=1.0, terminated=True, info={"success": True}),
    ]
    kept = episode_to_transitions(_episode(turns))
    masked = episode_to_transitions(_episode(turns), mask_truncated=True)
    assert [t.loss_mask for t in kept] == [True, True]
    assert [t.loss_mask for t in masked] == [False, True]
    assert [t.response_is_truncated for t in masked] == [True, False]
    assert masked[1].prompt_ids == [1, 2, 3, 4, 5] and masked[1].prompt == ""


def test_a_turn_without_logprobs_is_refused():
    turns = [Turn("o", "a", [1], [2, 3], None, reward=1.0, terminated=True)]
    with pytest.raises(ValueError, match="logprobs"):
        episode_to_transitions(_episode(turns))


def test_episodes_without_turns_are_left_out():
    done = _episode([Turn("o", "a", [1], [2], [-0.5], reward=1.0, terminated=True)])
    assert [len(e) for e in episodes_to_transitions([_episode([]), done])] == [1]

"""Episode.to_prompt_response: the one-sample-per-episode layout every trainer adapter uses, by hand."""

from __future__ import annotations

import pytest

from gem_adapters.episodes.episode import Episode, PromptResponse, Turn


def turn(prompt_ids, action_ids, logprobs=None) -> Turn:
    return Turn(observation="o", action="a", prompt_ids=prompt_ids, action_ids=action_ids, logprobs=logprobs)


def test_prompt_response_by_hand():
    episode = Episode(
        turns=[turn([1, 2, 3], [10, 11], [-0.1, -0.2]), turn([4, 5], [12], [-0.3])], closing_ids=[6]
    )
    assert episode.to_prompt_response() == PromptResponse(
        prompt_ids=[1, 2, 3],
        response_ids=[10, 11, 4, 5, 12, 6],
        response_mask=[1, 1, 0, 0, 1, 0],
        response_logprobs=[-0.1, -0.2, 0.0, 0.0, -0.3, 0.0],
        turn_spans=[(0, 2), (4, 5)],
    )
    cut = episode.to_prompt_response(include_closing=False)
    assert cut.response_ids == [10, 11, 4, 5, 12] and cut.response_mask == [1, 1, 0, 0, 1]
    # The whole-sequence views are those of to_sequence.
    sequence = episode.to_sequence()
    whole = episode.to_prompt_response()
    assert whole.token_ids == sequence.token_ids and whole.logprobs == sequence.logprobs
    assert whole.sequence_spans == sequence.turn_spans == [(3, 5), (7, 8)]


def test_without_logprobs_the_response_has_none():
    sample = Episode(turns=[turn([1], [2])]).to_prompt_response()
    assert sample.response_logprobs is None and sample.logprobs is None


def test_an_episode_without_an_action_or_with_touching_actions_is_refused():
    empty = Episode(env_id="game:X", seed=3, info={"stopped_by": "max_context_tokens"})
    with pytest.raises(ValueError, match=r"game:X \(seed 3\) has no action.*max_context_tokens"):
        empty.to_prompt_response()
    touching = Episode(turns=[turn([1], [2]), turn([], [3])])
    with pytest.raises(RuntimeError, match="not separated"):
        touching.to_prompt_response()
    with pytest.raises(RuntimeError, match="empty"):
        Episode(turns=[turn([1], []), turn([2], [3])]).to_prompt_response()

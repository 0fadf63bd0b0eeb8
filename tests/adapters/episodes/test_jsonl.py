"""Record / replay: episodes to JSONL and back, and re-scoring stored episodes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gem_adapters.algorithms.advantages import advantages_for_episodes
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode, rescore
from gem_adapters.episodes.jsonl import read_jsonl, write_jsonl
from gem_adapters.policies import TransformersPolicy
from gem_adapters.runtime.rollout import rollout


@pytest.fixture(scope="module")
def episodes(tokenizer, tiny_model):
    renderer = ChatRenderer(tokenizer, system_prompt="Answer with \\boxed{N}.")
    policy = TransformersPolicy(tiny_model, tokenizer, seed=1)
    return rollout(
        "game:GuessTheNumber-v1-easy", policy, renderer, num_envs=3, seeds=[4, 4, 5], max_new_tokens=6
    )


def test_round_trip_is_exact(tmp_path, episodes):
    episodes[0].info["numpy_value"] = np.float32(0.5)  # info values JSON cannot hold natively
    episodes[0].info["a_set"] = {"b", "a"}
    path = tmp_path / "episodes.jsonl"
    assert write_jsonl(path, episodes) == 3
    back = read_jsonl(path)
    assert back[0].info.pop("numpy_value") == 0.5 and back[0].info.pop("a_set") == ["a", "b"]
    del episodes[0].info["numpy_value"], episodes[0].info["a_set"]
    assert back == episodes  # dataclass equality: every field, id and logprob
    for original, restored in zip(episodes, back):
        assert restored.to_sequence() == original.to_sequence()
        assert restored.to_turn_samples() == original.to_turn_samples()
    line = json.loads(path.read_text().splitlines()[0])
    assert line["env_id"] == "game:GuessTheNumber-v1-easy" and line["seed"] == 4
    assert line["turns"][0]["observation"].startswith("You are playing Guess The Number")
    assert write_jsonl(path, episodes[:1], append=True) == 1 and len(read_jsonl(path)) == 4


def test_rescore_with_a_new_reward(tmp_path, episodes):
    path = tmp_path / "episodes.jsonl"
    write_jsonl(path, episodes)
    stored = read_jsonl(path)

    def length_penalty(episode: Episode):
        return [-0.01 * len(t.action_ids) for t in episode.turns]

    rescored = rescore(stored, length_penalty)
    for old, new in zip(stored, rescored):
        assert [t.reward for t in new.turns] == pytest.approx([-0.01 * len(t.action_ids) for t in old.turns])
        assert [t.info["previous_reward"] for t in new.turns] == [t.reward for t in old.turns]
        assert [t.action_ids for t in new.turns] == [t.action_ids for t in old.turns]
    # A single number is a terminal reward on the last turn; advantages follow the new rewards.
    terminal = rescore(stored, lambda e: float(e.seed == 4))
    assert [[t.reward for t in e.turns][-1] for e in terminal] == [1.0, 1.0, 0.0]
    assert all(t.reward == 0.0 for e in terminal for t in e.turns[:-1])
    advantages = advantages_for_episodes("grpo", terminal)
    assert np.all(advantages[0] == 0) and np.all(advantages[1] == 0)  # same group, same return
    with pytest.raises(ValueError, match="rewards for"):
        rescore(stored, lambda e: [0.0] * (e.num_turns + 1))
    with pytest.raises(ValueError, match="non-finite"):
        rescore(stored, lambda e: float("nan"))

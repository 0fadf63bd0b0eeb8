"""Each turn records the env's state key before its action (what GiGPO groups turns by), in every
driver; envs that are not gem_core envs report theirs in ``info`` or have none; rewards of None."""

from __future__ import annotations

import asyncio
import json

import numpy as np

import gem_core
from gem_adapters.algorithms.advantages import advantages_for_episodes, compute_advantages
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode
from gem_adapters.runtime.rollout import aplay_episode, arollout, rollout
from tests.adapters.runtime.test_rollout import BinarySearchPlayer, as_callback

ENV_ID = "game:GuessTheNumber-v1-easy"


class LowFirstPlayer(BinarySearchPlayer):
    """Binary search after a first guess of 1 (illegal when the range starts higher: no new state)."""

    def __call__(self, prompts, params):
        out = super().__call__(prompts, params)
        for k, prompt in enumerate(prompts):
            if "is wrong" not in self.tokenizer.decode(prompt) and "outside" not in self.tokenizer.decode(
                prompt
            ):
                ids = self.tokenizer.encode("\\boxed{0}", add_special_tokens=False) + [
                    params.stop_token_ids[0]
                ]
                out[k] = type(out[k])(ids, [-0.5] * len(ids), "stop")
        return out


def replayed_keys(episode: Episode) -> list:
    """The env's key before each action, from a fresh env replaying the episode's actions."""
    env = gem_core.make(episode.env_id)
    env.reset(seed=episode.seed)
    keys = []
    for turn in episode.turns:
        keys.append(env.state_key())
        env.step(turn.action)
    return keys


def test_every_driver_records_the_state_before_each_action(tokenizer):
    renderer = ChatRenderer(tokenizer)
    episodes = rollout(ENV_ID, LowFirstPlayer(tokenizer), renderer, num_envs=4, seeds=[7, 7, 8, 9])
    for episode in episodes:
        keys = [t.state_key for t in episode.turns]
        assert keys == replayed_keys(episode) and None not in keys
        # The illegal first guess (0 is out of range) leaves the state as it was: one key twice.
        assert keys[0] == keys[1] and episode.turns[0].info.get("invalid_move")
    again = asyncio.run(arollout(ENV_ID, LowFirstPlayer(tokenizer), renderer, num_envs=4, seeds=[7, 7, 8, 9]))
    assert [[t.state_key for t in e.turns] for e in again] == [
        [t.state_key for t in e.turns] for e in episodes
    ]
    one = asyncio.run(
        aplay_episode(gem_core.make(ENV_ID), as_callback(LowFirstPlayer(tokenizer)), renderer, seed=8)
    )
    assert [t.state_key for t in one.turns] == [t.state_key for t in episodes[2].turns]
    # A vector env of threads holds its envs in this process: the drivers read their keys too.
    with gem_core.make_vec(ENV_ID, 2, backend="threads", autoreset_mode="disabled") as vec:
        threaded = rollout(vec, LowFirstPlayer(tokenizer), renderer, seeds=[8, 9])
    assert [[t.state_key for t in e.turns] for e in threaded] == [
        [t.state_key for t in e.turns] for e in episodes[2:]
    ]


class ForeignEnv:
    """An env that is not a gem_core env (a framework's or a server's): coroutine reset and step;
    it names its states in ``info`` when ``keys`` and scores only some turns (reward None otherwise)."""

    def __init__(self, keys: bool):
        self.keys, self.count = keys, 0

    async def reset(self, seed=None):
        self.count = 0
        return "Count up from 1, one number per reply.", ({"state_key": 0} if self.keys else {})

    async def step(self, action):
        self.count += 1
        right = action.strip() == str(self.count)
        reward = 1.0 if self.count == 3 and right else (None if right else -0.5)
        info = {"state_key": self.count} if self.keys else {}
        return f"Next ({self.count} said).", reward, self.count == 3, False, info


def counter(tokenizer):
    def player(prompts, params):
        from gem_adapters.policies import Generation

        out = []
        for prompt in prompts:
            said = tokenizer.decode(prompt).count("said)")
            ids = tokenizer.encode(str(said + 1), add_special_tokens=False) + [params.stop_token_ids[0]]
            out.append(Generation(ids, [-0.1] * len(ids), "stop"))
        return out

    return as_callback(player)


def test_an_env_that_is_not_a_gem_env_names_its_states_in_info_or_not_at_all(tokenizer):
    renderer = ChatRenderer(tokenizer)
    with_keys = asyncio.run(aplay_episode(ForeignEnv(True), counter(tokenizer), renderer, env_id="count"))
    assert [t.state_key for t in with_keys.turns] == [0, 1, 2]
    # Its turns without a reward signal (None) are stored as 0.0, what every estimator reads None as.
    assert [t.reward for t in with_keys.turns] == [0.0, 0.0, 1.0]
    without = asyncio.run(aplay_episode(ForeignEnv(False), counter(tokenizer), renderer, env_id="count"))
    assert [t.state_key for t in without.turns] == [None, None, None]


def test_state_keys_survive_jsonl_and_feed_gigpo(tokenizer):
    renderer = ChatRenderer(tokenizer)
    episodes = rollout(ENV_ID, LowFirstPlayer(tokenizer), renderer, num_envs=4, seeds=[7, 7, 7, 8])
    restored = [Episode.from_dict(json.loads(json.dumps(e.to_dict()))) for e in episodes]
    assert [[t.state_key for t in e.turns] for e in restored] == [
        [t.state_key for t in e.turns] for e in episodes
    ]
    assert all(isinstance(t.state_key, tuple) for e in restored for t in e.turns)
    # advantages_for_episodes takes groups (env id, seed) and state keys from the episodes themselves.
    out = advantages_for_episodes("gigpo", restored, gamma=0.9)
    expected = compute_advantages(
        "gigpo",
        [[t.reward for t in e.turns] for e in episodes],
        gamma=0.9,
        group_ids=[(e.env_id, e.seed) for e in episodes],
        state_keys=[[t.state_key for t in e.turns] for e in episodes],
    )
    for got, want in zip(out, expected):
        np.testing.assert_array_equal(got, want)

"""The rollout driver on real envs: a scripted player, a tiny transformers model, sync and asyncio."""

from __future__ import annotations

import asyncio
import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem_core
from gem_adapters.algorithms.advantages import advantages_for_episodes, turn_values_to_tokens
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode_builder import PromptIds
from gem_adapters.episodes.episode_stats import episode_stats
from gem_adapters.policies import Generation, SamplingParams, TransformersPolicy
from gem_adapters.runtime.rollout import aplay_episode, arollout, rollout
from gem_adapters.runtime.rollout_limits import RolloutLimits

ENV_ID = "game:GuessTheNumber-v1-easy"
IM_START, IM_END = 1, 2  # <|im_start|>, <|im_end|> in the SmolLM2 vocabulary


class BinarySearchPlayer:
    """A policy over token ids: reads the conversation so far and plays binary search."""

    def __init__(self, tokenizer, pad_to=0):
        self.tokenizer, self.pad_to, self.batch_sizes = tokenizer, pad_to, []

    def __call__(self, prompts, params):
        self.batch_sizes.append(len(prompts))
        out = []
        for prompt in prompts:
            text = self.tokenizer.decode(prompt)
            low, high = map(int, re.search(r"between (\d+) and (\d+)", text).groups())
            for guess, direction in re.findall(r"(\d+) is wrong: the number is (higher|lower)", text):
                low, high = (int(guess) + 1, high) if direction == "higher" else (low, int(guess) - 1)
            ids = self.tokenizer.encode(f"\\boxed{{{(low + high) // 2}}}", add_special_tokens=False)
            ids = ids + [ids[-1]] * max(0, self.pad_to - len(ids))  # optionally long-winded
            ids = [*ids[: params.max_new_tokens - 1], params.stop_token_ids[0]]
            out.append(Generation(ids, [-0.5] * len(ids), "stop"))
        return out


@pytest.fixture(scope="module")
def renderer(tokenizer):
    return ChatRenderer(tokenizer)


def test_scripted_player_wins_and_episodes_finish_independently(tokenizer, renderer):
    player = BinarySearchPlayer(tokenizer)
    episodes = rollout(ENV_ID, player, renderer, num_envs=6, seeds=0, max_new_tokens=16)
    assert [e.seed for e in episodes] == list(range(6)) and {e.env_id for e in episodes} == {ENV_ID}
    assert all(e.success and e.turns[-1].reward == 1.0 and e.turns[-1].terminated for e in episodes)
    turns = [e.num_turns for e in episodes]
    assert len(set(turns)) > 1  # different targets need different numbers of guesses
    # Each round generates for the envs still playing, all in one batch.
    assert player.batch_sizes == [sum(t > k for t in turns) for k in range(max(turns))]
    for episode in episodes:
        seq = episode.to_sequence()
        assert sum(seq.loss_mask) == episode.num_generated_tokens
        assert episode.final_observation.startswith("Correct!")
        assert not episode.template_rewrites_history
    stats = episode_stats(episodes)
    assert stats["success_rate"] == 1.0 and stats["turns"] == sum(turns) / 6


def test_asyncio_rollout_gives_the_same_episodes(tokenizer, renderer):
    sync_player, async_player = BinarySearchPlayer(tokenizer), BinarySearchPlayer(tokenizer)
    expected = rollout(ENV_ID, sync_player, renderer, num_envs=5, seeds=10, max_new_tokens=16)
    got = asyncio.run(arollout(ENV_ID, async_player, renderer, num_envs=5, seeds=10, max_new_tokens=16))
    assert [e.to_dict() for e in got] == [e.to_dict() for e in expected]
    assert max(async_player.batch_sizes) > 1  # concurrent episodes were batched together
    assert sum(async_player.batch_sizes) == sum(e.num_turns for e in got)


def test_limits(tokenizer, renderer):
    episodes = rollout(ENV_ID, BinarySearchPlayer(tokenizer), renderer, num_envs=4, seeds=0, max_turns=1)
    for episode in episodes:
        assert episode.num_turns == 1
        if not episode.success:
            assert episode.info["stopped_by"] == "max_turns" and episode.turns[-1].truncated
    assert any(not e.success for e in episodes)

    limit = 230  # room for the first prompt and about two long-winded turns
    player = BinarySearchPlayer(tokenizer, pad_to=40)
    episodes = rollout(
        ENV_ID, player, renderer, num_envs=4, seeds=0, max_new_tokens=64, max_context_tokens=limit
    )
    for episode in episodes:
        assert len(episode.to_sequence().token_ids) <= limit
        if not episode.success:
            assert episode.info["stopped_by"] == "max_context_tokens"
    assert any(e.info.get("stopped_by") == "max_context_tokens" for e in episodes)

    # A first prompt that does not fit: episodes without turns, which every layout still handles.
    episodes = rollout(
        ENV_ID, BinarySearchPlayer(tokenizer), renderer, num_envs=2, seeds=0, max_context_tokens=20
    )
    assert [(e.num_turns, e.info["stopped_by"]) for e in episodes] == [(0, "max_context_tokens")] * 2
    assert episodes[0].to_sequence().token_ids == [] and episodes[0].to_turn_samples() == []
    assert [
        len(a)
        for a in advantages_for_episodes(
            "rebn", [*episodes, *rollout(ENV_ID, BinarySearchPlayer(tokenizer), renderer, num_envs=1)]
        )
    ][:2] == [0, 0]


def test_a_limits_object_plays_as_its_keywords(tokenizer, renderer):
    limits = RolloutLimits(max_turns=2, max_new_tokens=16)
    by_object = rollout(ENV_ID, BinarySearchPlayer(tokenizer), renderer, num_envs=3, seeds=0, limits=limits)
    by_keywords = rollout(
        ENV_ID, BinarySearchPlayer(tokenizer), renderer, num_envs=3, seeds=0, max_turns=2, max_new_tokens=16
    )
    assert [e.to_dict() for e in by_object] == [e.to_dict() for e in by_keywords]
    assert any(e.info.get("stopped_by") == "max_turns" for e in by_object)
    with pytest.raises(TypeError, match="not both"):
        rollout(ENV_ID, BinarySearchPlayer(tokenizer), renderer, num_envs=1, limits=limits, max_turns=2)
    with pytest.raises(TypeError, match="'max_tokens'"):
        rollout(ENV_ID, BinarySearchPlayer(tokenizer), renderer, num_envs=1, max_tokens=2)


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_rollout_on_a_given_vector_env(tokenizer, renderer, backend):
    vec = gem_core.make_vec(ENV_ID, 3, backend=backend, autoreset_mode="disabled")
    try:
        first = rollout(vec, BinarySearchPlayer(tokenizer), renderer, seeds=[7, 7, 8])
        again = rollout(vec, BinarySearchPlayer(tokenizer), renderer, seeds=[7, 7, 8])  # still open
    finally:
        vec.close()
    assert first[0].to_dict() == first[1].to_dict() == again[0].to_dict()
    assert first[0].group_id == first[1].group_id != first[2].group_id


def test_tiny_model_multi_turn_rollout(tokenizer, tiny_model, renderer):
    policy = TransformersPolicy(tiny_model, tokenizer, seed=0)
    episodes = rollout(ENV_ID, policy, renderer, num_envs=4, seeds=[0, 0, 1, 1], max_new_tokens=8)
    assert episodes[0].turns[0].observation == episodes[1].turns[0].observation
    for episode in episodes:
        assert 1 <= episode.num_turns <= 4 and (episode.turns[-1].terminated or episode.turns[-1].truncated)
        for turn in episode.turns:
            assert 1 <= len(turn.action_ids) <= 8 and len(turn.logprobs) == len(turn.action_ids)
            assert (turn.finish_reason == "stop") == (turn.action_ids[-1] in renderer.stop_token_ids)
        # The stored logprobs are the model's logprobs of the stored tokens in the stored context.
        seq = episode.to_sequence()
        with torch.no_grad():
            logits = tiny_model(torch.tensor([seq.token_ids])).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)
        for start, end in seq.turn_spans:
            recomputed = [logp[i - 1, seq.token_ids[i]].item() for i in range(start, end)]
            assert recomputed == pytest.approx(seq.logprobs[start:end], abs=1e-4)
    # Advantages for the batch, placed on each episode's tokens.
    advantages = advantages_for_episodes("rebn", episodes, gamma=0.9)
    for episode, per_turn in zip(episodes, advantages):
        seq = episode.to_sequence()
        tokens = turn_values_to_tokens(per_turn, seq.turn_spans, len(seq.token_ids), seq.loss_mask)
        assert (tokens != 0).sum() <= sum(seq.loss_mask)


def test_greedy_rollouts_are_reproducible(tokenizer, tiny_model, renderer):
    greedy = SamplingParams(max_new_tokens=6, temperature=0)
    policy = TransformersPolicy(tiny_model, tokenizer)
    a = rollout(ENV_ID, policy, renderer, num_envs=2, seeds=3, sampling=greedy, max_new_tokens=6, max_turns=2)
    b = asyncio.run(
        arollout(
            ENV_ID, policy, renderer, num_envs=2, seeds=3, sampling=greedy, max_new_tokens=6, max_turns=2
        )
    )
    assert [[t.action_ids for t in e.turns] for e in a] == [[t.action_ids for t in e.turns] for e in b]


# ---- one episode with an async generate callback ------------------------------------------------
def as_callback(player):
    """A ``generate(prompt_ids, params)`` coroutine around a policy function (as a server client is)."""

    async def generate(prompt_ids, params):
        (generation,) = player([prompt_ids], params)
        return generation

    return generate


class AsyncEnv:
    """An env whose reset and step are coroutines (an adapter's own env object), counting the calls."""

    def __init__(self, env):
        self.env, self.calls = env, []

    async def reset(self, seed=None):
        self.calls.append("reset")
        return self.env.reset(seed=seed)

    async def step(self, action):
        self.calls.append("step")
        return self.env.step(action)

    def state_key(self):  # an adapter's env may name its states (GiGPO's anchors) as gem_core envs do
        return self.env.state_key()


def test_aplay_episode_plays_what_rollout_plays(tokenizer, renderer):
    seeds = [3, 4, 5]
    expected = rollout(
        ENV_ID, BinarySearchPlayer(tokenizer), renderer, num_envs=3, seeds=seeds, max_new_tokens=16
    )

    async def play_all():
        # A gem_core env (stepped in a worker thread) and an env with coroutine methods, concurrently.
        async_env = AsyncEnv(gem_core.make(ENV_ID))
        generate = as_callback(BinarySearchPlayer(tokenizer))
        played = await asyncio.gather(
            aplay_episode(gem_core.make(ENV_ID), generate, renderer, seed=3, max_new_tokens=16),
            aplay_episode(gem_core.make(ENV_ID), generate, renderer, seed=4, max_new_tokens=16),
            aplay_episode(async_env, generate, renderer, seed=5, env_id=ENV_ID, max_new_tokens=16),
        )
        return played, async_env.calls

    got, calls = asyncio.run(play_all())
    assert [e.to_dict() for e in got] == [e.to_dict() for e in expected]
    assert got[0].env_id == ENV_ID and got[0].seed == 3 and all(e.success for e in got)
    assert calls == ["reset"] + ["step"] * got[2].num_turns


class FixedLengths:
    """A policy over ids whose k-th action (k = actions already in the prompt) has ``lengths[k]`` ids
    of "7", ending on the stop token when ``stops[k]``; with ``overrun`` it ignores the budget."""

    def __init__(self, lengths, stops, overrun=False):
        self.lengths, self.stops, self.overrun = lengths, stops, overrun

    def __call__(self, prompts, params):
        out = []
        for prompt in prompts:
            # <|im_start|> opens the system turn, the user turn and the generation prompt, then a user
            # turn and a generation prompt per action.
            k = (prompt.count(IM_START) - 3) // 2 % len(self.lengths)
            n = self.lengths[k] if self.overrun else min(self.lengths[k], params.max_new_tokens)
            ids = [39] * n
            if self.stops[k] and (self.overrun or n < params.max_new_tokens):
                ids.append(IM_END)
            stopped = bool(ids) and ids[-1] == IM_END
            out.append(Generation(ids, [-1.0] * len(ids), "stop" if stopped else "length"))
        return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lengths=st.lists(st.integers(1, 30), min_size=1, max_size=4),
    stops=st.lists(st.booleans(), min_size=4, max_size=4),
    overrun=st.booleans(),
    max_turns=st.one_of(st.none(), st.integers(1, 5)),
    max_new_tokens=st.one_of(st.none(), st.integers(1, 20)),
    context=st.one_of(st.none(), st.integers(100, 260)),
    response=st.one_of(st.none(), st.integers(0, 120)),
    seed=st.integers(0, 50),
)
def test_budgets_hold_and_every_driver_plays_alike(
    tokenizer, renderer, lengths, stops, overrun, max_turns, max_new_tokens, context, response, seed
):
    limits = {
        "max_turns": max_turns,
        "max_new_tokens": max_new_tokens,
        "max_context_tokens": context,
        "max_response_tokens": response,
    }
    if max_new_tokens is None and context is None and response is None:
        with pytest.raises(ValueError, match="max_new_tokens"):
            rollout(ENV_ID, FixedLengths(lengths, stops), renderer, seeds=[seed], **limits)
        return
    player = FixedLengths(lengths, stops, overrun)
    (episode,) = rollout(ENV_ID, player, renderer, seeds=[seed], **limits)
    single = asyncio.run(
        aplay_episode(gem_core.make(ENV_ID), as_callback(player), renderer, seed=seed, **limits)
    )
    assert single.to_dict() == episode.to_dict()

    seq = episode.to_sequence()
    first_prompt = len(episode.turns[0].prompt_ids) if episode.turns else 0
    stopped_by = episode.info.get("stopped_by")
    if context is not None:
        assert len(seq.token_ids) <= context
    if response is not None and episode.turns:
        assert len(seq.token_ids) - first_prompt <= response
    if max_turns is not None:
        assert episode.num_turns <= max_turns
    for turn in episode.turns:
        assert 1 <= len(turn.action_ids) <= (max_new_tokens or 10**9)
        # An overrun cut to the budget is a cut-off turn: the renderer closed it (mask 0).
        assert (turn.finish_reason == "stop") == (turn.action_ids[-1] == IM_END)
    last = episode.turns[-1] if episode.turns else None
    if stopped_by is None:
        assert last is not None and (last.terminated or last.truncated)  # the env ended it (its 4 turns)
    else:
        assert stopped_by in {"max_turns", "max_context_tokens"}
        assert last is None or last.truncated
        if stopped_by == "max_turns":
            assert episode.num_turns == max_turns
        else:  # not one more id fits a token budget (the next prompt included)
            assert context is not None or response is not None


def test_a_turn_that_fills_the_budget_fills_it_exactly(tokenizer, renderer):
    """Without a per-turn cap an action may take all the room left: the sequence then ends exactly at
    the budget, its closing end-of-turn ids included."""

    def fill(**budget):
        player = as_callback(FixedLengths([10**6], [False]))
        episode = asyncio.run(
            aplay_episode(gem_core.make(ENV_ID), player, renderer, seed=0, max_new_tokens=None, **budget)
        )
        assert episode.num_turns == 1 and episode.info["stopped_by"] == "max_context_tokens"
        assert episode.turns[0].finish_reason == "length"
        return episode, len(episode.to_sequence().token_ids)

    _, length = fill(max_context_tokens=300)
    assert length == 300
    episode, length = fill(max_response_tokens=50)
    assert length - len(episode.turns[0].prompt_ids) == 50
    assert episode.turns[0].action_ids == [39] * (50 - len(renderer.closing_ids))


def test_an_empty_generation_ends_the_episode(tokenizer, renderer):
    calls = []

    async def generate(prompt_ids, params):
        calls.append(prompt_ids)
        ids = [39, IM_END] if len(calls) == 1 else []
        return Generation(ids, None, "stop")

    episode = asyncio.run(aplay_episode(gem_core.make(ENV_ID), generate, renderer, seed=0))
    assert len(calls) == 2 and episode.num_turns == 1
    # Each call got its own copy of the context, images attribute included (a PromptIds).
    assert isinstance(calls[0], PromptIds) and calls[0] == episode.turns[0].prompt_ids
    assert episode.info["stopped_by"] == "empty_generation" and episode.turns[-1].truncated
    assert episode.to_sequence().logprobs is None


@pytest.mark.parametrize("cache", ["kv", "none"])
@pytest.mark.parametrize("driver", ["rollout", "arollout"])
def test_episodes_end_at_the_policys_context_without_a_limit_of_their_own(
    tokenizer, tiny_model, renderer, cache, driver
):
    first_prompt = len(renderer.first_prompt(gem_core.make("game:GuessTheNumber-v1-hard").reset(seed=0)[0]))
    context = first_prompt + 40  # a turn or two of 12-id actions and the env's answers, never 7 turns
    policy = TransformersPolicy(tiny_model, tokenizer, seed=0, cache=cache, max_context_tokens=context)
    kwargs = dict(num_envs=4, seeds=0, max_new_tokens=12)
    if driver == "rollout":
        episodes = rollout("game:GuessTheNumber-v1-hard", policy, renderer, **kwargs)
    else:
        episodes = asyncio.run(arollout("game:GuessTheNumber-v1-hard", policy, renderer, **kwargs))
    for episode in episodes:
        assert len(episode.to_sequence().token_ids) <= context
    assert any(e.info.get("stopped_by") == "max_context_tokens" for e in episodes)
    # a tighter limit of the rollout's own still holds
    tight = rollout(
        "game:GuessTheNumber-v1-hard", policy, renderer, max_context_tokens=first_prompt + 20, **kwargs
    )
    assert all(len(e.to_sequence().token_ids) <= first_prompt + 20 for e in tight)

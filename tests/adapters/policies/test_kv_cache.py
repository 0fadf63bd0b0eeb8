"""TransformersPolicy's key/value-cache engine (cache="kv") against the re-prefill path (cache="none"):
the same ids and logprobs, fewer tokens through the model; eviction, invalidation, bad input."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref

import pytest
import torch

import gem_core
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.policies import SamplingParams, TransformersPolicy
from gem_adapters.policies.base import mark_weights_updated
from gem_adapters.runtime.rollout import aplay_episode, arollout, rollout
from tests.adapters.chat_templates import CHATML_TEMPLATE, QWEN3_TEMPLATE

ENV_ID = "game:GuessTheNumber-v1-easy"
IM_END = 2
DEMO = [
    {"role": "user", "content": "Guess my number between 1 and 10. Reply with \\boxed{}."},
    {"role": "assistant", "content": "\\boxed{5}"},
]


def stop_prone_model(tokenizer, seed=1):
    """A tiny random Llama whose head favours <|im_end|> (about 1 in 3), so turns end at different lengths."""
    from gem_adapters.runtime.models import tiny_causal_lm

    model = tiny_causal_lm(tokenizer, seed=seed).eval()
    with torch.no_grad():
        head = torch.nn.Linear(model.config.hidden_size, model.config.vocab_size, bias=True)
        head.weight.copy_(model.lm_head.weight)
        head.bias.zero_()
        head.bias[IM_END] = 10.0
    model.lm_head = head
    return model


@pytest.fixture(scope="module")
def model(tokenizer):
    return stop_prone_model(tokenizer)


RENDERERS = {
    "smollm2": {},
    "chatml": {"chat_template": CHATML_TEMPLATE},
    "qwen3": {"chat_template": QWEN3_TEMPLATE, "template_kwargs": {"enable_thinking": False}},
}
# A context budget per template that some of PLAY's episodes hit before the env's last turn.
CONTEXT = {"smollm2": 300, "chatml": 280, "qwen3": 314}


def renderer_for(tokenizer, name):
    return ChatRenderer(tokenizer, prefix_messages=DEMO, **RENDERERS[name])


def actions(episodes):
    return [[t.action_ids for t in e.turns] for e in episodes]


def assert_same_episodes(got, expected):
    assert actions(got) == actions(expected)
    assert [e.info.get("stopped_by") for e in got] == [e.info.get("stopped_by") for e in expected]
    for a, b in zip(got, expected):
        for ta, tb in zip(a.turns, b.turns):
            assert ta.finish_reason == tb.finish_reason
            assert ta.logprobs == pytest.approx(tb.logprobs, abs=1e-4)


def assert_logprobs_are_the_models(model, episodes):
    for episode in episodes:
        seq = episode.to_sequence()
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([seq.token_ids])).logits[0].float(), dim=-1)
        for start, end in seq.turn_spans:
            recomputed = [logp[i - 1, seq.token_ids[i]].item() for i in range(start, end)]
            assert recomputed == pytest.approx(seq.logprobs[start:end], abs=1e-4)


PLAY = {
    "num_envs": 6,
    "seeds": [0, 0, 1, 1, 2, 3],  # two GRPO groups sharing a seed
    "max_new_tokens": 6,
    "max_context_tokens": CONTEXT["smollm2"],  # episodes stop at different turns
    "sampling": SamplingParams(max_new_tokens=6, temperature=1.0),
}


@pytest.mark.parametrize("template", list(RENDERERS))
def test_rollout_samples_what_the_reprefill_path_samples(tokenizer, model, template):
    renderer = renderer_for(tokenizer, template)
    cached = TransformersPolicy(model, tokenizer, seed=3, cache="kv")
    plain = TransformersPolicy(model, tokenizer, seed=3, cache="none")
    play = {**PLAY, "max_context_tokens": CONTEXT[template]}
    got = rollout(ENV_ID, cached, renderer, **play)
    expected = rollout(ENV_ID, plain, renderer, **play)
    assert_same_episodes(got, expected)
    assert_logprobs_are_the_models(model, got)
    # The batch covers what the tests promise: different end turns, stopped and cut-off turns, and
    # GRPO twins (same first prompt) that still sample differently.
    assert len({e.num_turns for e in got}) > 1
    reasons = {t.finish_reason for e in got for t in e.turns}
    assert reasons == {"stop", "length"}
    assert got[0].turns[0].prompt_ids == got[1].turns[0].prompt_ids
    assert actions(got)[0] != actions(got)[1]
    # Every token through the model about once: the shared prefix once, each turn only its new ids.
    stats = cached.stats()
    final = sum(len(e.to_sequence().token_ids) for e in got)
    assert stats["tokens_processed"] <= final
    assert plain.stats()["tokens_processed"] > 2 * final
    assert stats["shared_prefix_tokens"] > 0 and stats["reused_tokens"] > 0
    assert stats["released"] == PLAY["num_envs"] and stats["evictions"] == 0


def test_every_driver_plays_the_same_episodes(tokenizer, model):
    renderer = renderer_for(tokenizer, "smollm2")
    expected = rollout(ENV_ID, TransformersPolicy(model, tokenizer, seed=5, cache="none"), renderer, **PLAY)
    for cache in ["kv", "none"]:
        policy = TransformersPolicy(model, tokenizer, seed=5, cache=cache)
        assert_same_episodes(asyncio.run(arollout(ENV_ID, policy, renderer, **PLAY)), expected)
    # aplay_episode with a callback around the policy (greedy: its calls draw their own seeds).
    greedy = {**PLAY, "sampling": SamplingParams(max_new_tokens=6, temperature=0)}
    policy = TransformersPolicy(model, tokenizer, cache="kv")
    expected = rollout(ENV_ID, TransformersPolicy(model, tokenizer, cache="none"), renderer, **greedy)

    async def generate(prompt_ids, params):
        (generation,) = await policy.agenerate([prompt_ids], params)
        return generation

    generate.release = policy.release
    limits = {k: greedy[k] for k in ("max_new_tokens", "max_context_tokens", "sampling")}

    async def play_all():
        return await asyncio.gather(
            *(
                aplay_episode(gem_core.make(ENV_ID), generate, renderer, seed=s, **limits)
                for s in greedy["seeds"]
            )
        )

    got = asyncio.run(play_all())
    assert_same_episodes(got, expected)
    stats = policy.stats()
    assert stats["reused_tokens"] > 0 and stats["released"] == len(got)


def test_eviction_and_a_zero_budget_fall_back_to_prefill(tokenizer, model):
    renderer = renderer_for(tokenizer, "chatml")
    play = {**PLAY, "max_context_tokens": CONTEXT["chatml"]}
    expected = rollout(ENV_ID, TransformersPolicy(model, tokenizer, seed=7, cache="none"), renderer, **play)
    small = TransformersPolicy(model, tokenizer, seed=7, cache="kv", max_cache_tokens=900)
    assert_same_episodes(rollout(ENV_ID, small, renderer, **play), expected)
    assert small.stats()["evictions"] > 0
    none_kept = TransformersPolicy(model, tokenizer, seed=7, cache="kv", max_cache_tokens=0)
    assert_same_episodes(rollout(ENV_ID, none_kept, renderer, **play), expected)
    stats = none_kept.stats()
    assert stats["reused_tokens"] == 0 and stats["cached_tokens"] == 0


def test_a_dropped_policy_frees_its_cache_without_the_cyclic_gc(tokenizer, model):
    """TRL's rollout makes a policy per generation batch: its keys/values must go with it, not wait
    for a full garbage collection (they piled up by ~180 MB per step in a CPU training run)."""
    policy = TransformersPolicy(model, tokenizer, seed=7, cache="kv")
    gc.disable()
    try:
        rollout(ENV_ID, policy, renderer_for(tokenizer, "chatml"), **PLAY)
        engine, pool = weakref.ref(policy.rollout_engine()), weakref.ref(policy.rollout_engine()._pool)
        assert policy.stats()["cached_tokens"] > 0
        del policy
        assert engine() is None and pool() is None
    finally:
        gc.enable()


def test_a_stale_cache_is_never_used(tokenizer):
    model = stop_prone_model(tokenizer, seed=2)
    policy = TransformersPolicy(model, tokenizer, cache="kv")
    params = SamplingParams(max_new_tokens=5, temperature=0, stop_token_ids=())
    prompt = tokenizer.encode("The first turn of an episode.", add_special_tokens=False)
    (first,) = policy.generate([prompt], params)
    follow = prompt + first.token_ids + [5, 6]
    (again,) = TransformersPolicy(model, tokenizer, cache="kv").generate([prompt], params)
    assert again.token_ids == first.token_ids

    def check_fresh(generation):  # computed from scratch under the current weights
        assert generation.info["cached_tokens"] == 0
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([follow + generation.token_ids])).logits[0], dim=-1)
        expected = [logp[len(follow) - 1 + k, t].item() for k, t in enumerate(generation.token_ids)]
        assert generation.logprobs == pytest.approx(expected, abs=1e-4)

    # 1. An optimizer step (in-place updates) is detected without being told.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model(torch.tensor([prompt])).logits.logsumexp(-1).mean().backward()
    optimizer.step()
    check_fresh(policy.generate([follow], params)[0])
    assert policy.stats()["invalidations"] == 1
    # 2. A change the version counters cannot see (.data) needs mark_weights_updated / weights_updated.
    (cached,) = policy.generate([follow + [7]], params)
    assert cached.info["cached_tokens"] > 0  # the normal case: the cache is reused
    for bump in (lambda: mark_weights_updated(model), policy.weights_updated):
        with torch.no_grad():
            for p in model.parameters():
                p.data.mul_(0.9)
        bump()
        check_fresh(policy.generate([follow], params)[0])
    assert policy.stats()["invalidations"] == 3


def test_trainer_marks_weights_updated_after_each_optimizer_step(tokenizer):
    from gem_adapters.trl.trainer import WeightsVersionCallback

    model = stop_prone_model(tokenizer)
    WeightsVersionCallback().on_optimizer_step(None, None, None, model=model)
    assert TransformersPolicy(model, tokenizer, cache="kv").version == (0, 1)


def test_sequences_join_and_leave_the_decoding_batch(tokenizer, model):
    policy = TransformersPolicy(model, tokenizer, cache="kv")
    engine = policy.rollout_engine()
    params = SamplingParams(max_new_tokens=8, temperature=0, stop_token_ids=())
    short = SamplingParams(max_new_tokens=2, temperature=0, stop_token_ids=())
    long_prompt = tokenizer.encode(
        "A long history, with many turns already played before.", add_special_tokens=False
    )
    a = engine.request(long_prompt, params, 0)
    b = engine.request([42, 43], short, 1)
    engine.submit([a, b])
    assert engine.wait([a, b], any_done=True) == [b]  # b left after two steps; a still decodes
    c = engine.request([7, 8, 9], short, 2)  # a new turn joins a's batch
    engine.submit([c])
    engine.wait([a, c])
    assert policy.stats()["forward_calls"] == 8  # a's 8 steps carried b and c along
    plain = TransformersPolicy(model, tokenizer, cache="none")
    for request, p, prompt in [(a, params, long_prompt), (b, short, [42, 43]), (c, short, [7, 8, 9])]:
        (expected,) = plain.generate([prompt], p)
        assert request.generation.token_ids == expected.token_ids
        assert request.generation.logprobs == pytest.approx(expected.logprobs, abs=1e-4)


def test_a_shared_prefix_is_computed_once(tokenizer, model):
    policy = TransformersPolicy(model, tokenizer, cache="kv", max_step_tokens=16, max_batch_size=5)
    common = tokenizer.encode(
        "A system prompt and a worked game that every episode shows.", add_special_tokens=False
    )
    prompts = [common + [100 + i] + [200 + i] * i for i in range(8)]
    params = SamplingParams(max_new_tokens=3, temperature=0.8, seed=11)
    got = policy.generate(prompts, params)
    expected = TransformersPolicy(model, tokenizer, cache="none").generate(prompts, params)
    assert [g.token_ids for g in got] == [g.token_ids for g in expected]
    stats = policy.stats()
    # Two admissions (max_batch_size=5): the common prefix is computed once, then served from its row.
    assert stats["prefill_tokens"] + stats["decode_tokens"] - stats["generated_tokens"] + len(prompts) == (
        len(common) + sum(len(p) - len(common) for p in prompts)
    )
    assert all(g.info["cached_tokens"] >= len(common) for g in got)


def test_bad_input_is_refused_before_anything_runs(tokenizer, model):
    with pytest.raises(ValueError, match="cache"):
        TransformersPolicy(model, tokenizer, cache="paged")
    with pytest.raises(ValueError, match="max_cache_tokens"):
        TransformersPolicy(model, tokenizer, max_cache_tokens=-1)
    for cache in ["kv", "none"]:
        policy = TransformersPolicy(model, tokenizer, cache=cache, max_context_tokens=32)
        params = SamplingParams(max_new_tokens=4, temperature=0)
        good = [5, 6, 7]
        for bad, message in [([], "at least one token"), ([5, 10**7], "vocabulary"), ([5] * 40, "context")]:
            with pytest.raises(ValueError, match=message):
                policy.generate([good, bad], params)
        assert policy.stats().get("forward_calls", 0) == 0
        (ok,) = policy.generate([good], params)
        assert len(ok.token_ids) >= 1
    # A prompt near the end of the context: generation stops there.
    policy = TransformersPolicy(model, tokenizer, cache="kv", max_context_tokens=32)
    (cut,) = policy.generate([[5] * 30], SamplingParams(max_new_tokens=8, temperature=0, stop_token_ids=()))
    assert len(cut.token_ids) == 2 and cut.finish_reason == "length"


def test_concurrent_callers_share_the_engine(tokenizer, model):
    import threading

    policy = TransformersPolicy(model, tokenizer, cache="kv")
    params = SamplingParams(max_new_tokens=6, temperature=1.0, seed=4)
    prompts = [[10 + i, 20, 30 + i] for i in range(6)]
    results = {}

    def call(k):
        results[k] = policy.generate(prompts[k::2], params)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    plain = TransformersPolicy(model, tokenizer, cache="none")
    for k in range(2):
        assert [g.token_ids for g in results[k]] == [
            g.token_ids for g in plain.generate(prompts[k::2], params)
        ]


def test_weights_changing_mid_generation_recompute_the_running_sequences(tokenizer):
    model = stop_prone_model(tokenizer, seed=4)
    policy = TransformersPolicy(model, tokenizer, cache="kv")
    engine = policy.rollout_engine()
    params = SamplingParams(max_new_tokens=6, temperature=0, stop_token_ids=())
    prompt = tokenizer.encode("An episode generating while the trainer steps.", add_special_tokens=False)
    request = engine.request(prompt, params, 0)
    engine.submit([request])
    with engine._state:
        engine._step()
        engine._step()  # two ids generated with the old weights
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.8)  # in place: detected
    engine.wait([request])
    assert policy.stats()["invalidations"] == 1
    ids = request.generation.token_ids
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([prompt + ids])).logits[0], dim=-1)
    # The ids after the change come from the new weights over the whole sequence, recomputed.
    expected = [logp[len(prompt) - 1 + k, t].item() for k, t in enumerate(ids)][2:]
    assert request.generation.logprobs[2:] == pytest.approx(expected, abs=1e-4)
    assert ids[2:] == [int(logp[len(prompt) - 1 + k].argmax()) for k in range(2, len(ids))]


def test_generation_under_bf16_autocast(tokenizer):
    """Under autocast the rotary embeddings leave keys in fp32 while values are bf16 (as in a trainer that
    prepared the model for bf16): the pool keeps each in its own dtype, and greedy ids match re-prefill's."""
    from gem_adapters.runtime.models import tiny_causal_lm

    model = tiny_causal_lm(tokenizer, seed=5).eval()
    prompts = [[1, 5, 9, 14, 3], [1, 5, 9, 20], [7, 7]]
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        kv = TransformersPolicy(model, tokenizer, seed=0, cache="kv").generate(prompts, params)
        none = TransformersPolicy(model, tokenizer, seed=0, cache="none").generate(prompts, params)
    assert [g.token_ids for g in kv] == [g.token_ids for g in none]
    for a, b in zip(kv, none):
        assert a.logprobs == pytest.approx(b.logprobs, abs=0.05)


class SlowSteps(gem_core.Wrapper):
    """Env steps that take ``seconds`` for the seeds in ``slow`` (a tool call, a SQL query), recording when."""

    def __init__(self, env, slow, seconds, intervals):
        super().__init__(env)
        self.slow, self.seconds, self.intervals = slow, seconds, intervals
        self._seed = None

    def reset(self, seed=None, **kwargs):
        self._seed = seed
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action):
        if self._seed not in self.slow:
            return self.env.step(action)
        started = time.perf_counter()
        time.sleep(self.seconds)
        result = self.env.step(action)
        self.intervals.append((started, time.perf_counter()))
        return result


def play_with_slow_envs(model, tokenizer, env_ids, seeds, sampling, slow=(), intervals=None):
    """One rollout over a vector env whose envs with a seed in ``slow`` take 50 ms a step."""
    vec = gem_core.make_vec(
        env_ids, wrappers=[lambda env: SlowSteps(env, set(slow), 0.05, intervals)], autoreset_mode="disabled"
    )
    try:
        policy = TransformersPolicy(model, tokenizer, seed=7, cache="kv")
        return rollout(
            vec, policy, renderer_for(tokenizer, "smollm2"), seeds=seeds, max_new_tokens=6, sampling=sampling
        )
    finally:
        vec.close()


def test_each_episode_gets_what_it_gets_alone(tokenizer):
    """Greedy, fp32: an episode's ids and logprobs do not depend on what else shares the batch or how slow
    the other envs are."""
    from gem_adapters.runtime.models import tiny_causal_lm

    model = tiny_causal_lm(tokenizer, seed=2)
    env_ids = [ENV_ID, "game:Mastermind-v1-easy"] * 3  # episodes of different lengths
    seeds = [0, 1, 2, 3, 4, 5]
    greedy = SamplingParams(max_new_tokens=6, temperature=0)
    together = play_with_slow_envs(model, tokenizer, env_ids, seeds, greedy, slow={1, 4}, intervals=[])
    alone = [play_with_slow_envs(model, tokenizer, [e], [s], greedy)[0] for e, s in zip(env_ids, seeds)]
    assert_same_episodes(together, alone)
    assert len({e.num_turns for e in together}) > 1


def test_slow_env_steps_overlap_generation_and_change_no_episode(tokenizer, model, monkeypatch):
    """While a slow env steps (a tool call, a SQL query), the other episodes go on decoding, and the
    schedule changes nothing that is sampled (per-request random streams)."""
    from gem_adapters.policies import kv_engine

    forwards = []
    forward = kv_engine.KVEngine._forward

    def recorded(engine, rows):
        forwards.append(time.perf_counter())
        return forward(engine, rows)

    monkeypatch.setattr(kv_engine.KVEngine, "_forward", recorded)
    seeds = list(range(8))
    sampled = SamplingParams(max_new_tokens=6, temperature=1.0, seed=11)
    intervals = []
    slow = play_with_slow_envs(
        model, tokenizer, [ENV_ID] * 8, seeds, sampled, slow={1, 4}, intervals=intervals
    )
    fast = play_with_slow_envs(model, tokenizer, [ENV_ID] * 8, seeds, sampled)
    assert_same_episodes(slow, fast)
    assert len({len(t.action_ids) for e in slow for t in e.turns}) > 1  # turns end at different steps
    assert intervals, "the slow envs were stepped"
    overlapped = sum(any(start < t < end for t in forwards) for start, end in intervals)
    assert overlapped > 0, "no model step ran while a slow env was stepping"


def test_a_policy_built_under_bf16_autocast_keeps_the_engine(tokenizer):
    """A trainer's rollout builds its policy under bf16 autocast, around a forward that accelerate's mixed
    precision wraps in autocast too. The engine's check must keep SmolLM2 on the engine in both, whose bf16
    paths differ by more than the fp32 tolerance: it had sent every such policy to cache='none' (unless the
    model was checked before, outside)."""
    import warnings

    from gem_adapters.runtime.models import load_model

    for wrapped_forward in (False, True):
        model = load_model("smollm2")
        if wrapped_forward:
            model.forward = torch.autocast("cpu", dtype=torch.bfloat16)(model.forward)
        with torch.autocast("cpu", dtype=torch.bfloat16), warnings.catch_warnings():
            warnings.simplefilter("error")  # falling back to cache='none' warns
            policy = TransformersPolicy(model, tokenizer, seed=0)
        assert policy.cache == "kv"


def test_bf16s_wider_tolerance_still_sends_a_wrong_engine_to_plain_forwards(tokenizer):
    """The engine check's bf16 tolerance (a 16-bit forward) admits rounding, not an error: logits that the
    engine's path and a plain forward see differently by a nat are sent to cache='none'."""
    from gem_adapters.runtime.models import load_model

    model = load_model("smollm2")
    bf16_forward = torch.autocast("cpu", dtype=torch.bfloat16)(model.forward)
    noise = torch.randn(model.config.vocab_size, generator=torch.Generator().manual_seed(0))

    def wrong_forward(*args, **kwargs):
        out = bf16_forward(*args, **kwargs)
        if out.logits.shape[1] > 1:  # an error in whole-sequence passes only, not in one-token decoding
            out.logits = out.logits + noise.to(out.logits.dtype)
        return out

    model.forward = wrong_forward
    with pytest.warns(UserWarning, match="falls back to cache='none'"):
        policy = TransformersPolicy(model, tokenizer, seed=0)
    assert policy.cache == "none"

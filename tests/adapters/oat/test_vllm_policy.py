"""An Oat actor's vLLM engine as a ``Policy``: the sampling settings and the reading of its outputs.

vLLM does not install on the CPU CI, so ``generation_from_vllm`` is checked here on plain objects with
the attribute names of vLLM's ``CompletionOutput`` (``token_ids``, ``logprobs`` as one
``{token_id: Logprob}`` per position, ``finish_reason``) and of its ``Logprob`` (``logprob``). The
test at the end runs against vLLM's own classes wherever vLLM imports.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gem_adapters.oat import OatVLLMPolicy, generation_from_vllm, vllm_sampling_kwargs
from gem_adapters.policies import SamplingParams


def completion(token_ids, logprobs, finish_reason):
    return SimpleNamespace(token_ids=token_ids, logprobs=logprobs, finish_reason=finish_reason)


def lp(value):
    return SimpleNamespace(logprob=value)


def test_sampling_settings_map_onto_vllm_arguments():
    kwargs = vllm_sampling_kwargs(
        SamplingParams(12, temperature=0.7, top_p=0.9, stop_token_ids=(2, 7), seed=5)
    )
    assert kwargs == {
        "n": 1,
        "max_tokens": 12,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": -1,  # our 0 (off) is vLLM's -1
        "stop_token_ids": [2, 7],
        "seed": 5,
        "logprobs": 1,
    }
    assert vllm_sampling_kwargs(SamplingParams(3, top_k=40))["top_k"] == 40
    assert vllm_sampling_kwargs(SamplingParams(3))["stop_token_ids"] == []


def test_logprob_of_the_sampled_token_not_of_the_top_one():
    # logprobs=1 returns the top-1 token and the sampled one; they differ where sampling was not greedy.
    out = completion([11, 12, 2], [{11: lp(-0.1)}, {5: lp(-0.2), 12: lp(-2.5)}, {2: lp(-0.3)}], "stop")
    generation = generation_from_vllm(out)
    assert generation.token_ids == [11, 12, 2] and generation.logprobs == [-0.1, -2.5, -0.3]
    assert generation.finish_reason == "stop"


@pytest.mark.parametrize(
    ("reason", "expected"), [("stop", "stop"), ("length", "length"), ("abort", "length")]
)
def test_finish_reasons(reason, expected):
    assert generation_from_vllm(completion([4], [{4: lp(-1.0)}], reason)).finish_reason == expected


def test_missing_or_misaligned_logprobs_are_refused():
    with pytest.raises(ValueError, match="no logprobs"):
        generation_from_vllm(completion([4], None, "stop"))
    with pytest.raises(ValueError, match="1 logprob entries for 2 tokens"):
        generation_from_vllm(completion([4, 5], [{4: lp(-1.0)}], "length"))


def test_no_prompts_no_call():
    def generate(prompts, params):
        raise AssertionError("an empty batch must not reach vLLM")

    assert OatVLLMPolicy(generate).generate([], SamplingParams(4)) == []


def test_against_vllms_own_classes():
    vllm = pytest.importorskip("vllm")
    from vllm.outputs import CompletionOutput

    try:
        from vllm.logprobs import Logprob
    except ImportError:  # vLLM 0.8.x, the version oat-llm 0.2.4 pins
        from vllm.sequence import Logprob

    vllm.SamplingParams(**vllm_sampling_kwargs(SamplingParams(8, top_k=0, stop_token_ids=(2,), seed=1)))
    out = CompletionOutput(
        index=0,
        text="",
        token_ids=[11, 2],
        cumulative_logprob=-1.0,
        logprobs=[{11: Logprob(-0.5)}, {3: Logprob(-0.1), 2: Logprob(-0.9)}],
        finish_reason="stop",
    )
    generation = generation_from_vllm(out)
    assert generation.logprobs == [-0.5, -0.9] and generation.finish_reason == "stop"

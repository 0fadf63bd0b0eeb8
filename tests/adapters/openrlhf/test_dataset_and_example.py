"""The prompt JSONL read by OpenRLHF's own dataset code, and examples/train_openrlhf.py's launch
parsed and checked by OpenRLHF's own CLI (the launch itself needs a GPU with vLLM): the user's OpenRLHF
flags replace the example's values, a bad flag stops it before anything is written, ``--dry-run``
writes tasks that make their envs."""

from __future__ import annotations

import importlib.util
import json
import shlex
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
from tests import script_runs

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


def test_example_launch_parses_with_openrlhf_cli(tmp_path, tokenizer):
    example = load_example()
    gem = ["--gem.train_tasks", "5", "--gem.eval_tasks", "2", "--gem.output_dir", str(tmp_path)]
    user = ["--data.max_len", "1024", "--logger.logging_steps=2", "--rollout.batch_size", "8"]
    args, rest = example.parse_args([*gem, "--gem.max_turns", "3", *user])
    assert rest == user and args.max_turns == 3 and args.estimator == "rebn"
    paths = example.write_inputs(args)
    flags = example.openrlhf_flags(paths, [*rest, f"--actor.model_name_or_path={tmp_path / 'model'}"])
    cli = parse_cli(flags)  # OpenRLHF's own __main__ block: its parser and every check before train()
    assert cli.train.colocate_all and cli.vllm.enable_sleep and cli.ds.enable_sleep
    assert (
        cli.actor.num_nodes * cli.actor.num_gpus_per_node
        == cli.vllm.num_engines * cli.vllm.tensor_parallel_size
        == 1
    )
    assert cli.algo.advantage.estimator == "reinforce" and cli.algo.advantage.gamma == 0.9
    assert cli.critic.model_name_or_path is None and cli.algo.kl.init_coef == 0  # no critic, no reference
    assert cli.reward.remote_url == ["agent"] and cli.actor.model_name_or_path == str(tmp_path / "model")
    # the user's flags replace the example's values, each setting named once
    assert (cli.data.max_len, cli.logger.logging_steps, cli.rollout.batch_size) == (1024, 2, 8)
    assert "--data.max_len=2048" not in flags and "--logger.logging_steps=1" not in flags
    assert sum(f.startswith("--actor.model_name_or_path") for f in flags) == 1
    assert cli.rollout.max_new_tokens == 96  # the example's value where the user gives none
    assert cli.train.batch_size == 8 * cli.rollout.n_samples_per_prompt == 32  # follows the rollout batch
    assert (
        parse_cli(example.openrlhf_flags(paths, [*rest, "--train.batch_size", "16"])).train.batch_size == 16
    )
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
    stock = example.launch_env(example.parse_args(["--gem.estimator", "openrlhf"])[0])
    assert "GEM_OPENRLHF_ESTIMATOR" not in stock and "RAY_RUNTIME_ENV_HOOK" not in stock


def test_example_dry_run_writes_the_tasks_and_prints_the_command(tmp_path, capsys):
    example = load_example()
    ids = ["game:GuessTheNumber-v1-easy", "game:Mastermind-v1-easy"]
    argv = ["--gem.env_ids", *ids, "--gem.train_tasks", "3", "--gem.eval_tasks", "2"]
    argv += ["--gem.eval_first_seed", "50", "--gem.system_prompt", "", "--gem.estimator", "grpo"]
    model = str(tmp_path / "model")
    argv += ["--gem.output_dir", str(tmp_path), "--actor.model_name_or_path", model, "--dry-run"]
    assert example.main([*argv, "--rollout.max_new_tokens", "64"]) == 0
    words = shlex.split(capsys.readouterr().out.strip().splitlines()[-1])
    hooks, (python, dash_m, module), flags = words[:2], words[2:5], words[5:]
    assert hooks == [
        "GEM_OPENRLHF_ESTIMATOR=grpo",
        "RAY_RUNTIME_ENV_HOOK=gem_adapters.openrlhf.hook.runtime_env_hook",
    ]
    assert (python, dash_m, module) == (sys.executable, "-m", "openrlhf.cli.train_ppo_ray")
    cli = parse_cli(flags)
    assert cli.rollout.max_new_tokens == 64 and cli.actor.model_name_or_path == model
    # the JSONL rows hold tasks whose env ids and seeds make the envs that wrote their prompts
    for path, seeds in ((cli.data.prompt_dataset, [0, 1, 2]), (cli.eval.dataset, [50, 51])):
        rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
        tasks = [Task.from_label(row[cli.data.label_key]) for row in rows]
        assert [(t.env_id, t.seed) for t in tasks] == [(ids[i % 2], s) for i, s in enumerate(seeds)]
        assert all(t.system_prompt is None and t.max_turns == 8 for t in tasks)
        for row, task in zip(rows, tasks):
            assert row[cli.data.input_key] == str(gem_core.make(task.env_id).reset(seed=task.seed)[0])


def test_example_refuses_a_bad_flag_before_writing_anything(tmp_path, capsys):
    example = load_example()
    out = tmp_path / "run"
    for bad in (
        ["--rollout.max_new_token", "64"],  # a typo of an OpenRLHF flag
        ["--rollout.max_new", "64"],  # an abbreviation (OpenRLHF would expand it)
        ["--data.max_len", "long"],  # a value OpenRLHF's parser refuses
        ["--gem.max_turn", "3"],  # a typo of a GEM flag
        ["--gem.estimator", "ppo"],  # not an estimator
        ["--algo.advantage.estimator", "gae"],  # a critic, while a GEM estimator replaces the advantages
    ):
        with pytest.raises(SystemExit) as exit_:
            example.main(["--gem.output_dir", str(out), "--dry-run", *bad])
        assert exit_.value.code == 2, bad
        assert bad[0] in capsys.readouterr().err
        assert not out.exists()
    stock = ["--gem.estimator", "openrlhf", "--algo.advantage.estimator", "gae"]  # OpenRLHF's own: allowed
    assert (
        example.main(["--gem.output_dir", str(out), "--dry-run", *stock, "--actor.model_name_or_path=m"]) == 0
    )
    assert "--algo.advantage.estimator gae" in capsys.readouterr().out


def test_example_help_lists_both_flag_sets_and_imports_no_trainer():
    heavy = ("torch", "ray", "deepspeed", "vllm", "transformers", "openrlhf.cli.train_ppo_ray")
    done = script_runs.run_as_script(EXAMPLE, ["--help"], heavy)
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stderr[-2000:]
    assert "--gem.env_ids" in done.stdout and "--dry-run" in done.stdout
    assert "--actor.model_name_or_path=smollm2" in done.stdout  # the example's values of OpenRLHF flags
    assert "--vllm.gpu_memory_utilization VLLM.GPU_MEMORY_UTILIZATION" in done.stdout  # OpenRLHF's list


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

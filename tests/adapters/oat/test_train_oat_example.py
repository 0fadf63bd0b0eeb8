"""``examples/train_oat.py`` parses its command line as Oat's own scripts do: tyro over the real ``GEMArgs``
(Oat's real ``PPOArgs`` plus GEM's fields), Oat's ``default_args_validation``, then GEM's ``validate_args``.

The example and ``gem_adapters.oat.program`` are imported for real, with empty stand-ins for the GPU-only
packages Oat imports at module top (``oat_stand_ins.py``); Oat's validation counts CUDA devices, so the
tests that run it pretend there are 8.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import shlex
import subprocess
import sys

import pytest

pytest.importorskip("oat")
pytest.importorskip("tyro")
pytest.importorskip("torch")  # oat.args imports it
# tyro on Oat's own ``str = None`` fields (``ref_pretrain``, ``wb_org``, ...): Oat's, and harmless.
pytestmark = pytest.mark.filterwarnings("ignore:The field `.*` is annotated with type:UserWarning")

import gem_core  # noqa: E402
from tests.adapters.oat.oat_stand_ins import (  # noqa: E402
    EXAMPLE,
    GPU_STACK,
    ROOT,
    StandIn,
    StandInFinder,
    load_example,
)

GEM_FIELDS = {
    "env_id",
    "num_envs",
    "max_turns",
    "system_prompt",
    "advantage_estimator",
    "rebn_eps",
    "eval_episodes",
    "eval_seed",
    "dump_episodes",
}
# Oat's fields whose default GEMArgs changes (each with its reason in program.py).
CHANGED = {"algo", "pretrain", "gamma", "num_samples", "oracle", "prompt_data"}


@pytest.fixture(scope="module")
def example():
    return load_example()


@pytest.fixture(scope="module")
def ppo_args(example):
    (base,) = example.GEMArgs.__bases__
    assert (base.__module__, base.__name__) == ("oat.algorithms.ppo", "PPOArgs")
    return base


@pytest.fixture
def parse(example, monkeypatch):
    """``parse(*argv)``: what the example's ``parse_args`` makes of ``train_oat.py *argv`` on 8 GPUs."""
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)

    def run(*argv: str):
        monkeypatch.setattr(sys, "argv", ["train_oat.py", *argv])
        return example.parse_args()

    return run


def test_the_stand_ins_are_gone_once_the_example_is_loaded(example):
    assert example.GEMArgs.__module__ == "gem_adapters.oat.program"
    assert not any(isinstance(finder, StandInFinder) for finder in sys.meta_path)
    assert not any(isinstance(sys.modules.get(name), StandIn) for name in [*GPU_STACK, "pyarrow.plasma"])


def docstring_flags() -> list[str]:
    docstring = ast.get_docstring(ast.parse(EXAMPLE.read_text()))
    start = docstring.index("python examples/train_oat.py")
    command = docstring[start:].replace("\\\n", " ").splitlines()[0]
    return shlex.split(command)[2:]


def flag_values(flags: list[str]) -> dict[str, object]:
    """``--name value`` / ``--name`` (a bool) pairs, values as Python literals where they are ones."""
    values: dict[str, object] = {}
    for i, flag in enumerate(flags):
        if not flag.startswith("--"):
            continue
        name = flag[2:].replace("-", "_")
        if i + 1 == len(flags) or flags[i + 1].startswith("--"):
            values[name] = True
            continue
        try:
            values[name] = ast.literal_eval(flags[i + 1])
        except (ValueError, SyntaxError):
            values[name] = flags[i + 1]
    return values


def test_the_fields_are_oats_plus_gems_and_the_defaults_oats_but_where_gem_says(
    example, ppo_args, monkeypatch
):
    from oat.args import get_default_args

    own = {f.name for f in dataclasses.fields(example.GEMArgs)} - {
        f.name for f in dataclasses.fields(ppo_args)
    }
    assert own == GEM_FIELDS
    monkeypatch.setattr(sys, "argv", ["train_oat.py"])
    parsed = get_default_args(example.GEMArgs)  # tyro, as Oat's scripts call it
    oat = ppo_args()
    differ = {f.name for f in dataclasses.fields(ppo_args) if getattr(parsed, f.name) != getattr(oat, f.name)}
    assert differ == CHANGED
    assert (parsed.algo, parsed.num_samples, parsed.oracle, parsed.prompt_data) == ("PPO", 1, "", "")
    assert parsed.env_id == "game:GuessTheNumber-v1-easy" and parsed.max_turns is None


def test_the_docstring_command_reaches_the_args_and_sets_only_what_differs_from_oat(parse, ppo_args):
    values = flag_values(docstring_flags())
    args = parse(*docstring_flags())
    oat = ppo_args()
    for name, value in values.items():
        assert getattr(args, name) == value, name
        if name not in GEM_FIELDS:
            assert getattr(oat, name) != value, f"--{name} repeats Oat's default"
    assert gem_core.spec(args.env_id).id == values["env_id"]
    assert args.algo.name == "PPO" and args.ref_pretrain == args.pretrain  # Oat's validation ran


def test_a_gem_flag_and_an_oat_flag_reach_the_args(parse):
    args = parse(
        "--env-id", "game:Sudoku-v0", "--max-turns", "3", "--system-prompt", "Think first.",
        "--num-envs", "4", "--no-dump-episodes", "--advantage-estimator", "reinforce",
        "--learning_rate", "3e-6", "--collocate", "--gpus", "4", "--no-gradient-checkpointing",
    )  # fmt: skip
    assert (args.env_id, args.max_turns, args.system_prompt, args.num_envs) == (
        "game:Sudoku-v0",
        3,
        "Think first.",
        4,
    )
    assert not args.dump_episodes and args.advantage_estimator == "reinforce"
    assert (args.learning_rate, args.collocate, args.gpus, args.gradient_checkpointing) == (
        3e-6,
        True,
        4,
        False,
    )
    assert parse("--max-turns", "None").max_turns is None


@pytest.mark.parametrize(
    ("argv", "error", "message"),
    [
        (["--env-id", "game:Nope-v0"], ValueError, "--env-id: No env registered as 'game:Nope-v0'"),
        (["--max-turns", "0"], ValueError, "--max-turns must be at least 1"),
        (["--num-envs", "0"], ValueError, "--num-envs must be at least 1"),
        (["--whiten-adv"], ValueError, "--whiten-adv must be off"),
        (["--critic-type", "ppo"], ValueError, "trains without a critic"),
        (["--advantage-estimator", "gae"], ValueError, "needs a critic's per-turn values"),
        (["--gpus", "16"], AssertionError, "8 GPUs available, but 16 required"),  # Oat's own validation
    ],
)
def test_a_bad_setting_fails_validation_with_a_clear_error(parse, argv, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(*argv)


@pytest.mark.parametrize("argv", [["--algo", "DPO"], ["--max-turns", "three"], ["--env_idd", "x"]])
def test_tyro_refuses_what_is_not_a_flag_or_a_value_of_its_type(parse, argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit:
        parse(*argv)
    assert exit.value.code == 2
    assert argv[0].lstrip("-").replace("-", "_") in capsys.readouterr().err.replace("-", "_")


def test_help_runs_and_lists_the_gem_fields_with_their_help():
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "tests.adapters.oat.oat_stand_ins", "--help"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "usage: examples/train_oat.py" in out
    for help_text in [
        "--env-id STR",
        "The gem_core env every episode plays",
        "--max-turns {None}|INT",
        "Actions per episode; None: the env's own limit.",
        "--system-prompt {None}|STR",
        "A system message before each episode's first observation",
        "--num-envs INT",
        "Episodes each actor plays at once",
        "--advantage-estimator STR",
        "--dump-episodes, --no-dump-episodes",
        "--gamma FLOAT",
        "ReBN's returns",
        "Samples per prompt: the actor plays episodes",  # not Oat's "Evaluation configurations."
        "--learning-rate FLOAT",  # Oat's own flags, Oat's help
        "Number of GPUs to run in this group.",
    ]:
        assert help_text in out, help_text

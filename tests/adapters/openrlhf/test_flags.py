"""``gem_adapters.openrlhf.flags``: OpenRLHF's own ``train_ppo_ray`` parser, built from its source without
importing the module, and defaults laid under the user's flags."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest

from gem_adapters.openrlhf.flags import (
    Flag,
    as_argv,
    command_args,
    merge_flags,
    parse_flags,
    train_ppo_ray_parser,
)


@pytest.fixture(scope="module")
def parser():
    if importlib.util.find_spec("openrlhf") is None:
        pytest.skip("OpenRLHF is not installed")
    return train_ppo_ray_parser()


def test_the_parser_is_built_from_the_main_block_without_running_the_module(tmp_path):
    source = tmp_path / "train_ppo_ray.py"
    source.write_text(
        textwrap.dedent(
            """
            import argparse
            import not_installed_gpu_package  # the module itself cannot be imported here
            from datetime import datetime

            def train(args):
                raise AssertionError("never runs")

            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("--rollout.batch_size", type=int, default=1024)
                for prefix in ("actor", "critic"):
                    parser.add_argument(f"--{prefix}.adam.lr", type=float, default=1e-6)
                parser.add_argument("--logger.run_name", default="ppo_%s" % datetime.now().strftime("%m"))
                args = parser.parse_args()
                train(args)
            """
        )
    )
    built = train_ppo_ray_parser(source)
    flags = parse_flags(["--rollout.batch_size", "8", "--critic.adam.lr=0.5"], built)
    assert {dest: flag.value for dest, flag in flags.items()} == {
        "rollout.batch_size": 8,
        "critic.adam.lr": 0.5,
    }
    source.write_text("import argparse\nparser = argparse.ArgumentParser()\n")
    with pytest.raises(RuntimeError, match="__main__"):
        train_ppo_ray_parser(source)


def test_openrlhf_parser_knows_its_flags_and_refuses_the_rest(parser, capsys):
    flags = parse_flags(
        ["--data.max_len=4096", "--reward.clip_range", "-5", "5", "--train.colocate_all", "--"], parser
    )
    assert flags == {
        "data.max_len": Flag("--data.max_len", ("--data.max_len=4096",), 4096),
        "reward.clip_range": Flag("--reward.clip_range", ("--reward.clip_range", "-5", "5"), [-5.0, 5.0]),
        "train.colocate_all": Flag("--train.colocate_all", ("--train.colocate_all",), True),
    }
    for bad in (
        ["--data.max_lenn", "1"],  # unknown
        ["--data.max", "1"],  # an abbreviation: argparse (and OpenRLHF) would expand it
        ["--ds.param_dtype", "fp32"],  # not one of its choices
        ["--data.max_len", "1", "2"],  # a stray word
        ["stray"],
        ["--help"],
    ):
        with pytest.raises(SystemExit) as exit_:
            parse_flags(bad, parser)
        assert exit_.value.code == 2, bad
        assert "error:" in capsys.readouterr().err


def test_the_users_flags_replace_the_defaults_of_the_same_setting(parser):
    defaults = {
        "--data.max_len": 2048,
        "--train.colocate_all": True,
        "--vllm.enable_sleep": False,  # left out
        "--actor.muon.nesterov": True,
        "--actor.adam.betas": (0.9, 0.99),
        "--eval.dataset": None,  # left out
    }
    assert as_argv(defaults) == [
        "--data.max_len=2048",
        "--train.colocate_all",
        "--actor.muon.nesterov",
        "--actor.adam.betas",
        "0.9",
        "0.99",
    ]
    user = ["--data.max_len", "512", "--actor.muon.no_nesterov", "--rollout.top_p=0.5", "--data.max_len=1024"]
    merged = merge_flags(defaults, user, parser)
    assert command_args(merged) == [
        "--train.colocate_all",
        "--actor.adam.betas",
        "0.9",
        "0.99",
        "--actor.muon.no_nesterov",  # another option of the same setting replaces the default
        "--rollout.top_p=0.5",
        "--data.max_len=1024",  # given twice: the last, as argparse reads it
    ]
    values = vars(parser.parse_args(command_args(merged)))
    assert (values["data.max_len"], values["actor.muon.nesterov"], values["train.colocate_all"]) == (
        1024,
        False,
        True,
    )
    with pytest.raises(SystemExit):
        merge_flags({"--data.maxlen": 1}, [], parser)  # a launcher's own typo fails too

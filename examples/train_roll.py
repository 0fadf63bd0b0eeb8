"""Train an LLM agent on a gem_core game with ROLL's agentic pipeline (one GPU): ReBN or GRPO.

The settings are ROLL's own: ``examples/roll/agentic_gem_rebn.yaml`` (the default) and
``agentic_gem_grpo.yaml`` are ROLL ``AgenticConfig`` YAMLs, and any of their keys is set on the command
line as a Hydra override (``+key=value`` adds a ROLL key the YAML leaves at ROLL's default)::

    python examples/train_roll.py --roll-dir ~/ROLL pretrain=Qwen/Qwen2.5-1.5B-Instruct rollout_batch_size=32 \\
        custom_envs.GemCoreGame.env_type=gem_core/game:Sudoku-v1-easy max_actions_per_traj=15

What it does, top to bottom:
  1. composes the YAML with the overrides (Hydra, struct mode: an unknown key fails here) and checks that
     every gem_core env id of ``custom_envs.<tag>.env_type`` (``gem_core/<id>``) is registered;
  2. writes the composed config, every interpolation resolved, to ``<output_dir>/roll_config/`` (ROLL's
     launcher takes no overrides);
  3. launches ``python examples/start_agentic_pipeline.py --config_path ... --config_name ...`` in the
     ROLL checkout ``--roll-dir`` (Hydra; Ray; vLLM rollout; Megatron training).

The estimator is the YAML: ``agentic_gem_rebn`` is ReBN as ROLL's ``step_reinforce`` (one sample per turn,
per-turn discounted returns with ``step_reward_gamma`` normalised over the batch), ``--config-name
agentic_gem_grpo`` is GRPO (one sample per episode, scores normalised within groups of
``train_env_manager.group_size`` episodes that share a start). ROLL computes advantages with its own
estimators (a hard-coded chain in ``roll/pipeline/agentic/utils.py``, no registry to plug into), so these
two are the ones whose ROLL configuration matches ``gem_adapters.algorithms.advantages``' estimator of
the same name (``docs/custom-estimators.md`` has the table); a custom estimator does not reach ROLL.

The envs reach ROLL's env workers through the config: ``env_manager_cls:
gem_adapters.roll.env_managers.<Manager>`` is imported in each worker, registers gem_core's envs with
the reference GEM registry (``gem.make``) and is ROLL's own manager, or ``StepChatEnvManager`` (ReBN's:
ROLL's ``StepEnvManager`` prompting with the episode so far as a chat, as the other frameworks do;
``custom_envs.GemCoreGame.history_length=1`` prompts with the current observation alone). ``env_type``
is the gem_core id with the ``gem_core/`` prefix, ``env_config`` the env's keyword arguments,
``agent_system_template`` the system prompt. The launch puts ROLL and this checkout on ``PYTHONPATH``.

ROLL is not on PyPI: clone github.com/alibaba/ROLL, install its requirements for your CUDA (e.g.
``requirements_torch280_vllm.txt``) and gem-core with ``pip install -e .`` into the same environment.
ROLL pins gem-llm 0.0.4; gem_core only needs ``gem.make``/``gem.register``, the same in 0.0.4 and 0.1.0.
``pretrain`` takes a Hugging Face id, a local path or ``smollm2`` (the offline copy); ``output_dir`` is
made absolute. ``--dry-run`` writes the config and prints the command without launching (no GPU, no
ROLL needed); ``--config-path`` and ``--config-name`` choose another YAML.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

import gem_core
from gem_adapters.roll import NAMESPACE
from gem_adapters.runtime.models import resolve

CONFIG_PATH = Path(__file__).resolve().parent / "roll"
CONFIG_NAME = "agentic_gem_rebn"
LAUNCHER = "examples/start_agentic_pipeline.py"  # in the ROLL checkout


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``overrides`` (Hydra's ``key=value``), ``roll_dir``, ``config_path``, ``config_name``, ``dry_run``."""
    parser = argparse.ArgumentParser(
        prog="train_roll.py",
        description=__doc__.split("\n\n")[0],
        epilog="Every key is ROLL's (AgenticConfig; see examples/roll/*.yaml), e.g. pretrain=smollm2 "
        "rollout_batch_size=32 max_steps=50 step_reward_gamma=0.8 output_dir=runs/roll "
        "custom_envs.GemCoreGame.env_type=gem_core/game:Sudoku-v1-easy "
        "custom_envs.GemCoreGame.history_length=1.",
        allow_abbrev=False,
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of ROLL keys, e.g. max_steps=50.")
    parser.add_argument(
        "--roll-dir",
        "--roll_dir",
        default="ROLL",
        help="A checkout of github.com/alibaba/ROLL (default: %(default)s; not needed with --dry-run).",
    )
    parser.add_argument(
        "--config-path", "--config_path", default=str(CONFIG_PATH), help="(default: %(default)s)"
    )
    parser.add_argument(
        "--config-name",
        "--config_name",
        default=CONFIG_NAME,
        help="agentic_gem_rebn (ReBN as step_reinforce) or agentic_gem_grpo (default: %(default)s)",
    )
    parser.add_argument(
        "--dry-run", "--dry_run", action="store_true", help="Write the config and print the command only."
    )
    return parser.parse_intermixed_args(sys.argv[1:] if argv is None else argv)


def compose_config(config_path: str, config_name: str, overrides: list[str]):
    """The YAML with the overrides, as Hydra composes it (struct mode: a key the YAML lacks needs ``+``);
    exits with Hydra's message on a bad override."""
    try:
        with initialize_config_dir(config_dir=str(Path(config_path).resolve()), version_base=None):
            return compose(config_name=config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        cause = f"\n{exc.__cause__}" if exc.__cause__ else ""
        print(f"train_roll.py: error: {exc}{cause}", file=sys.stderr)
        raise SystemExit(2) from None


def check_env_ids(config) -> None:
    """Exits naming close matches when a ``gem_core/<id>`` env type of ``custom_envs`` is unknown."""
    for tag, env in config.custom_envs.items():
        env_type = str(env.get("env_type", ""))
        if env_type.startswith(NAMESPACE):
            try:
                gem_core.spec(env_type[len(NAMESPACE) :])
            except KeyError as exc:
                message = str(exc).strip("\"'")
                print(f"train_roll.py: error: custom_envs.{tag}.env_type: {message}", file=sys.stderr)
                raise SystemExit(2) from None


def write_config(config, config_name: str) -> Path:
    """``<output_dir>/roll_config/<config_name>.yaml``: ``config`` with ``pretrain`` resolved (``smollm2``:
    the offline copy) and ``output_dir`` made absolute, every interpolation resolved."""
    OmegaConf.update(config, "pretrain", resolve(str(config.pretrain)))
    OmegaConf.update(config, "output_dir", str(Path(config.output_dir).expanduser().resolve()))
    path = Path(config.output_dir) / "roll_config" / f"{config_name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(config, path, resolve=True)
    return path


def launch_command(config: Path, roll_dir: Path) -> list[str]:
    """ROLL's launcher; Hydra's ``initialize`` wants the config folder relative to the launcher's folder."""
    config_path = os.path.relpath(config.parent, roll_dir / "examples")
    return [sys.executable, LAUNCHER, "--config_path", config_path, "--config_name", config.stem]


def launch_env(roll_dir: Path) -> dict[str, str]:
    """This process's environment with ROLL and this checkout first on ``PYTHONPATH`` (the env workers
    import ``gem_adapters`` from here)."""
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(roll_dir), repo, env.get("PYTHONPATH")) if p)
    return env


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = compose_config(args.config_path, args.config_name, args.overrides)
    check_env_ids(config)
    path = write_config(config, args.config_name)
    roll_dir = Path(args.roll_dir).expanduser().resolve()
    command = launch_command(path, roll_dir)
    print(f"config: {path}\ncd {shlex.quote(str(roll_dir))} && {shlex.join(command)}", flush=True)
    if args.dry_run:
        return 0
    if not (roll_dir / LAUNCHER).is_file():
        raise SystemExit(f"--roll-dir {roll_dir} is not a ROLL checkout (no {LAUNCHER})")
    return subprocess.call(command, cwd=roll_dir, env=launch_env(roll_dir))


if __name__ == "__main__":
    sys.exit(main())

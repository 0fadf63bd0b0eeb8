"""ROLL's real agentic pipeline on CPU for a few steps: a tiny random Llama, a gem_core game, ``hf_infer``.

    python -m benchmarks.roll_cpu.run_pipeline OUT_DIR [--steps 2] [--env-id game:GuessTheNumber-v1-easy]

(``scripts/roll_cpu_attempt.sh`` runs it in ROLL's environment.) Writes a random 2-layer Llama (hidden 128,
4 heads of 32) over the SmolLM2 tokenizer to ``OUT_DIR/model`` and ``agentic_gem_cpu.yaml`` (beside this
file) with the run's values to ``OUT_DIR``, then runs ROLL's ``AgenticPipeline`` with
``gem_adapters.roll.cpu.run_pipeline`` (ROLL's CPU patches in every process, a private local Ray).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from gem_adapters.roll import cpu

CONFIG = Path(__file__).resolve().parent / "agentic_gem_cpu.yaml"
DEVICES = 2  # Ray logical GPUs: actor_train on 0, actor_infer on 1 (see agentic_gem_cpu.yaml)


def write_model(folder: Path) -> Path:
    from gem_adapters.runtime.models import load_tokenizer, tiny_causal_lm

    if not (folder / "config.json").exists():
        tokenizer = load_tokenizer("smollm2")
        tiny_causal_lm(tokenizer, hidden_size=128).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def write_config(out: Path, model: Path, steps: int, env_id: str) -> Path:
    import gem_core

    gem_core.spec(env_id)  # an unknown id fails here, naming close matches
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg.update(
        pretrain=str(model),
        reward_pretrain=str(model),
        max_steps=steps,
        logging_dir=str(out / "logs"),
        output_dir=str(out),
    )
    cfg["checkpoint_config"]["output_dir"] = str(out / "checkpoints")
    cfg["custom_envs"]["GemCoreGame"]["env_type"] = "gem_core/" + env_id
    path = out / CONFIG.name
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--env-id", default="game:GuessTheNumber-v1-easy")
    parser.add_argument("--num-cpus", type=int, default=8, help="Ray's logical CPUs (not cores)")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    path = write_config(out, write_model(out / "model"), args.steps, args.env_id)
    cpu.run_pipeline(cpu.load_config(path.parent, path.stem, DEVICES), DEVICES, args.num_cpus)
    print(f"ROLL agentic pipeline finished {args.steps} steps", flush=True)


if __name__ == "__main__":
    main()

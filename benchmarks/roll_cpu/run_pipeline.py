"""ROLL's real agentic pipeline (``roll.pipeline.agentic.agentic_pipeline.AgenticPipeline``) on CPU, driven the
way ROLL's ``examples/start_agentic_pipeline.py`` drives it, except that Ray is a private local instance
started here (ROLL's ``init()`` would run ``ray start --head``, a cluster that outlives the job).

    python benchmarks/roll_cpu/run_pipeline.py OUT_DIR [--steps 2] [--env-id game:GuessTheNumber-v1-easy]

Needs ``GEM_ROLL_CPU=1`` and ``benchmarks/roll_cpu`` + a ROLL checkout on PYTHONPATH (the runtime patches of
``gem_roll_cpu``, loaded in every process by ``sitecustomize``): ``scripts/roll_cpu_attempt.sh`` sets them.
The model is a random 2-layer Llama (hidden 128, 4 heads of 32) over the SmolLM2 tokenizer, written to
``OUT_DIR/model``; the config is ``agentic_gem_cpu.yaml`` with the run's values, written to ``OUT_DIR``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
DEVICES = 2  # Ray logical GPUs: actor_train on 0, actor_infer on 1 (see agentic_gem_cpu.yaml)


def write_model(folder: Path) -> Path:
    from gem_adapters.models import load_tokenizer, tiny_causal_lm

    if not (folder / "config.json").exists():
        tokenizer = load_tokenizer("smollm2")
        tiny_causal_lm(tokenizer, hidden_size=128).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def write_config(out: Path, model: Path, steps: int, env_id: str) -> Path:
    import gem_core

    gem_core.spec(env_id)  # an unknown id fails here, naming close matches
    cfg = yaml.safe_load((HERE / "agentic_gem_cpu.yaml").read_text())
    cfg.update(
        pretrain=str(model),
        reward_pretrain=str(model),
        max_steps=steps,
        logging_dir=str(out / "logs"),
        output_dir=str(out),
    )
    cfg["checkpoint_config"]["output_dir"] = str(out / "checkpoints")
    cfg["custom_envs"]["GemCoreGame"]["env_type"] = "gem_core/" + env_id
    path = out / "agentic_gem_cpu.yaml"
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
    if os.environ.get("GEM_ROLL_CPU") != "1":
        raise SystemExit(
            "run through scripts/roll_cpu_attempt.sh (GEM_ROLL_CPU=1 and the patches on PYTHONPATH)"
        )
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    config_path = write_config(out, write_model(out / "model"), args.steps, args.env_id)

    import ray
    from dacite import from_dict
    from omegaconf import OmegaConf
    from roll.pipeline.agentic.agentic_config import AgenticConfig
    from roll.pipeline.agentic.agentic_pipeline import AgenticPipeline
    from roll.platforms import current_platform
    from roll.utils.constants import RAY_NAMESPACE

    cfg = OmegaConf.load(config_path)
    config = from_dict(data_class=AgenticConfig, data=OmegaConf.to_container(cfg, resolve=True))
    ray.init(
        address="local",
        num_cpus=args.num_cpus,
        num_gpus=DEVICES,
        namespace=RAY_NAMESPACE,
        include_dashboard=False,
        runtime_env={"env_vars": current_platform.get_custom_env_vars()},
    )
    try:
        AgenticPipeline(pipeline_config=config).run()
        print(f"ROLL agentic pipeline finished {args.steps} steps", flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()

"""Building verl's config and agent loops the way verl's own worker does."""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
from verl.utils.dataset.rl_dataset import RLHFDataset

from gem_adapters.verl.rows import AGENT_NAME

REPO = Path(__file__).resolve().parents[3]
AGENT_YAML = REPO / "examples" / "verl" / "gem_agent_loop.yaml"
GAMMA = 0.9


def verl_config(**rollout):
    """verl's own default trainer config (the generated, fully resolved ppo_trainer.yaml)."""
    import verl

    config = OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml")
    config.data.max_prompt_length = 256
    config.data.max_response_length = 400
    config.algorithm.gamma = GAMMA
    for key, value in rollout.items():
        OmegaConf.update(config, f"actor_rollout_ref.rollout.{key}", value)
    return config


def make_loop(config, server, tokenizer, yaml=AGENT_YAML, **overrides):
    """What AgentLoopWorker does: read the agent-loop YAML into the registry, hydra-instantiate."""
    for entry in OmegaConf.load(yaml):
        _agent_loop_registry[entry.name] = entry
    entry = OmegaConf.merge(_agent_loop_registry[AGENT_NAME], overrides)
    return hydra.utils.instantiate(
        config=entry,
        trainer_config=DictConfigWrap(config=config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )

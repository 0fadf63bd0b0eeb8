"""ROLL's env managers for ``roll_agentic.py``: ROLL's env workers import the configured ``env_manager_cls`` by
its dotted path, so naming it through this module registers the experiments' env ids (``common``) with gem
in each worker before any env is built (``gem_adapters.roll.env_managers`` does the same for gem_core's
own ids). Needs ROLL on the path."""

from benchmarks.learning import common
from gem_adapters.roll.env_managers import (
    StepChatEnvManager,
    StepConcatEnvManager,
    StepEnvManager,
    TrajEnvManager,
)
from gem_adapters.roll.registration import register_gem_core_envs

register_gem_core_envs(common.LEARNING_ENVS)

__all__ = ["StepChatEnvManager", "StepConcatEnvManager", "StepEnvManager", "TrajEnvManager"]

"""gem_core: a Gym for agentic LLMs — multi-turn text environments with a Gymnasium-style API."""

from gem_core.checker import check_env
from gem_core.core import Env, EpisodeOverError, Wrapper
from gem_core.observation import MultimodalObservation
from gem_core.registry import (
    EnvNotFoundError,
    EnvSpec,
    list_envs,
    make,
    make_vec,
    print_envs,
    register,
    spec,
    unregister,
)

__all__ = [
    "Env",
    "EnvNotFoundError",
    "EnvSpec",
    "EpisodeOverError",
    "MultimodalObservation",
    "Wrapper",
    "check_env",
    "list_envs",
    "make",
    "make_vec",
    "print_envs",
    "register",
    "spec",
    "unregister",
]
__version__ = "0.1.0"

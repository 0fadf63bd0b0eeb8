"""The reference gem's ``gem.envs.registration``: ``register``, ``make``, ``make_vec``, ``print_envs`` and
``EnvSpec`` (``gem_core.registry``)."""

from gem_core.registry import EnvSpec, make, make_vec, print_envs, register

__all__ = ["EnvSpec", "make", "make_vec", "print_envs", "register"]

"""register_gem_core_envs: put gem_core's env ids into the reference GEM's registry (``gem.make``).

ROLL, like every user of the ``gem-llm`` package, builds envs with ``gem.make(env_id, **kwargs)``,
which looks ids up in one process-global dict, ``gem.envs.registration.ENV_REGISTRY``. Each gem_core
id is registered there with the entry point ``gem_adapters.roll.env:make_roll_env`` (a ``RollEnv``
around ``gem_core.make(id, **kwargs)``) under two names:

* ``gem_core/<id>`` (e.g. ``gem_core/game:Sudoku-v0-easy``), always: no other package uses the
  prefix, so this name means gem_core's env in every process, whatever else is registered;
* ``<id>`` itself, when gem's registry does not have it yet. gem-llm registers most of the same ids
  for its own implementations (169 of gem_core's 200 in gem-llm 0.1.0), and ROLL registers its own
  envs (``sokoban``, ``frozen_lake``, ...): such an id keeps its owner unless ``override=True``, which
  replaces the entry for this process.

Registration is lazy (a string entry point and kwargs) and idempotent: calling it again re-registers
gem_core's own entries and nothing else. It must run in every process that calls ``gem.make``; for ROLL's
env workers, ``gem_adapters.roll.env_managers`` does it on import (see there).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import gem_core

NAMESPACE = "gem_core/"
ENTRY_POINT = "gem_adapters.roll.env:make_roll_env"


@dataclass
class Registered:
    """What one call registered: ``aliases`` (``gem_core/<id>``), ``ids`` (bare ids now gem_core's) and
    ``kept`` (bare ids that stay with their previous owner)."""

    aliases: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def register_gem_core_envs(ids: Iterable[str] | None = None, *, override: bool = False) -> Registered:
    """Register ``ids`` (default: every gem_core id) in gem's registry; see the module docstring."""
    from gem.envs.registration import ENV_REGISTRY, EnvSpec

    done = Registered()
    for env_id in gem_core.list_envs() if ids is None else list(ids):
        gem_core.spec(env_id)  # an unknown id fails here, naming close matches
        ENV_REGISTRY[NAMESPACE + env_id] = EnvSpec(NAMESPACE + env_id, ENTRY_POINT, {"gem_core_id": env_id})
        done.aliases.append(NAMESPACE + env_id)
        owner = ENV_REGISTRY.get(env_id)
        if owner is None or override or _is_ours(owner):
            ENV_REGISTRY[env_id] = EnvSpec(env_id, ENTRY_POINT, {"gem_core_id": env_id})
            done.ids.append(env_id)
        else:
            done.kept.append(env_id)
    return done


def is_gem_core_entry(env_id: str) -> bool:
    """Whether ``gem.make(env_id)`` builds a gem_core env in this process."""
    from gem.envs.registration import ENV_REGISTRY

    spec = ENV_REGISTRY.get(env_id)
    return spec is not None and _is_ours(spec)


def _is_ours(spec) -> bool:
    return spec.entry_point == ENTRY_POINT

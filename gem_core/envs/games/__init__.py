"""The 12 multi-turn language games, in two versions.

* ``game:<Name>-v0-easy|-hard|-random`` (and ``game:Game2048-v0-extreme-hard``) are the reference GEM's
  ids (``gem-llm`` 0.1.0) and make the reference's games, rule for rule
  (``gem_core.envs.games.reference``): its texts, 0-based coordinates, rewards, word lists, and a
  format error that ends the episode. ``game:<Name>-v0`` is the hard one. Use them to reproduce GEM's
  baselines or to move GEM code and agents over unchanged.
* ``game:<Name>-v1[-easy|-hard|-random]`` are this package's design of the same games, with the same
  settings: rewards shaped the same way in every game (a penalty for format errors and illegal moves,
  which do not end the episode; progress rewards; partial credit when the turns run out), strict word
  checks, 1-based coordinates, turn counts in every observation and scripted solvers. ``-v1`` alone is
  the hard one; ``-v1-random`` draws easy or hard per episode. Each game's module docstring has its
  reward table; ``reward_type="sparse"`` (a kwarg of every ``-v1`` id) pays 1 for a win and 0 otherwise.

Both spellings of Tower of Hanoi are registered in both versions (the reference spells it
``TowerofHanoi``).

A game is one module of this package: its ``GameEnv`` subclass (with its scripted solver,
``solve_action``) and one ``register_game(...)`` call (``ids.py``) that registers its ``-v1`` ids.
Importing this package imports every module in it; the reference games are registered from the
table of the reference's ids (``reference/ids.py``).
"""

from __future__ import annotations

import importlib
import pkgutil

from gem_core.envs.games.ids import ALIASES
from gem_core.envs.games.reference.ids import register_reference_games

__all__ = ["ALIASES"]

for _module in pkgutil.iter_modules(__path__):
    if not _module.ispkg:
        importlib.import_module(f"{__name__}.{_module.name}")
register_reference_games()

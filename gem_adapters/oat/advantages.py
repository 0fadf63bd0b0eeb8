"""The learner's advantage step for Oat: a shared estimator (ReBN by default) over all collected turns.

``transition_advantages(episodes, estimator="rebn")`` takes Oat's episodes (lists of ``Transition``,
one per turn) and computes per-turn advantages with the named estimator of
``gem_adapters.algorithms.advantages`` (read from the registry at call time; one that needs a critic's values or
group ids is refused, Oat's learner has neither). For ReBN: per-turn discounted returns
``G_t = r_t + gamma * G_{t+1}`` normalised over every turn of the batch, on all learners together when
``reduce_fn`` all-reduces (the one ReBN implementation of the project). It writes what Oat's
``MultiTurnTransitionDataset`` reads from each transition's info: ``advantages``, ``returns`` and
``values`` (0.0: there is no critic).

Oat's built-in route to the same idea (``PPOMultiTurnLearner`` without a critic, ``whiten_adv=True``)
differs in three ways, and the learner in ``gem_adapters.oat.program`` uses this step instead, with
``whiten_adv=False``:

  ==========================  =====================================  ================================
                              Oat 0.2.4                              here
  ==========================  =====================================  ================================
  normalised over             the learning batch, i.e. after the     every turn collected, before the
                              random subsample of transitions        subsample
  variance                    one pass, ``E[G^2] - E[G]^2``, float32  two passes, float64
  eps added to the std        1e-9                                   ``eps`` (default 1e-6)
  ==========================  =====================================  ================================

Without subsampling and with the same eps the two agree up to float32 rounding (the tests show it).
The one-pass variance cancels catastrophically when returns share a large offset (it can even go
negative and give NaN), and normalising after the subsample makes each learning batch's statistics
depend on which turns were drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gem_adapters.algorithms.advantages import compute_advantages_flat, discounted_returns, require_estimator


def check_estimator(name: str) -> None:
    """Raise unless ``name`` is a shared estimator Oat's learner can feed (no critic values, no groups)."""
    require_estimator(name, values=False, groups=False, trainer="Oat's learner")


def transition_advantages(
    episodes: Sequence[Sequence[Any]],
    *,
    estimator: str = "rebn",
    gamma: float = 1.0,
    eps: float = 1e-6,
    reduce_fn: Callable[[Any], Any] | None = None,
) -> np.ndarray:
    """Advantages of every turn (episodes in order, turns in order), also written into each
    transition's ``info`` as ``advantages``, ``returns`` and ``values``.

    ``reduce_fn(x) -> x summed over all learners`` makes the mean and std global; every learner must
    call this at the same time (it all-reduces twice).
    """
    check_estimator(estimator)
    lengths = [len(episode) for episode in episodes]
    flat = [t for episode in episodes for t in episode]
    rewards = np.array([float(t.rewards) for t in flat], dtype=np.float64)
    episode_ids = np.repeat(np.arange(len(lengths)), lengths)
    advantages = compute_advantages_flat(
        estimator, rewards, episode_ids, gamma=gamma, eps=eps, reduce_fn=reduce_fn
    )
    returns = discounted_returns(rewards, gamma, episode_ids)
    for transition, advantage, ret in zip(flat, advantages, returns):
        if transition.info is None:
            transition.info = {}
        transition.info.update(advantages=float(advantage), returns=float(ret), values=0.0)
    return advantages

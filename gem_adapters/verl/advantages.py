"""verl's advantage hook: the shared per-turn estimators as verl estimators (``algorithm.adv_estimator=gem_rebn``).

verl hands a registered estimator only token-level tensors: ``token_level_rewards`` (B, T),
``response_mask`` (B, T), the algorithm config and ``index`` (the prompt uid of each row). The
episode's turns and per-turn rewards are read back from them as ``gem_adapters.verl.token_rewards``
describes (the protocol ``GemAgentLoop`` writes): this module only decodes verl's transport.

The per-turn rewards, one episode per row and ``index`` as the group of each episode (the ``rollout.n``
samples of one row share env id and seed) go to ``gem_adapters.advantages.token_advantages``, the
function every adapter calls: it runs the estimator and puts each turn's advantage on that turn's
action ids, and ``returns`` (the per-turn discounted returns ``G_t``) on the same ids. ``gamma`` and ``lam`` come from ``algorithm.gamma`` and
``algorithm.lam``. The whole batch is one call in verl's driver, so ReBN statistics are global.

Registered names: ``gem_<name>`` for every estimator of ``gem_adapters.advantages`` that needs no
per-turn values (``gem_rebn``, ``gem_rebn_per_episode``, ``gem_reinforce``, ``gem_grpo``, ...), also
those registered later in the process (``register_estimators`` follows the shared registry with
``on_register``) and those of other packages' ``gem_adapters.estimators`` entry points (loaded with the
shared module, in every verl process that imports this plugin). Turn-level GAE needs the critic's
values, which verl passes to its own ``gae`` only, and GiGPO each turn's env state key, which verl's
estimator call does not carry: neither is registered.

Limits: a row without any mask-1 id has no turn and gets zero advantages; verl's rollout-correction
rejection (``algorithm.rollout_correction``) may zero parts of ``response_mask`` before the estimator
runs, which changes the turns it sees.
"""

from __future__ import annotations

import functools
from typing import Any

from gem_adapters.advantages import Estimator, on_register, token_advantages
from gem_adapters.verl.token_rewards import turns_from_tokens

PREFIX = "gem_"


def gem_advantages(
    name: str,
    token_level_rewards: Any,
    response_mask: Any,
    config: Any = None,
    index: Any = None,
    **_: Any,
) -> tuple[Any, Any]:
    """verl's estimator contract: ``(advantages, returns)``, both shaped like ``token_level_rewards``."""
    import torch

    flat_rewards, rows, turn_spans = turns_from_tokens(token_level_rewards, response_mask)
    out = token_advantages(
        name,
        [flat_rewards[rows == b] for b in range(len(turn_spans))],
        int(token_level_rewards.shape[1]),
        turn_spans=turn_spans,
        loss_mask=response_mask,
        group_ids=None if index is None else list(index),
        gamma=float(_get(config, "gamma", 1.0)),
        lam=float(_get(config, "lam", 1.0)),
    )
    like = {"dtype": token_level_rewards.dtype, "device": token_level_rewards.device}
    return torch.from_numpy(out.advantages).to(**like), torch.from_numpy(out.returns).to(**like)


def register_estimators() -> list[str]:
    """Register ``gem_<name>`` with verl's ``register_adv_est`` for every shared estimator that needs
    no values and no state keys, now and whenever one is registered later (idempotent); returns the
    names so far."""
    global _FOLLOWING
    if not _FOLLOWING:
        _FOLLOWING = True
        on_register(_register_with_verl)
    from verl.trainer.ppo import core_algos

    return sorted(k for k in core_algos.ADV_ESTIMATOR_REGISTRY if k.startswith(PREFIX))


_FOLLOWING = False


def _register_with_verl(estimator: Estimator) -> None:
    from verl.trainer.ppo import core_algos

    key = PREFIX + estimator.name
    feedable = not (estimator.needs_values or estimator.needs_state_keys)  # verl passes neither
    if feedable and key not in core_algos.ADV_ESTIMATOR_REGISTRY:
        core_algos.register_adv_est(key)(functools.partial(gem_advantages, estimator.name))


def _get(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    if hasattr(config, "get"):
        value = config.get(key, default)
    else:
        value = getattr(config, key, default)
    return default if value is None else value

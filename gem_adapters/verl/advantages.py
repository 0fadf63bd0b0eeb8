"""verl's advantage hook: the shared per-turn estimators as verl estimators (``algorithm.adv_estimator=gem_rebn``).

verl hands a registered estimator only token-level tensors: ``token_level_rewards`` (B, T),
``response_mask`` (B, T), the algorithm config and ``index`` (the prompt uid of each row). The
episode's turns and per-turn rewards are read back from them as ``gem_adapters.verl.token_rewards``
describes (the protocol ``GemAgentLoop`` writes): this module only decodes verl's transport.

The per-turn rewards, one episode per row and ``index`` as the group of each episode (the ``rollout.n``
samples of one row share env id and seed) go to ``gem_adapters.algorithms.advantages.token_advantages``, the
function every adapter calls: it runs the estimator and puts each turn's advantage on that turn's
action ids, and ``returns`` (the per-turn discounted returns ``G_t``) on the same ids. ``gamma`` and ``lam`` come from ``algorithm.gamma`` and
``algorithm.lam``. The whole batch is one call in verl's driver, so ReBN statistics are global.

Registered names: ``gem_<name>`` for every estimator of ``gem_adapters.algorithms.advantages`` that needs no
per-turn values (``gem_rebn``, ``gem_rebn_per_episode``, ``gem_reinforce``, ``gem_grpo``, ...), also
those registered later in the process (``register_estimators`` follows the shared registry with
``on_register``) and those of other packages' ``gem_adapters.estimators`` entry points (loaded with the
shared module, in every verl process that imports this plugin). Estimators that need each turn's
env state key (``gem_gigpo``, ``gem_gigpo_no_std``) are registered together with the transport that
carries the keys from ``GemAgentLoop`` to the estimator (``gem_adapters.verl.state_keys``: a field of
the sample and a patch of verl's v1 advantage step), which ``register_estimators`` installs. Turn-level
GAE needs the critic's values, which verl passes to its own ``gae`` only: it is not registered.

Names: ``verl_estimator`` maps the name every example takes (a name of ``gem_adapters.algorithms.advantages``'
registry, or ``verl:<name>`` for one of verl's own) to ``algorithm.adv_estimator``.

Limits: a row without any mask-1 id has no turn and gets zero advantages; verl's rollout-correction
rejection (``algorithm.rollout_correction``) may zero parts of ``response_mask`` before the estimator
runs, which changes the turns it sees.
"""

from __future__ import annotations

import functools
from typing import Any

from gem_adapters.algorithms.advantages import (
    Estimator,
    estimator_names,
    get_estimator,
    on_register,
    token_advantages,
)
from gem_adapters.verl import state_keys
from gem_adapters.verl.state_keys import PREFIX
from gem_adapters.verl.token_rewards import turns_from_tokens

VERL_OWN = "verl:"  # the prefix naming one of verl's own estimators
# What verl feeds an estimator: group ids (``index``), no critic values; state keys once the
# transport (``state_keys.PATCHES``) is installed.
FEEDS = {"values": False, "groups": True}


def verl_estimator(name: str) -> str:
    """``algorithm.adv_estimator`` for the estimator ``name``: ``gem_<name>`` for a name of
    gem_adapters.algorithms.advantages' registry (``gem_<name>`` itself is accepted too), ``<name>`` for
    ``verl:<name>``."""
    if name.startswith(VERL_OWN):
        return name[len(VERL_OWN) :]
    return name if name.startswith(PREFIX) else PREFIX + name


def gem_advantages(
    name: str,
    token_level_rewards: Any,
    response_mask: Any,
    config: Any = None,
    index: Any = None,
    non_tensor_batch: Any = None,
    **_: Any,
) -> tuple[Any, Any]:
    """verl's estimator contract: ``(advantages, returns)``, both shaped like ``token_level_rewards``.
    An estimator that needs state keys reads them with ``state_keys.batch_state_keys``."""
    import torch

    flat_rewards, rows, turn_spans = turns_from_tokens(token_level_rewards, response_mask)
    keys = None
    if get_estimator(name).needs_state_keys:
        keys = state_keys.batch_state_keys(len(turn_spans), non_tensor_batch)
        if keys is None:
            raise ValueError(
                f"{PREFIX}{name} needs each turn's env state key: train on episodes played by GemAgentLoop "
                "in verl's v1 trainer, with gem_adapters.verl.state_keys.PATCHES installed "
                "(gem_adapters.verl.advantages.register_estimators installs it)"
            )
    out = token_advantages(
        name,
        [flat_rewards[rows == b] for b in range(len(turn_spans))],
        int(token_level_rewards.shape[1]),
        turn_spans=turn_spans,
        loss_mask=response_mask,
        group_ids=None if index is None else list(index),
        state_keys=keys,
        gamma=float(_get(config, "gamma", 1.0)),
        lam=float(_get(config, "lam", 1.0)),
    )
    like = {"dtype": token_level_rewards.dtype, "device": token_level_rewards.device}
    return torch.from_numpy(out.advantages).to(**like), torch.from_numpy(out.returns).to(**like)


def register_estimators(*, with_state_keys: bool = True) -> list[str]:
    """Register ``gem_<name>`` with verl's ``register_adv_est`` for every shared estimator that needs
    no values, now and whenever one is registered later (idempotent); returns the names so far.
    ``with_state_keys``: also install the state-key transport (``state_keys.PATCHES``) and so the
    estimators that need state keys; without it (and before it) they are not registered."""
    global _FOLLOWING
    if with_state_keys and not state_keys.PATCHES.installed:
        state_keys.PATCHES.install()
        for name in estimator_names(**FEEDS, state_keys=True):  # skipped until the transport was in
            _register_with_verl(get_estimator(name))
    if not _FOLLOWING:
        _FOLLOWING = True
        on_register(_register_with_verl)
    from verl.trainer.ppo import core_algos

    return sorted(k for k in core_algos.ADV_ESTIMATOR_REGISTRY if k.startswith(PREFIX))


_FOLLOWING = False


def _register_with_verl(estimator: Estimator) -> None:
    from verl.trainer.ppo import core_algos

    key = PREFIX + estimator.name
    feedable = not estimator.missing(**FEEDS, state_keys=state_keys.PATCHES.installed)
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

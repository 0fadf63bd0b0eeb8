"""Recorders for test_main_ppo_cpu, loaded in every process of its ``main_ppo`` run (listed in
``VERL_USE_EXTERNAL_MODULES`` after ``gem_adapters.verl.plugin``).

With ``GEM_VERL_RECORD_DIR`` set, the registered estimator (``gem_rebn``, or the one named by
``GEM_VERL_RECORD_ESTIMATOR``) and verl's ``vanilla`` policy loss are wrapped in place (the trainer's
config still names them): each call saves its tensors (and, for an estimator that needs them, the
per-turn state keys it was handed) to that folder and returns what the real function returns. The estimator runs in the trainer's process, the loss in the
actor's worker, so the files show what the estimator produced and what the actor's loss received.
"""

from __future__ import annotations

import itertools
import os

import torch
from verl.trainer.ppo import core_algos

ESTIMATOR = os.environ.get("GEM_VERL_RECORD_ESTIMATOR", "gem_rebn")
POLICY_LOSS = "vanilla"
RECORD_DIR = os.environ.get("GEM_VERL_RECORD_DIR")
_calls = itertools.count()


def _save(kind: str, **values) -> None:
    path = os.path.join(RECORD_DIR, f"{kind}-{os.getpid()}-{next(_calls)}.pt")
    torch.save({k: v.detach().cpu() if torch.is_tensor(v) else v for k, v in values.items()}, path)


def _record_estimator(estimator):
    def recording(token_level_rewards, response_mask, config=None, index=None, **kwargs):
        advantages, returns = estimator(
            token_level_rewards, response_mask, config=config, index=index, **kwargs
        )
        from gem_adapters.verl.state_keys import batch_state_keys

        _save(
            "estimator",
            token_level_rewards=token_level_rewards,
            response_mask=response_mask,
            index=None if index is None else [str(i) for i in index],
            gamma=float(config.gamma),
            advantages=advantages,
            state_keys=batch_state_keys(len(token_level_rewards), kwargs.get("non_tensor_batch")),
        )
        return advantages, returns

    recording.recorded = True
    return recording


def _record_loss(loss):
    def recording(old_log_prob, log_prob, advantages, response_mask, **kwargs):
        _save("loss", advantages=advantages, response_mask=response_mask)
        return loss(old_log_prob, log_prob, advantages, response_mask, **kwargs)

    recording.recorded = True
    return recording


if RECORD_DIR:
    import gem_adapters.verl.plugin  # noqa: F401  (registers gem_rebn first)

    for registry, name, wrap in (
        (core_algos.ADV_ESTIMATOR_REGISTRY, ESTIMATOR, _record_estimator),
        (core_algos.POLICY_LOSS_REGISTRY, POLICY_LOSS, _record_loss),
    ):
        if not getattr(registry[name], "recorded", False):
            registry[name] = wrap(registry[name])

"""Per-turn state keys on verl's samples: how ``GemAgentLoop`` ships them and how they reach the ``gem_``
estimators that need them (GiGPO: ``gem_gigpo``, ``gem_gigpo_no_std``).

verl 0.9.1 hands an estimator token tensors, the algorithm config and the row uids
(``compute_advantage`` in ``verl/trainer/ppo/ray_trainer.py``; the non-tensor batch only to GDPO),
and its v1 trainer builds that batch in ``PPOTrainer._compute_advantage`` from a fixed list of
TransferQueue fields. So:

* **written**: ``GemAgentLoopOutput.as_dict`` adds the field ``gem_state_keys`` to its sample: the
  episode's per-turn state keys before each action (``Turn.state_key``) as one JSON array
  (``gem_adapters.algorithms.advantages.state_keys_to_json``: tuples become arrays, None is null), one entry per
  action in response order. verl's v1 agent-loop worker stores every field of ``as_dict`` in
  TransferQueue under the sample's key.
* **carried**: ``PATCHES`` wraps ``PPOTrainer._compute_advantage``. When ``algorithm.adv_estimator``
  is a ``gem_`` estimator that needs state keys, the wrapper reads ``gem_state_keys`` for the batch's
  keys (the keys, partition and order of the method's own read: row ``b`` of the batch verl builds is
  row ``b`` here) and runs the method with them in scope; for every other estimator the method runs
  untouched. The estimator runs inside that call, in the same thread (verl's single controller).
* **read**: ``batch_state_keys`` gives the estimator one list of keys per row:
  ``non_tensor_batch["gem_state_keys"]`` when verl passes a non-tensor batch, else the keys in scope.

The patch follows ``gem_adapters.runtime.patching``: it names the verl lines it relies on, and
``tests/adapters/verl/test_state_keys.py`` fails when the installed verl changes them.
``gem_adapters.verl.advantages.register_estimators`` installs it (the ``verl.plugins`` entry point
does, in every verl process) and registers the state-key estimators only then.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from gem_adapters.algorithms.advantages import get_estimator, state_keys_from_json, state_keys_to_json
from gem_adapters.runtime.patching import Line, Patch, PatchSet, wrap

PREFIX = "gem_"  # verl's name of a shared estimator: algorithm.adv_estimator=gem_<name>
FIELD = "gem_state_keys"
TARGET = "verl.trainer.ppo.v1.trainer_base"
_IN_SCOPE: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("gem_state_keys", default=None)


def state_keys_field(state_keys: Sequence[Any]) -> str:
    """The ``gem_state_keys`` entry of one sample: its turns' state keys as a JSON array."""
    return state_keys_to_json(state_keys)


def batch_state_keys(rows: int, non_tensor_batch: Any = None) -> list[list[Any]] | None:
    """Each row's per-turn state keys, from ``non_tensor_batch[FIELD]`` or the keys ``PATCHES`` put in
    scope for the batch being computed; None when neither holds them."""
    if non_tensor_batch is not None and FIELD in non_tensor_batch:
        encoded = list(non_tensor_batch[FIELD])
    else:
        encoded = _IN_SCOPE.get()
    if encoded is None:
        return None
    if len(encoded) != rows:
        raise ValueError(f"{len(encoded)} samples' state keys for a batch of {rows} rows")
    return [state_keys_from_json(str(text)) for text in encoded]


def needs_state_keys(adv_estimator: Any) -> bool:
    """Whether verl's ``algorithm.adv_estimator`` names a ``gem_`` estimator that needs state keys."""
    name = str(getattr(adv_estimator, "value", adv_estimator))
    if not name.startswith(PREFIX):
        return False
    try:
        return get_estimator(name.removeprefix(PREFIX)).needs_state_keys
    except KeyError:
        return False


def _read_field(tq: Any, keys: Sequence[str], partition_id: str) -> list[str]:
    """``FIELD`` of the samples ``keys`` from TransferQueue, one JSON string per key, in key order."""
    data = tq.kv_batch_get(keys=list(keys), partition_id=partition_id, select_fields=[FIELD])
    if FIELD not in data:
        raise ValueError(
            f"the samples carry no {FIELD!r} field: an estimator that needs state keys trains on "
            "episodes played by GemAgentLoop (gem_adapters.verl.rollout)"
        )
    value = data[FIELD]
    encoded = value.tolist() if hasattr(value, "tolist") else list(value)
    if isinstance(encoded, str):  # tensordict stores a field whose rows are all equal as one value
        encoded = [encoded] * len(keys)
    return [str(text) for text in encoded]


def _compute_advantage_with_state_keys(module: ModuleType) -> None:
    """``PPOTrainer._compute_advantage`` that puts the batch's state keys in scope for the estimator."""

    def build(original):
        @functools.wraps(original)
        def _compute_advantage(self, batch, metrics):
            if not needs_state_keys(self.config.algorithm.adv_estimator):
                return original(self, batch, metrics)
            token = _IN_SCOPE.set(_read_field(module.tq, batch.keys, batch.partition_id))
            try:
                return original(self, batch, metrics)
            finally:
                _IN_SCOPE.reset(token)

        return _compute_advantage

    wrap(module.PPOTrainer, "_compute_advantage", build)


PATCHES = PatchSet(
    "verl",
    [
        Patch(
            TARGET,
            _compute_advantage_with_state_keys,
            (
                Line(
                    "verl/trainer/ppo/v1/trainer_base.py",
                    1743,
                    "def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:",
                ),
                Line(
                    "verl/trainer/ppo/v1/trainer_base.py",
                    1745,
                    'fields = ["uid", "response_mask", "rm_scores", "rollout_log_probs", "old_log_probs", '
                    '"ref_log_prob", "values"]',
                ),
                Line(
                    "verl/trainer/ppo/v1/trainer_base.py",
                    1746,
                    "data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, "
                    "select_fields=fields)",
                ),
                Line(
                    "verl/trainer/ppo/v1/trainer_base.py",
                    1775,
                    "data = compute_advantage_for_multi_trajectories(",
                ),
                Line(
                    "verl/trainer/ppo/ray_trainer.py",
                    261,
                    'if adv_estimator in (AdvantageEstimator.GDPO, "gdpo"):',
                ),
                Line(
                    "verl/trainer/ppo/ray_trainer.py",
                    279,
                    "advantages, returns = adv_estimator_fn(**adv_kwargs)",
                ),
                Line("verl/trainer/ppo/v1/agent_loop_tq.py", 194, "field = output.as_dict()"),
            ),
            "verl's v1 trainer reads a fixed list of TransferQueue fields for the advantage step and "
            "passes the estimator no non-tensor data (GDPO excepted): without the patch, the agent loop's "
            "gem_state_keys never reach a gem_ estimator that needs them (GiGPO)",
        ),
    ],
)

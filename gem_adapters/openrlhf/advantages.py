"""Per-turn advantages (ReBN, GRPO, RLOO, ...) for OpenRLHF 0.11, in place of its token-level estimators.

OpenRLHF keeps one reward per sample (``Experience.rewards``, shape (B,)) and computes advantages in
``RemoteExperienceMaker.compute_advantages_and_returns``, with estimators chosen by a hard-coded
``if`` chain. ``compute_advantages_and_returns`` below is a replacement for that method;
``gem_adapters.openrlhf.hook`` installs it in the trainer's Ray workers.

Where the turns come from:

* **rewards**: ``GemAgentExecutor`` puts the per-turn env rewards in ``extra_logs["gem_turn_rewards"]``
  and the turn count in ``extra_logs["gem_num_turns"]``; OpenRLHF copies ``extra_logs`` into
  ``Experience.info`` (a list becomes a (1, turns) tensor, right-padded with zeros when samples are
  concatenated; the count says where each row ends). float32, as OpenRLHF's own rewards.
* **spans**: turn ``k``'s tokens are the ``k``-th run of ``action_mask == 1`` (the executor's
  ``action_ranges``; env and template ids separate consecutive actions). Their number must equal the
  turn count, which holds because the executor keeps every episode within ``--data.max_len``.
* **groups** (GRPO, Dr.GRPO, RLOO, GiGPO): samples with the same label (env id, seed, kwargs) share an
  initial state; the ``--rollout.n_samples_per_prompt`` samples of a row form one group.
* **state keys** (GiGPO, and any estimator registered with ``needs_state_keys``): the executor puts
  each turn's env state key before its action (``Turn.state_key``) in ``extra_logs["gem_state_keys"]``
  as an integer code (``gem_adapters.algorithms.advantages.state_key_code``: -1 for no key, else 63 bits of a
  BLAKE2b digest of the key's JSON), because OpenRLHF turns every ``extra_logs`` entry into a tensor;
  equal keys have equal codes in every engine actor, and the codes group turns as the keys would.

Each turn's reward is clipped to ``--reward.clip_range``, then charged the KL penalty of its own
action tokens (``-kl_coef * sum KL``, as OpenRLHF charges each token when ``--algo.kl.use_loss`` is
off), and a change OpenRLHF's length penalties (``--reward.overlong_buffer_len``,
``--reward.stop_properly_penalty_coef``) make to the sample's reward is added to its last turn (note
that the overlong penalty measures a multi-turn sample from its first to its last action token,
env ids included, against ``--rollout.max_new_tokens``, which the executor applies per turn). Then
``gem_adapters.algorithms.advantages.token_advantages`` (the function every adapter calls) runs the estimator
once over every turn of the rollout batch, with ``gamma`` = ``--algo.advantage.gamma`` applied per
turn, and puts each turn's advantage on its action tokens; ``returns`` holds the per-turn discounted
returns the same way, and ``info["return"]`` the episode's return. This module only decodes
OpenRLHF's transport (``Experience``) and writes the result back. The method runs in OpenRLHF's single controller actor
(``PPOTrainer``) on the whole rollout batch, before it is split across data-parallel ranks, so the
ReBN statistics are global without any all-reduce.

How this differs from ``--algo.advantage.estimator reinforce --algo.advantage.gamma g`` (OpenRLHF 0.11):

1. OpenRLHF's reward is the *sum* of the step rewards (clipped as a whole), placed on the last action
   token of the whole sequence: which turn earned what is lost.
2. It discounts per *token*, over every position up to the last action token, env and template ids
   included: a token at position ``j`` gets ``R * g**(last - j)`` (``last``: the last action token).
   With ``g < 1`` the discount depends on how many tokens follow (0.9 over 200 tokens is 7e-10); with
   ``g = 1`` every token of an episode gets the same ``R``. GEM discounts per *turn*:
   ``G_t = r_t + g * G_{t+1}`` over the episode's turns, each turn with its own reward.
3. It whitens advantages over action *tokens* (token-weighted mean, variance clamped at 1e-8,
   ``rsqrt``; ``--algo.advantage.no_std_norm`` keeps only the mean); ReBN normalises the per-turn
   returns with every *turn* weighing once, ``(G_t - mean) / (std + 1e-6)``, population std.
4. OpenRLHF resets ``gamma`` to 1 for every estimator except ``reinforce`` and ``gae``.

Run with ``--algo.advantage.estimator reinforce`` (no critic, no group-size check; the replacement
ignores the name) and ``GEM_OPENRLHF_ESTIMATOR`` naming the GEM estimator (see ``config``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from gem_adapters.algorithms.advantages import as_numpy, get_estimator, mask_runs, token_advantages
from gem_adapters.openrlhf.config import ESTIMATOR_ENV

TURN_REWARDS = "gem_turn_rewards"
STATE_KEYS = "gem_state_keys"
NUM_TURNS = "gem_num_turns"
SUCCESS = "gem_success"


def compute_advantages_and_returns(self: Any, experiences: list[Any], *, estimator: str) -> list[Any]:
    """``RemoteExperienceMaker.compute_advantages_and_returns`` with a GEM per-turn estimator.

    Reads ``self.strategy.args`` and ``self.kl_ctl`` as OpenRLHF's method does (bound by ``hook``)."""
    import torch
    from openrlhf.trainer.ppo_utils.length_penalty import apply_length_penalties

    args = self.strategy.args
    if args.algo.advantage.estimator == "gae" or getattr(self, "critic_model_group", None) is not None:
        raise ValueError(
            f"{ESTIMATOR_ENV}={estimator} replaces OpenRLHF's estimator; launch with "
            "--algo.advantage.estimator reinforce (no critic)"
        )
    with torch.no_grad():
        for experience in experiences:
            experience.rewards = experience.rewards.to(
                torch.promote_types(experience.rewards.dtype, torch.float32)
            )
        before = [experience.rewards.clone() for experience in experiences]
        apply_length_penalties(experiences, args)
        adjustments = [(e.rewards - b).double() for e, b in zip(experiences, before)]
        return gem_advantages_and_returns(
            experiences,
            estimator,
            gamma=float(args.algo.advantage.gamma),
            kl_coef=float(self.kl_ctl.value),
            clip_range=args.reward.clip_range,
            adjustments=adjustments,
        )


def gem_advantages_and_returns(
    experiences: Sequence[Any],
    estimator: str,
    *,
    gamma: float = 1.0,
    kl_coef: float = 0.0,
    clip_range: Sequence[float] | None = None,
    eps: float = 1e-6,
    adjustments: Sequence[Any] | None = None,
) -> list[Any]:
    """Write per-turn ``estimator`` advantages into OpenRLHF ``Experience`` batches (in place; also
    returned): ``advantages`` and ``returns`` (B, A) on action tokens, ``info["return"]``; the
    per-turn rewards and state keys are removed from ``info`` and ``kl`` is dropped, as OpenRLHF's
    method does. ``adjustments[i][b]`` is added to the last turn of row ``b`` of experience ``i``."""
    import torch

    needs_state_keys = get_estimator(estimator).needs_state_keys
    rewards: list[np.ndarray] = []
    spans: list[list[tuple[int, int]]] = []
    groups: list[str] = []
    state_keys: list[list[int | None]] | None = [] if needs_state_keys else None
    for i, experience in enumerate(experiences):
        turn_rewards, turn_spans = episode_turns(experience, kl_coef=kl_coef, clip_range=clip_range)
        if state_keys is not None:
            state_keys.extend(episode_state_keys(experience))
        if adjustments is not None:
            for b, extra in enumerate(as_numpy(adjustments[i]).reshape(-1)):
                turn_rewards[b][-1] += extra
        rewards.extend(turn_rewards)
        spans.extend(turn_spans)
        labels = list(experience.labels or [])
        groups.extend(
            _group_key(labels[b]) if b < len(labels) else f"row {i}.{b}" for b in range(len(turn_rewards))
        )
    width = max((int(e.action_mask.shape[1]) for e in experiences), default=0)
    out = token_advantages(
        estimator,
        rewards,
        width,
        turn_spans=spans,
        group_ids=groups,
        state_keys=state_keys,
        gamma=gamma,
        eps=eps,
    )
    first = 0
    for experience in experiences:
        rows, width = experience.action_mask.shape
        here = slice(first, first + rows)
        first += rows

        def tensor(x: np.ndarray, device: Any = experience.action_mask.device) -> Any:
            return torch.from_numpy(x).to(device=device, dtype=torch.float32)

        experience.advantages = tensor(out.advantages[here, :width])
        experience.returns = tensor(out.returns[here, :width])
        experience.info["return"] = tensor(np.array([r.sum() for r in rewards[here]], dtype=np.float64))
        experience.info.pop(TURN_REWARDS, None)
        experience.info.pop(STATE_KEYS, None)
        experience.kl = None
    return list(experiences)


def episode_turns(
    experience: Any, *, kl_coef: float = 0.0, clip_range: Sequence[float] | None = None
) -> tuple[list[np.ndarray], list[list[tuple[int, int]]]]:
    """Per row of one ``Experience``: its per-turn rewards (float64, clipped, KL charged) and the
    ``action_mask`` spans of its turns."""
    info = experience.info
    if TURN_REWARDS not in info or NUM_TURNS not in info:
        raise ValueError(
            f"the samples carry no per-turn rewards (info[{TURN_REWARDS!r}]): play them with "
            f"GemAgentExecutor and {ESTIMATOR_ENV} set in the vLLM engine actors (gem_adapters.openrlhf.hook)"
        )
    mask = as_numpy(experience.action_mask)
    table = as_numpy(info[TURN_REWARDS]).reshape(mask.shape[0], -1)
    counts = as_numpy(info[NUM_TURNS]).reshape(-1).astype(np.int64)
    kl = None if experience.kl is None or kl_coef <= 0 else as_numpy(experience.kl)
    rewards, spans = [], []
    for b in range(mask.shape[0]):
        turns = mask_runs(mask[b])
        if len(turns) != counts[b]:
            raise RuntimeError(
                f"sample {b} has {counts[b]} turns but {len(turns)} runs of action_mask; was it "
                "truncated (--data.max_len) or played by another executor?"
            )
        r = table[b, : counts[b]].copy()
        if clip_range is not None:
            r = np.clip(r, clip_range[0], clip_range[1])
        if kl is not None:
            r -= kl_coef * np.array([kl[b, start:end].sum() for start, end in turns])
        rewards.append(r)
        spans.append(turns)
    return rewards, spans


def episode_state_keys(experience: Any) -> list[list[int | None]]:
    """Per row of one ``Experience``: each turn's state key code (None for a turn without a key)."""
    info = experience.info
    if STATE_KEYS not in info or NUM_TURNS not in info:
        raise ValueError(
            f"the samples carry no per-turn state keys (info[{STATE_KEYS!r}]): play them with "
            f"GemAgentExecutor and {ESTIMATOR_ENV} set in the vLLM engine actors (gem_adapters.openrlhf.hook)"
        )
    counts = as_numpy(info[NUM_TURNS]).reshape(-1).astype(np.int64)
    table = as_numpy(info[STATE_KEYS], dtype=None).reshape(len(counts), -1)
    if not np.issubdtype(table.dtype, np.integer):  # a float cannot hold a 63-bit code
        raise ValueError(f"info[{STATE_KEYS!r}] holds {table.dtype}, not the integer codes the executor sent")
    return [[None if code < 0 else int(code) for code in row[:count]] for row, count in zip(table, counts)]


def _group_key(label: Any) -> str:
    return label if isinstance(label, str) else json.dumps(label, sort_keys=True, default=str)

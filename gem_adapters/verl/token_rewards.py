"""Per-turn rewards on verl's token rows: where ``GemAgentLoop`` writes them and how the estimators
read them back (verl carries rewards only as a (B, T) ``token_level_rewards`` tensor).

Written (``rewards_on_tokens``): each turn's env reward on the last id of that turn's action in the
response, 0.0 everywhere else.

Read (``turns_from_tokens``), from ``token_level_rewards`` and ``response_mask`` alone:

* a **turn** is a maximal run of ``response_mask == 1`` (one action's generated ids; the env and
  template ids between two actions have mask 0, so consecutive actions never merge;
  ``Episode.to_prompt_response`` guarantees it);
* turn ``k``'s **reward** is the sum of ``token_level_rewards`` from the start of action ``k`` up to
  the start of action ``k + 1`` (the last turn runs to the end of the row).

The sums give back the env's per-turn rewards exactly; with ``algorithm.use_kl_in_reward`` each
turn's reward also carries the KL penalty of its own tokens, and a scalar reward on the row's last
token (what verl's other agent loops produce) counts as the last turn's reward. A row without any
mask-1 id has no turn.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from gem_adapters.algorithms.advantages import as_numpy, mask_runs


def rewards_on_tokens(
    rewards: Sequence[float], turn_spans: Sequence[tuple[int, int]], length: int
) -> list[float]:
    """A response row of ``length`` ids with turn ``k``'s reward on the last id of ``turn_spans[k]``."""
    row = [0.0] * length
    for reward, (_, end) in zip(rewards, turn_spans, strict=True):
        row[end - 1] = float(reward)
    return row


def turns_from_tokens(
    token_level_rewards: Any, response_mask: Any
) -> tuple[np.ndarray, np.ndarray, list[list[tuple[int, int]]]]:
    """Per-turn rewards (float64), the row of each turn, and each row's action spans."""
    rewards = as_numpy(token_level_rewards)
    mask = as_numpy(response_mask)
    turn_rewards: list[float] = []
    rows: list[int] = []
    spans: list[list[tuple[int, int]]] = []
    for b in range(rewards.shape[0]):
        row_spans = mask_runs(mask[b])
        spans.append(row_spans)
        if not row_spans:
            continue
        cuts = [0] + [start for start, _ in row_spans[1:]] + [rewards.shape[1]]
        turn_rewards.extend(rewards[b, lo:hi].sum() for lo, hi in itertools.pairwise(cuts))
        rows.extend([b] * len(row_spans))
    return np.asarray(turn_rewards, dtype=np.float64), np.asarray(rows, dtype=np.int64), spans

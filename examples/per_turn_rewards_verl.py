"""Per-turn rewards from an env that is not a GEM env, in verl (``algorithm.adv_estimator=gem_<name>``).

verl hands an advantage estimator one (B, T) ``token_level_rewards`` tensor and the ``response_mask``.
The ``gem_<name>`` estimators (``gem_adapters.verl.advantages``) read an episode's turns back from them:
a turn is a run of mask-1 ids (an action), its reward the sum of the rewards from the start of its
action to the start of the next. So an agent loop of your own, playing any env, hands per-turn rewards
to them by writing each turn's reward on the last id of that turn's action in the sample's
``rm_scores`` (``GemAgentLoopOutput.as_dict`` does exactly this for GEM envs), with the v1 trainer
(``trainer.use_v1=True``, verl 0.9's default). Its env's ``turn_rewards`` follow the contract of
``docs/per-turn-rewards.md``: a float, or None for a turn without a signal, which writes nothing (0).

    python examples/per_turn_rewards_verl.py

builds two such samples (their rows as an agent loop returns them: actions, then the env's answer
between them with mask 0) and runs the estimator as verl's trainer calls it, through verl's own
estimator registry; the advantages equal ``gem_adapters.algorithms.advantages`` on the turn rewards.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import torch

from gem_adapters.algorithms.advantages import compute_advantages, turn_rewards_array
from gem_adapters.verl.advantages import register_estimators
from gem_adapters.verl.token_rewards import rewards_on_tokens

# Two episodes of one task (a GRPO group, verl's ``uid``): a plain-function env that scores only some
# turns. Action lengths in tokens, the env's answer between two actions (mask 0), and turn rewards.
EPISODES = [
    {"actions": [3, 2, 4], "answer": 5, "turn_rewards": [None, 0.5, 1.0]},
    {"actions": [2, 3], "answer": 5, "turn_rewards": [-0.2, None]},
]


def sample_row(actions: Sequence[int], answer: int, turn_rewards: Sequence[float | None], width: int):
    """One sample's ``response_mask`` and ``rm_scores`` rows (``width`` ids, padded with 0)."""
    mask: list[int] = []
    spans: list[tuple[int, int]] = []
    for k, length in enumerate(actions):
        if k:
            mask.extend([0] * answer)  # the env's answer and the template's markers
        spans.append((len(mask), len(mask) + length))
        mask.extend([1] * length)
    scores = rewards_on_tokens(turn_rewards_array(turn_rewards), spans, len(mask))
    pad = width - len(mask)
    return mask + [0] * pad, scores + [0.0] * pad


def main(advantage_estimator: str = "rebn", gamma: float = 0.9) -> torch.Tensor:
    from verl.trainer.ppo import core_algos

    register_estimators()  # verl's plugin entry point does this in every verl process
    width = 24
    rows = [sample_row(e["actions"], e["answer"], e["turn_rewards"], width) for e in EPISODES]
    response_mask = torch.tensor([mask for mask, _ in rows], dtype=torch.float32)
    token_level_rewards = torch.tensor([scores for _, scores in rows], dtype=torch.float32)
    index = np.array(["task-0"] * len(EPISODES), dtype=object)  # verl's uid: one group
    advantages, _ = core_algos.get_adv_estimator_fn(f"gem_{advantage_estimator}")(
        token_level_rewards=token_level_rewards,
        response_mask=response_mask,
        config={"gamma": gamma, "lam": 1.0},
        index=index,
    )
    expected = compute_advantages(
        advantage_estimator,
        [e["turn_rewards"] for e in EPISODES],
        gamma=gamma,
        group_ids=["task-0"] * len(EPISODES),
    )
    for b, per_turn in enumerate(expected):
        on_tokens = advantages[b][response_mask[b] == 1].double().numpy()
        lengths = EPISODES[b]["actions"]
        np.testing.assert_allclose(on_tokens, np.repeat(per_turn, lengths), rtol=1e-6, atol=1e-6)
        print(
            f"episode {b}: turn rewards {EPISODES[b]['turn_rewards']} -> per-turn advantages {per_turn.round(4)}"
        )
    return advantages


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--advantage_estimator", default="rebn")
    parser.add_argument("--gamma", type=float, default=0.9)
    cli = parser.parse_args()
    main(cli.advantage_estimator, cli.gamma)

"""GEMPPOTrainer: PPO with a turn-level critic, on the same episodes and loss as ``GEMGRPOTrainer``.

The critic (``TurnCritic``) is a copy of the policy's transformer with a scalar head, initialised
from the policy's weights (head at zero). Its value of turn ``k`` is read at the last token before
action ``k`` (the end of the prompt the policy answered), so the value is a function of the state
the policy acted in. Each generation batch:

1. values ``V(s_k)`` for every turn (no gradient);
2. advantages by turn-level GAE(gamma, lam) from ``gem_adapters.advantages`` (``"gae"``), optionally
   whitened over the batch's turns;
3. ``critic_epochs`` Adam steps of the critic on ``(V(s_k) - (A_k + V_old(s_k)))^2``, the lambda-returns
   as targets;
4. the advantages go on each turn's tokens and TRL's clipped policy loss trains the policy, exactly
   as for the critic-free estimators.

Logged beside TRL's metrics: ``critic/loss`` (before the update) and ``critic/explained_variance``.
One training process only: a critic shared over several processes would need its own data
parallelism, which this small reference does not set up. ``save_model`` saves the policy; the
critic is ``trainer.critic`` (a plain ``nn.Module``: ``torch.save(trainer.critic.state_dict(), ...)``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from gem_adapters.advantages import advantages_for_episodes
from gem_adapters.episode import Episode
from gem_adapters.trl.config import GEMPPOConfig
from gem_adapters.trl.trainer import GEMGRPOTrainer


class TurnCritic(nn.Module):
    """A causal LM's transformer (without its LM head) and a linear value head."""

    def __init__(self, policy: Any):
        super().__init__()
        self.backbone = copy.deepcopy(
            policy.get_decoder() if hasattr(policy, "get_decoder") else policy.base_model
        )
        self.head = nn.Linear(policy.config.hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(hidden).squeeze(-1).float()

    def turn_values(self, episodes: Sequence[Episode], pad_id: int) -> list[torch.Tensor]:
        """Per episode, the value at each turn's state (the token before the action), with gradient."""
        sequences = [e.to_sequence(include_closing=False) for e in episodes]
        width = max(len(s.token_ids) for s in sequences)
        device = next(self.parameters()).device
        ids = torch.full((len(sequences), width), pad_id, dtype=torch.long, device=device)
        mask = torch.zeros_like(ids)
        for row, s in enumerate(sequences):  # right padding: a causal model's earlier positions ignore it
            ids[row, : len(s.token_ids)] = torch.tensor(s.token_ids, device=device)
            mask[row, : len(s.token_ids)] = 1
        values = self(ids, mask)
        return [values[row, [start - 1 for start, _ in s.turn_spans]] for row, s in enumerate(sequences)]


class GEMPPOTrainer(GEMGRPOTrainer):
    """``GEMGRPOTrainer`` whose advantages come from a turn-level critic (``critic``: a ``TurnCritic``,
    by default one built from ``model``)."""

    def __init__(
        self, model: Any, args: GEMPPOConfig, *posargs: Any, critic: TurnCritic | None = None, **kwargs: Any
    ):
        if not isinstance(args, GEMPPOConfig):
            raise TypeError(f"GEMPPOTrainer needs a GEMPPOConfig, got {type(args).__name__}")
        super().__init__(model, args, *posargs, **kwargs)
        if self.accelerator.num_processes > 1:
            raise NotImplementedError("GEMPPOTrainer trains its critic in one process; run a single process")
        self.critic = (critic or TurnCritic(self.accelerator.unwrap_model(self.model))).to(
            self.accelerator.device
        )
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=args.critic_learning_rate)

    def turn_advantages(self, episodes: Sequence[Episode]) -> list[np.ndarray]:
        pad_id = getattr(self.processing_class, "pad_token_id", None) or 0
        with torch.no_grad():
            old = [v.double().cpu().numpy() for v in self.critic.turn_values(episodes, pad_id)]
        advantages = advantages_for_episodes(
            "gae", episodes, gamma=self.args.gamma, lam=self.args.lam, values=old
        )
        targets = [
            torch.from_numpy(a + v).float().to(self.accelerator.device) for a, v in zip(advantages, old)
        ]
        flat_targets, flat_old = torch.cat(targets), np.concatenate(old)
        first_loss = None
        for _ in range(self.args.critic_epochs):
            values = torch.cat(self.critic.turn_values(episodes, pad_id))
            loss = torch.nn.functional.mse_loss(values, flat_targets)
            first_loss = loss.item() if first_loss is None else first_loss
            self.critic_optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.critic.parameters(), 1.0)
            self.critic_optimizer.step()
        target_np = flat_targets.double().cpu().numpy()
        variance = float(np.var(target_np))
        explained = 1.0 - float(np.var(target_np - flat_old)) / variance if variance > 0 else float("nan")
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["critic/loss"].append(first_loss)
        self._metrics[mode]["critic/explained_variance"].append(explained)
        if self.args.whiten_advantages:
            flat = np.concatenate(advantages)
            mean, std = flat.mean(), flat.std()
            advantages = [(a - mean) / (std + self.args.advantage_eps) for a in advantages]
        return advantages

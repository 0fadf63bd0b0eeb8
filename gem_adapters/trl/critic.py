"""GEMPPOTrainer: PPO with a turn-level critic, on the same episodes and loss as ``GEMGRPOTrainer``.

The critic (``TurnCritic``) is a copy of the policy's transformer with a scalar head, initialised
from the policy's weights (head at zero). Its value of turn ``k`` is read at the last token before
action ``k`` (the end of the prompt the policy answered), so the value is a function of the state
the policy acted in. Two separate calls per generation batch:

* scoring (``turn_advantages``, the trainer's one advantage hook, called by TRL's generation step)
  computes advantages and trains nothing: values ``V(s_k)`` for every turn (no gradient), then the configured
  ``advantage_estimator`` on them, optionally whitened over the batch's turns; the advantages go on
  each turn's tokens and TRL's clipped policy loss trains the policy, exactly as for the critic-free
  estimators. The estimator is any registered one that reads values (``needs_values=True``):
  ``"gae"`` (turn-level GAE(gamma, lam), the default) or one another package registers
  (``docs/custom-estimators.md``);
* the critic's own step (``critic_step``, called explicitly by ``training_step`` once per generation
  batch, after the policy's step on its first micro-batch): ``critic_epochs`` Adam steps on
  ``(V(s_k) - (A_k + V_old(s_k)))^2``, the targets being the estimator's advantages (before
  whitening) plus the values they were computed from (for GAE, the lambda-returns), each step's
  gradient accumulated over micro-batches. Evaluation batches never train the critic.

The critic reads the batch in micro-batches of ``critic_micro_batch_size`` episodes of similar length
(longest first), so a forward pass pads each episode to its neighbours' length rather than to the
batch's longest, and holds the activations of one micro-batch at a time.

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

from gem_adapters.algorithms.advantages import advantages_for_episodes
from gem_adapters.episodes.episode import Episode
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
        self.pad_id = getattr(self.processing_class, "pad_token_id", None) or 0
        self._critic_trained_on: Sequence[Episode] | None = (
            None  # the generation batch of the last critic_step
        )

    def turn_advantages(self, episodes: Sequence[Episode]) -> list[np.ndarray]:
        """The configured estimator's advantages on the critic's current values, optionally whitened
        over the batch's turns. Trains nothing (the critic's step is ``critic_step``)."""
        advantages = self.value_advantages(episodes, self.old_values(episodes))
        if self.args.whiten_advantages:
            flat = np.concatenate(advantages)
            mean, std = flat.mean(), flat.std()
            advantages = [(a - mean) / (std + self.args.advantage_eps) for a in advantages]
        return advantages

    def old_values(self, episodes: Sequence[Episode]) -> list[np.ndarray]:
        """The critic's per-turn values of ``episodes`` (float64, no gradient)."""
        with torch.no_grad():
            return [v.double().cpu().numpy() for v in self.critic_values(episodes)]

    def value_advantages(self, episodes: Sequence[Episode], values: Sequence[np.ndarray]) -> list[np.ndarray]:
        """``args.advantage_estimator`` (a registered estimator with ``needs_values``) on ``values``."""
        return advantages_for_episodes(
            self.args.advantage_estimator,
            episodes,
            gamma=self.args.gamma,
            lam=self.args.lam,
            eps=self.args.advantage_eps,
            values=values,
        )

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        """TRL's training step of the policy, then, once per generation batch, the critic's."""
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self.last_episodes and self.last_episodes is not self._critic_trained_on:
            self.critic_step(self.last_episodes)
        return loss

    def critic_step(self, episodes: Sequence[Episode]) -> float:
        """``critic_epochs`` steps of the critic towards ``A_k + V_old(s_k)`` on ``episodes`` (the
        advantages before whitening); logs ``critic/loss`` and ``critic/explained_variance``, returns
        the loss before the update."""
        old = self.old_values(episodes)
        targets = [torch.from_numpy(a + v).float() for a, v in zip(self.value_advantages(episodes, old), old)]
        with self.clock.phase("critic"):
            first_loss = self.fit_critic(episodes, targets)
        target_np, flat_old = torch.cat(targets).double().numpy(), np.concatenate(old)
        variance = float(np.var(target_np))
        explained = 1.0 - float(np.var(target_np - flat_old)) / variance if variance > 0 else float("nan")
        self._metrics["train"]["critic/loss"].append(first_loss)
        self._metrics["train"]["critic/explained_variance"].append(explained)
        self._critic_trained_on = episodes
        return first_loss

    def micro_batches(self, episodes: Sequence[Episode]) -> list[list[int]]:
        """Indices of ``episodes`` in groups of ``critic_micro_batch_size``, longest episodes first."""
        lengths = [len(e.to_sequence(include_closing=False).token_ids) for e in episodes]
        order = sorted(range(len(episodes)), key=lambda i: -lengths[i])
        size = self.args.critic_micro_batch_size
        return [order[i : i + size] for i in range(0, len(order), size)]

    def critic_values(self, episodes: Sequence[Episode]) -> list[torch.Tensor]:
        """``TurnCritic.turn_values`` of every episode, computed micro-batch by micro-batch."""
        values: list[torch.Tensor] = [torch.empty(0)] * len(episodes)
        for rows in self.micro_batches(episodes):
            for row, v in zip(rows, self.critic.turn_values([episodes[r] for r in rows], self.pad_id)):
                values[row] = v
        return values

    def fit_critic(self, episodes: Sequence[Episode], targets: Sequence[torch.Tensor]) -> float:
        """``critic_epochs`` steps on the mean squared error over all turns; returns the first step's loss."""
        num_turns = sum(len(t) for t in targets)
        groups = self.micro_batches(episodes)
        losses = []
        for _ in range(self.args.critic_epochs):
            self.critic_optimizer.zero_grad()
            loss_sum = 0.0
            for rows in groups:
                values = torch.cat(self.critic.turn_values([episodes[r] for r in rows], self.pad_id))
                target = torch.cat([targets[r] for r in rows]).to(values.device)
                loss = torch.sum((values - target) ** 2) / num_turns
                loss.backward()
                loss_sum += loss.item()
            losses.append(loss_sum)
            torch.nn.utils.clip_grad_norm_(self.critic.parameters(), 1.0)
            self.critic_optimizer.step()
        return losses[0]

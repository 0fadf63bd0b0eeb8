"""Advantage estimators on per-turn rewards: one implementation, shared by every framework adapter.

The layout is flat, one entry per turn, so that any trainer's batch maps onto it:

  ``rewards[i]``      the reward of turn ``i``
  ``episode_ids[i]``  the episode turn ``i`` belongs to (an episode's turns appear in order, not
                      necessarily next to each other)
  ``group_ids[i]``    the group of that episode: episodes that share an initial state (GRPO-style
                      baselines); every turn of an episode must carry the same group
  ``values[i]``       a critic's value of the state before turn ``i`` (GAE only)
  ``state_keys[i]``   the env's state key before turn ``i`` (``gem_core.Env.state_key()``: any
                      hashable, equal exactly when the states are the same; None: no anchor), GiGPO only
  ``strata[i]``       the stratum of that episode: where its task came from in a batch that mixes
                      several sources, e.g. its env id (``rebn_per_env`` only); every turn of an
                      episode must carry the same stratum

Per-turn rewards, the contract for every estimator and every env (ours or not): one entry per
assistant turn, ``float`` or ``None``. ``None`` means the env gave that turn no reward signal and
counts as a reward of 0: the turn's return ``G_t`` is then the discounted sum of the later rewards,
so it still receives credit for what followed it, and its episode's return is the sum of the turns
that have a reward. Non-finite rewards (NaN, inf) are an error, not a missing signal
(``docs/per-turn-rewards.md``).

With ``G_t = r_t + gamma * G_{t+1}`` the discounted return from turn ``t`` and ``R = G_0`` the
episode's return, the estimators give, per turn:

  ==========  ==================================================================================
  reinforce   ``G_t``
  rebn        ``(G_t - mean) / (std + eps)``, mean and population std over every turn of the
              (global) batch: return batch normalisation, GEM's default
  rebn_per_env
              ReBN within each stratum (env) of a mixed batch: ``(G_t - mean_s) / (std_s + eps)``,
              mean and population std over the turns of the batch whose episodes share the
              stratum ``s`` (``strata``: each episode's env id), so an env whose returns are on a
              larger scale neither sets the others' baseline nor drowns their gradient; the same
              numbers as ``rebn``, bit for bit, when the batch holds one stratum
  rebn_per_episode
              ReBN in which every episode weighs the same, whatever its number of turns ``T``:
              the turn weights ``1/T`` enter the mean and std, and each turn's advantage is
              scaled by ``(turns in batch / episodes in batch) / T``, so each episode's turns
              carry the same total weight in the loss (plain ``rebn`` lets a 20-turn episode
              pull the baseline and the gradient 20x as hard as a 1-turn one)
  grpo        ``(R - mean_g) / (std_g + eps)`` over the episodes of a group, sample std (ddof=1,
              as TRL and verl); turn-agnostic: every turn gets its episode's advantage
  dr_grpo     ``R - mean_g`` (Dr. GRPO: no std)
  rloo        ``R - mean of the other episodes' R in the group``
  gae         turn-level GAE(gamma, lam) from per-turn values; an episode's end is terminal
  gigpo       GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent
              Training"): ``A^E + omega * A^S``. The episode-level ``A^E = (R - mean_g) /
              (std_g + eps)`` over the group's undiscounted episode returns ``R = sum_t r_t``
              (the paper's Eq. 3); the step-level ``A^S = (G_t - mean_s) / (std_s + eps)`` over the
              step group ``s`` of turn ``t``: every turn, of any episode of the same group and at
              any position, whose state key before the action is the same (an anchor state, Eq. 6;
              ``G_t`` the discounted return, Eq. 5). Sample std (ddof=1), omega = 1 (Eq. 8).
              A turn without a state key, or alone in its step group, has ``A^S = 0``
  gigpo_no_std
              GiGPO with both levels centred but not scaled (the paper's "w/o std" variant,
              verl-agent's ``mean_norm``): ``(R - mean_g) + omega * (G_t - mean_s)``
  ==========  ==================================================================================

A group of one episode has no baseline: grpo, dr_grpo, rloo and gigpo's episode level give it 0.

Numbers are computed once, in float64 numpy. Torch tensors are accepted and returned (same device
and dtype as the rewards); they are converted at the boundary, so numpy and torch callers get the
same numbers bit for bit. The arrays hold one scalar per turn, so the copies cost nothing next to a
training step.

Distributed ReBN: pass ``reduce_fn(x) -> x summed elementwise over all workers`` (an all-reduce).
It receives a float64 array of the input's kind (a torch tensor on the rewards' device for torch
inputs) and is called twice: on ``[sum G, count]``, then on ``[sum (G - mean)^2]`` (two passes keep
the variance exact where ``E[G^2] - E[G]^2`` would cancel). With torch.distributed::

    def reduce_fn(x):
        torch.distributed.all_reduce(x)
        return x

From per-turn numbers to tokens, one path for every framework: ``token_advantages`` runs the
named estimator over episodes' per-turn rewards and puts each turn's advantage (and its discounted
return) on that turn's tokens; ``turn_values_on_tokens`` places per-turn numbers computed elsewhere
(e.g. by a critic); ``turn_values_to_tokens`` is its one-row kernel. A turn's tokens are its span in
the row, or, when only a trainer's loss mask travels with the batch, the mask's runs (``mask_runs``:
the env and template ids between two actions have mask 0). Adapters decode their framework's
transport into per-episode turn rewards, group ids, state keys and spans or masks, call these, and
encode the result back (``docs/adding-a-framework.md``). State keys cross processes as JSON
(``state_keys_to_json``) or, where a transport carries numbers only, as 63-bit codes
(``state_key_code``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ReduceFn = Callable[[Any], Any]
EstimatorFn = Callable[..., np.ndarray]
ENTRY_POINT_GROUP = "gem_adapters.estimators"


@dataclass(frozen=True)
class Estimator:
    """A registered estimator: ``fn(batch: TurnBatch, *, gamma, lam, eps, reduce_fn) -> per-turn float64
    array`` and what it needs besides rewards. Adapters check a name against what their trainer can
    feed with ``require_estimator`` (and list the usable ones with ``estimator_names``):
    ``needs_values`` (a critic's per-turn values), ``needs_groups`` (group ids of
    episodes that share an initial state), ``needs_state_keys`` (each turn's env state key),
    ``needs_strata`` (each episode's stratum in a mixed batch: the env id its task came from)."""

    name: str
    fn: EstimatorFn
    needs_values: bool = False
    needs_groups: bool = False
    needs_state_keys: bool = False
    needs_strata: bool = False

    def __call__(self, batch: TurnBatch, **kwargs: Any) -> np.ndarray:
        return self.fn(batch, **kwargs)

    def missing(self, *, values: bool, groups: bool, state_keys: bool, strata: bool = False) -> list[str]:
        """What this estimator needs that a trainer supplying (``True``) or not values, group ids,
        state keys and strata lacks (empty: the trainer can feed it)."""
        needs = [
            (self.needs_values and not values, "a critic's per-turn values"),
            (self.needs_groups and not groups, "group ids"),
            (self.needs_state_keys and not state_keys, "per-turn env state keys"),
            (self.needs_strata and not strata, "each episode's stratum (the env id of its task)"),
        ]
        return [what for lacking, what in needs if lacking]


ESTIMATORS: dict[str, Estimator] = {}
_LISTENERS: list[Callable[[Estimator], None]] = []


def register_estimator(
    name: str,
    *,
    needs_values: bool = False,
    needs_groups: bool = False,
    needs_state_keys: bool = False,
    needs_strata: bool = False,
) -> Callable[[EstimatorFn], EstimatorFn]:
    """Register ``fn`` under ``name`` (a decorator). Every adapter sees it at once, in this process;
    for every process of a trainer (verl's and OpenRLHF's Ray workers), register it in a module named
    by an entry point of the ``gem_adapters.estimators`` group (see ``load_entry_points``)."""

    def decorate(fn: EstimatorFn) -> EstimatorFn:
        if name in ESTIMATORS:
            raise ValueError(f"estimator {name!r} is already registered")
        estimator = Estimator(
            name,
            fn,
            needs_values=needs_values,
            needs_groups=needs_groups,
            needs_state_keys=needs_state_keys,
            needs_strata=needs_strata,
        )
        ESTIMATORS[name] = estimator
        for listener in list(_LISTENERS):
            listener(estimator)
        return fn

    return decorate


def on_register(listener: Callable[[Estimator], None]) -> None:
    """Call ``listener`` for every estimator registered so far (the plugins' included) and for every one
    registered later: how an adapter whose trainer keeps its own registry (verl) stays in step with this one."""
    _load_plugins()
    _LISTENERS.append(listener)
    for estimator in list(ESTIMATORS.values()):
        listener(estimator)


def estimator_names(
    *, values: bool = False, groups: bool = True, state_keys: bool = False, strata: bool = False
) -> list[str]:
    """The registered names usable by a trainer that can (``True``) or cannot supply per-turn values,
    group ids, per-turn state keys and each episode's stratum."""
    _load_plugins()
    return sorted(
        e.name
        for e in ESTIMATORS.values()
        if not e.missing(values=values, groups=groups, state_keys=state_keys, strata=strata)
    )


def require_estimator(
    name: str,
    *,
    values: bool = False,
    groups: bool = True,
    state_keys: bool = False,
    strata: bool = False,
    trainer: str = "this trainer",
) -> Estimator:
    """The estimator registered as ``name``, if a trainer that can (``True``) or cannot supply per-turn
    values, group ids, per-turn state keys and each episode's stratum (the env id of its task) can
    feed it: how every adapter checks a configured name, when the run is configured. Otherwise a
    ``ValueError`` naming ``trainer``, what it lacks, and the names it could use instead."""
    usable = estimator_names(values=values, groups=groups, state_keys=state_keys, strata=strata)
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r} for {trainer}; choose one of {usable}")
    estimator = ESTIMATORS[name]
    missing = estimator.missing(values=values, groups=groups, state_keys=state_keys, strata=strata)
    if missing:
        raise ValueError(
            f"{trainer} cannot feed estimator {name!r}: it needs {' and '.join(missing)}; choose one of {usable}"
        )
    return estimator


def get_estimator(name: str) -> Estimator:
    """The estimator registered as ``name`` (the built-in ones or a plugin's)."""
    _load_plugins()
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise KeyError(f"unknown estimator {name!r}; known: {sorted(ESTIMATORS)}") from None


_plugins_loaded = False
_plugins_lock = threading.RLock()


def _load_plugins() -> None:
    """Load the entry points' estimators once, at the first lookup or listing of the registry
    (``get_estimator``, ``estimator_names``, ``on_register``), not at import: importing
    ``gem_adapters`` runs no third-party code. A plugin's own lookups while it loads see the registry
    as it stands."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    with _plugins_lock:
        if _plugins_loaded:
            return
        _plugins_loaded = True  # before loading: a plugin's own lookups must not load again
        load_entry_points()


def load_entry_points() -> list[str]:
    """Import every module named in the ``gem_adapters.estimators`` entry point group (their
    ``register_estimator`` calls run on import). The registry calls it once, at its first lookup or
    listing; call it yourself to load them earlier. Returns the loaded entry points' names; one that
    fails to load is reported as a warning naming it, not raised, and the other estimators stay."""
    from importlib import metadata

    loaded = []
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry_point.load()
        except Exception as exc:  # a broken plugin must not break training with the built-in estimators
            warnings.warn(f"estimator entry point {entry_point.name!r} failed to load: {exc!r}", stacklevel=2)
            continue
        loaded.append(entry_point.name)
    return loaded


@dataclass(frozen=True)
class TurnBatch:
    """Flat per-turn arrays plus the episode layout derived from them (all numpy).

    ``episode[i]`` is turn ``i``'s episode as an index ``0..E-1`` and ``position[i]`` its turn number
    within that episode; ``lengths[e]`` counts episode ``e``'s turns; ``group[e]`` is episode ``e``'s
    group as an index ``0..G-1`` (None without group ids); ``state[i]`` is turn ``i``'s state key as an
    index ``0..S-1``, -1 for a turn without one (None without state keys); ``stratum[e]`` is episode
    ``e``'s stratum as an index ``0..K-1`` (None without strata). ``rewards`` has 0.0 for a turn whose
    reward was None.
    """

    rewards: np.ndarray
    episode: np.ndarray
    position: np.ndarray
    lengths: np.ndarray
    group: np.ndarray | None
    values: np.ndarray | None
    state: np.ndarray | None = None
    stratum: np.ndarray | None = None

    @classmethod
    def from_arrays(
        cls,
        rewards: Any,
        episode_ids: Any,
        group_ids: Any = None,
        values: Any = None,
        state_keys: Any = None,
        strata: Any = None,
    ) -> TurnBatch:
        r = turn_rewards_array(rewards)
        ep = as_numpy(episode_ids, dtype=None)
        if r.ndim != 1 or ep.shape != r.shape:
            raise ValueError(f"rewards {r.shape} and episode_ids {ep.shape} must be 1-D of equal length")
        _, episode = np.unique(ep, return_inverse=True)
        episode = episode.reshape(-1)
        lengths = np.bincount(episode, minlength=int(episode.max(initial=-1)) + 1)
        order = np.argsort(episode, kind="stable")
        starts = np.cumsum(lengths) - lengths
        position = np.empty_like(episode)
        position[order] = np.arange(len(r)) - np.repeat(starts, lengths)
        group = (
            None
            if group_ids is None
            else _per_episode("group_ids", "group id", group_ids, r.shape, episode, lengths)
        )
        v = None
        if values is not None:
            v = as_numpy(values)
            if v.shape != r.shape:
                raise ValueError(f"values {v.shape} must match rewards {r.shape}")
        state = None
        if state_keys is not None:
            keys = state_keys.tolist() if _is_torch(state_keys) else list(state_keys)
            if len(keys) != len(r):
                raise ValueError(f"{len(keys)} state keys for {len(r)} turns")
            try:
                state = _group_codes(keys, missing=-1)
            except TypeError as exc:
                raise ValueError(f"a state key must be hashable plain data ({exc})") from None
        stratum = None
        if strata is not None:
            stratum = _per_episode("strata", "stratum", _codes_array(strata), r.shape, episode, lengths)
        return cls(r, episode, position, lengths, group, v, state, stratum)

    @property
    def num_episodes(self) -> int:
        return len(self.lengths)

    def to_matrix(self, per_turn: np.ndarray) -> np.ndarray:
        """Per-turn numbers as an (episodes, max turns) matrix, zero-padded after each episode's end."""
        matrix = np.zeros((self.num_episodes, int(self.lengths.max(initial=0))), dtype=np.float64)
        matrix[self.episode, self.position] = per_turn
        return matrix

    def returns(self, gamma: float) -> np.ndarray:
        """Per-turn discounted returns ``G_t``; cost linear in the number of turns."""
        rewards = self.to_matrix(self.rewards)
        out = np.zeros_like(rewards)
        running = np.zeros(self.num_episodes, dtype=np.float64)
        for t in range(rewards.shape[1] - 1, -1, -1):
            running = rewards[:, t] + gamma * running  # padding is zero, so each episode starts at its end
            out[:, t] = running
        return out[self.episode, self.position]

    def episode_returns(self, gamma: float) -> np.ndarray:
        """``R = G_0`` of each episode, shape (episodes,)."""
        out = np.zeros(self.num_episodes, dtype=np.float64)
        first = self.position == 0
        out[self.episode[first]] = self.returns(gamma)[first]
        return out

    def require_groups(self, name: str) -> np.ndarray:
        if self.group is None:
            raise ValueError(f"the {name!r} estimator needs group_ids (episodes that share an initial state)")
        return self.group

    def require_strata(self, name: str) -> np.ndarray:
        if self.stratum is None:
            raise ValueError(
                f"the {name!r} estimator needs strata (each episode's source in a mixed batch, e.g. the env "
                "id of its task); this trainer's advantage hook does not receive them"
            )
        return self.stratum

    def require_state(self, name: str) -> np.ndarray:
        if self.state is None:
            raise ValueError(
                f"the {name!r} estimator needs state_keys (each turn's env state key, Turn.state_key, "
                "recorded by gem_adapters.runtime.rollout); this trainer's advantage hook does not receive them"
            )
        return self.state


# ---- estimators ---------------------------------------------------------------------------------
@register_estimator("reinforce")
def reinforce(batch: TurnBatch, *, gamma: float, **_: Any) -> np.ndarray:
    return batch.returns(gamma)


@register_estimator("rebn")
def rebn(
    batch: TurnBatch, *, gamma: float, eps: float, reduce_fn: ReduceFn | None = None, **_: Any
) -> np.ndarray:
    return _zscore(batch.returns(gamma), eps, reduce_fn)


def _zscore(returns: np.ndarray, eps: float, reduce_fn: ReduceFn | None = None) -> np.ndarray:
    """``(G - mean) / (std + eps)``, mean and population std over ``returns`` (every worker's with
    ``reduce_fn``): ReBN's normalisation."""
    reduce = reduce_fn or (lambda x: x)
    total, count = reduce(np.array([returns.sum(), float(len(returns))]))
    if count <= 0:
        raise ValueError("ReBN over an empty batch")
    mean = total / count
    (squares,) = reduce(np.array([np.square(returns - mean).sum()]))
    std = np.sqrt(squares / count)
    return (returns - mean) / (std + eps)


@register_estimator("rebn_per_env", needs_strata=True)
def rebn_per_env(
    batch: TurnBatch, *, gamma: float, eps: float, reduce_fn: ReduceFn | None = None, **_: Any
) -> np.ndarray:
    stratum = batch.require_strata("rebn_per_env")
    if reduce_fn is not None:
        raise ValueError(
            "rebn_per_env normalises within each stratum of the whole batch: give it every worker's "
            "episodes (gathered), not a reduce_fn"
        )
    returns = batch.returns(gamma)
    per_turn = stratum[batch.episode]
    out = np.empty_like(returns)
    for s in np.unique(per_turn):
        where = per_turn == s
        # rebn's own arithmetic on the stratum's turns, in batch order: one stratum gives rebn's numbers
        out[where] = _zscore(returns[where], eps)
    return out


@register_estimator("rebn_per_episode")
def rebn_per_episode(
    batch: TurnBatch, *, gamma: float, eps: float, reduce_fn: ReduceFn | None = None, **_: Any
) -> np.ndarray:
    returns = batch.returns(gamma)
    weight = 1.0 / batch.lengths[batch.episode]  # an episode's turn weights sum to 1
    reduce = reduce_fn or (lambda x: x)
    # Each worker holds whole episodes, so the summed weights count the global batch's episodes.
    weighted_sum, episodes, turns = reduce(
        np.array([(weight * returns).sum(), weight.sum(), float(len(returns))])
    )
    if episodes <= 0:
        raise ValueError("ReBN over an empty batch")
    mean = weighted_sum / episodes
    (squares,) = reduce(np.array([(weight * np.square(returns - mean)).sum()]))
    std = np.sqrt(squares / episodes)
    return (returns - mean) / (std + eps) * weight * (turns / episodes)


def _group_totals(batch: TurnBatch, name: str, gamma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per episode: its return, its group's size and its group's sum of returns."""
    group = batch.require_groups(name)
    episode_return = batch.episode_returns(gamma)
    size = np.bincount(group).astype(np.float64)
    total = np.bincount(group, weights=episode_return)
    return episode_return, size[group], total[group]


def _centred(values: np.ndarray, groups: np.ndarray, eps: float, std: bool) -> np.ndarray:
    """``values`` minus their group's mean, divided by the group's sample std (ddof=1, as TRL and verl)
    + eps when ``std``; 0 for a group of one (no baseline). ``groups`` are indices ``0..G-1``."""
    size = np.bincount(groups).astype(np.float64)
    mean = np.bincount(groups, weights=values) / size
    centred = values - mean[groups]  # exactly 0 for a group of one
    if not std:
        return centred
    squares = np.bincount(groups, weights=np.square(centred))
    deviation = np.sqrt(np.divide(squares, size - 1, out=np.zeros_like(squares), where=size > 1))
    return np.divide(centred, deviation[groups] + eps, out=np.zeros_like(centred), where=size[groups] > 1)


@register_estimator("grpo", needs_groups=True)
def grpo(batch: TurnBatch, *, gamma: float, eps: float, **_: Any) -> np.ndarray:
    group = batch.require_groups("grpo")
    return _centred(batch.episode_returns(gamma), group, eps, std=True)[batch.episode]


@register_estimator("dr_grpo", needs_groups=True)
def dr_grpo(batch: TurnBatch, *, gamma: float, **_: Any) -> np.ndarray:
    group = batch.require_groups("dr_grpo")
    return _centred(batch.episode_returns(gamma), group, 0.0, std=False)[batch.episode]


@register_estimator("rloo", needs_groups=True)
def rloo(batch: TurnBatch, *, gamma: float, **_: Any) -> np.ndarray:
    episode_return, size, total = _group_totals(batch, "rloo", gamma)
    others = np.divide(total - episode_return, size - 1, out=episode_return.copy(), where=size > 1)
    return (episode_return - others)[batch.episode]


@register_estimator("gae", needs_values=True)
def gae(batch: TurnBatch, *, gamma: float, lam: float, **_: Any) -> np.ndarray:
    if batch.values is None:
        raise ValueError("the 'gae' estimator needs per-turn values")
    rewards, values = batch.to_matrix(batch.rewards), batch.to_matrix(batch.values)
    out = np.zeros_like(rewards)
    running = np.zeros(batch.num_episodes, dtype=np.float64)
    next_value = np.zeros(batch.num_episodes, dtype=np.float64)
    for t in range(rewards.shape[1] - 1, -1, -1):
        alive = t < batch.lengths  # past an episode's end everything stays zero
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = np.where(alive, delta + gamma * lam * running, 0.0)
        next_value = np.where(alive, values[:, t], 0.0)
        out[:, t] = running
    return out[batch.episode, batch.position]


def _gigpo(batch: TurnBatch, *, gamma: float, eps: float, omega: float, std: bool, name: str) -> np.ndarray:
    group = batch.require_groups(name)
    state = batch.require_state(name)
    # Episode level: the group's undiscounted returns (Eq. 3).
    episode_return = np.bincount(batch.episode, weights=batch.rewards, minlength=batch.num_episodes)
    episode_level = _centred(episode_return, group, eps, std)[batch.episode]
    # Step level: turns of one group whose state before the action is the same (Eqs. 5-7).
    step_level = np.zeros(len(batch.rewards), dtype=np.float64)
    anchored = state >= 0
    if anchored.any():
        pairs = np.stack([group[batch.episode[anchored]], state[anchored]], axis=1)
        _, step_group = np.unique(pairs, axis=0, return_inverse=True)
        returns = batch.returns(gamma)[anchored]
        step_level[anchored] = _centred(returns, step_group.reshape(-1), eps, std)
    return episode_level + omega * step_level


# A different omega is one registration away:
#   register_estimator("gigpo_w05", needs_groups=True, needs_state_keys=True)(functools.partial(gigpo, omega=0.5))
@register_estimator("gigpo", needs_groups=True, needs_state_keys=True)
def gigpo(batch: TurnBatch, *, gamma: float, eps: float, omega: float = 1.0, **_: Any) -> np.ndarray:
    return _gigpo(batch, gamma=gamma, eps=eps, omega=omega, std=True, name="gigpo")


@register_estimator("gigpo_no_std", needs_groups=True, needs_state_keys=True)
def gigpo_no_std(batch: TurnBatch, *, gamma: float, eps: float, omega: float = 1.0, **_: Any) -> np.ndarray:
    return _gigpo(batch, gamma=gamma, eps=eps, omega=omega, std=False, name="gigpo_no_std")


# ---- entry points -------------------------------------------------------------------------------
def compute_advantages_flat(
    name: str,
    rewards: Any,
    episode_ids: Any,
    *,
    group_ids: Any = None,
    values: Any = None,
    state_keys: Sequence[Any] | None = None,
    strata: Any = None,
    gamma: float = 1.0,
    lam: float = 1.0,
    eps: float = 1e-6,
    reduce_fn: ReduceFn | None = None,
) -> Any:
    """Per-turn advantages for flat per-turn arrays (numpy or torch; the result has the rewards' kind;
    a list of rewards may hold None, a turn without a reward signal). ``state_keys``: one hashable or
    None per turn (a list; integer keys may also come as a numpy array or tensor). ``strata``: one
    id per turn (its episode's stratum: an env id, a number)."""
    estimator = get_estimator(name)
    batch = TurnBatch.from_arrays(rewards, episode_ids, group_ids, values, state_keys, strata)
    if len(batch.rewards) == 0:
        return _like(np.zeros(0), rewards)
    reduce = None if reduce_fn is None else _numpy_reduce(reduce_fn, rewards)
    out = estimator(batch, gamma=float(gamma), lam=float(lam), eps=float(eps), reduce_fn=reduce)
    return _like(out, rewards)


def _check_one_per_turn(what: str, per_episode: Sequence[Sequence[Any]], lengths: list[int]) -> None:
    if len(per_episode) != len(lengths):
        raise ValueError(
            f"{what} must have one entry per turn of each episode: {len(per_episode)} episodes for "
            f"{len(lengths)}"
        )
    for episode, (entries, turns) in enumerate(zip(per_episode, lengths)):
        if len(entries) != turns:
            raise ValueError(
                f"{what} must have one entry per turn of each episode: episode {episode} has "
                f"{len(entries)} for {turns} turns"
            )


def compute_advantages(
    name: str,
    episode_rewards: Sequence[Sequence[float | None]],
    *,
    gamma: float = 1.0,
    group_ids: Sequence[Any] | None = None,
    values: Sequence[Sequence[float]] | None = None,
    state_keys: Sequence[Sequence[Any]] | None = None,
    strata: Sequence[Any] | None = None,
    lam: float = 1.0,
    eps: float = 1e-6,
    reduce_fn: ReduceFn | None = None,
) -> list[np.ndarray]:
    """Per-turn advantages, one array per episode. ``episode_rewards``: each episode's turn rewards
    (``turn_rewards``: a float, or None for a turn without a reward signal); ``group_ids`` and
    ``strata`` (e.g. each episode's env id, for ``rebn_per_env``) have one entry per episode;
    ``values`` and ``state_keys`` one per turn of each episode."""
    lengths = [len(r) for r in episode_rewards]
    flat = [x for r in episode_rewards for x in r]
    episode_ids = np.repeat(np.arange(len(lengths)), lengths)
    groups = None if group_ids is None else np.repeat(_group_codes(group_ids), lengths)
    if strata is not None and len(strata) != len(lengths):
        raise ValueError(f"strata must have one entry per episode: {len(strata)} for {len(lengths)} episodes")
    flat_strata = None if strata is None else np.repeat(_group_codes(strata), lengths)
    flat_values = None
    if values is not None:
        _check_one_per_turn("values", values, lengths)
        flat_values = np.array([float(x) for v in values for x in v], dtype=np.float64)
    flat_keys = None
    if state_keys is not None:
        _check_one_per_turn("state_keys", state_keys, lengths)
        flat_keys = [k for keys in state_keys for k in keys]
    out = compute_advantages_flat(
        name,
        flat,
        episode_ids,
        group_ids=groups,
        values=flat_values,
        state_keys=flat_keys,
        strata=flat_strata,
        gamma=gamma,
        lam=lam,
        eps=eps,
        reduce_fn=reduce_fn,
    )
    return np.split(out, np.cumsum(lengths)[:-1]) if lengths else []


def advantages_for_episodes(name: str, episodes: Sequence[Any], **kwargs: Any) -> list[np.ndarray]:
    """Per-turn advantages of ``gem_adapters.episodes.episode.Episode`` objects; GRPO groups default to
    ``episode.group_id`` (episodes of the same env id and seed share a group), strata to
    ``episode.env_id``, state keys to each turn's ``state_key`` and rewards to each turn's ``reward``
    (``turn_rewards=`` replaces them: one list of floats or None per episode)."""
    kwargs.setdefault("group_ids", [ep.group_id for ep in episodes])
    kwargs.setdefault("strata", [getattr(ep, "env_id", None) for ep in episodes])
    kwargs.setdefault("state_keys", [[getattr(t, "state_key", None) for t in ep.turns] for ep in episodes])
    rewards = kwargs.pop("turn_rewards", None)
    if rewards is None:
        rewards = [[t.reward for t in ep.turns] for ep in episodes]
    return compute_advantages(name, rewards, **kwargs)


# ---- state keys across processes ----------------------------------------------------------------
def state_keys_to_json(keys: Sequence[Any]) -> str:
    """One episode's per-turn state keys as a JSON array (tuples become arrays, None null): the form
    in which a transport that carries strings ships them (verl's non-tensor fields).
    ``state_keys_from_json`` reads them back; keys equal as JSON stay equal."""
    try:
        return json.dumps(list(keys), separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a state key must be plain JSON data (tuples, strings, numbers): {exc}") from None


def state_keys_from_json(text: str) -> list[Any]:
    """The keys of ``state_keys_to_json``, arrays read back as tuples."""
    return [_hashable(key) for key in json.loads(text)]


def state_key_code(key: Any) -> int:
    """A state key as an integer, for transports that carry numbers only (OpenRLHF's ``extra_logs``
    become tensors): -1 for None, else the first 63 bits of the BLAKE2b digest of the key's JSON
    (``state_keys_to_json``). The same in every process (Python's ``hash`` of a string is salted per
    process); two different keys share a code with probability 2**-63."""
    if key is None:
        return -1
    digest = hashlib.blake2b(state_keys_to_json([key]).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def discounted_returns(rewards: Any, gamma: float = 1.0, episode_ids: Any = None) -> Any:
    """``G_t = r_t + gamma * G_{t+1}`` for one episode's rewards (or flat turns with ``episode_ids``)."""
    r = turn_rewards_array(rewards)
    ids = np.zeros(len(r), dtype=np.int64) if episode_ids is None else episode_ids
    return _like(TurnBatch.from_arrays(r, ids).returns(float(gamma)), rewards)


@dataclass(frozen=True)
class TokenAdvantages:
    """What ``token_advantages`` gives: (episodes, width) float64 matrices and the per-turn numbers."""

    advantages: np.ndarray  # each turn's advantage on its tokens, 0 elsewhere
    returns: np.ndarray  # each turn's discounted return G_t on its tokens, 0 elsewhere
    turn_advantages: list[np.ndarray]  # per episode, one advantage per turn
    turn_returns: list[np.ndarray]  # per episode, one G_t per turn


def token_advantages(
    name: str,
    turn_rewards: Sequence[Sequence[float | None]],
    width: int,
    *,
    turn_spans: Sequence[Sequence[tuple[int, int]]] | None = None,
    loss_mask: Any = None,
    group_ids: Sequence[Any] | None = None,
    state_keys: Sequence[Sequence[Any]] | None = None,
    values: Sequence[Sequence[float]] | None = None,
    strata: Sequence[Any] | None = None,
    gamma: float = 1.0,
    lam: float = 1.0,
    eps: float = 1e-6,
    reduce_fn: ReduceFn | None = None,
) -> TokenAdvantages:
    """The estimator ``name`` from episodes' per-turn rewards to token-level advantages: the one
    function every framework adapter calls (one token row per episode, ``width`` columns).

    ``turn_rewards``, ``group_ids``, ``state_keys``, ``values``, ``strata``, ``gamma``, ``lam``,
    ``eps`` and ``reduce_fn`` are ``compute_advantages``'s; ``turn_spans`` and ``loss_mask`` say where each turn's
    tokens are (``turn_values_on_tokens``)."""
    per_turn = compute_advantages(
        name,
        turn_rewards,
        gamma=gamma,
        group_ids=group_ids,
        values=values,
        state_keys=state_keys,
        strata=strata,
        lam=lam,
        eps=eps,
        reduce_fn=reduce_fn,
    )
    per_turn_returns = [discounted_returns(turn_rewards_array(r), gamma) for r in turn_rewards]
    return TokenAdvantages(
        advantages=turn_values_on_tokens(per_turn, width, turn_spans=turn_spans, loss_mask=loss_mask),
        returns=turn_values_on_tokens(per_turn_returns, width, turn_spans=turn_spans, loss_mask=loss_mask),
        turn_advantages=per_turn,
        turn_returns=per_turn_returns,
    )


def turn_values_on_tokens(
    turn_values: Sequence[Any],
    width: int,
    *,
    turn_spans: Sequence[Sequence[tuple[int, int]]] | None = None,
    loss_mask: Any = None,
) -> np.ndarray:
    """An (episodes, ``width``) float64 matrix: row ``e`` holds ``turn_values[e][k]`` on the tokens of
    episode ``e``'s turn ``k`` and 0 elsewhere. A turn's tokens are ``turn_spans[e][k]`` (``(start,
    end)`` in the row); without spans, the ``k``-th run of nonzero ``loss_mask[e]`` (``mask_runs``).
    With ``loss_mask`` (episodes, ``width``), positions where it is 0 are 0 too."""
    mask = None if loss_mask is None else as_numpy(loss_mask)
    if mask is not None and mask.shape != (len(turn_values), width):
        raise ValueError(f"loss_mask {mask.shape} for {len(turn_values)} episodes of {width} tokens")
    if turn_spans is None:
        if mask is None:
            raise ValueError("turn_values_on_tokens needs turn_spans or a loss_mask")
        turn_spans = [mask_runs(row) for row in mask]
    if len(turn_spans) != len(turn_values):
        raise ValueError(f"{len(turn_spans)} episodes' spans for {len(turn_values)} episodes' values")
    out = np.zeros((len(turn_values), width), dtype=np.float64)
    for e, (values, spans) in enumerate(zip(turn_values, turn_spans)):
        out[e] = turn_values_to_tokens(as_numpy(values), spans, width, None if mask is None else mask[e])
    return out


def turn_values_to_tokens(
    per_turn_values: Any, turn_spans: Sequence[tuple[int, int]], seq_len: int, loss_mask: Any = None
) -> Any:
    """A length-``seq_len`` array with turn ``k``'s value on the tokens ``turn_spans[k]`` and 0
    elsewhere; with ``loss_mask``, positions where the mask is 0 are 0 too."""
    values = as_numpy(per_turn_values)
    if len(values) != len(turn_spans):
        raise ValueError(f"{len(values)} values for {len(turn_spans)} turns")
    out = np.zeros(seq_len, dtype=np.float64)
    for value, (start, end) in zip(values, turn_spans):
        if not 0 <= start <= end <= seq_len:
            raise ValueError(f"span ({start}, {end}) outside a sequence of {seq_len} tokens")
        out[start:end] = value
    if loss_mask is not None:
        out *= as_numpy(loss_mask) != 0
    return _like(out, per_turn_values)


def mask_runs(mask: Any) -> list[tuple[int, int]]:
    """``(start, end)`` of every maximal run of nonzero entries of a 1-D mask (list, numpy or torch):
    the turn spans of a sequence whose actions are separated by mask-0 ids."""
    m = as_numpy(mask, dtype=None)
    if m.ndim != 1:
        raise ValueError(f"mask_runs takes one 1-D mask, got shape {m.shape}")
    edges = np.diff(np.concatenate([[False], m != 0, [False]]).astype(np.int8))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))


def turn_rewards_array(rewards: Any) -> np.ndarray:
    """Per-turn rewards as float64 numpy: None (a turn without a reward signal) is 0.0; NaN and inf
    raise (they are bugs upstream, not missing signals)."""
    if _is_torch(rewards) or (isinstance(rewards, np.ndarray) and rewards.dtype != object):
        out = as_numpy(rewards)
    else:
        out = np.array([0.0 if x is None else float(x) for x in rewards], dtype=np.float64)
    if not np.isfinite(out).all():
        raise ValueError(
            f"a per-turn reward is not finite ({out[~np.isfinite(out)][0]}); use None for a turn without a reward"
        )
    return out


# ---- numpy / torch boundary ---------------------------------------------------------------------
def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def as_numpy(x: Any, dtype: Any = np.float64) -> np.ndarray:
    """A tensor (any device), array or list as numpy: float64 by default, its own dtype with
    ``dtype=None``. The one tensor-to-numpy conversion of the adapters."""
    if _is_torch(x):
        x = x.detach().cpu()
        if dtype is not None:
            x = x.double()
        x = x.numpy()
    return np.asarray(x, dtype=dtype)


def _like(out: np.ndarray, reference: Any) -> Any:
    """``out`` as a tensor on ``reference``'s device and float dtype when ``reference`` is a tensor."""
    if not _is_torch(reference):
        return out
    import torch

    dtype = reference.dtype if reference.is_floating_point() else torch.float64
    return torch.from_numpy(out).to(device=reference.device, dtype=dtype)


def _numpy_reduce(reduce_fn: ReduceFn, reference: Any) -> Callable[[np.ndarray], np.ndarray]:
    """``reduce_fn`` fed with arrays of the caller's kind (float64 tensors on its device for torch)."""
    if not _is_torch(reference):
        return lambda x: as_numpy(reduce_fn(x.copy()))

    import torch

    return lambda x: as_numpy(reduce_fn(torch.from_numpy(x.copy()).to(reference.device)))


def _codes_array(ids: Any) -> np.ndarray:
    """Per-turn ids as an array ``np.unique`` can sort: numbers as they are, anything else (strings,
    tuples: env ids, group ids) as ``_group_codes``."""
    if _is_torch(ids) or (isinstance(ids, np.ndarray) and ids.dtype != object):
        return as_numpy(ids, dtype=None)
    return _group_codes(list(ids))


def _per_episode(
    what: str, noun: str, ids: Any, shape: tuple[int, ...], episode: np.ndarray, lengths: np.ndarray
) -> np.ndarray:
    """Per-turn ids (one per turn, the same for every turn of an episode) as each episode's index
    ``0..K-1``."""
    ids = as_numpy(ids, dtype=None)
    if ids.shape != shape:
        raise ValueError(f"{what} {ids.shape} must match rewards {shape}")
    _, index = np.unique(ids, return_inverse=True)
    index = index.reshape(-1)
    out = np.empty(len(lengths), dtype=np.int64)
    out[episode] = index
    if not np.array_equal(out[episode], index):
        raise ValueError(f"every turn of an episode must carry the same {noun}")
    return out


def _group_codes(group_ids: Sequence[Any], missing: int | None = None) -> np.ndarray:
    """Integer codes for arbitrary hashable ids (strings, tuples, ints; lists are read as tuples, as
    JSON gives them back); with ``missing``, None gets that code."""
    codes: dict[Any, int] = {}
    return np.array(
        [
            missing if missing is not None and g is None else codes.setdefault(_hashable(g), len(codes))
            for g in group_ids
        ],
        dtype=np.int64,
    )


def _hashable(x: Any) -> Any:
    return tuple(_hashable(v) for v in x) if isinstance(x, (list, tuple)) else x

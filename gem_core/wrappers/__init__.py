"""Wrappers: change how an env is observed, budgeted or measured, or check the order of its calls
(``OrderEnforcing``, applied by ``gem_core.make``), with explicit forwarding."""

from gem_core.wrappers.budget import ContextBudget, TimeLimit
from gem_core.wrappers.episode import EpisodeStatistics
from gem_core.wrappers.observation import (
    ChatMessages,
    ChatTemplate,
    ConcatObservations,
    HistoryWrapper,
    LastKTurns,
    ObservationActionHistory,
)
from gem_core.wrappers.order_enforcing import OrderEnforcing
from gem_core.wrappers.tools import ToolEnvWrapper
from gem_core.wrappers.wrapper_factory import WRAPPER_FACTORY, get_wrapper_fns

__all__ = [
    "WRAPPER_FACTORY",
    "ChatMessages",
    "ChatTemplate",
    "ConcatObservations",
    "ContextBudget",
    "EpisodeStatistics",
    "HistoryWrapper",
    "LastKTurns",
    "ObservationActionHistory",
    "OrderEnforcing",
    "TimeLimit",
    "ToolEnvWrapper",
    "get_wrapper_fns",
]

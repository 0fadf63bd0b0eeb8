"""Wrappers: change how an env is observed, budgeted or measured, with explicit forwarding."""

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
    "TimeLimit",
    "ToolEnvWrapper",
    "get_wrapper_fns",
]

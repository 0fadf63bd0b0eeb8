"""Token-exact trajectories, under one import: the names of ``gem_adapters.episode`` (the episode
data and its layouts), ``gem_adapters.chat_renderer`` (incremental chat-template rendering),
``gem_adapters.episode_builder`` (an episode recorded as it is played) and ``gem_adapters.jsonl``
(record and replay)."""

from gem_adapters.chat_renderer import ChatRenderer, shared_renderer
from gem_adapters.episode import (
    Episode,
    PromptResponse,
    TokenSequence,
    Turn,
    TurnSample,
    as_observation,
    rescore,
)
from gem_adapters.episode_builder import EpisodeBuilder, PromptIds
from gem_adapters.jsonl import iter_jsonl, read_jsonl, write_jsonl

__all__ = [
    "ChatRenderer",
    "Episode",
    "EpisodeBuilder",
    "PromptIds",
    "PromptResponse",
    "TokenSequence",
    "Turn",
    "TurnSample",
    "as_observation",
    "iter_jsonl",
    "read_jsonl",
    "rescore",
    "shared_renderer",
    "write_jsonl",
]

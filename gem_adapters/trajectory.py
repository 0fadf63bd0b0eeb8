"""Deprecated: import each name from the module that defines it.

``gem_adapters.trajectory`` was the single import of the token-exact trajectory names. It stays, for
code written against it, as a re-export that warns on import; the names live in:

``gem_adapters.episode``          Episode, Turn, TurnSample, TokenSequence, PromptResponse, as_observation, rescore
``gem_adapters.chat_renderer``    ChatRenderer, shared_renderer
``gem_adapters.episode_builder``  EpisodeBuilder, PromptIds
``gem_adapters.jsonl``            read_jsonl, iter_jsonl, write_jsonl
"""

import warnings

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

warnings.warn(
    "gem_adapters.trajectory is deprecated: import from gem_adapters.episode, gem_adapters.chat_renderer, "
    "gem_adapters.episode_builder or gem_adapters.jsonl (see its docstring)",
    DeprecationWarning,
    stacklevel=2,
)

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

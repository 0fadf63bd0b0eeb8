"""What an evaluation is asked to do (EvalConfig) and what it returns (EvalResult)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem_adapters.episodes.episode import Episode
from gem_adapters.evaluation.errors import EvalError

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful AI assistant. Think briefly, then give your move or answer in the format the "
    "task asks for, usually inside \\boxed{}.\n"
    "Example:\nUser: Guess a number between 1 and 100.\nAssistant: The middle is 50. \\boxed{50}"
)
TOOL_NAMES = ("python", "search")


@dataclass
class EvalConfig:
    env_ids: list[str]
    episodes: int = 8
    k: int = 1
    seed: int = 0
    tools: tuple[str, ...] = ()
    search_url: str | None = None
    max_turns: int | None = None
    max_new_tokens: int = 256
    max_context_tokens: int | None = 8192
    temperature: float | None = None  # None: 0 (greedy) when k == 1, else 1.0
    top_p: float = 1.0
    concurrency: int = 16
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT

    def __post_init__(self) -> None:
        if self.episodes < 1 or self.k < 1 or self.concurrency < 1:
            raise EvalError("--episodes, --k and --concurrency must be at least 1")
        unknown = [t for t in self.tools if t not in TOOL_NAMES]
        if unknown:
            raise EvalError(f"unknown tool {unknown[0]!r}; choose from {', '.join(TOOL_NAMES)}")

    @property
    def sampling_temperature(self) -> float:
        if self.temperature is not None:
            return self.temperature
        return 0.0 if self.k == 1 else 1.0


@dataclass
class EvalResult:
    model: str
    config: EvalConfig
    episodes: list[Episode]
    metrics: dict[str, Any]
    wall_seconds: float = 0.0
    files: dict[str, Path] = field(default_factory=dict)

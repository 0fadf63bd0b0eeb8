"""play: a person plays any registered env in the terminal (``gem play ENV_ID``).

Each turn shows the observation and reads one line. A line without ``\\boxed`` is wrapped as
``\\boxed{line}``, so typing ``50`` plays ``\\boxed{50}``; a line that already contains ``\\boxed`` is
sent as typed (a full action, reasoning included), and so is the rest of a line starting with ``:raw ``
(for envs that read other formats, e.g. tool calls). After each step it shows the reward, the
return so far and the turn count; at the end of an episode, a summary. Commands:

  ``:q``  quit            ``:r``  restart (the seed given to ``play`` again, or a new episode)
  ``:h``  the history of this episode's actions and rewards

End of input (Ctrl-D) quits like ``:q``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gem_core.registry import make

HELP = "Type your move (it is wrapped in \\boxed{} for you), or :h history, :r restart, :q quit."


@dataclass
class EpisodeSummary:
    """How the last episode went."""

    turns: int = 0
    total_reward: float = 0.0
    success: bool = False
    finished: bool = False
    history: list[tuple[str, float]] = field(default_factory=list)  # (action sent, reward)


def as_action(line: str) -> str:
    """The action a typed line stands for: itself if it has ``\\boxed`` (or starts with ``:raw ``), else boxed."""
    if line.startswith(":raw "):
        return line[len(":raw ") :]
    if "\\boxed" in line:
        return line
    return f"\\boxed{{{line.strip()}}}"


def play(
    env_id: str,
    seed: int | None = None,
    input_fn: Callable[[str], str] = input,
    print_fn: Callable[..., Any] = print,
) -> EpisodeSummary:
    """Play ``env_id`` interactively until ``:q`` or end of input; return the last episode's summary."""
    env = make(env_id)
    try:
        episode = _start(env, seed, print_fn)
        while True:
            try:
                line = input_fn("> ")
            except EOFError:
                break
            command = line.strip()
            if command == ":q":
                break
            if command == ":r":
                episode = _start(env, seed, print_fn)
            elif command == ":h":
                _print_history(episode, print_fn)
            elif episode.finished:
                print_fn("The episode is over: :r to play again, :h for its history, :q to quit.")
            elif not command:
                print_fn(HELP)
            else:
                _turn(env, episode, as_action(line), print_fn)
        return episode
    finally:
        env.close()


def _start(env: Any, seed: int | None, print_fn: Callable[..., Any]) -> EpisodeSummary:
    obs, _ = env.reset(seed=seed)
    print_fn(f"=== {env.unwrapped} (seed {getattr(env.unwrapped, 'seed', seed)}) ===")
    print_fn(obs)
    print_fn(HELP)
    return EpisodeSummary()


def _turn(env: Any, episode: EpisodeSummary, action: str, print_fn: Callable[..., Any]) -> None:
    obs, reward, terminated, truncated, info = env.step(action)
    episode.turns += 1
    episode.total_reward += reward
    episode.history.append((action, reward))
    print_fn(obs)
    notes = [k for k in ("format_error", "invalid_move", "error") if info.get(k)]
    note = f" ({', '.join(notes)})" if notes else ""
    print_fn(f"[turn {episode.turns}] reward {reward:+.3f}{note}, return {episode.total_reward:+.3f}")
    if terminated or truncated:
        episode.finished = True
        episode.success = bool(info.get("success"))
        outcome = "You won!" if episode.success else "Out of turns." if truncated else "Game over."
        print_fn(
            f"=== {outcome} Return {episode.total_reward:+.3f} in {episode.turns} turn"
            f"{'s' if episode.turns != 1 else ''}. Type :r to play again, :h for the history, :q to quit. ==="
        )


def _print_history(episode: EpisodeSummary, print_fn: Callable[..., Any]) -> None:
    if not episode.history:
        print_fn("No moves yet.")
    for turn, (action, reward) in enumerate(episode.history, start=1):
        print_fn(f"{turn:>3}. {action}  ->  {reward:+.3f}")
    print_fn(f"Return so far {episode.total_reward:+.3f} in {episode.turns} turns.")

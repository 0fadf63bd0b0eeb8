"""Supervised warm-up data: episodes played by a scripted player, tokenised as a policy would have played them.

A short supervised pass over such episodes teaches a small model the rules of a game (the move format,
what the feedback means) before RL teaches it to win; ``gem_adapters.trl.sft_warm_up`` runs one with TRL
(``examples/train_trl.py``). Each scripted action is encoded as the model would have generated it (the action's text,
then the template's end-of-turn token), so ``Episode.to_sequence()`` gives the ids and the loss mask
(1 on the actions only) exactly as for sampled episodes.

``scripted_games`` plays the games (observation, action text and step result per move: a tokenizer's
corpus, statistics of a player); ``episodes_of_games`` tokenises them; ``scripted_episodes`` does both.
A player may be any callable of the unwrapped env, e.g. one that draws from its own seeded RNG: the
games are played in a fixed order, so the same seeds and RNG give the same games.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode, as_observation
from gem_adapters.episodes.episode_builder import EpisodeBuilder

Player = Callable[[Any], str]  # the innermost game -> the next action's text
Move = tuple[Any, str, tuple]  # (observation, the action's text, env.step's 5-tuple)


def scripted_games(
    env_id: str,
    seeds: Iterable[int],
    player: Player,
    *,
    max_turns: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> Iterator[tuple[int, list[Move]]]:
    """Play one game per seed with ``player`` (given the unwrapped env, returning the action text), in one
    env reset per seed; yields ``(seed, moves)`` as each game ends (by the env, or after ``max_turns``
    moves). A player that draws random numbers plays the same games when its RNG is seeded the same: the
    games are played in the order of ``seeds``, move by move."""
    from gem_core import make

    with make(env_id, **(env_kwargs or {})) as env:
        for seed in seeds:
            observation, _ = env.reset(seed=seed)
            moves: list[Move] = []
            done = False
            while not done and (max_turns is None or len(moves) < max_turns):
                move = player(env.unwrapped)
                if not isinstance(move, str):
                    raise ValueError(
                        f"the scripted player gave {move!r} on {env_id} (an env without a solver?)"
                    )
                result = env.step(move)
                moves.append((observation, move, result))
                observation, done = result[0], bool(result[2] or result[3])
            yield seed, moves


def episodes_of_games(
    env_id: str, games: Iterable[tuple[int, list[Move]]], renderer: ChatRenderer
) -> list[Episode]:
    """The games of ``scripted_games`` token by token, as a policy would have played them: each action is
    its text's ids then the template's end-of-turn token. A game stopped before the env ended it is
    finished as stopped by ``max_turns``."""
    if not renderer.stop_token_ids:
        raise ValueError("the renderer's template has no end-of-turn token to end a scripted action with")
    stop = renderer.stop_token_ids[0]
    episodes = []
    for seed, moves in games:
        if not moves:
            raise ValueError(f"{env_id} (seed {seed}): a game without a move")
        builder = EpisodeBuilder(renderer, as_observation(moves[0][0]), env_id=env_id, seed=seed)
        for _, move, (observation, reward, terminated, truncated, info) in moves:
            text = builder.add_action([*renderer.encode(move), stop])
            if text != move:
                raise ValueError(
                    f"the tokenizer does not give back the scripted action {move!r} (got {text!r})"
                )
            builder.add_feedback(as_observation(observation), reward, terminated, truncated, info)
        episodes.append(builder.finish(None if builder.done else "max_turns"))
    return episodes


# A worked game of GuessTheNumber shown in the chat before each episode (loss mask 0): with it the move
# format and the game's feedback are in context even before any training (SmolLM2-135M rarely answers in
# \boxed{} without it). ``ChatRenderer(..., prefix_messages=GUESS_THE_NUMBER_WORKED_GAME)``.
GUESS_THE_NUMBER_WORKED_GAME = [
    {"role": "user", "content": "Guess my number between 1 and 10. Reply with your guess inside \\boxed{}."},
    {"role": "assistant", "content": "\\boxed{5}"},
    {"role": "user", "content": "5 is wrong: the number is higher."},
    {"role": "assistant", "content": "\\boxed{8}"},
    {"role": "user", "content": "8 is wrong: the number is lower."},
    {"role": "assistant", "content": "\\boxed{7}"},
    {"role": "user", "content": "Correct! The number was 7. Let's play again."},
    {"role": "assistant", "content": "OK."},
]


def solver(env: Any) -> str:
    """The env's own scripted solver (``Env.solve_action``) as a ``Player``."""
    return env.solve_action()


def scripted_episodes(
    env_id: str,
    seeds: Sequence[int],
    renderer: ChatRenderer,
    player: Player,
    *,
    max_turns: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> list[Episode]:
    """Play one episode per seed with ``player`` (given the unwrapped env, returning the action text):
    ``episodes_of_games`` of ``scripted_games``."""
    if not renderer.stop_token_ids:
        raise ValueError("the renderer's template has no end-of-turn token to end a scripted action with")
    games = scripted_games(env_id, seeds, player, max_turns=max_turns, env_kwargs=env_kwargs)
    return episodes_of_games(env_id, games, renderer)


def sft_rows(episodes: Sequence[Episode]) -> list[dict[str, list[int]]]:
    """``{"input_ids", "assistant_masks"}`` per episode: the pre-tokenised form TRL's ``SFTTrainer`` takes
    (the loss then falls on the actions only)."""
    rows = []
    for episode in episodes:
        sequence = episode.to_sequence()
        rows.append({"input_ids": sequence.token_ids, "assistant_masks": sequence.loss_mask})
    return rows

"""Supervised warm-up data: episodes played by a scripted player, tokenised as a policy would have played them.

A short supervised pass over such episodes teaches a small model the rules of a game (the move format,
what the feedback means) before RL teaches it to win; ``gem_adapters.trl.sft_warm_up`` runs one with TRL
(``examples/train_trl.py``). Each scripted action is encoded as the model would have generated it (the action's text,
then the template's end-of-turn token), so ``Episode.to_sequence()`` gives the ids and the loss mask
(1 on the actions only) exactly as for sampled episodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gem_adapters.trajectory import ChatRenderer, Episode, as_observation

Player = Callable[[Any], str]  # the innermost game -> the next action's text

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
) -> list[Episode]:
    """Play one episode per seed with ``player`` (given the unwrapped env, returning the action text)."""
    from gem_core import make

    if not renderer.stop_token_ids:
        raise ValueError("the renderer's template has no end-of-turn token to end a scripted action with")
    stop = renderer.stop_token_ids[0]
    episodes = []
    for seed in seeds:
        env = make(env_id)
        observation, _ = env.reset(seed=seed)
        builder = renderer.start(as_observation(observation), env_id=env_id, seed=seed)
        while not builder.done and (max_turns is None or len(builder.episode.turns) < max_turns):
            move = player(env.unwrapped)
            if not isinstance(move, str):
                raise ValueError(f"the scripted player gave {move!r} on {env_id} (an env without a solver?)")
            text = builder.add_action([*renderer.encode(move), stop])
            observation, reward, terminated, truncated, info = env.step(text)
            builder.add_feedback(as_observation(observation), reward, terminated, truncated, info)
        episodes.append(builder.finish(None if builder.done else "max_turns"))
        env.close()
    return episodes


def sft_rows(episodes: Sequence[Episode]) -> list[dict[str, list[int]]]:
    """``{"input_ids", "assistant_masks"}`` per episode: the pre-tokenised form TRL's ``SFTTrainer`` takes
    (the loss then falls on the actions only)."""
    rows = []
    for episode in episodes:
        sequence = episode.to_sequence()
        rows.append({"input_ids": sequence.token_ids, "assistant_masks": sequence.loss_mask})
    return rows

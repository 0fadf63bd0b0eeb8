"""Episodes of gem_core games played through the reference GEM API (``gem.make``) by an agent that
mixes the game's scripted solver with random moves, so that returns differ between episodes."""

from __future__ import annotations

import random

END_OF_TURN = "<|im_end|>"  # ROLL decodes responses with special tokens kept


def agent_action(env, agent: random.Random, p_random: float) -> str:
    """The scripted solver's move, or with probability ``p_random`` the env's random move."""
    game = env.gem_core_env
    if agent.random() < p_random:
        return game.sample_random_action()
    return game.solve_action()


def play(env, seed: int, agent: random.Random, p_random: float) -> list[float]:
    """One episode of a ``RollEnv`` through the gem API; per-turn rewards."""
    env.reset(seed=seed)
    rewards, terminated = [], False
    while not terminated:
        _, reward, terminated, _, _ = env.step(agent_action(env, agent, p_random) + END_OF_TURN)
        rewards.append(reward)
    return rewards

"""Code written for the reference GEM runs on gem_core: snippets exactly as the reference's README
(``gem-llm`` 0.1.0) and its ``examples/train_oat.py`` write them, with ``gem`` replaced by ``gem_core``
(and the LLM policy by a fixed reply where the snippet calls a model)."""

from __future__ import annotations

import numpy as np

import gem_core


def test_readme_quickstart(capsys):
    # --- the reference README's "Quick Start", verbatim but for the module name ---
    import gem_core

    # List all supported environments
    gem_core.print_envs()

    # Initialize the environment
    env = gem_core.make("game:GuessTheNumber-v0")

    # Reset the environment to generate the first observation
    observation, info = env.reset()

    # Start the agent-environment loop
    while True:
        action = env.sample_random_action()  # insert policy here, e.g.,
        # (pseudocode) action = llm.generate(observation)

        # apply action and receive next observation, reward
        # and whether the episode has ended
        next_observation, reward, terminated, truncated, info = env.step(action)
        print("OBS", observation)
        print("ACT", action)

        # update the policy (online) here
        # e.g., policy = learn(policy, observation, action, reward, info)

        observation = next_observation
        # Exit when the episode terminates
        if terminated or truncated:
            break
    # --- end of the snippet ---
    out = capsys.readouterr().out
    assert "game:GuessTheNumber-v0" in out and "ACT \\boxed{" in out


class Args:
    env_id = "game:Minesweeper-v0-easy"
    num_env = 3
    seed = 233
    async_env = True
    wrappers = "concat"


def test_train_oat_environment_loop():
    args = Args()
    # --- examples/train_oat.py: Actor.init (the env part), verbatim but for the module name ---
    from gem_core.wrappers.wrapper_factory import get_wrapper_fns

    # Get environment wrappers.
    wrappers = get_wrapper_fns(args.wrappers, tokenizer=None)

    # Instantiate vectorized environment.
    env = gem_core.make_vec(
        [args.env_id] * args.num_env,
        vec_kwargs=[{"seed": args.seed + j} for j in range(args.num_env)],
        wrappers=wrappers,
        async_mode=args.async_env,
    )
    # --- Actor.collect_experience's use of the env (the policy replaced by a fixed reply) ---
    try:
        obs, _ = env.reset()
        episodes = [[] for _ in range(env.num_envs)]
        finished_episodes = []
        for _ in range(30):
            action = ["\\boxed{reveal 2 2}"] * env.num_envs
            next_obs, reward, terminated, truncated, info = env.step(action)
            done = terminated | truncated
            for i in range(env.num_envs):
                episodes[i].append((obs[i], action[i], reward[i], done[i]))
                if done[i]:
                    finished_episodes.append(list(episodes[i]))
                    episodes[i].clear()
            obs = next_obs
        fresh = env.envs[0].reset()[0]
    finally:
        env.close()
    # Revealing the same cell again and again: the first reveal pays, the others do not, and every
    # episode ends within the 25 turns; the same-step autoreset starts the next game at once.
    assert len(finished_episodes) >= env.num_envs and all(len(ep) <= 25 for ep in finished_episodes)
    assert all(ep[0][2] > 0 and ep[-1][3] for ep in finished_episodes)
    assert isinstance(reward, np.ndarray) and "Minesweeper" in fresh

"""A malformed move earns nothing: the scripted (paying) move of every game, made malformed with a sign,
non-ASCII digits or extra tokens, must not be rewarded (issue: Mastermind read \\boxed{-5 -5} as 5 5)."""

import re

import pytest

import gem_core
from gem_core.envs.games import mastermind
from gem_core.parsing import extract_boxed

GAME_IDS = gem_core.list_envs("game:*-v1-easy") + gem_core.list_envs("game:*-v1-hard")  # -v0: reference
FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")


def malformed(move: str) -> dict[str, str]:
    variants = {
        "extra words": f"{move} and more junk",
        "leading junk": f"junk {move}",
        "fullwidth digits": move.translate(FULLWIDTH),
        "arabic-indic digits": move.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")),
        "signed numbers": re.sub(r"(?<![0-9])([0-9]+)", r"-\1", move),
        "plus signs": re.sub(r"(?<![0-9])([0-9]+)", r"+\1", move),
        "underscored numbers": re.sub(r"([0-9])([0-9])", r"\1_\2", move),
    }
    return {name: text for name, text in variants.items() if text != move}


def paying_move(env_id: str, seed: int):
    """An env reset with ``seed`` and a move (the scripted player's) that pays > 0, or None."""
    env = gem_core.make(env_id)
    env.reset(seed=seed)
    for _ in range(200):
        action = env.solve_action()
        state = env.get_state()
        _, reward, terminated, truncated, _ = env.step(action)
        if reward > 0:
            env.set_state(state)
            return env, extract_boxed(action)
        if terminated or truncated:
            return None
    return None


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_malformed_moves_earn_nothing(env_id):
    tried = 0
    for seed in range(6):
        found = paying_move(env_id, seed)
        if found is None:
            continue
        env, move = found
        state = env.get_state()
        for name, text in malformed(move).items():
            env.set_state(state)
            obs, reward, *_ = env.step(f"\\boxed{{{text}}}")
            assert reward <= 0, (env_id, seed, name, text, obs)
            tried += 1
    assert tried, "no paying move found"


@pytest.mark.parametrize(
    "guess", ["-5 -5", "5 -5", "+5 5", "５ ５", "5 5 x", "x 5 5", "5,,5", "(5 5", "5 5)", "5_5", "5 - 5"]
)
def test_mastermind_malformed_guesses_are_format_errors(guess):
    env = mastermind.MastermindEnv(code_length=2, num_symbols=6, max_turns=10)
    env.reset(seed=0)
    env.code = (5, 1)
    obs, reward, _, _, info = env.step(f"\\boxed{{{guess}}}")
    assert reward == -0.1 and info["format_error"], obs


@pytest.mark.parametrize("guess", ["5 1", "5,1", "5-1", "[5, 1]", "(5 1)", "51", " 5 ; 1 "])
def test_mastermind_well_formed_guesses(guess):
    env = mastermind.MastermindEnv(code_length=2, num_symbols=6, max_turns=10)
    env.reset(seed=0)
    env.code = (5, 1)
    obs, reward, terminated, _, info = env.step(f"\\boxed{{{guess}}}")
    assert terminated and info["success"] and reward > 1, obs

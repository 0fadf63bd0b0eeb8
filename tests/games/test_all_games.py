"""check_env over every registered ``game:*`` id, and what every game shares."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem_core
from gem_core.parsing import extract_boxed

GAME_IDS = gem_core.list_envs("game:*")
GAMES = sorted({i.split(":")[1].split("-v1")[0] for i in GAME_IDS if "-v1" in i})


def test_every_game_has_all_its_variants():
    """Both versions: the reference's (``-v0``) and gem_core's design (``-v1``)."""
    assert len(GAMES) >= 12
    for name in GAMES:
        for version in ("-v0", "-v1"):
            for suffix in ("", "-easy", "-hard", "-random"):
                assert f"game:{name}{version}{suffix}" in GAME_IDS


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_check_env(env_id):
    gem_core.check_env(gem_core.make(env_id))


@pytest.mark.parametrize("env_id", [f"game:{name}-v1{s}" for name in GAMES for s in ("", "-random")])
def test_every_v1_game_has_a_scripted_solver_and_the_reference_games_none(env_id):
    env = gem_core.make(env_id)
    env.reset(seed=0)
    assert extract_boxed(env.solve_action())  # through RandomDifficulty to the game it drew
    reference = gem_core.make(env_id.replace("-v1", "-v0"))
    reference.reset(seed=0)
    assert reference.solve_action() is None


@pytest.mark.parametrize("env_id", [f"game:{name}-v1-easy" for name in GAMES])
def test_rules_prompt_and_penalties(env_id):
    env = gem_core.make(env_id)
    obs, _ = env.reset(seed=0)
    assert "\\boxed" in obs and "turns left" in obs
    obs, reward, terminated, truncated, info = env.step("no boxed move here")
    assert reward == pytest.approx(-0.1) and info.get("format_error") and not terminated
    assert "\\boxed" in obs
    obs, reward, _, _, info = env.step("\\boxed{\x00 certainly not a move \x00}")
    assert reward == pytest.approx(-0.1) and info.get("invalid_move")


@pytest.mark.parametrize("env_id", [f"game:{name}{v}-easy" for name in GAMES for v in ("-v0", "-v1")])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.text(max_size=30), min_size=1, max_size=4))
def test_arbitrary_boxed_moves_never_raise(env_id, texts):
    env = gem_core.make(env_id)
    env.reset(seed=0)
    for text in texts:
        obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{text}}}")
        assert isinstance(obs, str) and obs.strip() and math.isfinite(reward)
        if terminated or truncated:
            break


NASTY_MOVES = [
    "²",
    "٣",
    "Ⅷ",
    "-1",
    "1e9",
    "nan",
    "9" * 1999,
    "",
    "   ",
    "{}",
    "{{1}}",
    "\\boxed{1}",
    "1/0",
    "٣ ٣ ٣",
]


@pytest.mark.parametrize("env_id", [f"game:{name}{v}-easy" for name in GAMES for v in ("-v0", "-v1")])
def test_nasty_moves_never_raise(env_id):
    env = gem_core.make(env_id)
    for move in NASTY_MOVES:
        env.reset(seed=0)
        obs, reward, _, _, _ = env.step(f"\\boxed{{{move}}}")
        assert isinstance(obs, str) and obs.strip() and math.isfinite(reward), move

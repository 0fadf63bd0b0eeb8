"""check_env over every registered ``game:*`` id, and what every game shares."""

import pytest

import gem_core

GAME_IDS = gem_core.list_envs("game:*")
GAMES = sorted({i.split(":")[1].split("-v0")[0] for i in GAME_IDS})


def test_every_game_has_all_its_variants():
    assert len(GAMES) >= 12
    for name in GAMES:
        for suffix in ("", "-easy", "-hard", "-random"):
            assert f"game:{name}-v0{suffix}" in GAME_IDS


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_check_env(env_id):
    gem_core.check_env(gem_core.make(env_id))


@pytest.mark.parametrize("env_id", [f"game:{name}-v0-easy" for name in GAMES])
def test_rules_prompt_and_penalties(env_id):
    env = gem_core.make(env_id)
    obs, _ = env.reset(seed=0)
    assert "\\boxed" in obs and "turns left" in obs
    obs, reward, terminated, truncated, info = env.step("no boxed move here")
    assert reward == pytest.approx(-0.1) and info.get("format_error") and not terminated
    assert "\\boxed" in obs
    obs, reward, _, _, info = env.step("\\boxed{\x00 certainly not a move \x00}")
    assert reward == pytest.approx(-0.1) and info.get("invalid_move")

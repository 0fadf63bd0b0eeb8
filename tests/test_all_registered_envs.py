"""check_env over every registered id whose data ships offline (hub-backed ids are tested for a clear
offline failure in their own modules' tests)."""

import pytest

import gem_core

OFFLINE_IDS = [i for i in gem_core.list_envs() if gem_core.spec(i).data_source == "offline"]


def test_there_are_registered_envs():
    assert len(OFFLINE_IDS) >= 4


@pytest.mark.parametrize("env_id", OFFLINE_IDS)
def test_check_env(env_id):
    gem_core.check_env(gem_core.make(env_id), seed=123)

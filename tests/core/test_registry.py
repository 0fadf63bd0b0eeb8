import subprocess
import sys

import pytest

import gem_core
from gem_core import EnvNotFoundError
from gem_core.vector import AsyncVectorEnv, SyncVectorEnv
from gem_core.wrappers import TimeLimit


def test_reference_gem_ids_resolve():
    for env_id in ["game:GuessTheNumber-v1-hard", "game:GuessTheNumber-v1-easy", "game:GuessTheNumber-v1"]:
        assert env_id in gem_core.list_envs()
    env = gem_core.make("game:GuessTheNumber-v1-hard").unwrapped
    assert (env.max_number, env.max_turns) == (50, 7)
    easy = gem_core.make("game:GuessTheNumber-v1-easy").unwrapped
    assert (easy.max_number, easy.max_turns) == (10, 4)


def test_make_kwargs_override_defaults():
    env = gem_core.make("game:GuessTheNumber-v1-easy", max_turns=9).unwrapped
    assert env.max_turns == 9 and env.max_number == 10


def test_unknown_id_lists_close_matches():
    with pytest.raises(EnvNotFoundError, match=r"Did you mean: .*game:GuessTheNumber-v1"):
        gem_core.make("game:GuesTheNumber-v1-hrad")
    with pytest.raises(EnvNotFoundError, match="GuessTheNumber"):
        gem_core.make("GuessTheNumber")


def test_list_envs_patterns():
    games = gem_core.list_envs("game:*")
    assert games and all(i.startswith("game:") for i in games)
    assert gem_core.list_envs("guessthenumber") == [i for i in gem_core.list_envs() if "GuessTheNumber" in i]
    assert gem_core.list_envs("game:*-easy") == sorted(i for i in games if i.endswith("-easy"))


def test_register_custom_env_and_duplicate_rejected():
    spec = gem_core.register("test:Custom-v0", "tests.core.toy_envs:CountdownEnv", length=2)
    try:
        env = gem_core.make("test:Custom-v0")
        assert env.unwrapped.length == 2 and env.spec is spec and spec.category == "test"
        with pytest.raises(ValueError, match="already registered"):
            gem_core.register("test:Custom-v0", "tests.core.toy_envs:CountdownEnv")
    finally:
        assert gem_core.unregister("test:Custom-v0") is spec
    assert "test:Custom-v0" not in gem_core.list_envs()
    with pytest.raises(gem_core.EnvNotFoundError):
        gem_core.unregister("test:Custom-v0")


def test_reference_spelling_alias():
    ids = gem_core.list_envs()
    assert "game:TowerofHanoi-v1-easy" in ids and "game:TowerOfHanoi-v1-easy" in ids


def test_make_vec_builds_sync_or_async_with_wrappers():
    vec = gem_core.make_vec("game:GuessTheNumber-v1-easy", 3, wrappers=[lambda e: TimeLimit(e, 2)])
    assert isinstance(vec, AsyncVectorEnv) and len(vec) == 3
    assert all(isinstance(e, TimeLimit) for e in vec.envs)
    vec.close()
    mixed = gem_core.make_vec(["game:GuessTheNumber-v1-easy", "game:GuessTheNumber-v1-hard"], backend="sync")
    assert isinstance(mixed, SyncVectorEnv)
    assert [e.spec.id for e in mixed.envs] == ["game:GuessTheNumber-v1-easy", "game:GuessTheNumber-v1-hard"]
    with pytest.raises(EnvNotFoundError):
        gem_core.make_vec("game:Nope-v1", 2)


def test_threads_making_their_first_envs_at_once_all_find_the_builtin_ids():
    """The first ``make`` imports the built-in envs; threads that ask meanwhile wait for the import
    (OpenRLHF plays a prompt's samples in threads from the start)."""
    code = (
        "import threading, gem_core\n"
        "errors, barrier = [], threading.Barrier(8)\n"
        "def play():\n"
        "    barrier.wait()\n"
        "    try:\n"
        "        gem_core.make('game:GuessTheNumber-v1-easy')\n"
        "    except Exception as exc:\n"
        "        errors.append(repr(exc))\n"
        "threads = [threading.Thread(target=play) for _ in range(8)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "print(errors)\n"
    )
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
        )
        assert out.stdout.strip() == "[]"

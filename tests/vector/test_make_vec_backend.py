"""``make_vec`` picks its backend with ``backend=``; ``async_mode`` (the reference GEM's keyword) and the
deprecated ``asynchronous`` map onto it in one place, ``gem_core.vector.backends.resolve_backend``."""

import warnings

import pytest

import gem_core
from gem_core.vector import DEFAULT_BACKEND, resolve_backend

ENV_ID = "game:GuessTheNumber-v1-easy"


def vector_type(**kwargs):
    vec = gem_core.make_vec(ENV_ID, 2, **kwargs)
    vec.close()
    return type(vec).__name__


@pytest.mark.parametrize(
    ("backend", "expected"),
    [("sync", "SyncVectorEnv"), ("threads", "AsyncVectorEnv"), (None, "AsyncVectorEnv")],
)
def test_backend_names_the_vector_env_without_warning(backend, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert vector_type(backend=backend) == expected
    assert DEFAULT_BACKEND == "threads"


@pytest.mark.parametrize(("flag", "expected"), [(True, "AsyncVectorEnv"), (False, "SyncVectorEnv")])
def test_async_mode_is_the_references_alias_without_warning(flag, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert vector_type(async_mode=flag) == expected


@pytest.mark.parametrize(("flag", "expected"), [(True, "AsyncVectorEnv"), (False, "SyncVectorEnv")])
def test_asynchronous_is_a_deprecated_alias(flag, expected):
    with pytest.warns(DeprecationWarning, match="backend='threads' or backend='sync'") as caught:
        assert vector_type(asynchronous=flag) == expected
    assert caught[0].filename == __file__  # the warning points at the caller of make_vec


@pytest.mark.parametrize(
    "kwargs",
    [
        {"backend": "processes", "async_mode": True},
        {"backend": "sync", "async_mode": True},
        {"backend": "threads", "asynchronous": False},
        {"async_mode": True, "asynchronous": False},
    ],
)
def test_conflicting_choices_raise_and_name_them(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(
            ValueError, match=r"conflicting vector env backends: .*pass backend= alone"
        ) as error:
            gem_core.make_vec(ENV_ID, 2, **kwargs)
    for keyword, value in kwargs.items():
        assert f"{keyword}={value!r}" in str(error.value)


def test_agreeing_choices_are_accepted():
    assert resolve_backend("threads", async_mode=True) == "threads"
    assert resolve_backend("sync", async_mode=False) == "sync"


def test_unknown_backend_and_non_bool_flags_are_rejected():
    with pytest.raises(ValueError, match=r"unknown vector env backend 'nope'; choose from \["):
        gem_core.make_vec(ENV_ID, 2, backend="nope")
    with pytest.raises(TypeError, match="are True or False, got 'false'"):
        resolve_backend(async_mode="false")

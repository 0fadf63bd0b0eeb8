"""The env registry: ids such as ``game:GuessTheNumber-v0-hard`` map to an entry point and default kwargs.

Ids follow the reference GEM scheme ``category:Name-v0[-variant]``. Entry points are ``"module:Class"``
strings, imported on first ``make``, so registering hundreds of ids costs nothing at import time.

The first lookup (``make``, ``spec``, ``list_envs``) imports the built-in envs (``gem_core.envs``) and
then the envs of other packages: each entry point of the ``gem_core.envs`` group, a module that
registers its ids on import or a function that registers them (``docs/adding-an-env.md``).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import importlib
import inspect
import threading
import types
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gem_core.core import Env


class EnvNotFoundError(KeyError):
    """An id that is not registered; the message lists close matches."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


@dataclass(frozen=True)
class EnvSpec:
    """How to build one registered env."""

    id: str
    entry_point: str | Callable[..., Env]
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    multi_turn: bool = True
    data_source: str = "offline"  # "offline" (ships with the package) | "hub" (needs `datasets` + network)

    @property
    def category(self) -> str:
        return self.id.split(":", 1)[0] if ":" in self.id else ""

    def load(self) -> Callable[..., Env]:
        """The class or factory behind this id."""
        if callable(self.entry_point):
            return self.entry_point
        module_name, _, attr = self.entry_point.partition(":")
        return getattr(importlib.import_module(module_name), attr)

    def make(self, **kwargs: Any) -> Env:
        """Build the bare env (``gem_core.make`` wraps it in ``OrderEnforcing``); a ``seed`` its constructor does not take seeds its generators (as
        ``reset(seed=...)`` would), so that a first ``reset()`` without a seed is reproducible."""
        factory = self.load()
        seed = kwargs.pop("seed", None) if "seed" in kwargs and not _takes(factory, "seed") else None
        env = factory(**{**self.kwargs, **kwargs})
        env.spec = self
        if seed is not None:
            env._seed(seed)
        return env


def _takes(factory: Callable[..., Any], name: str) -> bool:
    """Whether ``factory`` names the parameter ``name`` (``**kwargs`` does not count)."""
    try:
        return name in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


_REGISTRY: dict[str, EnvSpec] = {}


def register(
    id: str,
    entry_point: str | Callable[..., Env],
    *,
    description: str = "",
    multi_turn: bool = True,
    data_source: str = "offline",
    **kwargs: Any,
) -> EnvSpec:
    """Register ``id``; ``kwargs`` become the env's default constructor arguments."""
    if id in _REGISTRY:
        raise ValueError(f"env id {id!r} is already registered")
    spec = EnvSpec(id, entry_point, kwargs, description, multi_turn, data_source)
    _REGISTRY[id] = spec
    return spec


def unregister(id: str) -> EnvSpec:
    """Remove ``id`` from the registry (e.g. an env a test registered) and return its spec."""
    return _REGISTRY.pop(spec(id).id)


OPENENV_PREFIX = "openenv:"


def spec(id: str) -> EnvSpec:
    """The spec of a registered id, or an ``EnvNotFoundError`` naming close matches.

    ``"openenv:http://host:port"`` is not registered: it names a session on that OpenEnv server
    (``gem_core.openenv.client.OpenEnvClientEnv``), so ``make`` and ``make_vec`` take it like an id.
    """
    if id.startswith(OPENENV_PREFIX):
        url = id[len(OPENENV_PREFIX) :]
        return EnvSpec(
            id, "gem_core.openenv.client:OpenEnvClientEnv", {"url": url}, f"OpenEnv server at {url}"
        )
    _load_envs()
    try:
        return _REGISTRY[id]
    except KeyError:
        close = difflib.get_close_matches(id, _REGISTRY, n=5, cutoff=0.5)
        if not close:  # match on the name alone, e.g. "GuessTheNumber" for "game:GuessTheNumber-v0"
            stem = id.split(":")[-1].lower()
            close = [k for k in sorted(_REGISTRY) if stem and stem in k.lower()][:5]
        hint = f" Did you mean: {', '.join(close)}?" if close else " See gem_core.list_envs()."
        raise EnvNotFoundError(f"No env registered as {id!r}.{hint}") from None


def make(id: str, **kwargs: Any) -> Env:
    """Build the env registered as ``id`` (``kwargs`` override its registered defaults), wrapped in
    ``OrderEnforcing``: a step before the first reset or after the end raises ``EpisodeOverError``, a
    non-``str`` action ``TypeError`` (``gem_core.wrappers.order_enforcing``). ``EnvSpec.make`` builds the
    bare env."""
    return _enforced(spec(id), kwargs)


def _enforced(env_spec: EnvSpec, kwargs: dict[str, Any]) -> Env:
    from gem_core.wrappers.order_enforcing import OrderEnforcing

    return OrderEnforcing(env_spec.make(**kwargs))


def print_envs() -> None:
    """Print every registered id with its entry point and default kwargs (the reference GEM's listing)."""
    for env_id in list_envs():
        env_spec = _REGISTRY[env_id]
        print(f"  - {env_id}:\n      Entry Point: {env_spec.entry_point}\n      Kwargs: {env_spec.kwargs}")


def list_envs(pattern: str | None = None) -> list[str]:
    """Registered ids, sorted; ``pattern`` is a glob (``game:*-easy``) or a case-insensitive substring."""
    _load_envs()
    ids = sorted(_REGISTRY)
    if not pattern:
        return ids
    if any(c in pattern for c in "*?["):
        return [i for i in ids if fnmatch.fnmatchcase(i, pattern)]
    return [i for i in ids if pattern.lower() in i.lower()]


def make_vec(
    env_ids: str | Sequence[str],
    num_envs: int | None = None,
    *,
    wrappers: Iterable[Callable[[Env], Env]] = (),
    asynchronous: bool | None = None,
    env_kwargs: dict[str, Any] | None = None,
    backend: str | None = None,
    vec_kwargs: Sequence[dict[str, Any]] | None = None,
    async_mode: bool | None = None,
    seed: int | None = None,
    **vector_kwargs: Any,
):
    """A vector env of ``num_envs`` copies of one id, or one env per id in a list.

    Each env is built as ``make`` builds it (inside ``OrderEnforcing``), then ``wrappers`` are applied
    to it in order. ``backend`` is ``"sync"``, ``"threads"`` (the
    default: a thread per env, I/O-bound steps overlap), ``"processes"`` (worker processes, CPU-bound
    steps in parallel) or ``"ray"`` (Ray actors). ``asynchronous`` is a deprecated alias: ``True`` is
    ``"threads"``, ``False`` is ``"sync"`` (``gem_core.vector.backends.resolve_backend``).
    ``vector_kwargs`` go to the vector env (``autoreset_mode``, ``step_timeout``, and per backend
    e.g. ``num_workers``). The env factories pickle (for the process and Ray backends) when the
    wrappers do.

    The reference GEM's form ``make_vec(ids, wrappers=..., vec_kwargs=..., async_mode=..., seed=...)``
    works too: ``vec_kwargs`` is one dict of constructor kwargs per env, ``async_mode`` is the
    reference's name for the backend (``True`` is ``"threads"``, ``False`` is ``"sync"``), ``seed``
    builds env ``i`` with ``seed=seed + i`` (unless its ``vec_kwargs`` name one; see ``EnvSpec.make``),
    and a call that uses any of the three gets the reference's autoreset, ``autoreset_mode="same_step"``,
    unless it names one.
    """
    from gem_core.vector.backends import BACKENDS, resolve_backend

    name = resolve_backend(backend, async_mode=async_mode, asynchronous=asynchronous)
    if vec_kwargs is not None or async_mode is not None or seed is not None:
        vector_kwargs.setdefault("autoreset_mode", "same_step")
    if isinstance(env_ids, str):
        ids = [env_ids] * (num_envs or 1)
    else:
        ids = list(env_ids)
        if num_envs is not None and num_envs != len(ids):
            raise ValueError(f"num_envs={num_envs} but {len(ids)} env ids were given")
    # The factories carry each spec itself, so a worker process needs no registration of its own.
    specs = {env_id: spec(env_id) for env_id in ids}  # fails now, with close matches
    wrapper_list = tuple(wrappers or ())
    if vec_kwargs is not None and len(vec_kwargs) != len(ids):
        raise ValueError(f"{len(vec_kwargs)} vec_kwargs for {len(ids)} envs")
    per_env = [
        {**(env_kwargs or {}), **(vec_kwargs[i] if vec_kwargs is not None else {})} for i in range(len(ids))
    ]
    if seed is not None:
        per_env = [{"seed": seed + i, **kwargs} for i, kwargs in enumerate(per_env)]
    factories = [
        functools.partial(_build_env, specs[env_id], per_env[i], wrapper_list) for i, env_id in enumerate(ids)
    ]
    return BACKENDS[name](factories, **vector_kwargs)


def _build_env(env_spec: EnvSpec, kwargs: dict[str, Any], wrappers: Sequence[Callable[[Env], Env]]) -> Env:
    env = _enforced(env_spec, kwargs)
    for wrap in wrappers:
        env = wrap(env)
    return env


ENTRY_POINT_GROUP = "gem_core.envs"

_envs_loaded = False
_envs_loading = False  # while the loading thread imports: its nested calls return at once
_envs_lock = threading.RLock()


def _load_envs() -> None:
    """Import the built-in env modules, then the plugins, once; other threads that ask meanwhile wait
    for the whole import."""
    global _envs_loaded, _envs_loading
    if _envs_loaded:
        return
    with _envs_lock:
        if _envs_loaded or _envs_loading:
            return
        _envs_loading = True
        try:
            importlib.import_module("gem_core.envs")
            load_entry_points()
        finally:
            _envs_loading = False
        _envs_loaded = True


def load_entry_points() -> list[str]:
    """Load every entry point of the ``gem_core.envs`` group: a module (its ``register`` calls run on
    import) or a callable, called with no arguments, that registers ids. Returns the names of those
    that loaded; one that fails is reported as a warning naming it, and the other envs stay."""
    from importlib import metadata

    loaded, seen = [], set()
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.value in seen:  # the same distribution found twice on sys.path
            continue
        seen.add(entry_point.value)
        try:
            target = entry_point.load()
            if not isinstance(target, types.ModuleType):
                target()
        except Exception as exc:  # a broken plugin must not take the other envs down
            warnings.warn(
                f"env entry point {entry_point.name!r} ({entry_point.value}) failed to load: {exc!r}",
                stacklevel=2,
            )
            continue
        loaded.append(entry_point.name)
    return loaded

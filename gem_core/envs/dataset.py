"""DatasetEnv: a single-turn env over a collection of examples (question in, one graded answer out).

``reset`` draws an example from ``self.rng`` (or takes ``reset(index=i)``, e.g. to evaluate every
example once) and returns its prompt; ``step`` grades the answer and ends the episode. A subclass
says how to prompt (``_prompt``), how to grade (``_grade``) and what a random answer looks like
(``_random_answer``). Stepping after the episode has ended raises ``EpisodeOverError``, as for every
env (``gem_core.core``).

The examples are any sequence of mappings: a list read from a JSON-lines file that ships in
``gem_core/data`` (``read_jsonl``, no dependencies), a Hugging Face dataset (``load_hf_dataset``:
from the Hub by name, or from local files with ``data_files=``), or a lazy sequence that generates
example ``i`` on demand. Loaded examples are cached per process and shared, never copied, by the
envs that ``spawn`` makes, so a GRPO group of a 40k-example dataset costs one copy.

Without network, a Hub id fails within seconds (not after minutes of retries) with a
``DatasetUnavailableError`` that says how to pass a local file instead.
"""

from __future__ import annotations

import functools
import json
import os
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from gem_core.core import Env, StepResult

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
HUB_PROBE_TIMEOUT = 3.0  # seconds to wait for a TCP connection to the Hub before calling it offline
MAX_SKIPPED_EXAMPLES = 8  # unavailable examples in a row before reset gives up


class DatasetEnv(Env[str]):
    """Base class of the single-turn dataset envs (math, QA, logic, reasoning-gym).

    Subclasses call ``super().__init__(examples)`` and implement ``_prompt``, ``_grade`` and
    ``_random_answer``. The reward is whatever ``_grade`` returns (1.0 means solved); ``info`` always
    has ``success`` on the final step, and ``format_error`` when the answer could not be found.

    An example that cannot be had (``_example`` raises ``ExampleUnavailableError``, e.g. its generator
    ran past its deadline) is skipped for the next one, ``index + 1`` (wrapping around), so the same
    seed still gives the same example; the skipped indices are in ``info["skipped_items"]`` and
    ``info["index"]`` is the example posed.
    """

    _static_attributes = ("examples",)

    def __init__(self, examples: Sequence[Mapping[str, Any]]):
        if len(examples) == 0:
            raise ValueError(f"{type(self).__name__} needs at least one example")
        self.examples = examples
        self.index = -1
        self.example: Mapping[str, Any] = {}

    # ---- for subclasses ------------------------------------------------------------------------
    def _prompt(self, example: Mapping[str, Any]) -> str:
        """The observation that poses ``example``."""
        raise NotImplementedError

    def _grade(self, action: str) -> tuple[float, str, dict[str, Any]]:
        """Grade an answer to ``self.example``: ``(reward, feedback, info)``. Must not raise."""
        raise NotImplementedError

    def _random_answer(self) -> str:
        """A random well-formed answer, drawn from ``self.action_rng``."""
        raise NotImplementedError

    # ---- the Env API ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None, index: int | None = None, **kwargs: Any) -> tuple[str, dict]:
        """Draw an example from ``self.rng``, or pose example ``index`` when it is given."""
        super().reset(seed)
        if index is None:
            index = self.rng.randrange(len(self.examples))
        elif not 0 <= index < len(self.examples):
            raise IndexError(f"index {index} is outside 0..{len(self.examples) - 1}")
        index, skipped = int(index), []
        while True:
            try:
                example = self._example(index)
                break
            except ExampleUnavailableError as exc:
                skipped.append(index)
                if len(skipped) >= MAX_SKIPPED_EXAMPLES:
                    raise RuntimeError(f"{len(skipped)} examples in a row are unavailable: {exc}") from exc
                index = (index + 1) % len(self.examples)
        self.index, self.example = index, example
        info: dict[str, Any] = {"index": self.index}
        if skipped:
            info["skipped_items"] = skipped
        return self._prompt(self.example), info

    def _example(self, index: int) -> Mapping[str, Any]:
        """Example ``index``; raises ``ExampleUnavailableError`` when it cannot be had (it is skipped)."""
        return self.examples[index]

    def step(self, action: str) -> StepResult:
        reward, feedback, info = self._grade(action)
        info.setdefault("success", reward >= 1.0)
        return feedback, float(reward), True, False, info

    def sample_random_action(self) -> str:
        return self._random_answer()

    @property
    def num_examples(self) -> int:
        """How many examples ``reset(index=...)`` can pose."""
        return len(self.examples)


class ExampleUnavailableError(Exception):
    """One example cannot be had (e.g. generating it ran past its deadline): ``reset`` skips it."""


# ---- loading examples -----------------------------------------------------------------------------
class DatasetUnavailableError(RuntimeError):
    """A dataset could not be loaded (no network, no such dataset, or a missing dependency)."""


@functools.lru_cache(maxsize=32)
def read_jsonl(path: str | Path) -> tuple[dict[str, Any], ...]:
    """The records of a JSON-lines file; a relative path is looked up in ``gem_core/data``."""
    full = Path(path) if Path(path).is_absolute() else DATA_DIR / path
    with open(full, encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())


def load_hf_dataset(
    dataset_name: str | None,
    split: str | None = None,
    data_files: str | Sequence[str] | Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], ...]:
    """The rows of a Hugging Face dataset: ``dataset_name`` from the Hub, or local ``data_files``.

    ``data_files`` (a JSON/JSON-lines, Parquet or CSV file, a list of them, or a ``{split: files}``
    dict) takes precedence over ``dataset_name``.
    """
    return _load_hf_cached(dataset_name, split, _hashable(data_files))


@functools.lru_cache(maxsize=16)
def _load_hf_cached(
    dataset_name: str | None, split: str | None, data_files: Any
) -> tuple[dict[str, Any], ...]:
    try:
        import datasets
    except ImportError as exc:
        raise DatasetUnavailableError(
            "Loading Hugging Face datasets needs the `datasets` package: pip install 'gem-core[tasks]'"
        ) from exc
    if data_files is not None:
        files = _unhashable(data_files)
        first = next(iter(files.values())) if isinstance(files, dict) else files
        first = first if isinstance(first, str) else next(iter(first))
        builder = _builder_for(first)
        if isinstance(files, dict):
            split = split if split in files else next(iter(files))
        else:
            split = "train"
        dataset = datasets.load_dataset(builder, data_files=files, split=split)
        return tuple(dataset.to_list())
    if not dataset_name:
        raise ValueError("give a dataset_name (a Hub id) or data_files (local files)")
    how_to = _how_to_load_locally(dataset_name)
    if not _hub_offline_mode() and not _hub_reachable():
        raise DatasetUnavailableError(f"The Hugging Face Hub is not reachable. {how_to}")
    try:
        loaded = datasets.load_dataset(dataset_name, split=split)
    except Exception as exc:  # ConnectionError, DatasetNotFoundError, OfflineModeIsEnabled, ...
        raise DatasetUnavailableError(f"{type(exc).__name__}: {exc}\n{how_to}") from exc
    if isinstance(loaded, datasets.DatasetDict):
        names = list(loaded)
        if len(names) != 1 and "train" not in names:
            raise ValueError(f"{dataset_name} has the splits {names}: pass split=...")
        loaded = loaded[names[0] if len(names) == 1 else "train"]
    return tuple(loaded.to_list())


def _how_to_load_locally(dataset_name: str) -> str:
    return (
        f"Could not load {dataset_name!r} from the Hub. Download it where there is network, e.g. "
        f"datasets.load_dataset({dataset_name!r}, split='train').to_json('train.jsonl'), and pass the "
        "local file: gem_core.make('<env id>', data_files='train.jsonl') (JSON lines, JSON, Parquet or "
        "CSV), or set HF_HUB_OFFLINE=1 to use a copy in the datasets cache."
    )


def _builder_for(path: str) -> str:
    suffix = Path(path.split("::")[0]).suffix.lower()
    builders = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}
    if suffix not in builders:
        raise ValueError(f"cannot tell the format of {path!r}: use a .jsonl, .json, .parquet or .csv file")
    return builders[suffix]


def _hub_offline_mode() -> bool:
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes")
        for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def _hub_reachable() -> bool:
    """A quick TCP probe of the Hub endpoint (skipped behind a proxy, where only the proxy can tell)."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=HUB_PROBE_TIMEOUT).close()
    except OSError:
        return False
    return True


def _hashable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return ("__dict__", tuple((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def _unhashable(value: Any) -> Any:
    if isinstance(value, tuple) and value[:1] == ("__dict__",):
        return {k: _unhashable(v) for k, v in value[1]}
    if isinstance(value, tuple):
        return [_unhashable(v) for v in value]
    return value


def answers_of(value: Any) -> list[str]:
    """A gold answer field as a list of strings (datasets store one answer or a list of aliases)."""
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]

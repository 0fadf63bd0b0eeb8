"""Optional packages: an env or tool that needs one checks for it when it is built, never mid-episode.

``require("bm25s", package="bm25s", extra="tools", needed_by="web:Shop-v0's search")`` raises
``MissingExtraError`` (an ``ImportError``) naming the package and the extra that installs it, so a
missing package stops ``make`` instead of a step hours into a run.
"""

from __future__ import annotations

import importlib.util


class MissingExtraError(ImportError):
    """An optional package that an env or tool needs is not installed."""


def require(module: str, *, package: str, extra: str, needed_by: str) -> None:
    """Raise ``MissingExtraError`` unless ``module`` can be imported (checked without importing it)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module without a spec
        found = False
    if not found:
        raise MissingExtraError(
            f"{needed_by} needs {package}, which is not installed: pip install 'gem-core[{extra}]'",
            name=module,
        )

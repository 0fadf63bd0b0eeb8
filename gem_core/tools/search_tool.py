"""The reference gem's ``gem.tools.search_tool``: ``SearchTool``, gem_core's ``SearchTool`` with the reference's
constructor and methods (``tool_type = "search"``, ``instruction_string()``, ``execute_action``).

``search_url`` is a gem_core search server (``python -m gem_core.tools.search``), not the reference's
retrieval server; without one, gem_core's local BM25 index over the shipped corpus answers (the
reference needs ``search_url`` or ``$SEARCH_URL``).
"""

from __future__ import annotations

from typing import Any

from gem_core.tools.base_tool import ReferenceToolAPI
from gem_core.tools.search import SearchTool as GemSearchTool

TIMEOUT = 5


class SearchTool(ReferenceToolAPI, GemSearchTool):
    tool_type = "search"

    def __init__(
        self,
        num_workers: int = 1,
        search_url: str | None = None,
        topk: int = 3,
        timeout: float = TIMEOUT,
        **kwargs: Any,
    ):
        super().__init__(url=search_url, k=topk, timeout=timeout, **kwargs)
        self.num_workers = num_workers
        self.search_url, self.topk = search_url, topk

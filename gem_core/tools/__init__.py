"""Tools an agent can call mid-episode: Python in a sandbox, BM25 search, MCP servers.

Each tool module imports its heavy dependency (``bm25s``, ``mcp``) lazily, so this package imports
with numpy alone. Wrap any env with ``gem_core.wrappers.tools.ToolEnvWrapper`` to give it tools.
"""

from gem_core.tools.base import Tool

__all__ = ["Tool"]

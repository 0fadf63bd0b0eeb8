"""Tools an agent can call mid-episode: Python in a sandbox, BM25 search, MCP servers.

Each tool module imports its heavy dependency (``bm25s``, ``mcp``) only when used, so this package
imports with the standard library alone. Wrap any env with ``gem_core.wrappers.tools.ToolEnvWrapper``
to give it tools.
"""

from gem_core.tools.base import Tool
from gem_core.tools.mcp import MCPTool
from gem_core.tools.python import PythonTool
from gem_core.tools.search import SearchIndex, SearchServer, SearchTool

__all__ = ["MCPTool", "PythonTool", "SearchIndex", "SearchServer", "SearchTool", "Tool"]

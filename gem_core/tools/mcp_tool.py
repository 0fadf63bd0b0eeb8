"""The reference gem's ``gem.tools.mcp_tool``: gem_core's ``MCPTool`` (``gem_core.tools.mcp``) under the
reference's module path. Its constructor is gem_core's (a server command or URL; see that module)."""

from gem_core.tools.mcp import MCPTool

__all__ = ["MCPTool"]

"""The Python sandbox: warm, isolated template processes that fork once per call.

``launcher`` picks the isolation (bubblewrap, else ``unshare``, else a plain process, loudly) and
builds the command; ``template`` is the process inside the sandbox; ``pool`` is the host side.
"""

from gem_core.tools.sandbox.launcher import detect_mode
from gem_core.tools.sandbox.pool import ExecResult, SandboxLimits, SandboxPool, shared_pool

__all__ = ["ExecResult", "SandboxLimits", "SandboxPool", "detect_mode", "shared_pool"]

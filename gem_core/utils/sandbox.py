"""The reference gem's ``gem.utils.sandbox.run_python``, run in gem_core's sandbox (``gem_core.tools.python``):
bubblewrap, no network, resource limits, whatever ``sandbox_type`` says."""

from __future__ import annotations

from gem_core.tools.python import PythonTool

DEFAULT_TIMEOUT = 10


def run_python(
    code: str, sandbox_type: str = "bwrap", stdin: str | None = None, timeout: float = DEFAULT_TIMEOUT
) -> tuple[bool, str, str]:
    """``(success, stdout, stderr)`` of running ``code``; success is a clean exit with status 0."""
    result = PythonTool(timeout=timeout).run(code, stdin=stdin or "")
    stderr = result.stderr if result.error is None else f"{result.stderr}{result.error}"
    return result.ok, result.stdout, stderr

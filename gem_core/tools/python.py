"""PythonTool: the agent writes Python in ``<python>...</python>`` (or a fenced ```python block); the
tool runs it in the sandbox (``gem_core.tools.sandbox``) and returns what it printed.

The observation is ``Code execution result:``, then what the program printed (stdout, then stderr) in
a code fence it cannot close (``gem_core.tools.base.fence``: control characters, ANSI escapes and NUL
shown escaped), then one line per abnormal event (non-zero exit, signal, time-out, truncated output):
whatever a program prints, it cannot pass for those lines. A call is ``ok`` when the code ran to
completion with exit status 0.

By default every ``PythonTool`` in a process shares one warm pool per configuration
(``shared_pool``), so a vector of 64 wrapped envs does not start 64 sandboxes.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any

from gem_core.parsing import extract_tag
from gem_core.tools.base import Tool, fence
from gem_core.tools.sandbox import ExecResult, SandboxLimits, SandboxPool, shared_pool

_FENCE_OPEN = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n", re.IGNORECASE)


def python_fence(text: str) -> str | None:
    """The body of the last closed fenced block tagged ``python``/``py``; None if there is none."""
    for match in reversed(list(_FENCE_OPEN.finditer(text))):
        close = text.find("```", match.end())
        if close != -1:
            return text[match.end() : close]
    return None


def describe(result: ExecResult, limits: SandboxLimits) -> str:
    """The observation text for one sandbox result."""
    if result.error is not None:
        return f"Code execution failed: {result.error}"
    body = result.stdout
    if result.stderr:
        body = f"{body}\n{result.stderr}" if body and not body.endswith("\n") else body + result.stderr
    lines = [fence(body)] if body else []
    if result.truncated:  # the sandbox stopped the program there: its exit status says nothing more
        lines.append(f"[output truncated at {limits.max_output} bytes]")
    elif result.timed_out:
        limit = limits.timeout if result.time_limit_s is None else result.time_limit_s
        lines.append(f"[timed out after {limit:.3g} s: the program was killed]")
    elif result.signal is not None:
        lines.append(f"[the program was killed by {result.signal}]")
    elif result.exit_code not in (0, None):
        lines.append(f"[exit status {result.exit_code}]")
    if not lines:
        lines.append("(no output; use print() to show values)")
    text = "\n".join(lines)
    return f"Code execution result:\n{text}\n"


class PythonTool(Tool):
    """Runs Python from the action in the sandbox.

    ``fenced`` also accepts a ```python block (turn it off for envs whose answer is itself a code
    block). ``pool`` shares an existing ``SandboxPool``; otherwise a process-wide shared pool that
    starts with ``workers`` workers is used, built with ``pool_options`` (``mode``, ``preload``,
    ``seccomp``, ``max_workers``, ``max_calls_per_caller``, ``max_wait``: see ``SandboxPool``; the pool
    shares itself fairly between the envs calling it).
    """

    name = "python"

    def __init__(
        self,
        timeout: float = 5.0,
        memory_mb: int = 512,
        max_output: int = 16_384,
        max_processes: int = 1,
        fenced: bool = True,
        pool: SandboxPool | None = None,
        workers: int = 2,
        **pool_options: Any,
    ):
        self.limits = SandboxLimits(
            timeout=timeout, memory_mb=memory_mb, max_output=max_output, max_processes=max_processes
        )
        self.fenced = fenced
        self._pool, self._pool_args = pool, (workers, pool_options)

    @property
    def pool(self) -> SandboxPool:
        """The sandbox pool, started on first use."""
        if self._pool is None:
            workers, options = self._pool_args
            self._pool = shared_pool(workers, **options)
        return self._pool

    def __getstate__(self) -> dict[str, Any]:
        """Pickling (e.g. to a vector-env worker process) keeps the limits, not the pool: the copy
        starts that process's own shared pool on first use."""
        return {**vars(self), "_pool": None}

    def instruction(self) -> str:
        or_fenced = " or in a ```python code block" if self.fenced else ""
        return (
            "You can run Python code to help your reasoning: write a complete script inside "
            f"<python>...</python>{or_fenced}. It runs in a sandbox (no network, no files kept between runs, "
            f"{self.limits.timeout:g} s limit) and what it prints comes back after 'Code execution result:' "
            "in a code block. "
            "Use print() to see values. When you are done, give your final answer."
        )

    def parse(self, action: str) -> str | None:
        if not isinstance(action, str):
            return None
        code = extract_tag(action, "python")
        if code is None and self.fenced:
            code = python_fence(action)
        return code if code is not None and code.strip() else None

    def execute(self, call: str) -> tuple[str, bool]:
        result = self.run(call)
        return describe(result, self.limits), result.ok

    def run(self, code: str, stdin: str = "") -> ExecResult:
        """Run ``code`` under this tool's limits and return the raw result."""
        return self.pool.run(code, stdin=stdin, **asdict(self.limits))

    def close(self) -> None:
        """Shared pools outlive a single tool (they close at exit); nothing to release here."""

"""The Python sandbox: warm, isolated template processes that fork once per call.

Layers, outermost first (each one alone would stop most of the security suite):

1. ``launcher``: bubblewrap namespaces. No network, a private PID space, a file system of read-only
   system and Python directories plus a small tmpfs, no environment. Falls back (loudly, with the
   mode reported) to ``unshare`` or a plain process where bubblewrap is missing.
2. ``template``: each call is a fresh fork of a clean template, dropped to an unprivileged uid with
   no capabilities, with resource limits (CPU, memory, processes, file size, open files), a seccomp
   filter, an IPC namespace of its own, fresh size- and inode-limited tmpfs as its working directory
   and ``/dev/shm``, and a ``/proc`` showing only its own processes; it holds no descriptor of the
   harness, and its exit status comes from the kernel. The template enforces the wall clock and the
   output cap, and kills and reaps everything the call left before the next one; the kernel frees
   the call's files and IPC objects (nothing a call leaves is walked, so no cleanup can fail).
3. ``pool``: the host side. Warm workers shared by threads, replaced when they die, closed at exit;
   the host never runs untrusted code and gets an error result, never an exception.
"""

from gem_core.tools.sandbox.launcher import detect_mode
from gem_core.tools.sandbox.pool import ExecResult, SandboxLimits, SandboxPool, shared_pool

__all__ = ["ExecResult", "SandboxLimits", "SandboxPool", "detect_mode", "shared_pool"]

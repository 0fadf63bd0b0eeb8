"""An example run as a script in a fresh interpreter, reporting how it exited and which heavy modules it had
imported by then: how the examples' tests check that ``--help`` and bad settings come before torch loads."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

AS_SCRIPT = """
import runpy, sys
sys.argv = [{example!r}, *{argv!r}]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as exit:
    print(exit.code, [m for m in {heavy!r} if m in sys.modules])
"""


def run_as_script(example: Path, argv: Sequence[str], heavy: Sequence[str]) -> subprocess.CompletedProcess:
    """Its stdout ends with ``"<exit status> [<the modules of heavy it imported>]"``."""
    code = AS_SCRIPT.format(example=str(example), argv=list(argv), heavy=tuple(heavy))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)

"""bubblewrap isolation for a Python that lives under /tmp (test_python_sandbox checks bwrap is the mode
in use; the security suite skips without it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@needs_bwrap
def test_bubblewrap_works_for_a_python_that_lives_under_tmp(tmp_path):
    """A virtual environment inside /tmp (e.g. a clone there) is bound on top of the sandbox's /tmp."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    repo = Path(__file__).resolve().parents[2]
    code = f"import sys; sys.path.insert(0, {str(repo)!r}); from gem_core.tools.sandbox import launcher; "
    code += "print(launcher.mode_works('bwrap'))"
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip() == "True", out.stderr[-2000:]

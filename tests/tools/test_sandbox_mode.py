"""Which isolation the sandbox runs in: bubblewrap wherever it is installed (the security suite skips
without it, so a silent fallback must fail here), also for a Python that lives under /tmp."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gem_core.tools.sandbox import launcher

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@needs_bwrap
def test_bubblewrap_on_the_machine_is_what_the_sandbox_uses():
    assert launcher.detect_mode() == "bwrap"


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

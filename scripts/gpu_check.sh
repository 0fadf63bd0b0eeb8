#!/usr/bin/env bash
# The training path on a GPU in one call (scripts/gpu_check.py: examples/train_trl.py for 2 steps in bf16, the KV
# engine against re-prefill, the prefix-tree learner against the unshared forward), under 8 minutes on one H100/H200.
#
#   bash scripts/gpu_check.sh --prepare            # here, once: what the device machine lacks, into .gpu/ (ignored)
#   device tool: run(command="bash scripts/gpu_check.sh", carry=[".gpu"])  -> $OUT/gpu_check.txt, $OUT/train.log
#   bash scripts/gpu_check.sh --device cpu [--out DIR]   # the same checks on the CPU (tests/test_gpu_check.py)
#
# The device machine has torch, transformers, accelerate and peft but no registry: TRL, datasets and their small
# dependencies travel as wheels (.gpu/wheels), with SmolLM2's tokenizer (.gpu/cache; no weights: the tiny model).
set -euo pipefail
cd "$(dirname "$0")/.."
device=cuda
out="${OUT:-}"
prepare=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prepare) prepare=1 ;;
    --device) device="$2"; shift ;;
    --out) out="$2"; shift ;;
    *) echo "usage: bash scripts/gpu_check.sh [--prepare] [--device cuda|cpu] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done

if [ "$prepare" = 1 ]; then
  py="${PYTHON:-.venv/bin/python}"
  rm -rf .gpu && mkdir -p .gpu/wheels .gpu/cache
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .gpu/wheels "trl==1.16.0" "datasets==5.2.0" "dill==0.4.1" "multiprocess==0.70.19"
  tokenizer="$("$py" -c 'from gem_adapters.runtime.models import resolve; print(resolve("smollm2"))')"
  mkdir -p .gpu/cache/SmolLM2-135M-Instruct
  cp "$tokenizer"/*.json "$tokenizer"/*.jinja .gpu/cache/SmolLM2-135M-Instruct/
  du -sh .gpu
  exit 0
fi

if [ "$device" = cuda ]; then
  [ -d .gpu/wheels ] || { echo "error: run 'bash scripts/gpu_check.sh --prepare' first and carry .gpu" >&2; exit 2; }
  py="${PYTHON:-python3}"
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gem-site .gpu/wheels/*.whl
  export PYTHONPATH="/tmp/gem-site${PYTHONPATH:+:$PYTHONPATH}" GEM_CACHE="$PWD/.gpu/cache"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
else
  py="${PYTHON:-.venv/bin/python}"
fi
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false TRL_EXPERIMENTAL_SILENCE=1 PYTHONUNBUFFERED=1
out="${out:-$(mktemp -d /tmp/gem-gpu-check-XXXXXX)}"
mkdir -p "$out"
"$py" scripts/gpu_check.py --device "$device" --out "$out"

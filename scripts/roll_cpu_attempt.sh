#!/usr/bin/env bash
# ROLL's agentic pipeline (github.com/alibaba/ROLL, not on PyPI) for 2 steps on CPU: fsdp2_train + hf_infer, a tiny
# random Llama over the SmolLM2 tokenizer, a gem_core game through gem_adapters.roll (StepConcatEnvManager, ReBN as
# step_reinforce). ROLL runs unmodified; gem_adapters/roll/cpu.py patches it at runtime in every process (each patch
# names the ROLL file:line it works around; Ray's worker_process_setup_hook installs them in the workers).
# Results and the story: benchmarks/results/roll_cpu/README.md.
#
#   ROLL_DIR=/path/to/ROLL bash scripts/roll_cpu_attempt.sh [OUT_DIR] [benchmarks/roll_cpu/run_pipeline.py args...]
# Any ROLL config on CPU: python -m gem_adapters.roll.cpu --config_path DIR --config_name NAME (same environment).
#
# Environment (.venv-roll, kept apart: ROLL wants numpy < 2, datasets 3.1 and TransferQueue 0.1.6):
#   GEM_VENV=.venv-roll bash scripts/install.sh roll
#   .venv-roll/bin/pip install torch==2.13.0 'ray[default]==2.60.0' 'TransferQueue==0.1.6' 'datasets==3.1.0' \
#     'pyarrow<21' 'pandas<3' tensordict codetiming dacite more_itertools pybase64 peft accelerate tyro jsonlines \
#     deprecated einops omegaconf gymnasium loralib sympy imageio openai uvicorn fastapi opentelemetry-api \
#     opentelemetry-sdk opentelemetry-exporter-otlp
# SmolLM2's tokenizer comes from the gem_core cache (~/.cache/gem_core/SmolLM2-135M-Instruct; .venv builds it).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
py="${GEM_ROLL_PYTHON:-$repo/.venv-roll/bin/python}"
roll_dir="$(realpath "${ROLL_DIR:?set ROLL_DIR to a checkout of github.com/alibaba/ROLL}")"
[ -f "$roll_dir/roll/pipeline/agentic/agentic_pipeline.py" ] || { echo "error: $roll_dir is not a ROLL checkout" >&2; exit 2; }
out="$(realpath -m "${1:-/tmp/gem-roll-cpu-$$}")"
mkdir -p "$out"

export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$roll_dir:$repo${PYTHONPATH:+:$PYTHONPATH}"
# Ray: a private local instance (gem_adapters.roll.cpu.run_pipeline) whose short temp dir is removed at exit.
ray_tmp="$(mktemp -d /tmp/gem-ray-XXXXXX)"
trap 'rm -rf "$ray_tmp"' EXIT
export RAY_TMPDIR="$ray_tmp" RAY_DEDUP_LOGS=0 RAY_ADDRESS=

start=$(date +%s)
set +e
(cd "$out" && "$py" -m benchmarks.roll_cpu.run_pipeline "$out" "${@:2}") 2>&1 | tee "$out/run.log"
rc=${PIPESTATUS[0]}
echo "run_pipeline.py exit code $rc after $(( $(date +%s) - start )) s (ROLL $(git -C "$roll_dir" rev-parse HEAD 2>/dev/null || echo "checkout without .git"))" | tee -a "$out/run.log"
exit "$rc"

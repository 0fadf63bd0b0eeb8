#!/usr/bin/env bash
# The Oat adapter's tests under Python 3.10 with Oat's own pins (oat-llm 0.2.4 needs Python < 3.11 and
# pins numpy 1.26.4 and transformers 4.51.3). Python 3.10 is not in the registries these machines reach
# (Debian bookworm ships 3.11 only); this uses a python3.10 on PATH or pyenv's, or $PY310, and skips
# without one. torch is not installed: PyPI has no CPU build of torch for Linux (its wheels pull GBs of
# CUDA packages), so the tests that need it (oat.types imports torch) skip, and what runs is every
# torch-free test of tests/adapters/oat plus a byte-compile and import of gem_core / gem_adapters.
set -euo pipefail
cd "$(dirname "$0")/.."

is_310() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' >/dev/null 2>&1; }
py310=""
candidates=("${PY310:-}" "$(command -v python3.10 || true)")
if command -v pyenv >/dev/null 2>&1; then
  candidates+=("$(pyenv root)"/versions/3.10.*/bin/python)
fi
for candidate in "${candidates[@]}"; do
  if [ -n "$candidate" ] && is_310 "$candidate"; then
    py310="$candidate"
    break
  fi
done
if [ -z "$py310" ]; then
  echo "test_oat_py310: no Python 3.10 found (set PY310=/path/to/python3.10); skipped"
  exit 0
fi

venv="${OAT_PY310_VENV:-${TMPDIR:-/tmp}/gem-oat-py310}"
[ -x "$venv/bin/python" ] || "$py310" -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" "numpy==1.26.4" "transformers==4.51.3" jinja2 pytest pytest-timeout
"${pip[@]}" --no-deps "oat-llm==0.2.4"
"${pip[@]}" --no-deps -e .

"$venv/bin/python" -m compileall -q gem_core gem_adapters examples/train_oat.py
"$venv/bin/python" -c "import sys, numpy, transformers, gem_core, gem_adapters.runtime.rollout, gem_adapters.oat; \
print('Python', sys.version.split()[0], 'numpy', numpy.__version__, 'transformers', transformers.__version__)"
"$venv/bin/python" -m pytest -p no:cacheprovider tests/adapters/oat "$@"

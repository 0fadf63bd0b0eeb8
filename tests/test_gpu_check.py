"""scripts/gpu_check.sh on the CPU, as CI runs it: the three checks a lent GPU runs, passing here too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_checks_pass_on_the_cpu(tmp_path):
    done = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--device", "cpu", "--out", str(tmp_path)],
        cwd=ROOT,
        # the precision the machine chooses (bf16 on AVX-512-BF16 or AMX), not the suite's forced fp32
        env={**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", "GEM_PRECISION": "auto"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = (tmp_path / "gpu_check.txt").read_text()
    for check in ("check_kv_engine", "check_learner", "check_schedule_and_bf16", "check_training"):
        assert f"PASS {check}" in report
    assert report.rstrip().endswith("all checks passed")
    assert "2 GRPO steps" in report and (tmp_path / "train" / "metrics.csv").exists()

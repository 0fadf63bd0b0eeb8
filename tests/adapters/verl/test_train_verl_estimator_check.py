"""examples/train_verl.py refuses an estimator verl does not know before writing anything, and lists the
registered ones (verl's own, the gem_* ones, and those other packages register)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "train_verl.py"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def test_an_unknown_estimator_fails_with_the_registered_list_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    done = run("--advantage_estimator", "nope", "--dry_run", "--output_dir", str(out), cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("train_verl.py: error: unknown --advantage_estimator 'nope'")
    listed = line.split("the registered estimators: ")[1].split(", ")
    assert {"rebn", "grpo", "rloo", "verl:gae", "verl:grpo"} <= set(listed)
    assert not out.exists()
    done = run("--advantage_estimator", "grpo", "--dry_run", "--output_dir", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "algorithm.adv_estimator=gem_grpo" in done.stdout and out.exists()


PLUGIN = f"""
import importlib.util, sys
import numpy as np
from gem_adapters.algorithms.advantages import register_estimator

@register_estimator("halved_returns")
def halved_returns(batch, *, gamma, **_):
    return batch.returns(gamma) / 2

spec = importlib.util.spec_from_file_location("train_verl", {str(EXAMPLE)!r})
example = importlib.util.module_from_spec(spec)
sys.modules["train_verl"] = example
spec.loader.exec_module(example)
assert example.check_estimator("halved_returns") == "gem_halved_returns"
print("accepted")
"""


def test_an_estimator_registered_by_other_code_is_accepted():
    done = subprocess.run(
        [sys.executable, "-c", PLUGIN], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("accepted"), done.stderr[-2000:]

"""examples/train_verl.py refuses an estimator verl does not know before writing anything, and lists the
registered ones (verl's own, the gem_* ones, and those other packages register); and an unknown env id."""

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
    done = run("algorithm.adv_estimator=rebn", "--dry-run", f"gem.output_dir={out}", cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("train_verl.py: error: unknown algorithm.adv_estimator 'rebn'")
    listed = line.split("the registered estimators: ")[1].split(", ")
    assert {"gem_rebn", "gem_grpo", "gem_rloo", "gae", "grpo"} <= set(listed)
    assert not out.exists()
    done = run("algorithm.adv_estimator=gem_grpo", "--dry-run", f"gem.output_dir={out}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "algorithm.adv_estimator=gem_grpo" in done.stdout and (out / "data" / "train.parquet").exists()


def test_an_unknown_env_id_fails_with_close_matches_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    done = run("gem.env_ids=[game:Sudoku-v9]", "--dry-run", f"gem.output_dir={out}", cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("train_verl.py: error: gem.env_ids: No env registered as 'game:Sudoku-v9'")
    assert "game:Sudoku-v" in line.split("Did you mean")[1] and not out.exists()


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
assert example.check_estimator("gem_halved_returns") == "gem_halved_returns"
print("accepted")
"""


def test_an_estimator_registered_by_other_code_is_accepted():
    done = subprocess.run(
        [sys.executable, "-c", PLUGIN], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("accepted"), done.stderr[-2000:]

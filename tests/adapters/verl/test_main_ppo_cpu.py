"""verl's own trainer on CPU: two real steps of ``python -m verl.trainer.main_ppo``, launched by
``examples/train_verl.py machine=cpu actor_rollout_ref.model.path=tiny`` (verl's v1 trainer, TransferQueue,
the FSDP2 engine, ``GemAgentLoop`` playing GuessTheNumber, ``gem_rebn``, the transformers rollout of
``gem_adapters.verl.cpu``; a random Llama with head size 32 over the SmolLM2 tokenizer).

``main_ppo_hooks`` records, inside the run, what ``gem_rebn`` produced and what verl's policy loss
received; verl's file logger writes the metrics; the rollout server prints a fingerprint of its
weights at every sync. The run starts its own Ray (``address=local``, a fresh temp dir; Ray picks
free ports), and every process left under that temp dir is killed afterwards.

The tests without the run check that each verl line a patch of ``gem_adapters.verl.cpu`` names is
still there, word for word, in the installed verl (they fail when verl changes it), that the patches land
in a fresh process, and that the example's ``machine=cpu`` config composes with verl's.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

import torch

from gem_adapters.algorithms.advantages import mask_runs, state_keys_to_json
from gem_adapters.runtime.patching import source_root
from gem_adapters.verl import cpu
from gem_adapters.verl.advantages import gem_advantages
from gem_adapters.verl.state_keys import FIELD

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "train_verl.py"
STEPS = 2
SYNC_LINE = re.compile(r"weights synced: global_steps=(\d+) fingerprint=(\S+)")


# ---- the patched verl code is still what the patches expect (no Ray, fast) ----------------------


@pytest.mark.parametrize(
    "patch, line", cpu.PATCHES.lines(), ids=[str(line) for _, line in cpu.PATCHES.lines()]
)
def test_patched_verl_line_is_unchanged(patch, line):
    found = line.read(source_root("verl"))
    assert found == line.text, f"verl changed {line} (now {found!r}); re-check {patch.name}: {patch.why}"


def test_patches_apply_in_a_fresh_process():
    """``install()`` in a process that has not imported verl's patched modules yet: each patch lands when
    its module is imported, before a caller binds the patched name, and does what it says (verl's
    ``is_trl_available`` is ``functools.cache``-wrapped: a patch that took ``__wrapped__`` for its own
    mark would skip it)."""
    code = (
        "from gem_adapters.verl import cpu\n"
        "cpu.install()\n"
        "from verl.workers import engine_workers\n"
        "import verl.models.transformers.monkey_patch as monkey_patch\n"
        "from verl.utils.import_utils import is_trl_available\n"
        "print(getattr(engine_workers.initialize_global_process_group_ray, '_gem_patched', False),"
        " monkey_patch.is_trl_available() == (is_trl_available() and cpu._trl_has_value_head()),"
        " monkey_patch.is_trl_available is not is_trl_available)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-3:] == ["True", "True", "True"]


def test_verl_still_needs_the_seams_cpu_uses():
    """The overrides and env variables of the CPU run stand for verl code that, if it changes, may make
    them wrong or unnecessary."""
    from verl.single_controller.ray.base import ResourcePoolManager
    from verl.workers.engine.base import EngineRegistry

    # Ray resources: verl counts only GPU/NPU (hence a logical GPU and CPUPlatform.ray_resource_name)
    assert 'node_info.get("GPU", 0)' in inspect.getsource(ResourcePoolManager._check_resource_available)
    # FSDP engines register for cuda/npu only (hence VERL_ENGINE_DEVICE=cuda)
    assert 'os.getenv("VERL_ENGINE_DEVICE")' in inspect.getsource(EngineRegistry.get_engine_cls)
    import verl.workers.engine.fsdp.transformer_impl as fsdp

    assert 'backend=["fsdp", "fsdp2"], device=["cuda", "npu"]' in inspect.getsource(fsdp)


def test_machine_cpu_composes_with_verl_config(tmp_path):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    example = _load_example()
    _, config, command = example.prepare(
        ["machine=cpu", f"gem.output_dir={tmp_path}", f"actor_rollout_ref.model.path={tmp_path / 'model'}"]
    )
    validate_config(
        config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )
    assert (config.data.train_batch_size, config.trainer.total_training_steps) == (4, 2)  # machine/cpu.yaml
    assert config.actor_rollout_ref.rollout.name == cpu.ROLLOUT and config.trainer.device == "cpu"
    assert config.actor_rollout_ref.actor.strategy == "fsdp2"
    assert set(cpu.CPU_OVERRIDES) <= set(command)  # main_ppo gets them too


# ---- two real steps --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _launch(tmp_path_factory.mktemp("main_ppo_cpu"), steps=STEPS)


@pytest.fixture(scope="module")
def gigpo_run(tmp_path_factory):
    """One step with ``gem_gigpo``: each turn's state key from GemAgentLoop to the estimator."""
    return _launch(tmp_path_factory.mktemp("main_ppo_cpu_gigpo"), steps=1, estimator="gigpo")


def _launch(out: Path, steps: int, estimator: str = "rebn") -> dict:
    """``examples/train_verl.py machine=cpu actor_rollout_ref.model.path=tiny`` for ``steps`` steps with the
    recorders."""
    record = out / "record"
    record.mkdir()
    ray_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths have a length limit
    env = {
        **os.environ,
        "VERL_USE_EXTERNAL_MODULES": "tests.adapters.verl.main_ppo_hooks",  # the launcher adds its own first
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
        "GEM_VERL_RECORD_DIR": str(record),
        "GEM_VERL_RECORD_ESTIMATOR": f"gem_{estimator}",
        "VERL_FILE_LOGGER_PATH": str(out / "metrics.jsonl"),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "RAY_DEDUP_LOGS": "0",
    }
    command = [
        sys.executable, str(EXAMPLE), "machine=cpu", "actor_rollout_ref.model.path=tiny", f"gem.output_dir={out}",
        f"trainer.total_training_steps={steps}", "trainer.logger=[console,file]",
        f"algorithm.adv_estimator=gem_{estimator}", f"+ray_kwargs.ray_init._temp_dir={ray_dir}",
    ]  # fmt: skip
    started = time.monotonic()
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = process.communicate(timeout=900)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        leftover = _kill_processes_using(ray_dir, grace=20)
        shutil.rmtree(ray_dir, ignore_errors=True)
    print(f"main_ppo on CPU: {time.monotonic() - started:.0f} s")
    return {
        "returncode": process.returncode,
        "output": output,
        "out": out,
        "record": record,
        "leftover": leftover,
        "metrics": [
            json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()
        ]
        if (out / "metrics.jsonl").exists()
        else [],
    }


def test_trainer_exits_cleanly(run):
    assert run["returncode"] == 0, run["output"][-6000:]
    assert [m["step"] for m in run["metrics"]] == list(range(1, STEPS + 1))
    assert run["leftover"] == [], "Ray processes outlived the trainer"


def test_agent_loop_played_multi_turn_episodes(run):
    for step in run["metrics"]:
        data = step["data"]
        # GemAgentLoop reports 2 messages per action; at least 2 actions in every episode
        assert data["training/num_turns/min"] >= 4, data
        assert data["critic/score/max"] < 0  # random actions: every turn pays the format penalty


def test_rollout_and_trainer_logprobs_agree(run):
    for step in run["metrics"]:
        data = step["data"]
        assert data["training/rollout_probs_diff_valid"] == 1
        assert data["training/rollout_probs_diff_max"] < 1e-6, data
        # per-sequence mean logprob (verl's rollout-correction metrics): the same to float rounding
        assert abs(data["rollout_corr/log_ppl_diff_max"]) < 1e-4, data
        assert abs(data["rollout_corr/log_ppl_diff_min"]) < 1e-4, data


def test_gem_rebn_advantages_reached_the_actor(run):
    estimator = [torch.load(p) for p in sorted(run["record"].glob("estimator-*.pt"))]
    losses = [torch.load(p) for p in sorted(run["record"].glob("loss-*.pt"))]
    assert len(estimator) == STEPS and losses

    produced = []
    for call in estimator:
        rewards, mask = call["token_level_rewards"], call["response_mask"]
        # per-turn rewards: one per action (env rewards at each action's last id)
        assert ((rewards != 0).sum(dim=1) >= 2).all()
        expected, _ = gem_advantages(
            "rebn", rewards, mask, config={"gamma": call["gamma"]}, index=call["index"]
        )
        torch.testing.assert_close(call["advantages"], expected)
        assert call["advantages"][mask.bool()].std() > 0.1  # turns of different depth: not all equal
        produced += _masked_rows(call["advantages"], mask)
    received = [row for call in losses for row in _masked_rows(call["advantages"], call["response_mask"])]
    assert Counter(received) == Counter(produced)  # every sample's advantages, exactly once per step

    for call, step in zip(estimator, run["metrics"]):
        values = call["advantages"][call["response_mask"].bool()]
        assert step["data"]["critic/advantages/max"] == pytest.approx(values.max().item(), abs=1e-5)


def test_weights_changed_and_reached_the_rollout(run):
    syncs = [(int(step), float(value)) for step, value in SYNC_LINE.findall(run["output"])]
    assert [step for step, _ in syncs] == list(range(STEPS + 1)), run["output"][-3000:]
    # the first sync carries the initial weights: the saved model's
    from transformers import AutoModelForCausalLM

    initial = AutoModelForCausalLM.from_pretrained(run["out"] / "tiny_model", dtype=torch.float32)
    assert syncs[0][1] == pytest.approx(float(sum(p.double().sum() for p in initial.parameters())), rel=1e-9)
    assert run["metrics"][0]["data"]["actor/grad_norm"] > 0
    assert syncs[1][1] != syncs[0][1] and syncs[2][1] != syncs[1][1]


def test_gem_gigpo_gets_each_turns_state_key_in_main_ppo(gigpo_run):
    """``algorithm.adv_estimator=gem_gigpo`` in verl's real trainer: the estimator is handed one state key
    per action of every row (GemAgentLoop's ``gem_state_keys`` field, carried by the patch of the v1
    advantage step), its advantages are GiGPO's on those keys, and the actor's loss receives them."""
    assert gigpo_run["returncode"] == 0, gigpo_run["output"][-6000:]
    assert [m["step"] for m in gigpo_run["metrics"]] == [1]
    assert gigpo_run["leftover"] == [], "Ray processes outlived the trainer"
    (call,) = [torch.load(p) for p in sorted(gigpo_run["record"].glob("estimator-*.pt"))]
    losses = [torch.load(p) for p in sorted(gigpo_run["record"].glob("loss-*.pt"))]
    rewards, mask, keys = call["token_level_rewards"], call["response_mask"], call["state_keys"]
    assert keys is not None and [len(k) for k in keys] == [len(mask_runs(m)) for m in mask]
    assert all(k[0] is not None for k in keys)  # GuessTheNumber names its states
    first = {}
    for uid, row_keys in zip(call["index"], keys):  # the sessions of one task start from one state
        first.setdefault(uid, set()).add(row_keys[0])
    assert len(first) > 1 and all(len(k) == 1 for k in first.values())
    expected, _ = gem_advantages(
        "gigpo",
        rewards,
        mask,
        config={"gamma": call["gamma"]},
        index=call["index"],
        non_tensor_batch={FIELD: [state_keys_to_json(k) for k in keys]},
    )
    torch.testing.assert_close(call["advantages"], expected)
    received = [row for loss in losses for row in _masked_rows(loss["advantages"], loss["response_mask"])]
    assert Counter(received) == Counter(_masked_rows(call["advantages"], mask))


# ---- helpers ---------------------------------------------------------------------------------------


def _masked_rows(advantages, mask):
    return [tuple(round(v, 5) for v in a[m.bool()].tolist()) for a, m in zip(advantages, mask)]


def _load_example():
    spec = importlib.util.spec_from_file_location("train_verl", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _kill_processes_using(path: str, grace: float) -> list[int]:
    """Processes whose command line names ``path`` (this run's Ray temp dir) still alive after ``grace``
    seconds: SIGKILLed, and their ids returned."""
    deadline = time.monotonic() + grace
    while (found := _processes_using(path)) and time.monotonic() < deadline:
        time.sleep(1)
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return found


def _processes_using(path: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and path in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
    return found

"""What ``test_train_ppo_ray_cpu.py`` records inside OpenRLHF's Ray workers (test code, not gem_adapters).

The run's driver gets ``RAY_RUNTIME_ENV_HOOK=tests.adapters.openrlhf.recording.runtime_env_hook``: Ray then
runs ``setup_worker`` at the start of every worker process instead of gem's own setup hook, which it calls
first (the CPU patches and the GEM estimator), and then arms two recordings to ``$GEM_OPENRLHF_CPU_RECORD``:

* in the ``PPOTrainer`` actor: the experiences before and after ``compute_advantages_and_returns`` (the GEM
  estimator), one ``trainer-*.pt`` per rollout batch;
* in the policy actor: each batch ``ActorPPOTrainer.training_step`` trains on (``actor-*.pt``), and its
  gradient norm (``actor_steps.jsonl``).

The weight reloads in the vLLM worker need no recording: ``gem_adapters.openrlhf.cpu`` prints a line per
reload, which the test reads from the log.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import time
from typing import Any

from gem_adapters.openrlhf import hook
from gem_adapters.runtime.patching import patch_on_import

RECORD = "GEM_OPENRLHF_CPU_RECORD"
_COUNTER = itertools.count()


def runtime_env_hook(runtime_env: dict[str, Any] | None) -> dict[str, Any]:
    env = hook.runtime_env_hook(runtime_env)
    env["worker_process_setup_hook"] = f"{__name__}.setup_worker"
    env["env_vars"][RECORD] = os.environ[RECORD]
    return env


def setup_worker() -> None:
    hook.setup_worker()
    patch_on_import("openrlhf.trainer.ppo_utils.experience_maker", _record_experience_maker)
    patch_on_import("openrlhf.trainer.ray.ppo_actor", _record_training_step)


def _record_dir() -> str:
    path = os.environ[RECORD]
    os.makedirs(path, exist_ok=True)
    return path


def _save(prefix: str, payload: Any) -> None:
    import torch

    torch.save(payload, os.path.join(_record_dir(), f"{prefix}-{os.getpid()}-{next(_COUNTER):04d}.pt"))


def _tensor(x: Any) -> Any:
    return x.detach().cpu().clone() if hasattr(x, "detach") else x


def _record_experience_maker(module: Any) -> None:
    cls = module.RemoteExperienceMaker
    make_experience, make_batch = cls.make_experience, cls.make_experience_batch

    def recorded_make_experience(self: Any, samples_list: Any) -> Any:
        experiences = make_experience(self, samples_list)
        self._gem_before = [
            {
                "sequences": _tensor(e.sequences),
                "action_mask": _tensor(e.action_mask),
                "info": {k: _tensor(v) for k, v in e.info.items()},
                "labels": list(e.labels or []),
            }
            for e in experiences
        ]
        return experiences

    def recorded_make_experience_batch(self: Any, rollout_samples: Any) -> Any:
        experiences = make_batch(self, rollout_samples)
        after = [
            {
                name: _tensor(getattr(e, name))
                for name in (
                    "sequences",
                    "action_mask",
                    "advantages",
                    "returns",
                    "action_log_probs",
                    "rollout_log_probs",
                )
            }
            for e in experiences
        ]
        _save(
            "trainer",
            {
                "time": time.time(),
                "gem_estimator": getattr(type(self), "gem_estimator", None),
                "gamma": float(self.strategy.args.algo.advantage.gamma),
                "before": self._gem_before,
                "after": after,
            },
        )
        return experiences

    cls.make_experience = recorded_make_experience
    cls.make_experience_batch = recorded_make_experience_batch


def _record_training_step(module: Any) -> None:
    cls = module.ActorPPOTrainer
    original = cls.training_step

    @functools.wraps(original)
    def training_step(self: Any, experience: Any, *args: Any, **kwargs: Any) -> Any:
        _save(
            "actor",
            {
                "time": time.time(),
                "sequences": _tensor(experience.sequences),
                "action_mask": _tensor(experience.action_mask),
                "advantages": _tensor(experience.advantages),
            },
        )
        status = original(self, experience, *args, **kwargs)
        with open(os.path.join(_record_dir(), "actor_steps.jsonl"), "a") as f:
            f.write(json.dumps({"grad_norm": float(status["metrics"].get("actor_grad_norm", 0.0))}) + "\n")
        return status

    cls.training_step = training_step

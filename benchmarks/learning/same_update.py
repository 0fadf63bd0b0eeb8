"""The same updates from the same batches: optimizer steps of the TRL adapter and of the verl adapter in lockstep.

    python -m benchmarks.learning.same_update --task guess_range --estimator rebn --seed 0 --episodes_per_step 128 --steps 5

Both frameworks start from the same warmed-up weights at the full learning rate (``warmup_steps`` 0)
and train on the same batches. Each step, one batch (``episodes_per_step`` episodes,
``num_generations`` per task seed) is played by verl's agent loop with verl's current policy
(``verl_cpu.VerlCPUTrainer.rollout``), then

* verl steps on it: ``VerlCPUTrainer``'s old log-probs, ``gem_<estimator>`` advantages,
  ``TrainingWorker.train_mini_batch`` (verl's ``ppo_loss`` and FSDP engine) and weight sync, as
  ``verl_cpu.py`` does;
* TRL steps on it: ``train.py``'s trainer (``build_trainer``, its tasks in dataset order) whose
  ``rollout_func`` plays verl's step and hands back verl's episodes of each task prompt.

Every optimizer's gradients are read just before its step (a global step pre-hook: after gradient
clipping, what the optimizer uses), and both frameworks' weights after the last step. The printout
(also written to ``benchmarks/results/learning/same_update.txt``) compares, per step, the losses and
the two gradients, and at the end the two accumulated updates: when they agree to float precision,
two learning curves of the frameworks differ only by the episodes each samples.
"""

from __future__ import annotations

import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from benchmarks.learning.common import PolicySpec, warmed_up_policy
from benchmarks.learning.train import build_trainer
from benchmarks.learning.verl_cpu import VerlCPUTrainer, VerlRunConfig

OUT = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "learning" / "same_update.txt"


@dataclass
class SameUpdateConfig(VerlRunConfig):
    task: str = "guess_range"
    steps: int = 5


def full(tensor: torch.Tensor) -> torch.Tensor:
    """A plain float64 CPU copy of a (possibly FSDP2-sharded) tensor."""
    tensor = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
    return tensor.detach().to("cpu", torch.float64).clone()


def lockstep(verl: VerlCPUTrainer, played: list[dict]):
    """A TRL ``rollout_func`` that first takes verl's next step, then returns, for each task prompt,
    an unused episode verl played of that task; ``played`` gets each verl step's batch and metrics."""
    from gem_adapters.trl.rollout import rollout_output
    from gem_adapters.trl.rows import prompt_task

    def rollout_func(prompts, trainer):
        batch, keys, episodes = verl.rollout(len(played))
        verl.old_log_probs(batch)
        verl.advantages(batch, keys)
        played.append({"episodes": episodes, "mask": batch["response_mask"], "metrics": verl.update(batch)})
        verl.sync_weights()
        unused = defaultdict(list)
        for episode in episodes:
            unused[(episode.env_id, episode.seed)].append(episode)
        chosen = [unused[(task.env_id, task.seed)].pop(0) for task in map(prompt_task, prompts)]
        return rollout_output(chosen, float("nan"))

    return rollout_func


def distance(a: torch.Tensor, b: torch.Tensor) -> dict[str, float]:
    return {
        "cosine": float(torch.nn.functional.cosine_similarity(a, b, dim=0)),
        "relative": float((a - b).norm() / b.norm()),
        "max": float((a - b).abs().max()),
    }


def compare(run: VerlRunConfig, policy: PolicySpec | None = None) -> dict:
    """``run.steps`` steps of both frameworks in lockstep (``policy`` overrides the warmed-up policy's
    spec): per step the batch's size, each framework's loss and gradient norms and how far apart the
    two gradients are; at the end how far apart the two accumulated updates are."""
    from gem_adapters.runtime.models import load_model

    run = replace(run, warmup_steps=0)
    spec = policy or run.policy_spec()
    folder = warmed_up_policy(spec)
    before = dict(load_model(str(folder)).named_parameters())
    gradients: list[dict[int, torch.Tensor]] = []  # per optimizer step, verl's then TRL's: id(weight) -> grad

    def record(optimizer, *_):
        gradients.append(
            {id(p): full(p.grad) for g in optimizer.param_groups for p in g["params"] if p.grad is not None}
        )

    hook = register_optimizer_step_pre_hook(record)
    played: list[dict] = []
    try:
        with tempfile.TemporaryDirectory() as workdir:
            verl = VerlCPUTrainer(run, folder, Path(workdir))
            verl_names = {id(p): n for n, p in verl.actor.engine.module.named_parameters()}
            trainer = build_trainer(run, spec)
            trainer.shuffle_dataset = False  # TRL's step k asks for the tasks of verl's step k
            trainer.rollout_func = lockstep(verl, played)
            trl_names = {id(p): n for n, p in trainer.model.named_parameters()}
            trainer.train()
            verl_after = {n: full(p) for n, p in verl.actor.engine.get_per_tensor_param()[0]}
            trl_after = {n: full(p) for n, p in trainer.model.named_parameters()}
    finally:
        hook.remove()

    if len(gradients) != 2 * run.steps:
        raise RuntimeError(
            f"expected {2 * run.steps} optimizer steps, {run.steps} per framework, got {len(gradients)}"
        )
    names = sorted(trl_names.values())

    def flat(named: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([named[n].flatten() for n in names])

    trl_logs = [h for h in trainer.state.log_history if "grad_norm" in h]
    steps = []
    for k, (step, trl_log) in enumerate(zip(played, trl_logs)):
        verl_grad = flat({verl_names[i]: g for i, g in gradients[2 * k].items()})
        trl_grad = flat({trl_names[i]: g for i, g in gradients[2 * k + 1].items()})
        (verl_loss,) = step["metrics"]["loss"]  # one value per mini-batch, and there is one
        (verl_grad_norm,) = step["metrics"]["grad_norm"]
        steps.append({
            "episodes": len(step["episodes"]),
            "turns": sum(e.num_turns for e in step["episodes"]),
            "action_tokens": int(sum(m.sum() for m in step["mask"].unbind())),
            "loss": {"TRL": float(trl_log["loss"]), "verl": float(verl_loss)},
            "grad_norm": {"TRL": float(trl_log["grad_norm"]), "verl": float(verl_grad_norm)},
            "gradient": distance(trl_grad, verl_grad),
        })  # fmt: skip
    start = flat({n: full(p) for n, p in before.items()})
    trl_update, verl_update = flat(trl_after) - start, flat(verl_after) - start
    return {
        "weights": start.numel(),
        "steps": steps,
        "update_norm": {"TRL": float(trl_update.norm()), "verl": float(verl_update.norm())},
        "update": distance(trl_update, verl_update),
    }


def report(run: VerlRunConfig, m: dict) -> list[str]:
    first = m["steps"][0]
    lines = [
        f"{run.task}, {run.estimator}, gamma {run.gamma}, lr {run.learning_rate}, seed {run.seed}: {len(m['steps'])} "
        f"steps of {first['episodes']} episodes played by verl's agent loop, {m['weights']} weights",
        "step  turns  tokens        loss TRL       loss verl  grad norm TRL  grad norm verl  "
        "gradients: cosine  |TRL - verl| / |verl|",
    ]
    for k, s in enumerate(m["steps"], 1):
        lines.append(
            f"{k:>4} {s['turns']:>6} {s['action_tokens']:>7} {s['loss']['TRL']:>15.8f} {s['loss']['verl']:>15.8f} "
            f"{s['grad_norm']['TRL']:>14.6f} {s['grad_norm']['verl']:>15.6f} {s['gradient']['cosine']:>18.8f} "
            f"{s['gradient']['relative']:>22.2e}"
        )
    u = m["update"]
    lines.append(
        f"weights after {len(m['steps'])} steps minus before: norm TRL {m['update_norm']['TRL']:.6f}, verl "
        f"{m['update_norm']['verl']:.6f}; cosine {u['cosine']:.8f}, |TRL - verl| / |verl| {u['relative']:.2e}, "
        f"max |TRL - verl| {u['max']:.2e}"
    )
    return lines


if __name__ == "__main__":
    from transformers import HfArgumentParser

    (cli,) = HfArgumentParser(SameUpdateConfig).parse_args_into_dataclasses()
    lines = report(cli, compare(cli))
    text = "\n".join(["$ python -m benchmarks.learning.same_update " + " ".join(sys.argv[1:]), *lines])
    print(text)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text + "\n")

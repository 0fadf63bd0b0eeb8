"""The same update from the same batch: one optimizer step of the TRL adapter and of the verl adapter.

    python benchmarks/learning/same_update.py --task guess_range --estimator rebn --seed 0 --episodes_per_step 128

One batch (``episodes_per_step`` episodes, ``num_generations`` per task seed) is played once with the
warmed-up policy through verl's agent loop (``verl_cpu.VerlCPUTrainer.rollout``). From the same
weights, each framework then takes its own first optimizer step on exactly those episodes, at the full
learning rate (``warmup_steps`` 0):

* verl: ``VerlCPUTrainer``'s old log-probs, ``gem_<estimator>`` advantages and
  ``TrainingWorker.train_mini_batch`` (verl's ``ppo_loss`` and FSDP engine), as in ``verl_cpu.py``;
* TRL: ``train.py``'s trainer (``build_trainer``, one step) whose ``rollout_func`` hands back the
  verl-played episodes of each task prompt instead of playing new ones.

Every optimizer's gradients are read just before its step (a global step pre-hook: after gradient
clipping, what the optimizer uses), and the weights after it. The printout (also written to
``benchmarks/results/learning/same_update.txt``) compares the two gradients and the two updates:
if they agree to float precision, the two frameworks' learning curves differ only by their sampling.
"""

from __future__ import annotations

import sys
import tempfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from common import PolicySpec, warmed_up_policy
from torch.optim.optimizer import register_optimizer_step_pre_hook
from train import build_trainer
from verl_cpu import VerlCPUTrainer, VerlRunConfig

OUT = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "learning" / "same_update.txt"


def full(tensor: torch.Tensor) -> torch.Tensor:
    """A plain CPU copy of a (possibly FSDP2-sharded) tensor."""
    tensor = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
    return tensor.detach().to("cpu", torch.float64).clone()


def replay(episodes):
    """A TRL ``rollout_func`` returning, for each task prompt, the next unused episode of that task."""
    from gem_adapters.trl.rollout import episode_to_sample, prompt_task

    unused = defaultdict(list)
    for episode in episodes:
        unused[(episode.env_id, episode.seed)].append(episode)

    def rollout_func(prompts, trainer):
        chosen = []
        for prompt in prompts:
            task = prompt_task(prompt)
            chosen.append(unused[(task.env_id, task.seed)].pop(0))
        samples = [episode_to_sample(e) for e in chosen]
        return {
            "prompt_ids": [s.prompt_ids for s in samples],
            "completion_ids": [s.completion_ids for s in samples],
            "logprobs": [s.logprobs for s in samples],
            "env_mask": [s.env_mask for s in samples],
            "episode": chosen,
            "rollout_seconds": float("nan"),
        }

    return rollout_func


def flat(named: dict[str, torch.Tensor], names: list[str]) -> torch.Tensor:
    return torch.cat([named[n].flatten() for n in names])


def compare(run: VerlRunConfig, policy: PolicySpec | None = None) -> dict:
    """One step of each framework on one verl-played batch of ``run`` (``policy`` overrides its warmed-up
    policy's spec): the batch's size, each framework's loss and gradient norms, and how far apart the
    two gradients and the two updates are."""
    from gem_adapters.models import load_model

    run = replace(run, steps=1, warmup_steps=0)
    spec = policy or PolicySpec(run.policy or run.task)
    folder = warmed_up_policy(spec)
    before = {n: full(p) for n, p in load_model(str(folder)).named_parameters()}
    steps: list[dict[int, torch.Tensor]] = []  # per optimizer step: id(parameter) -> its gradient

    def record(optimizer, *_):
        steps.append(
            {id(p): full(p.grad) for g in optimizer.param_groups for p in g["params"] if p.grad is not None}
        )

    hook = register_optimizer_step_pre_hook(record)
    try:
        with tempfile.TemporaryDirectory() as workdir:
            verl = VerlCPUTrainer(run, folder, Path(workdir))
            batch, keys, episodes = verl.rollout(0)
            verl.old_log_probs(batch)
            verl.advantages(batch, keys)
            verl_names = {id(p): n for n, p in verl.actor.engine.module.named_parameters()}
            verl_metrics = verl.update(batch)
            params, _ = verl.actor.engine.get_per_tensor_param()
            verl_after = {n: full(p) for n, p in params}
            verl_grads = {verl_names[i]: g for i, g in steps[-1].items()}

            trainer = build_trainer(run, spec)
            trainer.rollout_func = replay(episodes)
            trl_names = {id(p): n for n, p in trainer.model.named_parameters()}
            trainer.train()
            trl_after = {n: full(p) for n, p in trainer.model.named_parameters()}
            trl_grads = {trl_names[i]: g for i, g in steps[-1].items()}
            trl_log = next(h for h in trainer.state.log_history if "grad_norm" in h)
    finally:
        hook.remove()

    if len(steps) != 2 or set(verl_grads) != set(trl_grads):
        raise RuntimeError(f"expected one step per framework over the same parameters, got {len(steps)}")
    names = sorted(trl_grads)
    gradient = {"TRL": flat(trl_grads, names), "verl": flat(verl_grads, names)}
    update = {"TRL": flat(trl_after, names), "verl": flat(verl_after, names)}
    update = {k: v - flat(before, names) for k, v in update.items()}
    (verl_loss,), (verl_grad_norm,) = verl_metrics["loss"], verl_metrics["grad_norm"]  # one mini-batch
    measured = {
        "episodes": len(episodes),
        "turns": sum(e.num_turns for e in episodes),
        "action_tokens": int(sum(m.sum() for m in batch["response_mask"].unbind())),
        "tensors": len(names),
        "weights": gradient["TRL"].numel(),
        "loss": {"TRL": float(trl_log["loss"]), "verl": float(verl_loss)},
        "grad_norm": {"TRL": float(trl_log["grad_norm"]), "verl": float(verl_grad_norm)},
        "used_grad_norm": {k: float(v.norm()) for k, v in gradient.items()},
        "update_norm": {k: float(v.norm()) for k, v in update.items()},
    }
    for name, pair in (("gradient", gradient), ("update", update)):
        a, b = pair["TRL"], pair["verl"]
        measured[name] = {
            "cosine": float(torch.nn.functional.cosine_similarity(a, b, dim=0)),
            "relative": float((a - b).norm() / b.norm()),
            "max": float((a - b).abs().max()),
        }
    return measured


def report(run: VerlRunConfig, m: dict) -> list[str]:
    lines = [
        f"{m['episodes']} {run.task} episodes ({m['turns']} turns, {m['action_tokens']} action tokens), played once "
        f"by verl's agent loop; {run.estimator}, gamma {run.gamma}, lr {run.learning_rate}, seed {run.seed}; "
        f"{m['tensors']} parameter tensors, {m['weights']} weights",
        f"{'':<34} {'TRL':>10} {'verl':>10}",
    ]
    for key, name in (
        ("loss", "loss"),
        ("grad_norm", "gradient norm before clipping"),
        ("used_grad_norm", "gradient norm the optimizer used"),
        ("update_norm", "update norm"),
    ):
        lines.append(f"{name:<34} {m[key]['TRL']:>10.6f} {m[key]['verl']:>10.6f}")
    for key in ("gradient", "update"):
        d = m[key]
        lines.append(
            f"{key + 's:':<10} cosine {d['cosine']:.8f}, |TRL - verl| / |verl| {d['relative']:.2e}, "
            f"max |TRL - verl| {d['max']:.2e}"
        )
    return lines


if __name__ == "__main__":
    from transformers import HfArgumentParser

    (cli,) = HfArgumentParser(VerlRunConfig).parse_args_into_dataclasses()
    lines = report(cli, compare(cli))
    text = "\n".join(["$ python benchmarks/learning/same_update.py " + " ".join(sys.argv[1:]), *lines])
    print(text)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text + "\n")

"""Identical advantages on identical episodes: the TRL adapter and the verl adapter on one batch.

    python -m benchmarks.learning.same_advantages --task hangman --seed 0

One batch of ``episodes_per_step`` episodes (``num_generations`` per task seed) is played once with
the warmed-up policy through verl's agent loop (``verl_cpu.VerlCPUTrainer.rollout``: verl's
``AgentLoopWorker`` running ``GemAgentLoop`` against ``PolicyServer``). Of exactly those episodes:

* TRL: a real ``GEMGRPOTrainer`` computes ``turn_advantages`` (per turn) of the ``Episode`` objects
  the agent loop returned, put on each turn's completion tokens by ``turn_values_on_tokens`` as its
  scoring step does;
* verl: ``compute_advantage_for_multi_trajectories`` with ``gem_<estimator>`` on the ``DataProto``
  of the agent loop's samples (``verl_cpu.VerlCPUTrainer.advantages``), per response token; a turn's
  value is read on its run of ``response_mask``.

TRL's completion and verl's response both start at the first action's first id; verl's also holds
the closing end-of-turn ids, which must get 0. The printout (also written to
``benchmarks/results/learning/same_advantages.txt``) gives the largest absolute differences.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from benchmarks.learning.common import TASKS, warmed_up_policy
from benchmarks.learning.verl_cpu import VerlCPUTrainer, VerlRunConfig

ESTIMATORS = ("rebn", "grpo", "reinforce", "dr_grpo", "rloo")
OUT = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "learning" / "same_advantages.txt"


def trl_trainer(run: VerlRunConfig, folder: Path, workdir: Path):
    from gem_adapters.runtime.models import load_model, load_tokenizer
    from gem_adapters.trl import GEMGRPOConfig, GEMGRPOTrainer, tasks_dataset

    config = GEMGRPOConfig(
        output_dir=str(workdir / "trl"),
        gamma=run.gamma,
        max_turn_tokens=TASKS[run.task].max_turn_tokens,
        per_device_train_batch_size=run.episodes_per_step,
        num_generations=run.num_generations,
        use_cpu=True,
        report_to=[],
        seed=run.seed,
    )
    dataset = tasks_dataset(TASKS[run.task].env_id, run.episodes_per_step // run.num_generations)
    return GEMGRPOTrainer(
        load_model(str(folder)), config, dataset, processing_class=load_tokenizer(str(folder))
    )


def compare(run: VerlRunConfig) -> list[str]:
    from gem_adapters.algorithms.advantages import mask_runs, turn_values_on_tokens
    from gem_adapters.trl import episode_to_sample

    folder = warmed_up_policy(run.policy_spec())
    with tempfile.TemporaryDirectory() as workdir:
        verl = VerlCPUTrainer(run, folder, Path(workdir))
        trl = trl_trainer(run, folder, Path(workdir))
        batch, keys, episodes = verl.rollout(0)
    samples = [episode_to_sample(e) for e in episodes]
    responses = batch["responses"].unbind()
    for sample, response in zip(samples, responses):  # the same tokens in both layouts
        assert response[: len(sample.completion_ids)].tolist() == sample.completion_ids
    width = max(len(s.completion_ids) for s in samples)
    turns = sum(e.num_turns for e in episodes)
    lines = [
        f"{len(episodes)} {run.task} episodes ({len(episodes) // run.num_generations} task seeds x "
        f"{run.num_generations}), {turns} turns, played once by verl's agent loop (GemAgentLoop); "
        f"gamma {run.gamma}; success rate {np.mean([e.success for e in episodes]):.3f}",
        f"{'estimator':<10} {'max |TRL - verl| per token':>27} {'per turn':>10} {'max |adv|':>10}",
    ]
    for name in ESTIMATORS:
        trl.args.advantage_estimator = name
        trl_turns = trl.turn_advantages(episodes)
        spans = [s.turn_spans for s in samples]
        trl_tokens = torch.from_numpy(turn_values_on_tokens(trl_turns, width, turn_spans=spans)).float()
        verl.advantages(batch, keys, f"gem_{name}")
        token_diff = turn_diff = 0.0
        for b, (sample, advantages) in enumerate(zip(samples, batch["advantages"].unbind())):
            n = len(sample.completion_ids)
            assert not advantages[n:].any() and not trl_tokens[b, n:].any()
            token_diff = max(
                token_diff, (advantages[:n].double() - trl_tokens[b, :n].double()).abs().max().item()
            )
            spans = mask_runs(batch["response_mask"][b].tolist())
            assert all(len(set(advantages[s:e].tolist())) == 1 for s, e in spans)  # one value per turn
            per_turn = torch.tensor([advantages[s].item() for s, _ in spans], dtype=torch.float64)
            turn_diff = max(turn_diff, (per_turn - torch.from_numpy(trl_turns[b])).abs().max().item())
        largest = max(np.abs(a).max() for a in trl_turns)
        lines.append(f"{name:<10} {token_diff:>27.2e} {turn_diff:>10.2e} {largest:>10.3f}")
    lines.append(
        "verl's advantages are float32 (the dtype of its token_level_rewards), TRL's per-turn ones float64 "
        "and its token ones float32."
    )
    return lines


if __name__ == "__main__":
    from transformers import HfArgumentParser

    (cli,) = HfArgumentParser(VerlRunConfig).parse_args_into_dataclasses()
    lines = compare(cli)
    text = "\n".join(["$ python -m benchmarks.learning.same_advantages " + " ".join(sys.argv[1:]), *lines])
    print(text)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text + "\n")

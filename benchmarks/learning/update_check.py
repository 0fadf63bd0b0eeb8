"""One optimizer step under the microscope: where does a step of the learning experiments move the policy?

    python -m benchmarks.learning.update_check --task guess_range --estimator rebn --seed 0

Plays one generation batch and takes one optimizer step with ``train.py``'s trainer (same settings,
no learning-rate warm-up), then compares, on that batch, the policy before the step (the warmed-up
policy, loaded again) with the policy after it:

1. the rollout's logprobs against the training forward's, before the step: the trainer trains on
   exactly what was sampled;
2. per turn, the change of the sampled reply's log-probability against the turn's advantage, by
   sign of the advantage and by turn index;
3. on GuessTheNumber, in every turn's context, the probability that the policy replies with a number
   the hints still allow (``\\boxed{k}`` then end of turn, for every k in the stated range), before
   and after, by sign of the turn's advantage: whether probability pushed off a sampled reply lands
   on useful replies or on the rest.
"""

from __future__ import annotations

import re
from dataclasses import replace

import torch

from benchmarks.learning.common import LEARNING_ENVS, PolicySpec, warmed_up_policy
from benchmarks.learning.train import RunConfig, build_trainer
from gem_adapters.runtime.models import load_model
from gem_adapters.trl.rollout import episode_to_sample

RANGE = re.compile(r"between (\d+) and (\d+)")


def reply_logprobs(model, contexts: list[list[int]], replies: list[list[int]]) -> torch.Tensor:
    """Sum of log-probabilities of each reply after its context, one forward per 64 sequences."""
    pairs, out = list(zip(contexts, replies)), []
    for first in range(0, len(pairs), 64):
        chunk = pairs[first : first + 64]
        width = max(len(context) + len(reply) for context, reply in chunk)
        ids = torch.zeros((len(chunk), width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, (context, reply) in enumerate(chunk):
            ids[i, : len(context) + len(reply)] = torch.tensor(context + reply)
            mask[i, : len(context) + len(reply)] = 1
        with torch.no_grad():
            logps = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), -1)
        for i, (context, reply) in enumerate(chunk):
            positions = torch.arange(len(context) - 1, len(context) + len(reply) - 1)
            out.append(logps[i, positions, torch.tensor(reply)].sum())
    return torch.stack(out)


def hint_range(observation: str, env_kwargs: dict) -> tuple[int, int]:
    found = RANGE.search(observation)
    return (int(found[1]), int(found[2])) if found else (env_kwargs["min_number"], env_kwargs["max_number"])


def allowed_reply_mass(model, tokenizer, turns, env_kwargs: dict) -> torch.Tensor:
    """Per turn: the probability of replying ``\\boxed{k}`` then end of turn, k any number the hints allow."""
    contexts, replies, owner = [], [], []
    for index, (context, observation) in enumerate(turns):
        low, high = hint_range(observation, env_kwargs)
        for k in range(low, high + 1):
            contexts.append(context)
            replies.append(
                tokenizer.encode(f"\\boxed{{{k}}}", add_special_tokens=False) + [tokenizer.eos_token_id]
            )
            owner.append(index)
    mass = torch.zeros(len(turns))
    mass.index_add_(0, torch.tensor(owner), reply_logprobs(model, contexts, replies).exp())
    return mass


def measure(run: RunConfig, policy: PolicySpec | None = None) -> dict:
    """One step of ``run`` (``policy`` overrides its warmed-up policy's spec); per turn of the batch:
    ``turn_index``, ``advantage``, the sampled reply's log-probability as the rollout saw it
    (``rollout_logprob``) and as the model computes it ``before`` and ``after`` the step, and on
    GuessTheNumber ``allowed_before`` / ``allowed_after`` (probability of a reply the hints allow)."""
    spec = policy or run.policy_spec()
    trainer = build_trainer(replace(run, steps=1, warmup_steps=0), spec)
    trainer.train()
    episodes, token_advantages = trainer.last_episodes, trainer.last_advantages
    before, after = load_model(str(warmed_up_policy(spec))), trainer.model
    after.eval()

    samples = [(e, k, sample) for e in episodes for k, sample in enumerate(e.to_turn_samples())]
    contexts = [sample.prompt_ids for _, _, sample in samples]
    replies = [sample.response_ids for _, _, sample in samples]
    spans = [span for e in episodes for span in episode_to_sample(e).turn_spans]  # as the trainer laid them
    rows = [i for i, e in enumerate(episodes) for _ in e.turns]
    measured = {
        "turn_index": torch.tensor([k for _, k, _ in samples]),
        "advantage": torch.tensor(
            [float(token_advantages[row, start]) for row, (start, _) in zip(rows, spans)]
        ),
        "rollout_logprob": torch.tensor([sum(sample.logprobs) for _, _, sample in samples]),
        "before": reply_logprobs(before, contexts, replies),
        "after": reply_logprobs(after, contexts, replies),
    }
    env_kwargs = LEARNING_ENVS.get(episodes[0].env_id, (None, None, {}))[2]
    if "min_number" in env_kwargs:
        pairs = [(context, e.turns[k].observation) for context, (e, k, _) in zip(contexts, samples)]
        for name, model in (("allowed_before", before), ("allowed_after", after)):
            measured[name] = allowed_reply_mass(model, trainer.processing_class, pairs, env_kwargs)
    return measured


def report(run: RunConfig, m: dict) -> None:
    advantage, change = m["advantage"], m["after"] - m["before"]
    print(f"{run.task} {run.estimator} seed={run.seed} lr={run.learning_rate}: {len(advantage)} turns")
    print(f"1. |rollout logprob - training forward| per reply before the step: "
          f"max {(m['rollout_logprob'] - m['before']).abs().max():.1e}")  # fmt: skip
    corr = torch.corrcoef(torch.stack([advantage, change]))[0, 1]
    print(f"2. change of the sampled reply's log-probability: correlation with the advantage {corr:.3f}")
    signs = (
        ("all turns", advantage == advantage),
        ("advantage > 0", advantage > 0),
        ("advantage < 0", advantage < 0),
    )
    for name, chosen in signs[1:]:
        print(f"   {name}: {int(chosen.sum())} turns, mean change {change[chosen].mean():+.3f}")
    print("   by turn: index, turns, mean advantage, mean change")
    for k in range(int(m["turn_index"].max()) + 1):
        at = m["turn_index"] == k
        print(f"   {k:3d} {int(at.sum()):4d} {advantage[at].mean():+.3f} {change[at].mean():+.3f}")
    if "allowed_before" in m:
        print("3. probability of a reply the hints allow, before -> after the step")
        for name, chosen in signs:
            print(
                f"   {name}: {m['allowed_before'][chosen].mean():.3f} -> {m['allowed_after'][chosen].mean():.3f}"
            )


if __name__ == "__main__":
    from transformers import HfArgumentParser

    (cli,) = HfArgumentParser(RunConfig).parse_args_into_dataclasses()
    report(cli, measure(cli))

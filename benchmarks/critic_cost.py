"""Cost of the PPO critic's passes (``GEMPPOTrainer``): one padded batch against length-grouped micro-batches.

Plays one real training step of the learning experiments' critic run (GuessTheNumber 1-10 with the range
stated, 128 episodes, the warmed-up ~0.7M-parameter policy of ``benchmarks/learning/``), then times, on
that step's episodes, the critic's value pass (no gradient) and one critic epoch (forward, backward and
Adam step) with ``critic_micro_batch_size`` = 128 (the whole batch padded to its longest episode, what
the trainer did before micro-batches) and with smaller micro-batches. Reported: padded tokens per pass,
the fastest of ``--repeats`` wall times, and the speed-up over the one-batch pass, all in the same run.

    OMP_NUM_THREADS=2 python -m benchmarks.critic_cost   # alone on the machine; the table goes to results/
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from benchmarks.learning import train


def fastest(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 32, 16, 8])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    run = train.RunConfig(task="guess_range", estimator="gae", steps=1, episodes_per_step=args.episodes)
    trainer = train.build_trainer(run)
    trainer.train()
    episodes = trainer.last_episodes
    lengths = [len(e.to_sequence(include_closing=False).token_ids) for e in episodes]
    targets = [torch.zeros(len(e.turns)) for e in episodes]
    trainer.args.critic_epochs = 1
    print(f"# python -m benchmarks.critic_cost — {len(episodes)} episodes of one step, {sum(lengths)} tokens")
    print(
        f"# {platform.machine()}, python {platform.python_version()}, torch threads {torch.get_num_threads()}"
    )
    print("micro-batch  padded tokens  values s  speed-up  epoch s  speed-up")
    base = None
    for size in args.sizes:
        trainer.args.critic_micro_batch_size = size
        padded = sum(len(rows) * max(lengths[i] for i in rows) for rows in trainer.micro_batches(episodes))

        def values() -> None:
            with torch.no_grad():
                trainer.critic_values(episodes)

        timings = (
            fastest(values, args.repeats),
            fastest(lambda: trainer.fit_critic(episodes, targets), args.repeats),
        )
        base = base or timings
        print(
            f"{size:11d}  {padded:13d}  {timings[0]:8.2f}  {base[0] / timings[0]:7.1f}x  "
            f"{timings[1]:7.2f}  {base[1] / timings[1]:7.1f}x"
        )


if __name__ == "__main__":
    main()

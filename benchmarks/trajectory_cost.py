"""Trajectory-building cost: incremental rendering (gem_adapters) against re-encoding the whole history
every turn (what the reference GEM does), for episodes of 1, 8, 32 and 128 turns, in the same run.

Both build the token context the policy needs before every turn of a GuessTheNumber-like dialogue with
the SmolLM2 chat template; the incremental side also finishes the episode (end-of-turn ids and the
full-render template check). Reported: CPU microseconds per token of the final sequence (process CPU
time, so that other jobs on a shared machine do not count; the fastest of repeated runs), and the incremental cost per token relative to its 1-turn cost (the target: <= 1.5 at 32
turns, i.e. linear cost).

    python benchmarks/trajectory_cost.py            # writes nothing; copy the table to results/
"""

from __future__ import annotations

import argparse
import platform
import time

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode_builder import EpisodeBuilder
from gem_adapters.runtime.models import load_tokenizer

FIRST = (
    "You are playing Guess The Number. I am thinking of an integer between 1 and 1000 (inclusive). Guess it "
    "in as few turns as you can. After each guess I say whether the number is higher or lower. Reply with your "
    "guess inside \\boxed{}, e.g. \\boxed{500}.\nYou have 128 turns left."
)


def observation(k: int) -> str:
    return f"{100 + k} is wrong: the number is higher.\nYou have {127 - k} turns left." if k else FIRST


def incremental(renderer: ChatRenderer, action_ids: list[int], turns: int) -> list[int]:
    builder = EpisodeBuilder(renderer, observation(0))
    for k in range(turns):
        builder.context()
        builder.add_action(action_ids)
        builder.add_feedback(observation(k + 1), 0.0, k == turns - 1, False, {})
    return builder.finish().to_sequence().token_ids


def full_reencode(tokenizer, action_text: str, turns: int) -> list[int]:
    messages: list[dict[str, str]] = []
    for k in range(turns):
        messages.append({"role": "user", "content": observation(k)})
        out = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        context = list(out["input_ids"] if hasattr(out, "keys") else out)  # what the policy would get
        messages.append({"role": "assistant", "content": action_text})
    out = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=False)
    assert context  # the last context was built
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def timed(fn, repeats: int) -> tuple[float, list[int]]:
    times, result = [], None
    for _ in range(repeats):
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--budget", type=float, default=1.5, help="seconds of repeats per measurement")
    args = parser.parse_args()

    tokenizer = load_tokenizer("smollm2")
    renderer = ChatRenderer(tokenizer)
    action_text = "I will try the next number. \\boxed{123}"
    action_ids = [*tokenizer.encode(action_text, add_special_tokens=False), *renderer.stop_token_ids[:1]]
    incremental(renderer, action_ids, 4), full_reencode(tokenizer, action_text, 4)  # warm-up

    print(f"# {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print(
        f"{'turns':>5} {'tokens':>7} {'incremental cpu-us/tok':>23} {'re-encode cpu-us/tok':>21} {'speed-up':>9} {'vs 1 turn':>10}"
    )
    base, per_token = None, {}
    for turns in args.turns:
        once = time.process_time()
        incremental(renderer, action_ids, turns)
        repeats = max(3, int(args.budget / max(time.process_time() - once, 1e-4)))
        t_inc, ids_inc = timed(lambda n=turns: incremental(renderer, action_ids, n), repeats)
        t_full, ids_full = timed(
            lambda n=turns: full_reencode(tokenizer, action_text, n), max(3, repeats // turns)
        )
        assert ids_inc == ids_full, "the incremental sequence must equal the full re-render"
        per_inc, per_full = t_inc / len(ids_inc) * 1e6, t_full / len(ids_full) * 1e6
        base = base or per_inc
        per_token[turns] = per_inc
        print(
            f"{turns:>5} {len(ids_inc):>7} {per_inc:>23.2f} {per_full:>21.2f} {per_full / per_inc:>8.1f}x"
            f" {per_inc / base:>9.2f}x"
        )
    if 1 in per_token and 32 in per_token:
        ratio = per_token[32] / per_token[1]
        print(
            f"per-token cost at 32 turns / 1 turn: {ratio:.2f}x (target <= 1.5x): {'PASS' if ratio <= 1.5 else 'FAIL'}"
        )


if __name__ == "__main__":
    main()

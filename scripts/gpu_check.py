"""The training path on an accelerator, in three checks (``scripts/gpu_check.sh`` runs this):

1. ``examples/train_trl.py`` with the tiny model for 2 GRPO steps (bf16 where the device computes it): the
   warm-up, both trainers' prefix-tree learners and the KV engine's rollouts on the device;
2. the KV engine's ids and logprobs equal to re-prefill (``TransformersPolicy(cache="none")``) on the
   device, over multi-turn episodes of a game;
3. the prefix-tree learner's log probabilities and gradients equal to the unshared forward (each row
   alone, unpadded) on the device, fp32 (and, reported without a bound, bf16 under autocast);
4. continuous batching with slow env steps beside generation samples what the plain schedule samples,
   and bf16 generation's logprobs are the bf16 learner's.

    python scripts/gpu_check.py --device cuda --out DIR     # DIR/gpu_check.txt, DIR/train/...
    python scripts/gpu_check.py --device cpu --out DIR      # the same checks on the CPU (CI)

Exit status 0 when every check passes. Only the tiny random model is used (no weights travel): its
tokenizer is SmolLM2's (``$GEM_CACHE``).
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's packages, as on the device machine (no install there)

from gem_adapters.algorithms.prefix_tree import token_logprobs  # noqa: E402
from gem_adapters.algorithms.warmup import scripted_episodes  # noqa: E402
from gem_adapters.episodes.chat_renderer import ChatRenderer  # noqa: E402
from gem_adapters.policies import SamplingParams, TransformersPolicy  # noqa: E402
from gem_adapters.runtime.models import load_tokenizer, tiny_causal_lm  # noqa: E402
from gem_adapters.runtime.precision import native_bf16  # noqa: E402
from gem_adapters.runtime.rollout import rollout  # noqa: E402
from gem_core import make_vec  # noqa: E402
from gem_core.vector.faults import InjectFaults  # noqa: E402

GAME = "game:GuessTheNumber-v1-easy"
DEMONSTRATION = [
    {"role": "user", "content": "Guess my number between 1 and 10. Reply inside \\boxed{}."},
    {"role": "assistant", "content": "\\boxed{5}"},
]


def check_training(device: str, out: Path, lines: list[str]) -> None:
    bf16 = native_bf16(device)  # as the trainer chooses: a bf16 GPU, or a CPU with AVX-512-BF16/AMX
    command = [
        sys.executable, str(ROOT / "examples" / "train_trl.py"), "--model", "tiny", "--max_steps", "2",
        "--per_device_train_batch_size", "8", "--num_generations", "2",
        "--warmup_episodes", "8", "--warmup_batch_size", "4", "--eval_episodes", "4",
        "--bf16", str(bf16).lower(), "--output_dir", str(out / "train"),
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    (out / "train.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, f"train_trl.py exited {done.returncode}: {done.stderr[-2000:]}"
    assert f"on {device}" in done.stdout, "the run did not report training on the device"
    rows = (out / "train" / "metrics.csv").read_text().splitlines()
    train = [r for r in rows if r.startswith("train,")]
    assert len(train) == 2, f"expected 2 GRPO steps, metrics.csv has {len(train)}"
    lines.append(f"train_trl.py --model tiny, 2 GRPO steps, bf16={bf16}: ok ({len(rows) - 1} metric rows)")


def check_kv_engine(device: str, lines: list[str]) -> None:
    tokenizer = load_tokenizer("smollm2")
    model = tiny_causal_lm(tokenizer, seed=1).to(device).eval()
    renderer = ChatRenderer(tokenizer, prefix_messages=DEMONSTRATION)
    sampling = SamplingParams(max_new_tokens=6, temperature=1.0)
    played = {}
    for cache in ("kv", "none"):
        policy = TransformersPolicy(model, tokenizer, seed=7, cache=cache)
        played[cache] = rollout(
            [GAME] * 6, policy, renderer, seeds=range(6), max_new_tokens=6, sampling=sampling
        )
    ids = {cache: [[t.action_ids for t in e.turns] for e in episodes] for cache, episodes in played.items()}
    assert ids["kv"] == ids["none"], "the KV engine sampled other ids than re-prefill"
    error = max(
        abs(a - b)
        for ea, eb in zip(played["kv"], played["none"])
        for ta, tb in zip(ea.turns, eb.turns)
        for a, b in zip(ta.logprobs, tb.logprobs)
    )
    assert error < 1e-3, f"KV-engine logprobs differ from re-prefill by {error}"
    turns = sum(e.num_turns for e in played["kv"])
    lines.append(f"KV engine vs re-prefill, 6 episodes, {turns} turns: same ids, logprobs within {error:.1e}")


def check_schedule_and_bf16(device: str, lines: list[str]) -> None:
    """Continuous batching with slow env steps beside generation samples what the plain schedule samples;
    bf16 generation's logprobs are the bf16 learner's."""
    tokenizer = load_tokenizer("smollm2")
    model = tiny_causal_lm(tokenizer, seed=3).to(device).eval()
    renderer = ChatRenderer(tokenizer, prefix_messages=DEMONSTRATION)
    sampling = SamplingParams(max_new_tokens=6, temperature=1.0, seed=5)
    played = {}
    for slow in (0.0, 0.5):  # half the steps of every env take 50 ms: they run beside the decoding
        vec = make_vec(
            [GAME] * 8, autoreset_mode="disabled",
            wrappers=[functools.partial(InjectFaults, hang_prob=slow, hang_seconds=0.05, seed=0)],
        )  # fmt: skip
        with vec:
            policy = TransformersPolicy(model, tokenizer, seed=7)
            played[slow] = rollout(vec, policy, renderer, seeds=range(8), max_new_tokens=6, sampling=sampling)
    ids = {slow: [[t.action_ids for t in e.turns] for e in episodes] for slow, episodes in played.items()}
    assert ids[0.0] == ids[0.5], "slow env steps changed what was sampled"
    lines.append(f"continuous batching with slow env steps: the same {sum(map(len, ids[0.5]))} turns")

    policy = TransformersPolicy(model, tokenizer, seed=7, bf16=True)
    episodes = rollout([GAME] * 6, policy, renderer, seeds=range(6), max_new_tokens=6, sampling=sampling)
    gaps = []
    for episode in episodes:
        seq = episode.to_sequence()
        ids_ = torch.tensor([seq.token_ids], device=device)
        scored = torch.zeros_like(ids_)
        for start, end in seq.turn_spans:
            scored[0, start:end] = 1
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
            learner = token_logprobs(model, ids_, torch.ones_like(ids_), scored).logprobs[0][scored[0].bool()]
        sampled = torch.tensor([lp for s, e in seq.turn_spans for lp in seq.logprobs[s:e]], device=device)
        gaps.append((learner - sampled).abs().mean().item())
    assert max(gaps) < 0.02, f"bf16 rollout vs bf16 learner logprobs differ by {max(gaps)} on average"
    lines.append(f"bf16 generation vs bf16 learner: mean |logprob gap| per episode at most {max(gaps):.1e}")


def unshared(model, ids, mask, scored):
    logprobs = torch.zeros(ids.shape, device=ids.device)
    for b in range(ids.shape[0]):
        columns = mask[b].nonzero()[:, 0]
        row = ids[b, columns]
        log_p = model(input_ids=row[None]).logits[0].float().log_softmax(-1)[:-1]
        lp = log_p.gather(1, row[1:, None])[:, 0]
        keep = scored[b, columns[1:]].bool()
        logprobs[b, columns[1:][keep]] = lp[keep]
    return logprobs


def check_learner(device: str, lines: list[str]) -> None:
    tokenizer = load_tokenizer("smollm2")
    renderer = ChatRenderer(tokenizer, prefix_messages=DEMONSTRATION)
    episodes = scripted_episodes(GAME, [0, 0, 1, 2, 3, 4], renderer, lambda env: env.solve_action())
    rows = [e.to_sequence().token_ids for e in episodes]
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for b, row in enumerate(rows):  # left padding, as TRL pads prompts
        ids[b, width - len(row) :], mask[b, width - len(row) :] = torch.tensor(row), 1
    ids, mask = ids.to(device), mask.to(device)
    scored = mask.clone()
    weights = torch.randn(ids.shape, generator=torch.Generator().manual_seed(0)).to(device)
    model = tiny_causal_lm(tokenizer, seed=2).to(device)

    def gradients(compute, autocast: bool):
        model.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            logprobs = compute()
        (logprobs * weights).sum().backward()
        return logprobs.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    for autocast in (False, True) if device == "cuda" else (False,):
        tree_lp, tree_grads = gradients(lambda: token_logprobs(model, ids, mask, scored).logprobs, autocast)
        ref_lp, ref_grads = gradients(lambda: unshared(model, ids, mask, scored), autocast)
        lp_error = (tree_lp - ref_lp).abs().max().item()
        grad_error = max(
            ((tree_grads[n] - g).abs().max() / g.abs().max().clamp(min=1e-30)).item()
            for n, g in ref_grads.items()
        )
        label = "bf16 autocast" if autocast else "fp32"
        lines.append(
            f"prefix-tree learner vs unshared forward ({label}, {len(rows)} episodes): logprobs within "
            f"{lp_error:.1e}, gradients within {grad_error:.1e} of each tensor's largest entry"
        )
        if not autocast:
            assert lp_error < 1e-4 and grad_error < 1e-4, f"fp32: logprobs {lp_error}, gradients {grad_error}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device visible")
    lines = [
        f"gpu_check {time.strftime('%Y-%m-%d %H:%M')}: device {args.device}"
        + (f" ({torch.cuda.get_device_name(0)})" if args.device == "cuda" else ""),
        f"torch {torch.__version__}, python {sys.version.split()[0]}",
    ]
    failed = 0
    for check in (check_kv_engine, check_learner, check_schedule_and_bf16, check_training):
        started = time.perf_counter()
        try:
            if check is check_training:
                check(args.device, out, lines)
            else:
                check(args.device, lines)
            lines.append(f"  PASS {check.__name__} ({time.perf_counter() - started:.0f} s)")
        except Exception:
            failed += 1
            lines.append(f"  FAIL {check.__name__}:\n{traceback.format_exc()}")
        print(lines[-2] if lines[-1].startswith("  PASS") else lines[-1], flush=True)
    lines.append("all checks passed" if not failed else f"{failed} check(s) failed")
    (out / "gpu_check.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

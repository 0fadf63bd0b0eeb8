"""Where a long multi-turn GRPO step's time goes: SmolLM2 on ``game:Mastermind-v1-easy`` with the baselines
row's settings (16 episodes of ~8 turns, 4 per task, 16 tokens a turn, 2,048-token context, micro-batches
of 4), phase by phase, against the machine's fp32 and bf16 matmul peaks measured in the same run.

    .venv/bin/python -m benchmarks.long_step_profile --label "fp32" --precision fp32
    .venv/bin/python -m benchmarks.long_step_profile --label "auto" --precision auto

Run it alone on the machine. The policy is warmed up once per seed as the row does (TRL's ``SFTTrainer`` on
64 solver games) and cached under ``--cache``, so that every measurement starts from the same weights; then
``--steps`` GRPO steps run through ``GEMGRPOTrainer``. Per step: the rollout split into prefill, decode
(model forwards of the generation engine) and env steps; the learner's forward, backward and optimizer
step; generated tokens; learner tokens processed / unique (the prefix tree); the average batch of the
decode-only engine steps against the step's episodes; the learner's achieved GFLOP/s (6 x the backbone's
parameters per processed token) against the peak of its precision; and the gap between the logprobs the
rollout sampled with and the learner's recomputation (mean |difference| over generated tokens, TRL's
``sampling/...`` numbers where it logs them). With ``--ops``, the last step's last learner micro-batch is
replayed once under ``torch.profiler``: seconds in matrix products, attention kernels and everything else,
and the ceiling the matrix products alone put on the learner's share of the peak. ``--compile`` runs the
learner's layers compiled (``GEMGRPOConfig.compile_learner``); its first step compiles and is reported
apart, as ``--exclude-first`` does for the eager run it is compared with. The section named
``--label`` goes into ``benchmarks/results/long_step_profile.txt`` (replacing an older one of that name).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from benchmarks.train_step_profile import cpu_name, matmul_gflops, spread, timing_flags, write_section

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "long_step_profile.txt"
ROW = "game_Mastermind-v1-easy--smollm2"


def warmed_up(row, seed: int, cache: Path):
    """The row's SmolLM2 after its SFT warm-up, built once per seed and cached as a plain HF folder."""
    from benchmarks.baselines.train_run import load_policy
    from gem_adapters.episodes.chat_renderer import ChatRenderer
    from gem_adapters.runtime.models import load_model, load_tokenizer

    folder = cache / f"{row.name}-seed{seed}"
    if not (folder / "config.json").exists():
        model, tokenizer, _, _ = load_policy(row, seed, smoke=False)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    model, tokenizer = load_model(str(folder)), load_tokenizer(str(folder))
    return model, tokenizer, ChatRenderer(tokenizer)


class EngineProbe:
    """Collects every ``KVEngine`` the rollouts create and the seconds spent in env steps."""

    def __init__(self):
        import importlib

        from gem_adapters.policies import kv_engine

        rollout_module = importlib.import_module(
            "gem_adapters.runtime.rollout"
        )  # the package exports a function of that name

        self.engines: list = []
        self.env_seconds = 0.0
        probe = self
        init, step_subset = kv_engine.KVEngine.__init__, rollout_module._step_subset

        def recording_init(engine, *args, **kwargs):
            init(engine, *args, **kwargs)
            probe.engines.append(engine)

        def timed_step_subset(*args, **kwargs):
            started = time.perf_counter()
            try:
                return step_subset(*args, **kwargs)
            finally:
                probe.env_seconds += time.perf_counter() - started

        kv_engine.KVEngine.__init__ = recording_init
        rollout_module._step_subset = timed_step_subset

    def take(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for engine in self.engines:
            for key, value in engine.stats.items():
                totals[key] = totals.get(key, 0) + value
        totals["env_seconds"] = self.env_seconds
        self.engines, self.env_seconds = [], 0.0
        return totals


class LearnerCallProbe:
    """Keeps the arguments of the learner's last training forward over a prefix tree (``token_logprobs``
    with gradients on), to replay it under the profiler (``learner_ops``)."""

    def __init__(self):
        from gem_adapters.algorithms import prefix_tree

        self.last: tuple | None = None
        probe, token_logprobs = self, prefix_tree.token_logprobs

        def recording(*args, **kwargs):
            if torch.is_grad_enabled():
                probe.last = (args, kwargs)
            return token_logprobs(*args, **kwargs)

        prefix_tree.token_logprobs = recording
        self.replay = token_logprobs


MATMULS = ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm")


def _matmul_flops(name: str, shapes: list) -> float:
    """2 m k n (times the batch) from a matmul op's input shapes."""
    operands = [s for s in shapes if len(s) >= 2]
    if name in ("aten::addmm", "aten::addmm_", "aten::baddbmm"):
        operands = operands[1:]
    a, b = operands[0], operands[1]
    batch = a[0] if len(a) == 3 else 1
    return 2.0 * batch * a[-2] * a[-1] * b[-1]


def learner_ops(model, probe: LearnerCallProbe, bf16: bool, peak: float, backbone: int) -> dict:
    """One replay of the learner's last micro-batch (forward and backward of its logprobs) under
    ``torch.profiler``: seconds in matrix products (and their GFLOP/s), in attention kernels and in
    everything else (elementwise work, casts, copies), and the ceiling the matrix products alone put on
    the learner's share of ``peak``: were every other op free, 6 x backbone FLOPs per token over the
    matrix products' seconds."""
    from torch.profiler import ProfilerActivity, profile

    if probe.last is None:
        raise RuntimeError(
            "no learner forward over a prefix tree was recorded (TRL's padded forward ran instead?)"
        )
    args, kwargs = probe.last

    def one_pass():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = probe.replay(*args, **kwargs)
        out.logprobs.sum().backward()
        model.zero_grad(set_to_none=True)
        return out.tokens

    one_pass()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        started = time.perf_counter()
        tokens = one_pass()
        wall = time.perf_counter() - started
    matmul_s = attention_s = matmul_flops = total_s = 0.0
    for event in prof.key_averages(group_by_input_shape=True):
        seconds = event.self_cpu_time_total / 1e6
        total_s += seconds
        if event.key in MATMULS:
            matmul_s += seconds
            matmul_flops += event.count * _matmul_flops(event.key, event.input_shapes)
        elif "scaled_dot_product" in event.key:
            attention_s += seconds
    model_flops = 6 * backbone * tokens
    return {
        "tokens": tokens,
        "wall_s": wall,
        "matmul_s": matmul_s,
        "matmul_gflops": matmul_flops / matmul_s / 1e9,
        "attention_s": attention_s,
        "other_s": total_s - matmul_s - attention_s,
        "achieved_share": model_flops / wall / 1e9 / peak,
        "ceiling_share": model_flops / matmul_s / 1e9 / peak,
    }


def run(args) -> dict:
    from transformers import PrinterCallback, TrainerCallback, set_seed

    from benchmarks.baselines.rows import ENVS
    from benchmarks.baselines.train_run import grpo_trainer
    from gem_adapters.runtime.allocator import reuse_freed_memory

    row = next(r for r in ENVS if r.name == ROW)
    torch.set_num_threads(args.threads)
    reuse_freed_memory()  # as the row's own run does (benchmarks.baselines.train_run.train)
    # SmolLM2's MLP shape
    peaks = {
        name: matmul_gflops(1024, 576, 1536, dtype=d)
        for name, d in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    started = time.perf_counter()
    set_seed(args.seed)
    model, tokenizer, renderer = warmed_up(row, args.seed, args.cache)
    load_s = time.perf_counter() - started
    bf16 = {"auto": None, "bf16": True, "fp32": False}[args.precision]
    trainer = grpo_trainer(
        row,
        "rebn",
        args.seed,
        args.steps,
        model,
        tokenizer,
        renderer,
        bf16=bf16,
        compile_learner=args.compile,
    )
    trainer.remove_callback(PrinterCallback)
    probe = EngineProbe()
    learner_call = LearnerCallProbe() if args.ops else None
    steps: list[dict] = []

    class Record(TrainerCallback):
        def on_log(self, _args, state, _control, logs=None, **__):
            if not logs or "timing/step_s" not in logs:
                return
            engine = probe.take()
            steps.append({"step": state.global_step, "logs": dict(logs), "engine": engine})

    trainer.add_callback(Record())
    trainer.train()
    backbone = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n and "lm_head" not in n)
    precision = "bf16" if trainer.args.bf16 else "fp32"
    ops = None
    if learner_call is not None:
        ops = learner_ops(model, learner_call, trainer.args.bf16, peaks[precision], backbone)
    return {
        "cpu": cpu_name(),
        "flags": timing_flags(),
        "threads": torch.get_num_threads(),
        "peaks": peaks,
        "load_s": load_s,
        "backbone": backbone,
        "steps": steps,
        "precision": precision,
        "compiled": args.compile,
        "first_apart": args.compile or args.exclude_first,
        "ops": ops,
    }


def section(label: str, command: str, result: dict, beside: str) -> str:
    steps = result["steps"]
    first = []
    if result.get("first_apart"):  # with --compile the first step compiles the learner's layers
        why = "it compiles the learner's layers" if result["compiled"] else "--exclude-first"
        first = [f"first step {steps[0]['logs']['timing/step_s']:.1f} s ({why}), not in the ranges below"]
        steps = steps[1:]
    logs = [s["logs"] for s in steps]
    engine = [s["engine"] for s in steps]

    def col(key):
        return [float(entry.get(key, float("nan"))) for entry in logs]

    fwd, bwd = col("timing/forward_s"), col("timing/backward_s")
    learner_tokens, unique = col("timing/learner_tokens"), col("timing/unique_tokens")
    episodes = col("env/episodes") if "env/episodes" in logs[0] else [16.0] * len(logs)
    peak = result["peaks"]["bf16" if result["precision"] == "bf16" else "fp32"]
    gflops = [6 * result["backbone"] * t / (f + b) / 1e9 for t, f, b in zip(learner_tokens, fwd, bwd)]
    lines = [
        f"== {label} ==",
        f"command: {command}",
        f"date: {time.strftime('%Y-%m-%d %H:%M')}, CPU: {result['cpu']}, flags: {result['flags']}, "
        f"torch threads {result['threads']}, beside: {beside}",
        f"matmul peak (best of 5, SmolLM2's MLP shape): fp32 {result['peaks']['fp32']:.0f} GFLOP/s, "
        f"bf16 {result['peaks']['bf16']:.0f} GFLOP/s; learner precision: {result['precision']}",
        f"warmed-up policy load: {result['load_s']:.1f} s",
        *first,
        f"GRPO steps: {len(steps)}, seconds per step (mean and range over steps):",
        f"  whole step   {spread(col('timing/step_s'))}",
        f"  rollout      {spread(col('timing/rollout_s'))}",
        f"    prefill    {spread([e['prefill_seconds'] for e in engine])}  (engine forwards that prefill)",
        f"    decode     {spread([e['decode_seconds'] for e in engine])}  (engine forwards that only decode)",
        f"    env steps  {spread([e['env_seconds'] for e in engine], 2)}",
        f"  scoring      {spread(col('timing/scoring_s'), 2)}",
        f"  forward      {spread(fwd)}",
        f"  backward     {spread(bwd)}",
        f"  optimizer    {spread(col('timing/optimizer_s'), 2)}",
        f"turns per episode {spread(col('env/turns'))}; generated tokens per step "
        f"{spread([e['generated_tokens'] for e in engine], 0)}; prefilled {spread([e['prefill_tokens'] for e in engine], 0)}",
        f"generation: {spread([e['generated_tokens'] / max(e['prefill_seconds'] + e['decode_seconds'], 1e-9) for e in engine], 0)} "
        f"generated tok/s over engine forwards; average decode batch "
        f"{spread([e['decode_step_rows'] / max(e['decode_steps'], 1) for e in engine])} of "
        f"{episodes[0]:.0f} episodes",
        f"learner: tokens processed {spread(learner_tokens, 0)}, processed / unique "
        f"{spread([t / u for t, u in zip(learner_tokens, unique)], 2)}",
        f"learner GFLOP/s (6 x {result['backbone'] / 1e6:.0f}M backbone parameters per processed token): "
        f"{spread(gflops, 0)}, {spread([100 * g / peak for g in gflops], 0)}% of the {result['precision']} peak",
        f"rollout vs learner logprob gap (mean |diff| per generated token): "
        f"{spread(col('gem/logprob_gap'), 4)}",
        f"success {spread(col('env/success_rate'), 2)}, return {spread(col('env/return'), 2)}",
    ]
    ops = result.get("ops")
    if ops:
        lines += [
            f"learner pass by op (torch.profiler, the last step's last micro-batch replayed, {ops['tokens']} "
            f"tokens, {ops['wall_s']:.1f} s wall): matrix products (the LM head's included) {ops['matmul_s']:.2f} s at "
            f"{ops['matmul_gflops']:.0f} GFLOP/s, attention kernels {ops['attention_s']:.2f} s, everything "
            f"else {ops['other_s']:.2f} s; learner {100 * ops['achieved_share']:.0f}% of the "
            f"{result['precision']} peak, and at most {100 * ops['ceiling_share']:.0f}% were every op but the "
            f"matrix products free",
        ]
    return "\n".join([*lines, ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    parser.add_argument("--beside", default="nothing (the CPU lock held)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/gem-long-step-profile"))
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    parser.add_argument(
        "--ops", action="store_true", help="also replay one learner micro-batch under torch.profiler"
    )
    parser.add_argument(
        "--compile", action="store_true", help="GEMGRPOConfig(compile_learner=True); the first step is apart"
    )
    parser.add_argument(
        "--exclude-first", action="store_true", help="report the first step apart (for A/B with --compile)"
    )
    args = parser.parse_args()
    result = run(args)
    command = (
        ".venv/bin/python -m benchmarks.long_step_profile "
        + " ".join(
            f"--{k} {json.dumps(v) if isinstance(v, str) and ' ' in v else v}"
            for k, v in (("label", args.label), ("steps", args.steps), ("precision", args.precision))
        )
        + (" --ops" if args.ops else "")
        + (" --compile" if args.compile else "")
        + (" --exclude-first" if args.exclude_first else "")
    )
    text = section(args.label, command, result, args.beside)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    write_section(args.label, text, RESULTS, header="")


if __name__ == "__main__":
    main()

"""Where the default training run's time goes, phase by phase, against the machine's fp32 matmul peak.

    .venv/bin/python benchmarks/train_step_profile.py --label after
    .venv/bin/python benchmarks/train_step_profile.py --label before -- --share_prefixes false

Runs the README's first command (``examples/train_trl.py`` with its defaults, plus any arguments after
``--``) in a subprocess under ``/usr/bin/time -v``; run it alone on the machine. Then it reads the run's
``metrics.csv`` (every GRPO step logs ``GEMGRPOTrainer``'s ``timing/*`` phases) and writes a section
named ``--label`` into ``benchmarks/results/train_step_profile.txt`` (replacing an older section of that
name): the CPU, the fp32 matmul peak measured just before the run, model load, each evaluation, the
warm-up, and per GRPO step the rollout, scoring (rewards, any extra logprob pass, advantages), the
learner's forward, backward and optimizer step and the rest (logging), with minor page faults; then the
learner's tokens per second and what that is as a share of the peak, and the process's totals (wall,
user and system time, peak RSS, minor faults).
"""

from __future__ import annotations

import argparse
import csv
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "train_step_profile.txt"
PHASES = ["rollout_s", "scoring_s", "forward_s", "backward_s", "optimizer_s"]


def timing_flags() -> str:
    """The CPU flags a timing depends on (``gem_adapters.runtime.precision.cpu_flags``), space-separated."""
    from gem_adapters.runtime.precision import cpu_flags

    return " ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in cpu_flags())


def cpu_name() -> str:
    fields = {}
    with suppress(OSError):
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    flags = timing_flags().split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    name = fields.get("Model name") or platform.processor() or "unknown CPU"
    return (
        f"{name} (family {fields.get('CPU family', '?')}, model {fields.get('Model', '?')}), "
        f"{fields.get('CPU(s)', '?')} cores, {isa}"
    )


def matmul_gflops(m: int, k: int, n: int, repeats: int = 5, dtype: torch.dtype = torch.float32) -> float:
    """Best-of-``repeats`` GFLOP/s of an ``(m, k) @ (k, n)`` product in ``dtype`` on this process's threads."""
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    out = torch.empty(m, n, dtype=dtype)
    torch.mm(a, b, out=out)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(4):
            torch.mm(a, b, out=out)
        best = min(best, (time.perf_counter() - started) / 4)
    return 2 * m * k * n / best / 1e9


def time_report(text: str) -> dict[str, str]:
    wanted = {
        "wall": r"Elapsed \(wall clock\) time.*: (.+)",
        "user_s": r"User time \(seconds\): (.+)",
        "system_s": r"System time \(seconds\): (.+)",
        "cpu": r"Percent of CPU this job got: (.+)",
        "peak_rss_kb": r"Maximum resident set size \(kbytes\): (.+)",
        "minor_faults": r"Minor \(reclaiming a frame\) page faults: (.+)",
    }
    found = {}
    for key, pattern in wanted.items():
        match = re.search(pattern, text)
        found[key] = match.group(1).strip() if match else "?"
    return found


def spread(values: list[float], digits: int = 1) -> str:
    return f"{statistics.mean(values):.{digits}f} (range {min(values):.{digits}f}-{max(values):.{digits}f})"


def backbone_parameters(model_name: str) -> tuple[int, int]:
    """(parameters outside the embedding and head, hidden size x vocabulary) of the run's model."""
    from gem_adapters.runtime.models import load_model, load_tokenizer, tiny_causal_lm

    model = tiny_causal_lm(load_tokenizer("smollm2")) if model_name == "tiny" else load_model(model_name)
    embedding = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight
    total = sum(p.numel() for p in model.parameters())
    body = total - embedding - (0 if head is model.get_input_embeddings().weight else head.numel())
    return body, head.numel()


def report(
    label: str, command: list[str], rows: list[dict], timing: dict[str, str], peak: dict, model: str
) -> str:
    evals = [r for r in rows if r["split"] == "eval"]
    steps = [r for r in rows if r["split"] == "train"]
    num = lambda r, k: float(r[k]) if r.get(k) not in (None, "", "nan") else float("nan")  # noqa: E731
    first = evals[0]
    wall = sum(float(part) * 60**i for i, part in enumerate(reversed(timing["wall"].split(":"))))
    # the log's clock starts once the model is loaded; what the process spent before (and after the last row)
    startup_s = wall - num(rows[-1], "wall_s") + num(first, "wall_s") - num(first, "step_s")
    lines = [
        f"== {label} ==",
        f"command: {' '.join(command)}",
        f"date: {time.strftime('%Y-%m-%d %H:%M')}, CPU: {cpu_name()}, torch threads {torch.get_num_threads()}",
        f"fp32 matmul peak (torch.mm, best of 5): {peak['square']:.0f} GFLOP/s at 2048^3, "
        f"{peak['mlp']:.0f} GFLOP/s at (1024x576)@(576x1536) (SmolLM2's MLP shape)",
        "",
        f"start-up and the end (interpreter, imports, model load, the final plot): {startup_s:.1f} s",
    ]
    warmup = [r for r in evals if r["phase"] == "warmup"]
    for r in evals:
        lines.append(
            f"evaluation '{r['phase']}' (step {r['step']}): {num(r, 'step_s'):.1f} s, "
            f"{num(r, 'tokens_per_s'):.0f} generated tok/s, {num(r, 'faults_k'):.0f}k minor faults"
        )
    if warmup:
        warmup_s = num(warmup[0], "wall_s") - num(warmup[0], "step_s") - num(first, "wall_s")
        lines.append(f"warm-up (SFT on the solver's games): {warmup_s:.1f} s")
    if steps:
        lines.append(f"GRPO steps: {len(steps)}, seconds per step (mean and range over steps):")
        total = [num(r, "step_s") for r in steps]
        lines.append(f"  whole step   {spread(total)}")
        for key in PHASES:
            lines.append(f"  {key[:-2]:<12} {spread([num(r, key) for r in steps], 2)}")
        other = [num(r, "step_s") - sum(num(r, k) for k in PHASES) for r in steps]
        lines.append(f"  other        {spread(other, 2)}  (logging, data loading, gradient clipping)")
        lines.append(f"  minor faults {spread([num(r, 'faults_k') for r in steps], 0)} thousand per step")
        body, head = backbone_parameters(model)
        tokens = [num(r, "learner_tokens") for r in steps]
        unique = [num(r, "unique_tokens") for r in steps]
        learner_s = [num(r, "forward_s") + num(r, "backward_s") for r in steps]
        rate = [t / s for t, s in zip(tokens, learner_s)]
        gflops = [6 * body * t / s / 1e9 for t, s in zip(tokens, learner_s)]
        lines += [
            f"learner: {spread(tokens, 0)} tokens through the forward per step; the batch's prefix tree holds "
            f"{spread(unique, 0)} (processed / unique {statistics.mean(tokens) / statistics.mean(unique):.2f})",
            f"learner tokens/s (forward + backward): {spread(rate, 0)}",
            f"learner GFLOP/s (6 x {body / 1e6:.0f}M backbone parameters per token; the {head / 1e6:.0f}M-parameter "
            f"head on scored tokens and attention not counted): {spread(gflops, 0)}, "
            f"{statistics.mean(gflops) / peak['mlp']:.0%} of the MLP-shape peak",
        ]
    lines += [
        "",
        f"process: wall {timing['wall']}, user {timing['user_s']} s, system {timing['system_s']} s, "
        f"CPU {timing['cpu']}, peak RSS {int(timing['peak_rss_kb']) / 1e6:.2f} GB, "
        f"minor faults {int(timing['minor_faults']) / 1e6:.1f} million",
        "",
    ]
    return "\n".join(lines)


def write_section(label: str, text: str, path: Path = RESULTS, header: str | None = None) -> None:
    """``text`` as the section ``label`` of ``path``, replacing an older section of that name; the file's
    header (what precedes its first section) is kept, else ``header`` (default: this script's) starts it."""
    old = path.read_text() if path.exists() else ""
    sections = re.split(r"(?m)^(?=== )", old)
    kept = [s for s in sections if s.strip() and not s.startswith(f"== {label} ==")]
    first = kept.pop(0) if kept and not kept[0].startswith("== ") else (HEADER if header is None else header)
    path.write_text(first + "".join(kept) + text + "\n")


HEADER = (
    "Where the default run's time goes (benchmarks/train_step_profile.py; each section: one run, alone on "
    "the machine).\n\n"
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--label", required=True, help="section name in the results file")
    parser.add_argument("--output-dir", default=None, help="the run's folder (default: a temporary one)")
    parser.add_argument("train_args", nargs="*", help="arguments for examples/train_trl.py (after --)")
    args = parser.parse_args()
    peak = {"square": matmul_gflops(2048, 2048, 2048), "mlp": matmul_gflops(1024, 576, 1536)}
    out = Path(args.output_dir or tempfile.mkdtemp(prefix="gem-profile-"))
    command = [sys.executable, "examples/train_trl.py", *args.train_args, "--output_dir", str(out)]
    shown = [".venv/bin/python", "examples/train_trl.py", *args.train_args]
    done = subprocess.run(["/usr/bin/time", "-v", *command], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(done.stderr[-4000:])
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode})")
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    model = (
        args.train_args[args.train_args.index("--model") + 1] if "--model" in args.train_args else "smollm2"
    )
    text = report(args.label, shown, rows, time_report(done.stderr), peak, model)
    print(text)
    write_section(args.label, text)


if __name__ == "__main__":
    main()

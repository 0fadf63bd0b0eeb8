"""The ``gem`` CLI: list, play through stdin, and real (small) evaluations with random, the scripted
solvers, a tiny transformers model and an OpenAI-compatible server; one-line errors."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gem_core
from gem_adapters.episodes.jsonl import read_jsonl
from gem_adapters.evaluation import pass_at_k
from gem_core.cli import main

GUESS = "game:GuessTheNumber-v1-easy"
HANOI = "game:TowerOfHanoi-v1-easy"
REPO = Path(__file__).resolve().parents[1]


def gem(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gem_core.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )


def metrics_of(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


# ---- gem list -----------------------------------------------------------------------------------
def test_list_shows_every_env_without_importing_torch():
    # The registry is read in the same fresh process: tests that import benchmarks register more ids here.
    code = (
        "import json, sys; import gem_core; from gem_core.cli import main; c = main(['list']);"
        " print(json.dumps(gem_core.list_envs())); print('torch' in sys.modules); sys.exit(c)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:5] == ["ID", "CATEGORY", "TURNS", "TOOLS", "DATA"]
    assert lines[-1] == "False"  # torch was never imported
    registered = set(json.loads(lines[-2]))
    listed = {line.split()[0] for line in lines[1:-2] if line.startswith(tuple("abcdefghijklmnopqrstuvwxyz"))}
    assert listed == registered
    assert GUESS in registered and "game:GuessTheNumber-v0-hard" in registered
    row = next(line.split() for line in lines if line.startswith(GUESS + " "))
    assert row[1:5] == ["game", "multi", "-", "offline"]
    assert f"{len(listed)} envs" in proc.stdout


def test_list_pattern_glob_substring_and_no_match(capsys):
    assert main(["list", "game:*-easy"]) == 0
    ids = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:] if line.startswith("game:")]
    assert ids == gem_core.list_envs("game:*-easy") and all(i.endswith("-easy") for i in ids)
    assert main(["list", "guessthe"]) == 0
    out = capsys.readouterr().out
    assert GUESS in out and "Wordle" not in out
    assert main(["list", "no-such-env-*"]) == 2
    assert "no registered env matches" in capsys.readouterr().err


# ---- gem play -----------------------------------------------------------------------------------
def test_play_through_stdin():
    env = gem_core.make(GUESS)
    env.reset(seed=3)
    target = env.unwrapped.target
    proc = gem("play", GUESS, "--seed", "3", stdin=f"11\nhello\n{target}\n:h\n:q\n")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "seed 3" in out and "Guess The Number" in out
    assert "reward -0.100 (invalid_move)" in out  # 11 is out of range
    assert "You won!" in out and "reward +1.000" in out
    assert f"3. \\boxed{{{target}}}  ->  +1.000" in out  # the history


def test_play_unknown_env_is_one_line():
    proc = gem("play", "game:GuessTheNumbr-v1-easy")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "Did you mean" in proc.stderr


# ---- gem eval: random and the scripted solvers --------------------------------------------------
def test_eval_solver_wins_and_random_does_worse(tmp_path, capsys):
    solver_out, random_out = tmp_path / "solver", tmp_path / "random"
    env_arg = f"{GUESS},{HANOI}"
    assert (
        main(["eval", "--model", "solver", "--env", env_arg, "--episodes", "6", "--out", str(solver_out)])
        == 0
    )
    solver = metrics_of(solver_out)
    for env_id in (GUESS, HANOI):
        assert solver["envs"][env_id]["success_rate"] == 1.0
        assert solver["envs"][env_id]["format_error_rate"] == 0.0
    assert solver["envs"][GUESS]["mean_turns"] <= 4  # binary search over 1..10

    args = ["eval", "--model", "random", "--env", env_arg, "--episodes", "10", "--k", "4"]
    assert main([*args, "--out", str(random_out)]) == 0  # progress bar on
    captured = capsys.readouterr()
    assert "100%" in captured.err and "80/80" in captured.err
    assert "mean over envs" in captured.out and "report:" in captured.out
    rand = metrics_of(random_out)
    for env_id in (GUESS, HANOI):
        m = rand["envs"][env_id]
        assert m["episodes"] == 40 and m["seeds"] == 10
        assert m["success_rate"] < 1.0 and m["mean_return"] < solver["envs"][env_id]["mean_return"]
        assert m["pass@4"] >= m["avg@4"] == pytest.approx(m["success_rate"])
        assert m["prompt_tokens"] is None  # random uses no tokens

    # The numbers agree with the trajectories on disk.
    episodes = read_jsonl(random_out / "trajectories.jsonl")
    assert len(episodes) == 80
    guess = [e for e in episodes if e.env_id == GUESS]
    assert sorted({e.seed for e in guess}) == list(range(10))
    assert sorted(e.info["sample"] for e in guess if e.seed == 0) == [0, 1, 2, 3]
    wins = {s: any(e.success for e in guess if e.seed == s) for s in range(10)}
    assert rand["envs"][GUESS]["pass@4"] == pytest.approx(sum(wins.values()) / 10)
    assert rand["envs"][GUESS]["mean_return"] == pytest.approx(sum(e.total_reward for e in guess) / 40)
    assert rand["envs"][GUESS]["pass@4"] > rand["envs"][GUESS]["avg@4"] > 0  # 4 tries beat 1
    # The samples of one seed differ (the random agent re-seeds per sample), the initial states do not.
    seed0 = [e for e in guess if e.seed == 0]
    assert len({e.turns[0].observation for e in seed0}) == 1
    assert len({tuple(t.action for t in e.turns) for e in seed0}) > 1

    report = (random_out / "report.md").read_text()
    assert "gem eval --model random" in report and "| mean over envs | 80 |" in report
    for chart in ("summary.png", "returns.png"):
        assert (random_out / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_rerun_is_identical_for_random(tmp_path):
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        args = ["eval", "--model", "random", "--env", "game:Wordle-v1-easy", "--episodes", "4", "--k", "2"]
        assert main([*args, "--no-progress", "--out", str(out)]) == 0
    assert metrics_of(outs[0]) == metrics_of(outs[1])
    assert (outs[0] / "trajectories.jsonl").read_text() == (outs[1] / "trajectories.jsonl").read_text()


def test_eval_solver_plays_the_drawn_game_and_refuses_an_env_without_a_solver(tmp_path, capsys):
    out, drawn = tmp_path / "drawn", "game:TowerOfHanoi-v1-random"  # easy or hard, drawn per episode
    args = [
        "eval",
        "--model",
        "solver",
        "--env",
        drawn,
        "--episodes",
        "4",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    assert metrics_of(out)["envs"][drawn]["success_rate"] == 1.0 and metrics_of(out)["skipped"] == {}
    reference = "game:GuessTheNumber-v0-easy"  # the reference GEM's game: no solver
    args = ["eval", "--model", "solver", "--env", reference, "--no-progress", "--out", str(tmp_path / "ref")]
    assert main(args) == 2  # nothing left to play
    err = capsys.readouterr().err
    assert "gem: error: no env to play" in err and f"{reference}: it has no scripted solver" in err
    assert not (tmp_path / "ref").exists()


def test_eval_solver_skips_the_envs_without_a_solver_with_a_warning_and_reports_them(tmp_path):
    out = tmp_path / "mixed"
    no_solver = ["math:Arithmetic-v0", "game:Wordle-v0-easy"]
    envs = ",".join([GUESS, no_solver[0], HANOI, no_solver[1]])
    proc = gem(
        "eval", "--model", "solver", "--env", envs, "--episodes", "3", "--no-progress", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    for env_id in no_solver:
        assert f"skipping {env_id}: it has no scripted solver" in proc.stderr
        assert f"skipped {env_id}: it has no scripted solver" in proc.stdout
    metrics = metrics_of(out)
    assert set(metrics["envs"]) == {GUESS, HANOI}
    assert all(metrics["envs"][e]["success_rate"] == 1.0 for e in (GUESS, HANOI))
    assert set(metrics["skipped"]) == set(no_solver)
    assert metrics["config"]["env_ids"] == [GUESS, HANOI]
    report = (out / "report.md").read_text()
    assert "## Skipped" in report and all(
        f"`{env_id}`: it has no scripted solver" in report for env_id in no_solver
    )
    assert {e.env_id for e in read_jsonl(out / "trajectories.jsonl")} == {GUESS, HANOI}


def test_eval_reports_invalid_moves_in_its_table_report_and_metrics(tmp_path):
    out, envs = tmp_path / "invalid", ["game:FifteenPuzzle-v1-easy", "game:Sudoku-v1-easy", GUESS]
    proc = gem(
        "eval",
        "--model",
        "random",
        "--env",
        ",".join(envs),
        "--episodes",
        "4",
        "--no-progress",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    metrics = metrics_of(out)
    episodes = read_jsonl(out / "trajectories.jsonl")
    for env_id in envs:
        turns = [t for e in episodes if e.env_id == env_id for t in e.turns]
        expected = sum(bool(t.info.get("invalid_move")) for t in turns) / len(turns)
        assert metrics["envs"][env_id]["invalid_move_rate"] == pytest.approx(expected)
    assert metrics["envs"]["game:Sudoku-v1-easy"]["invalid_move_rate"] > 0  # random fills given cells
    assert metrics["overall"]["invalid_move_rate"] == pytest.approx(
        sum(metrics["envs"][e]["invalid_move_rate"] for e in envs) / len(envs)
    )
    sudoku = f"{metrics['envs']['game:Sudoku-v1-easy']['invalid_move_rate']:.1%}"
    header = next(line for line in proc.stdout.splitlines() if line.startswith("env "))
    assert "invalid moves" in header
    row = next(line for line in proc.stdout.splitlines() if line.startswith("game:Sudoku-v1-easy"))
    assert sudoku in row.split()
    report = (out / "report.md").read_text()
    assert "| invalid moves |" in report and "invalid_move" in report
    assert any(
        line.startswith("| game:Sudoku-v1-easy |") and f" {sudoku} " in line for line in report.splitlines()
    )


def test_eval_with_python_tool_wraps_the_env(tmp_path):
    out = tmp_path / "tools"
    args = ["eval", "--model", "solver", "--env", GUESS, "--episodes", "2", "--tools", "python"]
    assert main([*args, "--no-progress", "--out", str(out)]) == 0
    assert metrics_of(out)["envs"][GUESS]["success_rate"] == 1.0
    first = read_jsonl(out / "trajectories.jsonl")[0].turns[0]
    assert "<python>" in first.observation and first.info["tool_uses"] == 0


def test_pass_at_k_is_the_unbiased_estimator():
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


# ---- gem eval: models ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer():
    from gem_adapters.runtime.models import load_tokenizer

    return load_tokenizer("smollm2")


@pytest.fixture(scope="module")
def tiny_model(tokenizer):
    from gem_adapters.runtime.models import tiny_causal_lm

    return tiny_causal_lm(tokenizer, seed=0)  # what `--model tiny` loads


TINY_ARGS = ["--env", GUESS, "--max-new-tokens", "8", "--system-prompt", "", "--no-progress"]


def test_eval_tiny_model_rerun_gives_identical_numbers(tmp_path):
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:  # k=2 samples at temperature 1 from the seeded sampler
        assert (
            main(["eval", "--model", "tiny", *TINY_ARGS, "--episodes", "1", "--k", "2", "--out", str(out)])
            == 0
        )
    first, second = metrics_of(outs[0]), metrics_of(outs[1])
    assert first == second
    m = first["envs"][GUESS]
    assert m["episodes"] == 2 and m["completion_tokens"] > 0 and m["prompt_tokens"] > m["completion_tokens"]
    assert m["completion_tokens"] <= 8 * m["mean_turns"]
    assert m["format_error_rate"] > 0.5  # random weights do not write \boxed{}
    a, b = (read_jsonl(out / "trajectories.jsonl") for out in outs)
    assert [t.action_ids for e in a for t in e.turns] == [t.action_ids for e in b for t in e.turns]
    # The two samples of a seed were drawn separately.
    seed0 = [e for e in a if e.seed == 0]
    assert seed0[0].turns[0].action_ids != seed0[1].turns[0].action_ids
    assert m["prompt_tokens"] == pytest.approx(
        sum(sum(s for s, _ in e.to_sequence().turn_spans) for e in a) / len(a)
    )


def test_eval_through_an_openai_compatible_server_matches_local(tmp_path, tiny_model, tokenizer):
    from gem_adapters.policies import TransformersPolicy
    from tests.adapters.policies.test_policies import CompletionsServer

    local = tmp_path / "local"
    assert main(["eval", "--model", "tiny", *TINY_ARGS, "--episodes", "2", "--out", str(local)]) == 0
    served = tmp_path / "served"
    with CompletionsServer(TransformersPolicy(tiny_model, tokenizer)) as server:
        args = ["eval", "--model", server.url, "--served-model", "tiny", "--tokenizer", "smollm2"]
        assert main([*args, *TINY_ARGS, "--episodes", "2", "--out", str(served)]) == 0
        assert server.requests and all(isinstance(p, list) for r in server.requests for p in r["prompt"])
    # Greedy decoding of the same weights: the server's episodes are the local ones, token for token.
    assert metrics_of(served)["envs"] == metrics_of(local)["envs"]
    a, b = (read_jsonl(out / "trajectories.jsonl") for out in (local, served))
    assert [t.action_ids for e in a for t in e.turns] == [t.action_ids for e in b for t in e.turns]


# ---- one-line errors ----------------------------------------------------------------------------
def test_errors_are_one_line_with_status_2(tmp_path, closed_port):
    cases = {
        "unknown env": (["--model", "random", "--env", "game:GuessTheNumbr-v1-easy"], "Did you mean"),
        "bad endpoint": (
            ["--model", f"http://127.0.0.1:{closed_port}", "--env", GUESS],
            "cannot reach the endpoint",
        ),
        "bad model": (["--model", str(tmp_path / "no-such-model"), "--env", GUESS], "cannot load model"),
        "bad tool": (["--model", "random", "--env", GUESS, "--tools", "browser"], "unknown tool"),
    }
    procs = {  # in parallel: each pays its own imports
        name: subprocess.Popen(
            [sys.executable, "-m", "gem_core.cli", "eval", *args, "--out", str(tmp_path / "out")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        for name, (args, _) in cases.items()
    }
    errors = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        errors[name] = stderr
        assert proc.returncode == 2, (name, stderr)
        assert stderr.count("\n") == 1 and "Traceback" not in stderr, (name, stderr)
        assert stderr.startswith("gem: error: ") and cases[name][1] in stderr, (name, stderr)
        assert stdout == ""
    assert not (tmp_path / "out").exists()  # nothing was written
    assert "Connection refused" in errors["bad endpoint"]

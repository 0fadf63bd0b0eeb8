"""benchmarks/baselines: the interval math, the table, and the resumable runner end to end on the
``check`` table (1 RL step of the small policy per seed, real processes, a git repository of its own)."""

from __future__ import annotations

import csv
import json
import math
import operator
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest

import gem_core
from benchmarks.baselines import chance, results
from benchmarks.baselines.rows import ENVS, MIXTURE, MIXTURE_SHARED, PLATEAU, TABLES, VERDICTS, Row, mixture
from benchmarks.baselines.runner import (
    REPO,
    Git,
    Overlaps,
    envs_markdown,
    measured_from_parts,
    measurement,
    plan_markdown,
    report,
    run,
    schedule,
)
from benchmarks.baselines.train_run import Resume, training_precision
from benchmarks.bootstrap import bootstrap
from gem_adapters.runtime.precision import cpu_flags


def summary(seed: int, before: float, after: float, **extra) -> dict:
    return {
        "env_id": "game:X-v0", "framework": "trl", "estimator": "rebn", "policy": "small", "seed": seed,
        "steps": 3, "episodes_per_step": 8, "wall_s": 100.0 + seed,
        "before": {"success_rate": before, "return": before - 0.5},
        "after": {"success_rate": after, "return": after - 0.5},
        "_row": "game_X-v0--small", **extra,
    }  # fmt: skip


def test_interval_is_the_bootstrap_of_the_mean_over_seeds():
    assert results.interval([0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert results.interval([0.2, 0.6, 0.7]) == bootstrap([0.2, 0.6, 0.7])
    low, high = results.interval([0.2, 0.6, 0.7])
    assert 0.2 <= low < 0.5 < high <= 0.7
    assert all(math.isnan(v) for v in results.interval([0.4]))
    assert results.interval([0.1, math.nan, 0.3]) == bootstrap([0.1, 0.3])  # NaN seeds are left out


def test_change_is_paired_by_seed():
    rose = [summary(s, b, a) for s, (b, a) in enumerate([(0.2, 0.5), (0.6, 0.7), (0.4, 0.9)])]
    assert results.change(rose)["verdict"] == "rose" and results.change(rose)["mean"] == pytest.approx(0.3)
    fell = [summary(s, b, a) for s, (b, a) in enumerate([(0.5, 0.2), (0.7, 0.6), (0.9, 0.4)])]
    assert results.change(fell)["verdict"] == "fell"
    mixed = [summary(s, b, a) for s, (b, a) in enumerate([(0.2, 0.5), (0.7, 0.6), (0.4, 0.4)])]
    assert results.change(mixed)["verdict"] == "no clear change"
    assert results.change(mixed[:1])["verdict"] == "one seed"


def test_table_line_and_file(tmp_path):
    runs = [summary(0, 0.25, 0.5), summary(1, 0.75, 1.0), summary(2, 0.5, 0.75)]
    line = results.table_line(runs)
    assert line["seeds"] == 3 and line["steps"] == 3 and line["wall_s"] == 303.0
    assert line["success_before"] == pytest.approx(0.5) and line["success_after"] == pytest.approx(0.75)
    assert line["return_after"] == pytest.approx(0.25)
    assert (line["after_lo"], line["after_hi"]) == bootstrap([0.5, 1.0, 0.75])
    one = results.table_line(runs[:1])
    path = tmp_path / "table.csv"
    results.write_table([line, one], path)
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == results.TABLE_COLUMNS == [
        "env_id", "framework", "estimator", "policy", "seeds", "steps", "success_before", "success_after",
        "after_lo", "after_hi", "return_before", "return_after", "wall_s", "plateau_step", "verdict", "mixture",
        "change", "chance", "chance_hi", "measured_on",
    ]  # fmt: skip
    assert rows[0]["mixture"] == rows[0]["change"] == ""  # a single-env line of a row trying no change
    assert rows[0]["measured_on"] == results.HELD_OUT
    assert rows[0]["success_after"] == "0.75" and rows[1]["after_lo"] == rows[1]["after_hi"] == ""
    assert line["plateau_step"] == "" and line["verdict"] == "learns"  # no curve files: no plateau step
    assert one["verdict"] == "one seed"


def test_a_rise_that_ends_at_chance_is_not_learning():
    """RuleTaker's SmolLM2 line: from below chance to exactly a third of tasks balanced over three labels."""
    runs = [summary(s, b, 1 / 3) for s, b in enumerate([0.21, 0.17, 0.25])]
    assert results.change(runs)["verdict"] == "rose"
    assert results.table_line(runs)["verdict"] == "learns"  # not measured against chance
    at_chance = results.table_line(runs, {"chance": 0.33, "chance_hi": 0.37})
    assert at_chance["verdict"] == "does not learn" and at_chance["chance"] == 0.33
    above = results.table_line(runs, {"chance": 0.05, "chance_hi": 0.1})
    assert above["verdict"] == "learns"
    # a constant answer right on a third of the tasks, as chance.csv's 4 decimals read it back
    read_back = results.table_line(runs, {"chance": 0.3333, "chance_hi": 0.3333})
    assert read_back["verdict"] == "does not learn"


@pytest.mark.parametrize(
    ("env_id", "player", "tool"),
    [
        ("tool:Arithmetic-v0-python", "python_then_answer", "<python>"),
        ("tool:LocalWiki-v0-search", "search_then_answer", "<search>"),
    ],
)
def test_a_planned_warm_up_player_calls_the_tool_then_answers_in_every_game(env_id, player, tool):
    """The warm-up plays every game in one env, reset per seed: each game gets its own plan (a stale one
    answered the first game's question at once in every later game)."""
    from benchmarks.baselines.players import PLAYERS, register_tool_envs
    from gem_adapters.algorithms.warmup import scripted_games

    register_tool_envs()
    games = list(scripted_games(env_id, range(5), PLAYERS[player]()))
    for _, moves in games:
        assert [move.startswith(tool) for _, move, _ in moves] == [True, False]
        assert moves[-1][2][1] == 1.0  # the answer copied from the tool's output wins


@pytest.mark.parametrize("env_id", ["math:Arithmetic-v0", "rg:letter_counting"])
def test_a_worked_answer_player_works_each_answer_out_and_wins(env_id):
    """The step-by-step players: each step's arithmetic holds and ends at the gold answer; each word named
    holds the letter as often as it says, and the counts sum to the answer. Every game won."""
    from benchmarks.baselines.players import PLAYERS
    from gem_adapters.algorithms.warmup import scripted_games

    player = {"math:Arithmetic-v0": "math_steps", "rg:letter_counting": "letters_by_word"}[env_id]
    games = list(scripted_games(env_id, range(30), PLAYERS[player]()))
    assert len(games) == 30
    for _, ((observation, move, outcome),) in games:
        assert outcome[1] == 1.0, (observation, move)
        if env_id == "math:Arithmetic-v0":
            number = r"(-?\d+(?:\.\d+)?)"
            steps = re.findall(rf"{number} ([-+*/^]) {number} = {number}", move)
            assert steps and re.search(rf"\\boxed\{{{number}\}}", move)[1] == steps[-1][3]
            for a, op, b, c in steps:
                apply = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
                exact = apply.get(op, operator.pow)(float(a), float(b))
                assert abs(exact - float(c)) < 1e-6, (observation, move)
        else:
            letter = re.search(r'letter "(\w)"', observation)[1].lower()
            named = re.findall(r"(\S+) \((\d+)\)", move)
            assert all(word.lower().count(letter) == int(n) for word, n in named), move
            assert sum(int(n) for _, n in named) == int(re.search(r"<answer>(\d+)</answer>", move)[1])


def test_a_rows_settings_reach_its_trainer():
    """The row's sampling temperature, KL coefficient and entropy control are the trainer's (held-out play
    stays at 1.0)."""
    from benchmarks.baselines.train_run import ENTROPY_COEF_DELTA, grpo_trainer
    from gem_adapters.episodes.chat_renderer import ChatRenderer
    from gem_adapters.runtime.models import load_tokenizer, tiny_causal_lm

    tokenizer = load_tokenizer("smollm2")
    model = tiny_causal_lm(tokenizer, seed=0)
    row = next(r for r in PLATEAU if r.change == "temperature-1.5")
    trainer = grpo_trainer(row, "rebn", 0, 1, model, tokenizer, ChatRenderer(tokenizer), bf16=False)
    assert trainer.temperature == trainer.args.temperature == 1.5 and trainer.args.beta == row.beta == 0.0
    assert not trainer.args.use_adaptive_entropy and trainer.entropy_coef == 0.0
    row = next(r for r in PLATEAU if r.change == "temperature-1.5--entropy-target-0.5")
    trainer = grpo_trainer(row, "rebn", 0, 1, model, tokenizer, ChatRenderer(tokenizer), bf16=False)
    assert trainer.args.use_adaptive_entropy and trainer.args.entropy_target == row.entropy_target == 0.5
    assert trainer.args.entropy_coef_delta == ENTROPY_COEF_DELTA and trainer.temperature == 1.5


def test_chance_is_the_better_of_the_random_player_and_the_best_constant_answer(tmp_path):
    """letter_counting's random player scores 0.003, answering "1" to every held-out text 8 of 24; a game
    holds no gold answer; a chance.csv line written before the constant answer gets it when read."""
    from benchmarks.baselines.train_run import EVAL_FIRST_SEED

    assert chance.constant_answer_success("rg:letter_counting", EVAL_FIRST_SEED, 24) == 8 / 24
    assert math.isnan(chance.constant_answer_success("game:Hangman-v1-easy", EVAL_FIRST_SEED, 4))
    path = tmp_path / "chance.csv"
    path.write_text(
        "env_id,max_turns,tasks,samples,success,lo,hi,seconds\n"
        "rg:letter_counting,,24,16,0.0026,0.0000,0.0078,4.9614\n"
        "game:Hangman-v1-easy,,4,16,0.0300,0.0100,0.0500,1.0\n"
    )
    table = chance.ChanceTable(path)
    assert table.get("rg:letter_counting", EVAL_FIRST_SEED, 24, None) == {
        "chance": 8 / 24,
        "chance_hi": 8 / 24,
    }
    assert table.get("game:Hangman-v1-easy", EVAL_FIRST_SEED, 4, None) == {"chance": 0.03, "chance_hi": 0.05}
    header, *lines = path.read_text().splitlines()
    assert header.split(",") == chance.CHANCE_COLUMNS and lines[1].split(",")[7] == "0.3333"


def test_the_random_player_scores_what_chance_predicts():
    """The real random player: a third of three-label questions; some TicTacToe wins against a random
    opponent; no win at all in a game with a turn limit too short to win in."""
    per_task = chance.random_player_success("logic:RuleTaker-v0-d1", 900_000_000, 24, None)
    assert len(per_task) == 24 and 0.22 < sum(per_task) / 24 < 0.45
    assert sum(chance.random_player_success("multiagent:TicTacToe-v0-random", 0, 8, None)) > 0
    assert chance.random_player_success("multiagent:TicTacToe-v0-random", 0, 8, 2) == [0.0] * 8


def test_a_lines_chance_is_measured_once_and_kept(tmp_path, monkeypatch):
    path = tmp_path / "chance.csv"
    first = chance.ChanceTable(path).get("logic:RuleTaker-v0-d1", 900_000_000, 6, None)
    assert 0 < first["chance"] < 1 and first["chance"] <= first["chance_hi"] and path.exists()
    monkeypatch.setattr(chance, "measure", lambda *a: pytest.fail("measured again"))
    assert chance.ChanceTable(path).get("logic:RuleTaker-v0-d1", 900_000_000, 6, None) == pytest.approx(
        first, abs=1e-4
    )
    with pytest.raises(pytest.fail.Exception):  # another number of tasks is another line
        chance.ChanceTable(path).get("logic:RuleTaker-v0-d1", 900_000_000, 7, None)


def test_an_env_without_a_random_player_has_no_chance_line_to_clear(tmp_path):
    unknown = chance.ChanceTable(tmp_path / "chance.csv").get("learn:PickSeven-v0", 0, 4, None)
    assert all(math.isnan(v) for v in unknown.values())
    runs = [summary(s, b, a) for s, (b, a) in enumerate([(0.2, 0.5), (0.3, 0.6), (0.4, 0.9)])]
    assert results.table_line(runs, unknown)["verdict"] == "learns"


def test_curves_combine_over_seeds_up_to_the_shortest():
    curves = [
        [{"step": 1, "success_rate": 0.0, "return": 1.0}, {"step": 2, "success_rate": 0.5, "return": 2.0}],
        [{"step": 1, "success_rate": 1.0, "return": 3.0}],
    ]
    (line,) = results.combine_curves(curves)
    assert line == {
        "step": 1, "success_rate_mean": 0.5, "success_rate_min": 0.0, "success_rate_max": 1.0,
        "return_mean": 2.0, "return_min": 1.0, "return_max": 3.0,
    }  # fmt: skip


def test_the_envs_table_spans_the_categories():
    assert len(ENVS) >= 24 and len({r.name for r in ENVS}) == len(ENVS)
    assert sum("grpo" in r.estimators and "rebn" in r.estimators for r in ENVS) >= 6
    assert sum(r.policy == "smollm2" for r in ENVS) >= 6
    assert all(r.gamma == 0.9 and len(r.seeds) >= 3 for r in ENVS)
    categories = {r.category for r in ENVS}
    for needed in ("reasoning-gym", "math", "math + Python tool", "QA + search tool", "code", "terminal",
                   "multi-agent", "game (easy)", "game (hard)"):  # fmt: skip
        assert needed in categories


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository of its own for the results, and a warm-up cache of its own."""
    monkeypatch.setenv("GEM_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "test@example.com")
    git(repo, "config", "user.name", "test")
    (repo / "README.md").write_text("results\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "start")
    return repo


def test_check_table_runs_end_to_end_commits_and_resumes(repo):
    results_dir = repo / "results"
    (row,) = TABLES["check"]
    run("check", None, workers=1, git=Git(repo=repo), results_dir=results_dir)

    stems = [results.run_stem(results_dir, row.name, "trl", "rebn", seed) for seed in row.seeds]
    for stem in stems:
        summary = json.loads(stem.with_suffix(".json").read_text())
        assert summary["steps"] == 1 and summary["episodes_per_step"] == 8
        assert summary["before"]["episodes"] == summary["after"]["episodes"] == 8
        for phase in ("before", "after"):
            assert 0.0 <= summary[phase]["success_rate"] <= 1.0
        assert 0.0 < summary["after"]["same_first_action"] <= 1.0
        # A run's seconds name the CPU they were measured on: machines of one kind differ in family,
        # model and the flags that choose the precision.
        assert "(family " in summary["machine"]["cpu"] and ", model " in summary["machine"]["cpu"]
        assert set(summary["machine"]["flags"].split()) <= cpu_flags()
        held_out = [json.loads(line) for line in stem.with_suffix(".heldout.jsonl").read_text().splitlines()]
        assert [e["phase"] for e in held_out] == ["before"] * 8 + ["after"] * 8
        assert all(e["env_id"] == "learn:PickSeven-v0" and e["actions"] for e in held_out)
        assert sum(e["success"] for e in held_out[8:]) / 8 == summary["after"]["success_rate"]
        with open(stem.with_suffix(".csv")) as f:
            (step,) = list(csv.DictReader(f))
        assert step["step"] == "1" and 0.0 <= float(step["success_rate"]) <= 1.0 and float(step["step_s"]) > 0
    with open(results_dir / "table.csv") as f:
        (line,) = list(csv.DictReader(f))
    assert line["env_id"] == "learn:PickSeven-v0" and line["seeds"] == "2" and line["framework"] == "trl"
    assert results.curve_path(results_dir, row.name, "trl", "rebn").exists()
    assert (results_dir / "grid.png").stat().st_size > 0

    # Each finished run was committed with its files alone as it finished, the curve over seeds when the
    # row was done, then the table in a commit of its own.
    subjects = git(repo, "log", "--reverse", "--format=%s").splitlines()
    label = row.label("rebn")
    assert subjects[1:] == [f"baselines: {label}, seed {s}" for s in row.seeds] + [
        f"baselines: {label}, 2 seeds",
        "baselines: the check table, README table and grid",
    ]
    first = git(repo, "show", "--name-only", "--format=", "HEAD~3").split()
    assert sorted(first) == sorted(
        str(stems[0].with_suffix(s).relative_to(repo)) for s in (".csv", ".json", ".log", ".heldout.jsonl")
    )
    assert git(repo, "status", "--porcelain") == ""

    # A finished run is never run again; a missing one is, and only it.
    logs = {stem: stem.with_suffix(".log").stat().st_mtime_ns for stem in stems}
    run("check", None, workers=1, git=Git(repo=repo), results_dir=results_dir)
    assert {stem: stem.with_suffix(".log").stat().st_mtime_ns for stem in stems} == logs
    stems[1].with_suffix(".json").unlink()
    run("check", None, workers=1, git=Git(enabled=False), results_dir=results_dir, seeds=[row.seeds[0]])
    assert not stems[1].with_suffix(".json").exists()  # another runner's seed: left to it
    run("check", None, workers=1, git=Git(enabled=False), results_dir=results_dir, seeds=[row.seeds[1]])
    assert stems[0].with_suffix(".log").stat().st_mtime_ns == logs[stems[0]]
    assert stems[1].with_suffix(".log").stat().st_mtime_ns != logs[stems[1]]
    assert stems[1].with_suffix(".json").exists()


def test_a_stopped_run_goes_on_from_its_last_step_as_if_never_stopped(tmp_path, monkeypatch):
    """A run killed mid-way (SIGKILL, as when a session ends) resumes from its last checkpoint on the next
    call: the same curve, held-out episodes and result as the same run never stopped."""
    monkeypatch.setenv("GEM_CACHE", str(tmp_path / "cache"))
    (row,) = TABLES["check"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}

    def one(stem: Path) -> subprocess.Popen:
        command = ["one", row.name, "rebn", "0", "--out", str(stem), "--steps", "24", "--table", "check"]
        return subprocess.Popen(
            [sys.executable, "-m", "benchmarks.baselines", *command], env=env, cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    whole, stopped = tmp_path / "whole" / "run", tmp_path / "stopped" / "run"
    assert one(whole).wait() == 0
    process = one(stopped)
    progress, curve = stopped.with_suffix(".resume") / "resume.json", stopped.with_suffix(".csv")

    def past_a_checkpoint() -> bool:  # two steps past the last checkpoint: the curve has rows to drop
        checkpoint = json.loads(progress.read_text()).get("step", 0) if progress.exists() else 0
        return checkpoint >= 1 and len(curve.read_text().splitlines()) - 1 >= checkpoint + 2

    while not past_a_checkpoint():
        assert process.poll() is None, "the run ended before it was stopped"
        time.sleep(0.01)
    process.kill()
    process.wait()
    assert json.loads(progress.read_text())["bf16"] is False  # the small policy trains in fp32
    assert not stopped.with_suffix(".json").exists()
    assert one(stopped).wait() == 0

    first, second = (json.loads(stem.with_suffix(".json").read_text()) for stem in (whole, stopped))
    assert first["resumed_at_steps"] == [] and len(second["resumed_at_steps"]) == 1
    assert 1 <= second["resumed_at_steps"][0] < 24
    assert first["steps"] == second["steps"] == 24
    for phase in ("before", "after"):
        assert {k: v for k, v in first[phase].items() if k != "seconds"} == {
            k: v for k, v in second[phase].items() if k != "seconds"
        }
    assert (
        whole.with_suffix(".heldout.jsonl").read_text() == stopped.with_suffix(".heldout.jsonl").read_text()
    )
    curves = []
    for stem in (whole, stopped):
        with open(stem.with_suffix(".csv")) as f:
            curves.append(
                [{k: v for k, v in r.items() if k not in ("wall_s", "step_s")} for r in csv.DictReader(f)]
            )
    assert [r["step"] for r in curves[1]] == [str(step) for step in range(1, 25)]
    assert curves[0] == curves[1]
    assert not stopped.with_suffix(".resume").exists()  # cleared once the run's JSON is written


def test_a_checkpoint_is_resumed_only_by_its_own_run(tmp_path):
    saved = Resume(tmp_path / "run", {"seed": 0, "row": {"gamma": 0.9}})
    saved.save(before={"success_rate": 0.5})  # stopped before its first step ended: nothing to resume
    assert Resume(tmp_path / "run", {"seed": 0, "row": {"gamma": 0.9}}).load() is None
    saved.save(checkpoint="checkpoint-3", step=3)
    (saved.folder / "checkpoint-3").mkdir()
    assert Resume(tmp_path / "run", {"seed": 0, "row": {"gamma": 0.9}}).load()["step"] == 3
    assert Resume(tmp_path / "run", {"seed": 1, "row": {"gamma": 0.9}}).load() is None  # another seed's
    assert not saved.folder.exists()


def test_a_resumed_run_keeps_the_precision_its_first_attempt_chose():
    smollm2 = next(row for row in PLATEAU if row.policy == "smollm2")
    small = next(row for row in PLATEAU if row.policy == "small")
    assert training_precision(smollm2, None) is None  # GEMGRPOConfig's choice on the device it meets
    assert training_precision(small, None) is False
    assert training_precision(smollm2, {"step": 3}) is None  # a checkpoint from before precision was kept
    for first in (False, True):  # begun on an AVX2-only CPU, or on one with AVX-512-BF16
        assert training_precision(smollm2, {"step": 3, "bf16": first}) is first
        assert training_precision(small, {"step": 3, "bf16": first}) is first


def test_what_ran_beside_a_run_is_seen_across_runner_processes(tmp_path):
    path = tmp_path / "activity.jsonl"
    one, other = Overlaps(path), Overlaps(path)  # two runners of one machine
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with open(path, "a") as f:  # runs without an end: one of a killed runner, one of a runner still going
        f.write(
            json.dumps({"event": "start", "key": "k1", "label": "killed", "pid": gone.pid, "t": 0.0}) + "\n"
        )
        f.write(
            json.dumps({"event": "start", "key": "k2", "label": "going", "pid": os.getpid(), "t": 0.0}) + "\n"
        )
        f.write("not json\n")
    with one.running("a") as a:
        with other.running("b") as b:
            pass
        with other.running("c") as c:
            pass
    with one.running("d") as d:
        pass
    assert a == {"b", "c", "going"} and b == c == {"a", "going"} and d == {"going"}


def test_the_activity_file_keeps_only_the_runs_a_run_can_still_meet(tmp_path):
    path = tmp_path / "activity.jsonl"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    now = time.time()

    def event(kind: str, key: str, t: float, pid: int = os.getpid()) -> str:
        return json.dumps({"event": kind, "key": key, "label": key, "pid": pid, "t": t}) + "\n"

    path.write_text(
        event("start", "old", now - 100)  # ended before the run still going started: nothing meets it
        + event("end", "old", now - 90)
        + event("start", "killed", now - 80, gone.pid)  # no end, its runner gone
        + event("start", "going", now - 50)  # another runner's, still going
        + event("start", "recent", now - 40)  # ended while "going" ran: "going" still needs it
        + event("end", "recent", now - 30)
        + "not json\n"
    )
    with Overlaps(path).running("new") as new:
        pass
    kept = [json.loads(line)["label"] for line in path.read_text().splitlines()]
    assert kept == ["going", "recent", "recent", "new", "new"] and new == {"going"}
    assert Overlaps(path).beside("going", now - 50, time.time()) == {"recent", "new"}
    with open(path, "a") as f:  # "going" ends: the next run keeps none of these
        f.write(event("end", "going", time.time()))
    with Overlaps(path).running("last"):
        pass
    assert [json.loads(line)["label"] for line in path.read_text().splitlines()] == ["last", "last"]


def test_report_reads_other_frameworks_results(tmp_path):
    """A row another runner wrote (e.g. verl) lands in the same table, one line per framework."""
    runs = tmp_path / "runs" / "game_X-v0--small"
    runs.mkdir(parents=True)
    for framework in ("trl", "verl_main_ppo"):
        for seed in range(3):
            data = {k: v for k, v in summary(seed, 0.5, 0.6, framework=framework).items() if k != "_row"}
            (runs / f"{framework}-rebn-seed{seed}.json").write_text(json.dumps(data))
            with open(runs / f"{framework}-rebn-seed{seed}.csv", "w") as f:
                f.write("step,success_rate,return\n1,0.5,0.0\n2,0.6,0.1\n")
    report("envs", tmp_path)
    with open(tmp_path / "table.csv") as f:
        lines = list(csv.DictReader(f))
    assert [line["framework"] for line in lines] == ["trl", "verl_main_ppo"]
    assert all(line["seeds"] == "3" for line in lines)


def test_a_small_policy_gets_its_rows_context(tmp_path, monkeypatch):
    import dataclasses

    from benchmarks.baselines.train_run import load_policy
    from gem_adapters.policies.transformers_policy import TransformersPolicy

    monkeypatch.setenv("GEM_CACHE", str(tmp_path))
    (row,) = TABLES["check"]
    for context, expected in ((512, 1024), (2560, 2560)):  # the build's 1024, or the row's longer one
        model, tokenizer, _, _ = load_policy(
            dataclasses.replace(row, max_context_tokens=context), 0, smoke=True
        )
        assert TransformersPolicy(model, tokenizer).max_context_tokens == expected


# ---- the plateau step and the measured verdict (issue 58) ----------------------------------------------


def bernoulli_curve(rng, means, episodes):
    return [sum(rng.random() < p for _ in range(episodes)) / episodes for p in means]


def test_plateau_of_a_rising_curve_is_still_rising():
    rising = [0.2 + 0.6 * i / 59 for i in range(60)]
    found = results.plateau(rising)
    assert found["step"] == "still rising" and found["trend"] > found["tolerance"]
    assert results.plateau(rising[::-1])["step"] == "still falling"
    assert results.verdict("rose", found, 60) == "learns slowly"


def test_plateau_of_a_flat_curve_is_its_first_step():
    assert results.plateau([0.3] * 60)["step"] == 1
    assert results.plateau([0.3] * 24, steps=range(5, 29))["step"] == 5  # the curve's own step numbers
    import random

    rng = random.Random(0)
    flat = bernoulli_curve(rng, [0.3] * 60, 192)  # 64 episodes x 3 seeds a step, nothing learnt
    assert results.plateau(flat)["step"] == 1
    short = bernoulli_curve(rng, [0.3] * 24, 48)  # SmolLM2: 16 episodes x 3 seeds
    assert results.plateau(short)["step"] <= 6  # 48 episodes a step: noisier, early all the same
    assert results.verdict("no clear change", results.plateau(flat), 60) == "does not learn"


def test_plateau_at_step_k():
    k = 20
    clean = [0.2 + 0.5 * min(i, k - 1) / (k - 1) for i in range(60)]
    found = results.plateau(clean)
    # within a tenth of the rise of the final value from 0.9 k on; the smoothing moves it by <= h = 5
    assert 0.85 * k <= found["step"] <= k and found["final"] == pytest.approx(0.7)
    assert results.verdict("rose", found, 60) == "learns"
    assert results.verdict("rose", results.plateau([0.2 + 0.5 * min(i, 44) / 44 for i in range(60)]), 60) == (
        "learns slowly"  # plateau in the budget's second half
    )
    import random

    rng = random.Random(1)
    noisy = bernoulli_curve(rng, [0.2 + 0.5 * min(i, k - 1) / (k - 1) for i in range(60)], 192)
    assert 0.75 * k <= results.plateau(noisy)["step"] <= 1.25 * k


def test_plateau_needs_six_steps():
    assert results.plateau([0.1, 0.2, 0.3, 0.4, 0.5])["step"] == ""
    assert results.plateau([0.1, math.nan, 0.3, 0.4, 0.5, 0.5])["step"] == ""  # NaN steps left out


def test_table_line_reads_the_plateau_from_the_runs_curves(tmp_path):
    runs = []
    for seed in range(3):
        stem = tmp_path / f"trl-rebn-seed{seed}"
        with open(stem.with_suffix(".csv"), "w") as f:
            f.write("step,success_rate,return\n")
            for step in range(1, 25):
                success = 0.2 + 0.4 * min(step, 8) / 8
                f.write(f"{step},{success},{success}\n")
        runs.append(summary(seed, 0.2, 0.6, steps=24, _stem=stem))
    line = results.table_line(runs)
    assert line["plateau_step"] in (8, 9) and line["verdict"] == "learns"  # the rise ends at step 8


# ---- the plateau table and its plan ------------------------------------------------------------------


def test_the_plateau_table_meets_the_issue_budgets():
    env_names = {e.name for e in ENVS}
    envs = [r for r in PLATEAU if not r.change and r.name in env_names]  # else a new policy
    assert len(envs) == len({r.env_id for r in envs}) == 24
    assert {r.env_id for r in envs} == {r.env_id for r in ENVS}
    for row in PLATEAU:
        assert row.verdict in VERDICTS and row.expectation.startswith(row.verdict)
        assert len(row.seeds) >= 3 and "rebn" in row.estimators
        assert row.gamma == 0.9 or row.change.endswith(f"gamma-{row.gamma:g}")  # a change row tries another
        if row.policy == "small":
            assert row.steps >= 60 and row.episodes_per_step >= 64
        elif row.policy == "smollm2":
            assert row.steps >= 24 and row.episodes_per_step >= 16

    # GRPO beside ReBN on >= 4 envs, each where a ReBN line rose: the ``envs`` table's (GRPO planned beside
    # it before the campaign) or the plateau table's own (GRPO added after that line rose)
    def rose(table: str) -> set[tuple[str, str]]:
        with open(results.results_dir(table) / "table.csv") as f:
            lines = [t for t in csv.DictReader(f) if t["estimator"] == "rebn" and not t.get("change")]
        return {
            (t["env_id"], t["policy"])
            for t in lines
            if float(t["success_after"]) > float(t["success_before"])
        }

    grpo = [r for r in envs if "grpo" in r.estimators]
    assert len(grpo) >= 4
    assert {(r.env_id, r.policy) for r in grpo} <= rose("envs") | rose("plateau")


def test_plateau_rows_run_in_their_own_folder_and_are_found_by_table():
    assert results.results_dir("plateau") == results.RESULTS / "plateau"
    assert results.results_dir("envs") == results.results_dir("check") == results.RESULTS
    names = {r.name for r in PLATEAU if not r.change}
    envs = {r.name for r in ENVS}
    assert len(names & envs) >= 24  # the same names: hence the folder of its own and ``one --table``
    for name in names - envs:  # else a policy the env's rows in ``envs`` did not have
        row = next(r for r in PLATEAU if r.name == name)
        assert any(e.env_id == row.env_id for e in ENVS)
        assert all(e.policy != row.policy for e in ENVS if e.env_id == row.env_id)


def test_a_tried_change_is_its_base_row_with_one_change_in_a_folder_of_its_own():
    """A tried row is the row it changes (the env's plain row, or a tried row: its name less the last
    slug) with one change, tried where that row's measured line did not learn."""
    by_name = {r.name: r for r in PLATEAU}
    tried = [r for r in PLATEAU if r.change]
    with open(results.results_dir("plateau") / "table.csv") as f:
        measured = {
            (t["env_id"], t["policy"], t.get("change", "")): t["verdict"]
            for t in csv.DictReader(f)
            if t["estimator"] == "rebn" and t["measured_on"] == results.HELD_OUT
        }
    assert tried and len(by_name) == len(PLATEAU)
    for row in tried:
        original = by_name[row.name.rsplit("--", 1)[0]]
        assert row.name.startswith(f"{original.name}--") and row.estimators in (("rebn",), ("rebn", "grpo"))
        assert (
            measured[(original.env_id, original.policy, original.change)] == "does not learn"
        )  # tried where it did not learn
        # its row's seeds, and more where a line needs them
        assert row.seeds[: len(original.seeds)] == original.seeds
        # the same budget, unless the change is the budget (more steps where the line was still rising)
        assert row.steps == original.steps or (
            row.change == f"steps-{row.steps}" and row.steps > original.steps
        )
        different = {k for k in vars(original) if getattr(original, k) != getattr(row, k)} - {
            "change",
            "estimators",
            "seeds",
            "verdict",
            "expectation",
        }
        warmup = {"small_task", "small_warmup_steps", "small_warmup_batch"}  # the player and its length
        # SmolLM2's player and its length, and the turn budget a player writing longer answers needs
        smollm2_warmup = {"warmup_player", "warmup_episodes", "max_turn_tokens"}
        assert len(different) == 1 or different <= warmup or different <= smollm2_warmup, different
    # a change row is planned from its base row's runs
    text = plan_markdown("plateau")
    assert "not measured" not in text


def test_the_report_puts_a_tried_change_after_its_row(tmp_path):
    base = next(r for r in PLATEAU if r.name == "rg_sum-learn--small")
    tried = next(r for r in PLATEAU if r.base_name == base.name and r.change)
    for row in (tried, base):
        for seed in (0, 1, 2):
            stem = results.run_stem(tmp_path, row.name, "trl", "rebn", seed)
            stem.parent.mkdir(parents=True, exist_ok=True)
            record = summary(seed, 0.1, 0.2 + 0.3 * bool(row.change), row=asdict(row), env_id=row.env_id)
            stem.with_suffix(".json").write_text(json.dumps(record))
    report("plateau", tmp_path)
    with open(tmp_path / "table.csv") as f:
        lines = [line for line in csv.DictReader(f) if line["measured_on"] == results.HELD_OUT]
    assert [line["change"] for line in lines] == ["", tried.change]
    assert float(lines[1]["success_after"]) > float(lines[0]["success_after"])


def timed_run(eval_seconds: float, eval_episodes: int, **extra) -> dict:
    """A finished run's summary whose before and after evaluations each took ``eval_seconds`` over
    ``eval_episodes`` episodes: what the plan's cost is measured from."""
    run = summary(0, 0.1, 0.2, **extra)
    for phase in ("before", "after"):
        run[phase] |= {"seconds": eval_seconds, "episodes": eval_episodes}
    return run


def plan_line(table_dir: Path, env_id: str) -> str:
    return next(line for line in plan_markdown("plateau", table_dir).splitlines() if f"| {env_id} |" in line)


def test_schedule_and_plan(tmp_path):
    assert schedule([3.0, 1.0, 1.0, 2.0], 2) == [(0.0, 3.0), (0.0, 1.0), (1.0, 2.0), (2.0, 4.0)]
    # nothing run yet: every row from the committed envs runs, but for a policy that the env's rows there
    # did not have (``smoke plateau --rows ROW`` measures it)
    text = plan_markdown("plateau", tmp_path)
    envs = {r.name for r in ENVS}
    unmeasured = [r for r in PLATEAU if r.base_name not in envs]
    assert text.count("\n") == len(PLATEAU) + 2 and text.count("not measured") == len(unmeasured)
    assert "(/2)" in text and "2 at a time" in text and "| done |" not in text
    # a long SmolLM2 row with one seed finished in this table: planned from it, not halved (its steps
    # ran after the long-step speedup), its other seeds left to run
    row = next(r for r in PLATEAU if r.policy == "smollm2" and not r.change and r.env_id == "web:Shop-v0")
    stem = results.run_stem(tmp_path, row.name, "trl", row.estimators[0], row.seeds[0])
    stem.parent.mkdir(parents=True)
    # the price holds for CPUs that compute as the runs did: the cell says which (precision)
    run = timed_run(100.0, 24, episodes_per_step=16, seconds_per_step=80.0, train_s=1920.0, wall_s=2400.0,
                    warmup_s=200.0, precision="fp32")  # fmt: skip
    stem.with_suffix(".json").write_text(json.dumps(run))
    line = plan_line(tmp_path, row.env_id)
    cells = [c.strip() for c in line.split("|")]
    assert cells[8] == "80.0 (fp32) at 16 -> 80.0" and cells[12] == f"1/{len(row.seeds)}"
    hours = float(cells[11])  # 3 seeds x (24 steps x 80 s + 200 s evaluations + 200 s warm-up + 80 s else)
    assert hours == pytest.approx(3 * (24 * 80 + 480) / 3600, abs=0.01)
    begin, end = map(float, cells[13].split("-"))
    assert end - begin == pytest.approx(hours * 2 / 3, abs=0.1)  # the two seeds left
    # every seed finished: the row is done and leaves nothing to run
    for seed in row.seeds[1:]:
        results.run_stem(tmp_path, row.name, "trl", row.estimators[0], seed).with_suffix(".json").write_text(
            json.dumps(run)
        )
    line = plan_line(tmp_path, row.env_id)
    assert "| 3/3 | done |" in line


# ---- the mixture row (issue 58, item 4) ----------------------------------------------------------------


def test_the_mixture_row_trains_four_plateau_envs_at_their_total_episodes():
    plateau = {r.name: r for r in PLATEAU}
    assert [r.estimators for r in MIXTURE] == [("rebn",), ("rebn_per_env",)]
    assert len({r.name for r in MIXTURE}) == 1  # one row split by estimator: one folder, two workers
    for row in MIXTURE:
        assert len(row.parts) >= 4 and row.policy == "small" and row.seeds == (0, 1, 2)
        assert all(plateau[p.name] == p and "rebn" in p.estimators for p in row.parts)
        assert row.compare_table == "plateau" and row.verdict in VERDICTS
        # the same total number of episodes as the single-env lines it is compared with
        assert row.steps * row.episodes_per_step == sum(p.steps * p.episodes_per_step for p in row.parts)
        assert (row.episodes_per_step // row.num_generations) % len(row.parts) == 0  # equal shares a step
        for key in MIXTURE_SHARED:
            assert {getattr(p, key) for p in row.parts} == {getattr(row, key)}
    assert results.results_dir("mixture") == results.RESULTS / "mixture"


def test_a_mixture_refuses_parts_one_policy_cannot_share():
    a = Row("game:A-v0", "x", "small", small_task="a")
    b = Row("game:B-v0", "x", "small", small_task="b")
    assert mixture("mixture:AB", "x", [a, b]).env_ids == ("game:A-v0", "game:B-v0")
    with pytest.raises(ValueError, match="must share max_turn_tokens"):
        mixture("mixture:AB", "x", [a, Row("game:B-v0", "x", "small", small_task="b", max_turn_tokens=8)])
    with pytest.raises(ValueError, match="distinct envs"):
        mixture("mixture:AA", "x", [a, a])
    with pytest.raises(ValueError, match="split evenly"):
        mixture("mixture:AB", "x", [a, b], episodes_per_step=24, num_generations=8)  # 3 groups, 2 envs


def mixture_summary(seed: int, per_env: dict[str, tuple[float, float]], **extra) -> dict:
    runs = {
        env: {"row": env.replace(":", "_") + "--small", "before": {"success_rate": b, "return": b},
              "after": {"success_rate": a, "return": a}}
        for env, (b, a) in per_env.items()
    }  # fmt: skip
    return summary(seed, 0.0, 0.0, env_id="mixture:AB", per_env=runs, wall_s=80.0, **extra)


def test_a_mixture_run_is_one_run_of_each_of_its_envs(tmp_path):
    data = mixture_summary(0, {"game:A-v0": (0.2, 0.5), "game:B-v0": (0.1, 0.3)})
    data |= {"_row": "mixture_AB--small", "_stem": tmp_path / "trl-rebn-seed0"}
    a, b = results.per_env_summaries(data)
    assert (a["env_id"], a["before"]["success_rate"], a["after"]["success_rate"]) == ("game:A-v0", 0.2, 0.5)
    assert b["env_id"] == "game:B-v0" and a["wall_s"] == b["wall_s"] == 40.0  # the run's time, split
    assert a["mixture"] == "mixture_AB--small" and "per_env" not in a
    assert a["_stem"] == tmp_path / "trl-rebn-seed0--game_A-v0--small"  # its env's curve
    assert results.per_env_summaries(summary(0, 0.1, 0.2)) == [summary(0, 0.1, 0.2)]


def test_the_mixture_report_puts_each_env_beside_its_single_env_lines(tmp_path, monkeypatch):
    (row, *_) = MIXTURE
    envs = {p.env_id: p.name for p in row.parts}
    mixture_runs = tmp_path / "mixture" / "runs" / row.name
    mixture_runs.mkdir(parents=True)
    for estimator in ("rebn", "rebn_per_env"):
        for seed in range(3):
            data = mixture_summary(seed, {env: (0.2, 0.4) for env in envs}, estimator=estimator)
            data["per_env"] = {env: data["per_env"][env] | {"row": name} for env, name in envs.items()}
            (mixture_runs / f"trl-{estimator}-seed{seed}.json").write_text(json.dumps(data))
            for name in envs.values():
                (mixture_runs / f"trl-{estimator}-seed{seed}--{name}.csv").write_text(
                    "step,success_rate,return\n1,0.2,0.2\n2,0.4,0.4\n"
                )
    for env, name in envs.items():  # the plateau table's single-env lines (GRPO too: not compared)
        (tmp_path / "plateau" / "runs" / name).mkdir(parents=True)
        for estimator in ("rebn", "grpo"):
            for seed in range(3):
                data = summary(seed, 0.2, 0.5, env_id=env, estimator=estimator)
                (tmp_path / "plateau" / "runs" / name / f"trl-{estimator}-seed{seed}.json").write_text(
                    json.dumps(data)
                )
    monkeypatch.setattr(results, "results_dir", lambda table: tmp_path / table)
    (tmp_path / "mixture" / "README.md").write_text("x\n<!-- table:start -->\n<!-- table:end -->\n")
    report("mixture")
    with open(tmp_path / "mixture" / "table.csv") as f:
        lines = list(csv.DictReader(f))
    assert [(line["env_id"], line["estimator"], line["mixture"]) for line in lines] == [
        (env, estimator, mixture)
        for env in envs
        for estimator, mixture in (("rebn", ""), ("rebn", row.name), ("rebn_per_env", row.name))
    ]
    assert all(line["seeds"] == "3" for line in lines)
    assert {line["wall_s"] for line in lines if line["mixture"]} == {"60.0"}  # 3 seeds x 80 s / 4 envs
    readme = (tmp_path / "mixture" / "README.md").read_text()
    assert f"| game:Hangman-v1-easy in {row.env_id} | mixture (4 games) |" in readme
    assert (tmp_path / "mixture" / "grid.png").exists()


def test_the_mixture_plan_is_measured_from_its_parts_runs(tmp_path):
    (row, *_) = MIXTURE
    for i, part in enumerate(row.parts):
        folder = tmp_path / "runs" / part.name
        folder.mkdir(parents=True)
        # part i's warm-up: 1,000 x (i + 1) SFT sequences built in 100 x i s (the first part's was cached)
        run_summary = timed_run(1.0, 10, episodes_per_step=32, seconds_per_step=float(i + 1), train_s=10.0,
                                warmup_build_s=100.0 * i, policy_warmup_steps=125 * (i + 1),
                                policy_warmup_batch=8)  # fmt: skip
        (folder / "trl-rebn-seed0.json").write_text(json.dumps(run_summary))
    measured = measured_from_parts(row, tmp_path)
    # a step of 64 episodes, 16 of each env: the mean of the parts' seconds per episode x 64
    assert measured["seconds_per_step"] == pytest.approx(64 * (1 + 2 + 3 + 4) / 4 / 32)
    # the cached part's 1,000 sequences at the mean seconds per sequence of the three builds
    rate = (100 / 2000 + 200 / 3000 + 300 / 4000) / 3
    assert measured["warmup_s"] == pytest.approx(600.0 + 1000 * rate)
    assert measured["eval_s_per_episode"] == pytest.approx(0.1)
    assert measured_from_parts(row, tmp_path / "nothing") is None
    text = plan_markdown("mixture")  # from the committed envs runs of its parts
    assert "not measured" not in text and text.count("\n") == len(MIXTURE) + 2


def test_a_change_on_a_change_is_priced_from_the_nearest_row_measured(tmp_path):
    """Shop's gamma-1 tries its change on the warmup-64 row: its steps cost what warmup-64's measured, not
    the plain row's, and the plain row's once warmup-64 has no finished run."""
    row = next(r for r in PLATEAU if r.change == "warmup-64--gamma-1")
    for folder, seconds in ((row.base_name, 100.0), (f"{row.base_name}--warmup-64", 300.0)):
        (tmp_path / "runs" / folder).mkdir(parents=True)
        run_summary = timed_run(1.0, 10, episodes_per_step=16, seconds_per_step=seconds, train_s=10.0)
        (tmp_path / "runs" / folder / "trl-rebn-seed0.json").write_text(json.dumps(run_summary))
    assert measurement(row, tmp_path)["seconds_per_step"] == pytest.approx(300.0)
    (tmp_path / "runs" / f"{row.base_name}--warmup-64" / "trl-rebn-seed0.json").unlink()
    assert measurement(row, tmp_path)["seconds_per_step"] == pytest.approx(100.0)


def test_mixture_check_runs_end_to_end(repo):
    results_dir = repo / "results"
    (row,) = TABLES["mixture-check"]
    run("mixture-check", None, workers=1, git=Git(repo=repo), results_dir=results_dir)
    for estimator in row.estimators:
        stem = results.run_stem(results_dir, row.name, "trl", estimator, 0)
        data = json.loads(stem.with_suffix(".json").read_text())
        assert data["env_id"] == row.env_id and data["steps"] == 1 and data["estimator"] == estimator
        assert set(data["per_env"]) == set(row.env_ids)
        for env in data["per_env"].values():
            assert env["before"]["episodes"] == env["after"]["episodes"] == row.eval_episodes
        assert data["before"]["episodes"] == 2 * row.eval_episodes
        for part in row.parts:
            with open(results.part_stem(stem, part.name).with_suffix(".csv")) as f:
                (step,) = list(csv.DictReader(f))
            assert float(step["turns"]) == 1.0 and float(step["step_s"]) > 0
            assert results.curve_path(results_dir, f"{row.name}--{part.name}", "trl", estimator).exists()
    with open(results_dir / "table.csv") as f:
        lines = list(csv.DictReader(f))
    assert sorted((line["env_id"], line["estimator"]) for line in lines) == sorted(
        (env, estimator) for env in row.env_ids for estimator in row.estimators
    )
    assert {line["mixture"] for line in lines} == {row.name}
    log = git(repo, "log", "--name-only", "--format=%s")
    assert "trl-rebn_per_env-seed0--rg_sum-learn--small.csv" in log
    assert git(repo, "status", "--porcelain") == ""


def test_a_mixed_warm_up_is_the_union_of_its_parts(tmp_path, monkeypatch):
    from benchmarks.learning.common import MixedPolicySpec, PolicySpec, mixed_warmup_batches, shared_tokenizer

    monkeypatch.setenv("GEM_CACHE", str(tmp_path))
    parts = (PolicySpec("pick", warmup_episodes=20, warmup_steps=3, warmup_batch=8),
             PolicySpec("sum", warmup_episodes=20, warmup_steps=5, warmup_batch=4))  # fmt: skip
    spec = MixedPolicySpec(parts, warmup_batch=16)
    assert spec.task == "pick+sum" and spec.warmup_steps == 3 and spec.seed == 0
    assert spec.folder() != MixedPolicySpec(parts[::-1], warmup_batch=16).folder()
    batches = mixed_warmup_batches(spec, shared_tokenizer(spec))
    assert [len(b) for b in batches] == [16, 16, 12]  # 3 x 8 + 5 x 4 sequences, in batches of 16
    text = [s.token_ids for b in batches for s in b]
    boxed = sum("\\boxed" in shared_tokenizer(spec).decode(t) for t in text)
    assert boxed == 24  # pick's sequences as often as in its own warm-up
    assert [[s.token_ids for s in b] for b in mixed_warmup_batches(spec, shared_tokenizer(spec))] == [
        [s.token_ids for s in b] for b in batches
    ]
    with pytest.raises(ValueError, match="must share"):
        MixedPolicySpec((parts[0], PolicySpec("sum", hidden_size=64)))


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_tables_result_files_can_be_committed(table):
    """The runner commits a row's runs and curve as they finish: no .gitignore pattern may hold them back."""
    folder = results.results_dir(table)
    row = TABLES[table][0]
    stem = results.run_stem(folder, row.name, "trl", row.estimators[0], 0)
    paths = [stem.with_suffix(s) for s in (".csv", ".json", ".log")]
    paths += [results.curve_path(folder, row.name, "trl", row.estimators[0]), folder / "table.csv"]
    repo = Path(results.__file__).resolve().parents[2]
    names = [str(p.relative_to(repo)) for p in paths]
    ignored = subprocess.run(["git", "check-ignore", *names], cwd=repo, capture_output=True, text=True)
    assert ignored.returncode == 1 and not ignored.stdout, f"ignored by .gitignore: {ignored.stdout}"


def test_a_line_gets_its_verdict_only_when_every_seed_of_its_row_has_run():
    row = {"seeds": [0, 1, 2]}
    runs = [summary(s, b, a, row=row) for s, (b, a) in enumerate([(0.2, 0.5), (0.3, 0.6), (0.4, 0.9)])]
    assert results.table_line(runs[:2])["verdict"] == "2 of 3 seeds so far"
    assert results.table_line(runs)["verdict"] in VERDICTS


def test_each_framework_run_of_section_15b_is_a_line_of_the_plateau_table(tmp_path):
    """TRL, verl, OpenRLHF and ROLL on FifteenPuzzle (benchmarks/learning's ``frameworks_fifteen``): one line
    per framework, before / after = the run's first and last 4 training steps, read from its own CSV."""
    from benchmarks.baselines.frameworks import framework_summaries

    fifteen = [s for s in framework_summaries() if s["_row"] == "frameworks_fifteen"]
    assert sorted({s["framework"] for s in fifteen}) == ["openrlhf", "roll", "trl", "verl"]
    for summary in fifteen:
        with open(results.curve_file(summary["_stem"])) as f:
            success = [float(r["success_rate"]) for r in csv.DictReader(f)]
        assert len(success) == summary["steps"] == 16
        assert summary["before"]["success_rate"] == pytest.approx(sum(success[:4]) / 4)
        assert summary["after"]["success_rate"] == pytest.approx(sum(success[-4:]) / 4)

    report("plateau", tmp_path)  # no held-out run in this folder: the framework lines alone
    with open(tmp_path / "table.csv") as f:
        lines = [r for r in csv.DictReader(f) if r["env_id"] == "game:FifteenPuzzle-v1-easy"]
    assert sorted(r["framework"] for r in lines) == ["openrlhf", "roll", "trl", "verl"]
    for line in lines:
        assert line["seeds"] == "3" and line["measured_on"] == "training batches, steps 1-4 -> 13-16"
        assert line["chance"] == ""  # the random player's chance is measured on held-out tasks only
        runs = [s for s in fifteen if s["framework"] == line["framework"]]
        after = [r["after"]["success_rate"] for r in runs]
        assert float(line["success_after"]) == pytest.approx(sum(after) / 3, abs=1e-4)
        assert line["plateau_step"] != ""  # curves read in place, though their names hold dots ("g0.9")


def test_an_arm_that_changes_its_frameworks_run_is_a_line_of_its_own():
    """ROLL prompted with the conversation (issue 58, item 5) and ROLL prompted with the observation run in
    one experiment (``frameworks``) with one framework and estimator: two lines, not one of their seeds."""
    from benchmarks.baselines.frameworks import framework_summaries

    roll = [s for s in framework_summaries() if s["_row"] == "frameworks" and s["framework"] == "roll"]
    changes = {s["row"]["change"] for s in roll}
    assert changes == {"", "history prompt"}  # both arms have finished runs committed
    groups = results.grouped(roll)
    assert sorted(k[5] for k in groups) == ["", "history prompt"]
    assert all({r["row"]["change"] for r in runs} == {k[5]} for k, runs in groups.items())
    assert len(groups[next(k for k in groups if not k[5])]) == 3


def test_a_sparse_reward_row_trains_on_sparse_games_and_its_base_on_dense_ones():
    """The row's ``reward_type`` goes into its training tasks' env kwargs (the held-out episodes play the
    env as registered): an illegal move costs nothing there, while the base row's game penalises it."""
    from benchmarks.baselines.train_run import TASK_SEEDS_PER_RUN, training_tasks

    sparse = next(r for r in PLATEAU if r.reward_type == "sparse")
    base = next(r for r in PLATEAU if r.name == sparse.name.rsplit("--", 1)[0])
    for row, penalty in ((sparse, 0.0), (base, -0.1)):
        tasks = training_tasks(row, 4, seed=1)
        assert [t.seed for t in tasks] == [TASK_SEEDS_PER_RUN + i for i in range(4)]
        with gem_core.make(tasks[0].env_id, **tasks[0].env_kwargs) as env:
            env.reset(seed=tasks[0].seed)
            assert env.step("\\boxed{\x00 certainly not a move \x00}")[1] == pytest.approx(penalty)


def test_a_rows_env_settings_reach_its_warm_up_training_and_held_out_games():
    """Sudoku's ``empty-cells-listed`` row: the warm-up's scripted games, the training tasks and the
    held-out episodes all show the listed empty cells; its base row's games do not."""
    from benchmarks.baselines.train_run import evaluate_env, sft_warmup, training_tasks
    from gem_adapters.episodes.chat_renderer import ChatRenderer
    from gem_adapters.runtime.models import load_tokenizer, tiny_causal_lm

    listed = next(r for r in PLATEAU if r.change == "empty-cells-listed")
    base = next(r for r in PLATEAU if r.name == listed.base_name)
    tokenizer = load_tokenizer("smollm2")
    renderer = ChatRenderer(tokenizer)
    for row, shown in ((listed, True), (base, False)):
        model = tiny_causal_lm(tokenizer, seed=0)
        warmup = sft_warmup(model, tokenizer, renderer, row, seed=0, episodes=2)
        texts = [tokenizer.decode(r["input_ids"]) for r in warmup.train_dataset]
        assert len(texts) == 2 and all(("Empty cells" in t) == shown for t in texts)
        (task,) = training_tasks(row, 1, seed=0)
        with gem_core.make(task.env_id, **task.env_kwargs) as env:
            assert ("Empty cells" in env.reset(seed=task.seed)[0]) == shown
        played = []
        evaluate_env(model, tokenizer, renderer, replace(row, max_turns=2), 2, played)
        assert len(played) == 2
        assert all(("Empty cells" in str(e.turns[0].observation)) == shown for e in played)


def test_env_outcomes_count_an_env_once_from_its_finished_held_out_lines():
    """An env rises when one finished held-out line's after interval lies above its before, learns when one
    line's verdict says so; partial, mixture and training-batch lines do not count, nor an env's other
    lines; an env without a line neither rises nor learns."""

    def line(env_id, before, lo, verdict, **other):
        fields = dict(
            env_id=env_id, success_before=before, success_after=lo + 0.02, after_lo=lo, after_hi=lo + 0.04,
            verdict=verdict, mixture="", change="", estimator="rebn", chance=0.1,
            measured_on=results.HELD_OUT,
        )  # fmt: skip
        return fields | other

    lines = [
        line("a", 0.2, 0.5, "learns"),
        line("a", 0.2, 0.1, "does not learn", change="worse"),
        line("b", 0.2, 0.3, "does not learn"),  # rises, at chance
        line("b", 0.2, 0.25, "does not learn", change="smaller"),
        line("c", 0.2, 0.2, "does not learn"),  # after's low end at its before: no rise
        line("c", 0.2, 0.9, "2 of 3 seeds so far", change="unfinished"),
        line("c", 0.2, 0.9, "learns", mixture="mixture:a+c"),
        line("c", 0.2, 0.9, "learns", measured_on="training batches, steps 1-4 -> 13-16"),
    ]
    outcomes = {o["env_id"]: o for o in results.env_outcomes(lines, ["a", "b", "c", "d"])}
    assert [(o["lines"], o["rises"], o["learns"]) for o in outcomes.values()] == [
        (2, True, True), (2, True, False), (1, False, False), (0, False, False),
    ]  # fmt: skip
    assert outcomes["a"]["best"] is lines[0] and outcomes["b"]["best"] is lines[2]
    assert outcomes["c"]["best"] is lines[4] and outcomes["d"]["best"] is None
    text = envs_markdown(list(outcomes.values()))
    assert "**2 of 4 envs rise**" in text and "**1 of 4 learn**" in text and "finished line: d." in text

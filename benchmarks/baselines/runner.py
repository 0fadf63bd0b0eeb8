"""The baselines' command line: run a table (resumable), report it, smoke-test and plan its rows.

    python -m benchmarks.baselines run envs [--rows ID ...] [--seeds N ...] [--workers 2] [--no-commit]
    python -m benchmarks.baselines report envs
    python -m benchmarks.baselines smoke [envs] [--rows ID ...] [--steps 2]
    python -m benchmarks.baselines plan [envs]
    python -m benchmarks.baselines run plateau --workers 2      # issue 58's campaign, in results/.../plateau/
    python -m benchmarks.baselines run mixture --workers 2      # one policy on 4 plateau envs, in .../mixture/
    python -m benchmarks.baselines diagnose plateau ROW [--seed 0]  # what RL starts from (diagnose.py)
    python -m benchmarks.baselines rejected plateau ROW  # why a game rejected the held-out moves
    python -m benchmarks.baselines purchases plateau ROW  # how a web shop row's held-out episodes end

``run`` trains every (row, estimator, seed) of the table whose summary JSON does not exist yet, one
process per run with ``OMP_NUM_THREADS=1`` (``--threads``); ``--workers`` rows at a time, a row's runs one
after the other. Each finished run's files are committed at once (``git commit -- <those files>``), and
the curve over seeds when a row's estimator has all its seeds; the same command goes on from there, never
re-running a finished run. A run in progress checkpoints as it goes (``train_run``'s ``<out>.resume/``,
after a step whenever that costs at most ``CHECKPOINT_SHARE`` of its time), so a session that stops loses
only the steps since the last checkpoint: the next ``run`` resumes the run there. A run that fails
leaves no JSON (its log says why) and is tried again by the next ``run``. At the end ``report`` writes
``table.csv``, the README's table and ``grid.png`` and commits them.

A mixture row (``rows.mixture``) runs the same way; its report has one line per env of the mixture
(``mixture`` column: the mixture's name) beside that env's single-env lines of ``compare_table``
(the row's ``rows`` there with the mixture's estimators, read from that table's results folder).

``smoke`` plays every row for ``--steps`` steps with seed 0 and its first estimator (the small
policy's warm-up build is the row's own, cached for the campaign; SmolLM2 warms up on 16 episodes;
16 evaluation episodes) under
``smoke/`` and writes ``smoke.csv``: seconds per step, warm-up and evaluation seconds, the episodes
played and their rewards. ``plan`` turns it into each row's planned work and predicted machine-hours.
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import json
import math
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.baselines import results
from benchmarks.baselines.chance import ChanceTable
from benchmarks.baselines.frameworks import EXPERIMENTS as FRAMEWORK_EXPERIMENTS
from benchmarks.baselines.frameworks import framework_summaries
from benchmarks.baselines.rows import FRAMEWORK, TABLES, Row, find_rows
from benchmarks.baselines.train_run import EVAL_FIRST_SEED, SMOKE_WARMUP_EPISODES
from gem_adapters.runtime.models import cache_dir

REPO = Path(__file__).resolve().parents[2]
README_TABLE = ("<!-- table:start -->", "<!-- table:end -->")
README_PLAN = ("<!-- plan:start -->", "<!-- plan:end -->")
README_DIAGNOSES = ("<!-- diagnoses:start -->", "<!-- diagnoses:end -->")
README_ENVS = ("<!-- envs:start -->", "<!-- envs:end -->")
SMOKE_COLUMNS = [
    "row", "policy", "estimator", "steps", "episodes_per_step", "seconds_per_step", "warmup_s", "overhead_s",
    "eval_s_per_episode", "wall_s", "episodes_played", "success_first", "success_last", "return_min",
    "return_max", "format_error_rate", "invalid_move_rate", "stopped_by_context", "success_before",
    "success_after",
]  # fmt: skip


class Overlaps:
    """Which runs ran at the same time as each run (what ran beside what), across every runner process of
    this machine (two runners side by side, of one table or of two): each run appends its start and end to
    one activity file (``$GEM_CACHE/baselines/activity.jsonl``), and a run's neighbours are the runs whose
    time meets its own. A run with no end whose runner process is gone (killed) is left out: when it
    stopped is unknown."""

    def __init__(self, path: Path | None = None):
        self.path = path

    def file(self) -> Path:
        return self.path or cache_dir() / "baselines" / "activity.jsonl"

    @contextmanager
    def _locked(self):
        """The activity file, held against this machine's other runners and this runner's other threads (a
        lock file beside it, which the file's rewrite in ``_prune`` never replaces; each call opens it anew,
        and ``flock`` excludes every other open of the file, in this process too)."""
        path = self.file()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield path

    def _append(self, event: dict[str, Any]) -> None:
        with self._locked() as path, open(path, "a") as f:
            f.write(json.dumps(event) + "\n")

    @staticmethod
    def _event(line: str) -> dict[str, Any] | None:
        """One line's event, None for a line that does not parse."""
        try:
            parsed = json.loads(line)
            event = {k: parsed[k] for k in ("key", "label", "pid", "event", "t")}
            hash((event["key"], event["event"]))  # both key dicts below: an unhashable one is a bad line
        except (json.JSONDecodeError, KeyError, TypeError):
            return None
        return event

    @staticmethod
    def _runs(events: list[dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
        """key -> {label, pid, start, end} from the file's events."""
        runs: dict[str, dict[str, Any]] = {}
        for event in filter(None, events):
            runs.setdefault(event["key"], {"label": event["label"], "pid": event["pid"]})[event["event"]] = (
                event["t"]
            )
        return runs

    @staticmethod
    def _end(run: dict[str, Any]) -> float | None:
        """When the run ended: infinity while its runner is alive, None for a killed runner's."""
        return run.get("end", math.inf if _alive(run["pid"]) else None)

    def beside(self, key: str, start: float, end: float) -> set[str]:
        """The labels of the runs other than ``key`` whose time meets ``[start, end]``."""
        with self._locked() as path:
            lines = path.read_text().splitlines() if path.exists() else []
            runs = self._runs([self._event(line) for line in lines])
        labels = set()
        for other, run in runs.items():
            other_end = self._end(run)
            if (
                other != key
                and "start" in run
                and other_end is not None
                and run["start"] < end
                and other_end > start
            ):
                labels.add(run["label"])
        return labels

    def _prune(self, now: float) -> None:
        """Drop the runs that no run still going, nor one starting from ``now`` on, can meet: those that
        ended before the earliest start of the runs still going (and before ``now``), and a killed
        runner's, so the file holds what is still needed instead of growing with every run."""
        with self._locked() as path:
            if not path.exists():
                return
            lines = path.read_text().splitlines()
            events = [self._event(line) for line in lines]
            runs = self._runs(events)
            ends = {key: self._end(run) for key, run in runs.items()}
            going = [run["start"] for key, run in runs.items() if "start" in run and ends[key] == math.inf]
            horizon = min([now, *going])
            keep = {key for key, end in ends.items() if end is not None and end >= horizon}
            kept = [line for line, event in zip(lines, events) if event and event["key"] in keep]
            if len(kept) < len(lines):
                temporary = path.with_suffix(".tmp")
                temporary.write_text("".join(line + "\n" for line in kept))
                os.replace(temporary, path)

    @contextmanager
    def running(self, label: str):
        """While the block runs, ``label`` is active; the yielded set gets, as the block ends, the labels of
        the runs seen beside it."""
        key, start = f"{os.getpid()}-{threading.get_ident()}-{time.time_ns()}", time.time()
        self._prune(start)
        self._append({"event": "start", "key": key, "label": label, "pid": os.getpid(), "t": start})
        beside: set[str] = set()
        try:
            yield beside
        finally:
            end = time.time()
            self._append({"event": "end", "key": key, "label": label, "pid": os.getpid(), "t": end})
            beside |= self.beside(key, start, end)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


OVERLAPS = Overlaps()


def run_one(
    row: Row,
    estimator: str,
    seed: int,
    stem: Path,
    steps: int | None = None,
    smoke: bool = False,
    table: str | None = None,
    threads: int = 1,
) -> bool:
    """One run in its own process (``OMP_NUM_THREADS=threads``, console to ``stem.log``); True if it
    finished. Its summary gets ``ran_beside``: the runs of every runner of this machine that overlapped it
    (``Overlaps``). ``table``: the table the row is looked up in (row names repeat across tables, at other
    budgets)."""
    command = [
        sys.executable, "-m", "benchmarks.baselines", "one", row.name, estimator, str(seed), "--out", str(stem),
        *(["--table", table] if table else []),
        *(["--steps", str(steps)] if steps else []), *(["--smoke"] if smoke else []),
    ]  # fmt: skip
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PYTHONPATH": str(REPO),
    }
    stem.parent.mkdir(parents=True, exist_ok=True)
    label = f"{row.label(estimator)} seed {seed}"
    # appended to: a run resumed from its checkpoint keeps its earlier attempts' console
    with OVERLAPS.running(label) as beside, open(stem.with_suffix(".log"), "a") as log:
        log.write(" ".join(command[1:]) + "\n")
        log.flush()
        code = subprocess.call(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    summary_path = stem.with_suffix(".json")
    finished = code == 0 and summary_path.exists()
    if finished:
        summary = json.loads(summary_path.read_text())
        beside |= set(summary.get("ran_beside", []))  # beside its earlier attempts, when it was resumed
        summary_path.write_text(json.dumps(summary | {"ran_beside": sorted(beside)}, indent=1) + "\n")
    outcome = "done" if finished else f"FAILED (exit {code}, see {stem.with_suffix('.log')})"
    print(f"{outcome}: {label}", flush=True)
    return finished


class Git:
    """Commits given files at once (``git commit -- files``): serialised, retried while another
    process holds the index lock."""

    lock = threading.Lock()

    def __init__(self, enabled: bool = True, repo: Path = REPO, attempts: int = 20):
        self.enabled, self.repo, self.attempts = enabled, repo, attempts

    def _git(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=self.repo, capture_output=True, text=True)

    def commit(self, files: list[Path], message: str) -> bool:
        if not self.enabled or not files:
            return False
        names = [str(Path(f).resolve().relative_to(self.repo.resolve())) for f in files]
        with self.lock:
            for attempt in range(self.attempts):
                done = self._git("add", "--", *names)
                if done.returncode == 0:
                    done = self._git("commit", "-q", "-m", message, "--", *names)
                if done.returncode == 0:
                    print(f"committed: {message}", flush=True)
                    return True
                if "index.lock" not in done.stderr:
                    print(f"not committed ({message}): {(done.stderr or done.stdout).strip()}", flush=True)
                    return False
                time.sleep(min(1 + attempt, 10))
        print(f"not committed ({message}): the git index stayed locked", flush=True)
        return False


def train_row(
    row: Row,
    results_dir: Path,
    git: Git,
    table: str | None = None,
    threads: int = 1,
    seeds: list[int] | None = None,
) -> None:
    """Every run of ``row`` still missing (of ``seeds`` only, if given), estimator by estimator; each finished
    run is committed at once, and the estimator's curve over all the row's seeds when its last seed is done
    (by whichever runner finishes it: two runners given different ``seeds`` share a row)."""
    for estimator in row.estimators:
        stems = [results.run_stem(results_dir, row.name, FRAMEWORK, estimator, s) for s in row.seeds]
        missing = [
            (s, stem)
            for s, stem in zip(row.seeds, stems)
            if (seeds is None or s in seeds) and not stem.with_suffix(".json").exists()
        ]
        if not missing:
            continue
        for seed, stem in missing:
            if run_one(row, estimator, seed, stem, table=table, threads=threads):
                git.commit(run_files(row, stem), f"baselines: {row.label(estimator)}, seed {seed}")
        if not all(stem.with_suffix(".json").exists() for stem in stems):
            continue
        curve = results.curve_path(results_dir, row.name, FRAMEWORK, estimator)
        results.write_curve(results.combine_curves(results.seed_curves(stems)), curve)
        curves = [curve]
        for part in row.parts:  # a mixture: each env's share of the steps, over seeds
            part_stems = [results.part_stem(stem, part.name) for stem in stems]
            curves.append(results.curve_path(results_dir, f"{row.name}--{part.name}", FRAMEWORK, estimator))
            results.write_curve(results.combine_curves(results.seed_curves(part_stems)), curves[-1])
        git.commit(curves, f"baselines: {row.label(estimator)}, {len(stems)} seeds")


def run_files(row: Row, stem: Path) -> list[Path]:
    """The files one run wrote: its curve, summary, log and held-out episodes (a mixture's: each env's too)."""
    bases = (stem, *(results.part_stem(stem, part.name) for part in row.parts))
    return [
        p
        for base in bases
        for p in (base.with_suffix(s) for s in (".csv", ".json", ".log", ".heldout.jsonl"))
        if p.exists()
    ]


def run(
    table: str,
    patterns: list[str] | None,
    workers: int,
    git: Git,
    results_dir: Path,
    threads: int = 1,
    seeds: list[int] | None = None,
) -> None:
    rows = find_rows(table, patterns)
    print(
        f"{len(rows)} rows of {table!r}, {workers} at a time, {threads} thread(s) each -> {results_dir}",
        flush=True,
    )
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda row: train_row(row, results_dir, git, table, threads, seeds), rows))
    git.commit(report(table, results_dir), f"baselines: the {table} table, README table and grid")


# ---- report --------------------------------------------------------------------------------------


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.2f}"


def table_markdown(
    table: str, keys: list[tuple], groups: dict[tuple, list[dict]], lines_of: dict[tuple, dict]
) -> str:
    """The README's table: one line per env x framework x estimator x policy with its verdict (a
    mixture's lines: the env "in" the mixture, beside the env's single-env lines)."""
    rows = {part.name: part for row in TABLES[table] for part in row.parts}
    rows |= {row.name: row for row in TABLES[table]}
    lines = [
        "| env | category | policy | framework | estimator | seeds | steps x episodes | success before -> after [95% interval] (chance: random player or best constant answer) | after - before, paired [95%] | return before -> after | plateau step | verdict: set before -> measured | machine-h | expectation (set before the run) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in keys:
        runs = groups[key]
        line = lines_of[key]
        delta = results.change(runs)
        row = rows.get(key[0])
        env = f"{line['env_id']} in {row.env_id}" if row and row.parts else line["env_id"]
        if line["change"]:
            env += f" ({line['change']})"
        lines.append(
            f"| {env} | {row.category if row else _source(key[0])} | {line['policy']} | {line['framework']} | "
            f"{line['estimator']} | {line['seeds']} | {line['steps']} x {runs[0]['episodes_per_step']} | "
            f"{_pct(line['success_before'])} -> **{_pct(line['success_after'])}** "
            f"[{_pct(line['after_lo'])}, {_pct(line['after_hi'])}] ({_pct(line['chance'])}) | {delta['mean']:+.2f} "
            f"[{_pct(delta['lo'])}, {_pct(delta['hi'])}] {delta['verdict']} | "
            f"{line['return_before']:.2f} -> {line['return_after']:.2f} | {line['plateau_step'] or '–'} | "
            f"{(row.verdict if row and row.verdict else '–')} -> {line['verdict']} | {line['wall_s'] / 3600:.2f} | "
            f"{row.expectation if row else _measured_on(line)} |"
        )
    return "\n".join(lines)


def envs_markdown(outcomes: list[dict[str, Any]]) -> str:
    """The table's count by env (``results.env_outcomes``): how many envs rise and learn, and each env's
    best line."""
    rises, learns = sum(o["rises"] for o in outcomes), sum(o["learns"] for o in outcomes)
    without = [o["env_id"] for o in outcomes if not o["lines"]]
    lines = [
        f"**{rises} of {len(outcomes)} envs rise** (a finished held-out line whose after-RL 95% interval lies "
        f"above its before success), **{learns} of {len(outcomes)} learn** (a line whose measured verdict is "
        f"learns or learns slowly: its rise also clears chance); without a finished line: "
        f"{', '.join(without) or 'none'}.",
        "",
        "| env | lines | rises | learns | its best line (learns, else rises, else its after's low end nearest its before): change, estimator, success before -> after [95%] (chance) |",
        "|---|---|---|---|---|",
    ]
    for o in outcomes:
        best = o["best"]
        line = "–"
        if best is not None:
            line = (
                f"{best['change'] or 'the row'}, {best['estimator']}: {_pct(best['success_before'])} -> "
                f"{_pct(best['success_after'])} [{_pct(best['after_lo'])}, {_pct(best['after_hi'])}] "
                f"({_pct(best['chance'])})"
            )
        lines.append(
            f"| {o['env_id']} | {o['lines']} | {'yes' if o['rises'] else 'no'} | "
            f"{'yes' if o['learns'] else 'no'} | {line} |"
        )
    return "\n".join(lines)


def _source(row_name: str) -> str:
    """The category cell of a line without a row of the table: the experiment it comes from."""
    return f"cross-framework (learning's `{row_name}`)" if row_name in FRAMEWORK_EXPERIMENTS else ""


def _measured_on(line: dict[str, Any]) -> str:
    """What a line without a row of the table compares (a cross-framework run's training windows)."""
    return "" if line["measured_on"] == results.HELD_OUT else f"({line['measured_on']})"


def line_chance(chance_table: ChanceTable, run: dict[str, Any]) -> dict[str, float] | None:
    """Chance (``ChanceTable.get``) on the held-out tasks of ``run``'s line (None for a run that does not
    say which: one of another table's, recorded before rows were)."""
    row = run.get("row")
    if not isinstance(row, dict) or run.get("smoke") or "measured_on" in run:  # chance: held-out tasks only
        return None
    return chance_table.get(run["env_id"], EVAL_FIRST_SEED, row["eval_episodes"], row["max_turns"])


def replace_section(path: Path, markers: tuple[str, str], text: str) -> None:
    """Replace what lies between the two marker lines of ``path`` by ``text``."""
    content = path.read_text()
    start, end = content.index(markers[0]) + len(markers[0]), content.index(markers[1])
    path.write_text(content[:start] + "\n" + text + "\n" + content[end:])


def report(table: str, results_dir: Path | None = None) -> list[Path]:
    """``table.csv``, the README's table and ``grid.png`` from every finished run; returns the files."""
    results_dir = results_dir or results.results_dir(table)
    found = results.read_summaries(results_dir) + compared_summaries(table)
    if table == "plateau":  # the cross-framework runs of benchmarks/learning, one line per framework
        found += framework_summaries()
    groups = results.grouped(found)
    mixtures = {row.name for row in TABLES[table] if row.parts}
    envs = {env: i for i, env in enumerate(dict.fromkeys(e for row in TABLES[table] for e in row.env_ids))}
    order = {row.name: i for i, row in enumerate(TABLES[table]) if not row.change}
    base_of = {row.name: row.base_name for row in TABLES[table]}

    def order_key(k: tuple) -> tuple:
        estimator = (k[3] != "rebn", k[3])
        if mixtures:  # by env, its single-env lines first, then the mixtures'
            return (envs.get(k[1], len(envs)), k[1], k[0] in mixtures, k[0], *estimator, k[5])
        base = base_of.get(k[0], k[0])  # a row trying a change: right after the row it changes
        return (
            order.get(base, len(order)),
            base,
            k[0] != base,
            k[0],
            k[2] != FRAMEWORK,
            k[2],
            *estimator,
            k[5],
        )

    keys = sorted(groups, key=order_key)
    chance_table = ChanceTable(results_dir / "chance.csv")
    table_path = results_dir / "table.csv"
    lines_of = {k: results.table_line(groups[k], line_chance(chance_table, groups[k][0])) for k in keys}
    results.write_table([lines_of[k] for k in keys], table_path)
    panels: dict[str, dict[str, list[dict[str, float]]]] = {}
    for key in keys:
        _, env_id, framework, estimator, policy, change = key
        curve = results.line_curve(groups[key])
        if curve:
            mixture = "mixture " if key[0] in mixtures else ""
            label = (
                f"{mixture}{framework} {estimator}{' ' + change if change else ''} ({len(groups[key])} seeds)"
            )
            # a cross-framework experiment ran at its own settings: a panel of its own
            where = f", {key[0]}" if key[0] in FRAMEWORK_EXPERIMENTS else ""
            panels.setdefault(f"{env_id} ({policy}{where})", {})[label] = curve
    written = [table_path]
    if chance_table.path.exists():  # measured for at least one line
        written.append(chance_table.path)
    if panels:
        results.plot_grid(list(panels.items()), results_dir / "grid.png")
        written.append(results_dir / "grid.png")
    readme = results_dir / "README.md"
    if readme.exists() and README_TABLE[0] in readme.read_text():
        replace_section(readme, README_TABLE, table_markdown(table, keys, groups, lines_of))
        written.append(readme)
    if readme.exists() and README_ENVS[0] in readme.read_text():
        outcomes = results.env_outcomes(list(lines_of.values()), list(envs))
        replace_section(readme, README_ENVS, envs_markdown(outcomes))
    if readme.exists() and README_DIAGNOSES[0] in readme.read_text():
        from benchmarks.baselines.diagnose import diagnoses_markdown

        replace_section(readme, README_DIAGNOSES, diagnoses_markdown(results_dir))
        written += sorted((results_dir / "diagnoses").glob("*.json"))
    print(f"{len(keys)} table rows -> {table_path}", flush=True)
    return written


def compared_summaries(table: str) -> list[dict[str, Any]]:
    """The single-env runs a mixture of ``table`` is compared with: each part's runs in its
    ``compare_table``'s results folder, with the mixture's estimators (none without a ``compare_table``)."""
    found = []
    for row in TABLES[table]:
        if not (row.parts and row.compare_table):
            continue
        parts = {part.name for part in row.parts}
        found += [
            s
            for s in results.read_summaries(results.results_dir(row.compare_table))
            if s["_row"] in parts and s["estimator"] in row.estimators and "mixture" not in s
        ]
    return found


# ---- smoke and plan ------------------------------------------------------------------------------


def smoke_line(row: Row, summary: dict[str, Any]) -> dict[str, Any]:
    curve = results.read_curve(Path(summary["_stem"]).with_suffix(".csv"))
    evaluations = summary["before"]["seconds"] + summary["after"]["seconds"]
    episodes = summary["before"]["episodes"] + summary["after"]["episodes"]
    warmup = summary.get("warmup_build_s", summary.get("warmup_s", 0.0))
    return {
        "row": row.name,
        "policy": row.policy,
        "estimator": summary["estimator"],
        "steps": summary["steps"],
        "episodes_per_step": summary["episodes_per_step"],
        "seconds_per_step": summary["seconds_per_step"],
        "warmup_s": warmup,
        "overhead_s": summary["wall_s"] - summary["train_s"] - evaluations - warmup,
        "eval_s_per_episode": evaluations / episodes,
        "wall_s": summary["wall_s"],
        "episodes_played": summary["steps"] * summary["episodes_per_step"],
        "success_first": curve[0]["success_rate"],
        "success_last": curve[-1]["success_rate"],
        "return_min": min(c["return"] for c in curve),
        "return_max": max(c["return"] for c in curve),
        "format_error_rate": results.mean(c["format_error_rate"] for c in curve),
        "invalid_move_rate": results.mean(c["invalid_move_rate"] for c in curve),
        "stopped_by_context": sum(c["stopped_by_context"] for c in curve),
        "success_before": summary["before"]["success_rate"],
        "success_after": summary["after"]["success_rate"],
    }


def smoke(table: str, patterns: list[str] | None, steps: int, results_dir: Path) -> Path:
    """Each row for ``steps`` steps, seed 0, first estimator; ``smoke.csv`` gets (or updates) its line."""
    path = results_dir / "smoke.csv"
    previous = {}
    if path.exists():
        with open(path) as f:
            previous = {line["row"]: line for line in csv.DictReader(f)}
    for row in find_rows(table, patterns):
        stem = results_dir / "smoke" / row.name / f"{FRAMEWORK}-{row.estimators[0]}-seed0"
        if run_one(row, row.estimators[0], 0, stem, steps=steps, smoke=True):
            summary = json.loads(stem.with_suffix(".json").read_text()) | {"_stem": stem}
            line = smoke_line(row, summary)
            if row.policy == "small" and not line["warmup_s"] and row.name in previous:
                line["warmup_s"] = float(previous[row.name]["warmup_s"])  # the build was cached this time
            previous[row.name] = line
        order = [r.name for r in TABLES[table]]
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, SMOKE_COLUMNS)
            writer.writeheader()
            for name in sorted(previous, key=lambda n: order.index(n) if n in order else len(order)):
                writer.writerow(
                    {
                        k: results._fmt(previous[name][k])
                        if not isinstance(previous[name][k], str)
                        else previous[name][k]
                        for k in SMOKE_COLUMNS
                    }
                )
    return path


# SmolLM2 rows whose measured steps took at least this long (multi-turn conversations, dominated by the
# learner's forward/backward over long contexts) are predicted at half their measured seconds per step:
# benchmarks/long_step_profile.py measured a SmolLM2 Mastermind step going from ~130 s to ~60 s (bf16
# autocast on CPUs with AVX-512-BF16/AMX, the KV engine's fixes). An assumption until the campaign's
# first SmolLM2 row measures it; shorter SmolLM2 steps and the small policy keep their measured seconds.
LONG_STEP_S = 60.0
LONG_STEP_SPEEDUP = 2.0


def measured_from_runs(
    row: Row, results_dir: Path = results.RESULTS, folder: str | None = None
) -> dict[str, Any] | None:
    """A smoke-line-like measurement of ``row`` from the finished runs under ``results_dir/runs/folder``
    (default: the ``envs`` table's runs of the row's base name, every estimator and seed), with the
    episodes per step and warm-up episodes they ran at (``ref_episodes_per_step``, ``ref_warmup_episodes``)
    whether they predate the long-step speedup (``predates_long_step``: the ``envs`` table's do) and the
    precision they computed in (``precision``: "fp32", "bf16 autocast", both joined, or "" where unrecorded),
    which the seconds depend on by a factor of 2-3 between CPUs with and without bf16 units."""
    runs = [
        json.loads(p.read_text())
        for p in sorted((results_dir / "runs" / (folder or row.base_name)).glob(f"{FRAMEWORK}-*.json"))
    ]
    if not runs:
        return None
    evaluations = [r["before"]["seconds"] + r["after"]["seconds"] for r in runs]
    episodes = [r["before"]["episodes"] + r["after"]["episodes"] for r in runs]
    warmups = [r.get("warmup_s") or 0.0 for r in runs]  # SmolLM2's SFT warm-up, in every run
    builds = [r.get("warmup_build_s") or 0.0 for r in runs]  # the small policy's, in the run that built it
    return {
        "seconds_per_step": results.mean(r["seconds_per_step"] for r in runs),
        "warmup_s": max(builds) if row.policy == "small" else results.mean(warmups),
        "overhead_s": results.mean(
            r["wall_s"] - r["train_s"] - e - w - b for r, e, w, b in zip(runs, evaluations, warmups, builds)
        ),
        "eval_s_per_episode": sum(evaluations) / sum(episodes),
        "ref_episodes_per_step": results.mean(r["episodes_per_step"] for r in runs),
        "ref_warmup_episodes": results.mean(
            r.get("row", {}).get("warmup_episodes", row.warmup_episodes) for r in runs
        ),
        # the small policy's SFT sequences (NaN where not recorded): a cached build's cost is read off them
        "warmup_sequences": results.mean(
            r.get("policy_warmup_steps", math.nan) * r.get("policy_warmup_batch", math.nan) for r in runs
        ),
        "source": f"{len(runs)} runs",
        "predates_long_step": results_dir == results.RESULTS,
        "precision": ", ".join(sorted({r["precision"] for r in runs if r.get("precision")})),
    }


def measured_from_parts(row: Row, results_dir: Path = results.RESULTS) -> dict[str, Any] | None:
    """A mixture's ``measured_from_runs`` from its parts' (None if a part has none): its steps cost the mean
    of the parts' seconds per episode (each env holds an equal share of a step), its evaluation episodes
    the mean of theirs, its warm-up build the sum of theirs (the union trains on all their batches). A part
    whose every run found its warm-up cached recorded no build: its sequences are costed at the mean
    seconds per sequence of the parts that built theirs."""
    parts = [measured_from_runs(part, results_dir) for part in row.parts]
    if not parts or any(m is None for m in parts):
        return None
    per_sequence = results.mean(m["warmup_s"] / m["warmup_sequences"] for m in parts if m["warmup_s"] > 0)
    cached = sum(m["warmup_sequences"] * per_sequence for m in parts if not m["warmup_s"])
    return {
        "seconds_per_step": row.episodes_per_step
        * results.mean(m["seconds_per_step"] / m["ref_episodes_per_step"] for m in parts),
        "warmup_s": sum(m["warmup_s"] for m in parts) + (0.0 if math.isnan(cached) else cached),
        "overhead_s": results.mean(m["overhead_s"] for m in parts),
        "eval_s_per_episode": results.mean(m["eval_s_per_episode"] for m in parts),
        "ref_episodes_per_step": row.episodes_per_step,
        "ref_warmup_episodes": row.warmup_episodes,
        "source": f"the {len(parts)} parts' runs",
    }


def measurement(row: Row, table_dir: Path) -> dict[str, Any] | None:
    """What ``row``'s cost is predicted from: the finished runs of the row itself under ``table_dir``, else
    those of the nearest row it tries a change on there (a change on a change: the row of the first change,
    then the env's plain row), else (a mixture) its parts' in the table it is compared with or the ``envs``
    table, else the ``envs`` table's runs of its base row."""
    slugs = row.change.split("--") if row.change else []
    for kept in range(len(slugs), -1, -1):
        measured = measured_from_runs(row, table_dir, "--".join([row.base_name, *slugs[:kept]]))
        if measured is not None:
            return measured
    if row.parts:
        return measured_from_parts(row, results.results_dir(row.compare_table)) or measured_from_parts(row)
    return None if table_dir == results.RESULTS else measured_from_runs(row)  # the envs runs: read above


def step_seconds(row: Row, measured: dict[str, Any]) -> tuple[float, bool]:
    """Predicted seconds per step of ``row``: the measured ones scaled by the episodes per step, halved
    for a SmolLM2 row whose steps were long (``LONG_STEP_S``) when measured before the long-step speedup
    (``predates_long_step``, true of smoke lines); and whether it was halved."""
    step = float(measured["seconds_per_step"])
    reference = float(measured.get("ref_episodes_per_step") or row.episodes_per_step)
    predates = measured.get("predates_long_step", True)
    halved = row.policy == "smollm2" and step >= LONG_STEP_S and predates
    return step * row.episodes_per_step / reference / (LONG_STEP_SPEEDUP if halved else 1.0), halved


def predicted_hours(row: Row, measured: dict[str, Any]) -> tuple[float, float]:
    """``(hours per estimator's seeds, hours of the row's one-off warm-up build)`` from a smoke line or
    ``measured_from_runs``."""
    warmup = float(measured["warmup_s"])
    per_run = (
        float(measured["overhead_s"])
        + row.steps * step_seconds(row, measured)[0]
        + 2 * row.eval_episodes * len(row.env_ids) * float(measured["eval_s_per_episode"])
    )
    build = 0.0
    if row.policy == "smollm2":
        reference = float(measured.get("ref_warmup_episodes") or SMOKE_WARMUP_EPISODES)
        per_run += warmup * row.warmup_episodes / reference
    elif row.policy == "small":
        build = warmup  # the warm-up build (cached under $GEM_CACHE/learning: 0 where it is there already)
    return per_run * len(row.seeds) / 3600, build / 3600


def schedule(hours: list[float], workers: int) -> list[tuple[float, float]]:
    """``(start, end)`` hours of each row when ``workers`` rows run at a time, taken in order (as ``run``'s
    pool takes them)."""
    free = [0.0] * workers
    spans = []
    for h in hours:
        i = min(range(workers), key=lambda k: free[k])
        spans.append((free[i], free[i] + h))
        free[i] += h
    return spans


def finished_runs(row: Row, table_dir: Path) -> int:
    """How many of ``row``'s runs (estimator x seed) have finished under ``table_dir``."""
    return sum(
        results.run_stem(table_dir, row.name, FRAMEWORK, estimator, seed).with_suffix(".json").exists()
        for estimator in row.estimators
        for seed in row.seeds
    )


def plan_markdown(table: str, results_dir: Path | None = None, workers: int = 2) -> str:
    """Each row's planned work, what its cost is predicted from (the table's ``smoke.csv``, else
    ``measurement``), predicted machine-hours, its runs finished, when the rest runs with ``workers`` rows
    at a time (hours from now), and its expectation."""
    table_dir = results_dir or results.results_dir(table)
    smoked = {}
    if (table_dir / "smoke.csv").exists():
        with open(table_dir / "smoke.csv") as f:
            smoked = {line["row"]: line for line in csv.DictReader(f)}
    lines = [
        "| # | env | category | policy | estimators | seeds | steps x episodes/step | s/step (precision) measured "
        "at episodes/step -> predicted | warm-up build h | h per estimator | h for the row | runs finished | "
        "runs (h from now) | verdict (set before) | expectation (set before the run) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    costs, left, cells, done, built = [], [], [], [], set()
    for row in TABLES[table]:
        finished, planned = finished_runs(row, table_dir), len(row.estimators) * len(row.seeds)
        done.append(finished == planned)
        measured = smoked.get(row.name) or measurement(row, table_dir)
        if measured is None:
            costs.append(0.0)
            left.append(0.0)
            cells.append(f" not measured | | | | {finished}/{planned} |")
            continue
        per_estimator, build = predicted_hours(row, measured)
        if row.name in built or finished:  # built already (cached) by this row or its other estimator's row
            build = 0.0
        built.add(row.name)
        hours = build + per_estimator * len(row.estimators)
        predicted, halved = step_seconds(row, measured)
        precision = measured.get("precision")
        costs.append(hours)
        left.append(build + (hours - build) * (planned - finished) / planned)
        cells.append(
            f" {float(measured['seconds_per_step']):.1f}{f' ({precision})' if precision else ''}"
            f" at {float(measured.get('ref_episodes_per_step') or row.episodes_per_step):g}"
            f" -> {predicted:.1f}{' (/2)' if halved else ''} | "
            f"{build:.2f} | {per_estimator:.2f} | {hours:.2f} | {finished}/{planned} |"
        )
    spans = schedule(left, workers)
    for i, (row, cost, finished, (begin, end)) in enumerate(zip(TABLES[table], cells, done, spans), 1):
        when = "done" if finished else f"{begin:.1f}-{end:.1f}"
        lines.append(
            f"| {i} | {row.env_id} | {row.category} | {row.policy} | {', '.join(row.estimators)} | "
            f"{len(row.seeds)} | {row.steps} x {row.episodes_per_step} |{cost} {when} | "
            f"{row.verdict or '–'} | {row.expectation} |"
        )
    makespan = max((e for _, e in spans), default=0.0)
    lines.append(
        f"| | **total** | | | | | | | | | **{sum(costs):.1f}** | | **{sum(left):.1f} h left: {makespan:.1f} h "
        f"wall, {workers} at a time** | | |"
    )
    return "\n".join(lines)


def plan_markers(table: str) -> tuple[str, str]:
    return README_PLAN if table == "envs" else (f"<!-- plan-{table}:start -->", f"<!-- plan-{table}:end -->")


def table_row(table: str, name: str) -> Row:
    """The row ``name`` of ``table``; a clear exit if it has none."""
    row = next((r for r in TABLES[table] if r.name == name), None)
    if row is None:
        raise SystemExit(f"no row named {name!r} in {table}")
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "report", "smoke", "plan"):
        sub = commands.add_parser(name)
        sub.add_argument("table", nargs="?", default="envs", choices=sorted(TABLES))
        sub.add_argument(
            "--results",
            type=Path,
            help="results folder (default: benchmarks/results/baselines_trained, "
            "its plateau/ and mixture/ for those tables)",
        )
        if name in ("run", "smoke"):
            sub.add_argument("--rows", nargs="+", help="env ids or row names (default: every row)")
        if name == "run":
            sub.add_argument("--workers", type=int, default=2, help="rows trained at the same time")
            sub.add_argument("--no-commit", action="store_true", help="do not commit finished runs")
            sub.add_argument(
                "--threads", type=int, default=1, help="threads of each run (2: a long SmolLM2 row alone)"
            )
            sub.add_argument(
                "--seeds", type=int, nargs="+", help="only these seeds (two runners can share a row's seeds)"
            )
        if name == "smoke":
            sub.add_argument("--steps", type=int, default=2)
        if name == "plan":
            sub.add_argument("--workers", type=int, default=2, help="rows at a time in the schedule")
    diagnose = commands.add_parser("diagnose", help="the row's warmed-up policy on one training batch")
    diagnose.add_argument("table", choices=sorted(TABLES))
    diagnose.add_argument("row", help="a row name (e.g. game_GuessTheNumber-v1-easy--small)")
    diagnose.add_argument("--seed", type=int, default=0)
    diagnose.add_argument("--results", type=Path, help="results folder (default: the table's)")
    rejected = commands.add_parser("rejected", help="why a game rejected the row's held-out moves")
    rejected.add_argument("table", choices=sorted(TABLES))
    rejected.add_argument("row", help="a row name (e.g. game_Sudoku-v1-easy--smollm2)")
    rejected.add_argument("--results", type=Path, help="results folder (default: the table's)")
    purchases = commands.add_parser("purchases", help="how a web shop row's held-out episodes end")
    purchases.add_argument("table", choices=sorted(TABLES))
    purchases.add_argument("row", help="a row name (e.g. web_Shop-v0--smollm2--warmup-64)")
    purchases.add_argument("--results", type=Path, help="results folder (default: the table's)")
    one = commands.add_parser("one", help="one run (what `run` starts in a process of its own)")
    one.add_argument("row")
    one.add_argument("estimator")
    one.add_argument("seed", type=int)
    one.add_argument("--out", type=Path, required=True, help="the run's files without suffix")
    one.add_argument("--steps", type=int)
    one.add_argument("--smoke", action="store_true")
    one.add_argument(
        "--table", choices=sorted(TABLES), help="the table to find the row in (default: the first)"
    )
    args = parser.parse_args(argv)
    if args.command != "one" and args.results is None and args.command != "plan":
        args.results = results.results_dir(args.table)

    if args.command == "one":
        from benchmarks.baselines.train_run import train

        tables = [TABLES[args.table]] if args.table else TABLES.values()
        named = [r for rows in tables for r in rows if r.name == args.row]
        # a row split by estimator (the mixture's): the one that trains this estimator
        row = next((r for r in named if args.estimator in r.estimators), named[0] if named else None)
        if row is None:
            raise SystemExit(f"no row named {args.row!r} in any table")
        summary = train(row, args.estimator, args.seed, args.out, steps=args.steps, smoke=args.smoke)
        print(json.dumps({k: summary[k] for k in ("before", "after", "steps", "seconds_per_step", "wall_s")}))
    elif args.command in ("rejected", "purchases"):
        from benchmarks.baselines import diagnose

        files = sorted((args.results / "runs" / args.row).glob("*.heldout.jsonl"))
        if not files:
            raise SystemExit(f"no held-out episodes of {args.row!r} under {args.results / 'runs'}")
        if args.command == "rejected":
            print(diagnose.rejected_markdown(diagnose.rejected_moves(files)))
        else:
            row = table_row(args.table, args.row)
            print(diagnose.purchases_markdown(diagnose.purchases(files, row.gamma), row.gamma))
    elif args.command == "diagnose":
        from benchmarks.baselines.diagnose import diagnose

        out = diagnose(table_row(args.table, args.row), args.seed, args.results)
        print(json.dumps(json.loads(out.read_text())["stats"], indent=1), f"\n-> {out}")
    elif args.command == "run":
        run(
            args.table,
            args.rows,
            args.workers,
            Git(not args.no_commit),
            args.results,
            args.threads,
            args.seeds,
        )
    elif args.command == "report":
        report(args.table, args.results)
    elif args.command == "smoke":
        print(f"-> {smoke(args.table, args.rows, args.steps, args.results)}")
    else:
        text = plan_markdown(args.table, args.results, args.workers)
        readme = results.RESULTS / "README.md"  # the plans of every table stand in the one README
        if readme.exists() and plan_markers(args.table)[0] in readme.read_text():
            replace_section(readme, plan_markers(args.table), text)
        print(text)

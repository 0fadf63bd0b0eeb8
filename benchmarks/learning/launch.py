"""A trainer's own command (``main_ppo``, ``train_ppo_ray``, ROLL's pipeline) run beside the launcher that turns
its step records into the learning CSV: started in a session of its own (its Ray and vLLM processes with it),
followed step by step, its memory sampled, and every process of the session killed at the end."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.learning.train import RunConfig, run_log, summarize

POLL_S = 2.0


def run_trainer(
    run: RunConfig,
    name: str,
    argv: list[str],
    env: dict[str, str],
    trainer_log: Path,
    records: Callable[[], list[Any]],
    to_row: Callable[[Any], dict],
    cwd: str | Path | None = None,
) -> list[dict]:
    """Run the trainer's ``argv`` (output to ``trainer_log``) and write ``run``'s CSV, one row per record
    (``to_row``) as ``records()`` yields them; then print the closing lines (``name``) and the peak memory
    of the trainer's processes. Returns the rows; raises when the trainer fails or stops early."""
    with run_log(run) as log:
        with Launched(argv, env, trainer_log, cwd) as launched:
            logged = launched.follow(records, run.steps, lambda record: log.record(to_row(record)))
        summarize(log, name)
        print(
            f"peak memory of the trainer's processes: {launched.peak_rss_bytes / 2**30:.1f} GiB", flush=True
        )
    returncode = launched.process.returncode
    if returncode != 0 or logged != run.steps:
        tail = trainer_log.read_text(errors="replace")[-4000:]
        raise RuntimeError(f"{name}: exit code {returncode} after {logged} steps:\n{tail}")
    return log.rows


class Launched:
    """``argv`` with ``env`` in a new session, stdout and stderr to ``log``; use as a context manager."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, cwd: str | Path | None = None):
        self.log = open(log, "w")  # noqa: SIM115 (closed by __exit__)
        self.process = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.peak_rss_bytes = 0

    def follow(self, records: Callable[[], list[Any]], steps: int, on_record: Callable[[Any], None]) -> int:
        """Until ``steps`` records were handed to ``on_record`` or the command exits: read ``records()``
        (every record so far, in order) every ``POLL_S`` seconds, hand on the new ones, and sample the
        session's memory. Returns how many records were handed on."""
        done = 0
        while done < steps:
            finished = self.process.poll() is not None
            self.peak_rss_bytes = max(self.peak_rss_bytes, session_rss_bytes(self.process.pid))
            for record in records()[done:steps]:
                on_record(record)
                done += 1
            if finished:
                break
            time.sleep(POLL_S)
        self.process.wait()
        return done

    def __enter__(self) -> Launched:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()


def session_rss_bytes(session: int) -> int:
    """Resident memory of every process in ``session`` (Linux ``/proc``; 0 elsewhere)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
            if int(fields[3]) == session:  # state ppid pgrp session ...
                total += int((entry / "statm").read_text().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return total

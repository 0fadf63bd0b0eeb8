"""The run log every example writes: ``metrics.csv`` (one row per record), a console progress line, the
learning-curve PNG and a first-to-last summary.

    with RunLog(out, ["split", "step", "wall_s", "return", "success_rate"]) as log:
        row = log.record({"split": "train", "step": 1, "return": 0.25, "success_rate": 0.5})
        log.print_row(row, {"split": "{:<5}", "step": "step {:4d}", "success_rate": "success {:.2f}"})
    log.plot(["success_rate", "return"], title="SmolLM2 on GuessTheNumber")
    log.summarize({"success_rate": ".2f", "return": "+.3f"})

Rows are grouped by their ``split`` column (e.g. "train", "eval"; "all" when a row has none) in the
plot and the summary; the x axis is the ``step`` column. Only the standard library is imported here (matplotlib
when plotting, TensorBoard or wandb when rows are mirrored to them).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path


def _print(line: str) -> None:
    print(line, flush=True)


class RunLog:
    """``output_dir/metrics.csv`` with the given ``columns``, written and flushed row by row.

    ``record`` keeps each row (unrounded) in ``rows`` and writes it with floats rounded to ``digits``
    decimals, or to ``significant`` significant digits when that is given (values that span orders of
    magnitude, such as a decaying learning rate); a ``wall_s`` column, when there is one and the row
    lacks it, is filled with the seconds since the log was opened. A row with a key that is not a
    column is an error, not silently dropped. ``filename`` may name a file anywhere under
    ``output_dir`` (e.g. ``RunLog(path.parent, columns, filename=path.name)`` for a given CSV path).

    ``report_to`` mirrors every row to where users look as well: ``"tensorboard"`` (event files in
    ``output_dir/tensorboard``) and ``"wandb"`` (a run in ``output_dir``; ``WANDB_MODE=offline`` works
    without an account). Each number of a row becomes the scalar ``<split>/<column>`` at the row's
    ``step``, so the dashboards hold exactly what ``metrics.csv`` holds.
    """

    def __init__(
        self,
        output_dir: str | Path,
        columns: Sequence[str],
        *,
        filename: str = "metrics.csv",
        digits: int = 4,
        report_to: Sequence[str] = (),
        significant: int | None = None,
    ) -> None:
        columns = list(columns)
        if not columns:
            raise ValueError("RunLog needs at least one column")
        if duplicates := sorted({c for c in columns if columns.count(c) > 1}):
            raise ValueError(f"RunLog columns given twice: {duplicates}")
        self.output_dir = Path(output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.columns = columns
        self.digits = digits
        self.significant = significant
        self.path = self.output_dir / filename
        self.rows: list[dict] = []
        self.started = time.perf_counter()
        self._file = open(self.path, "w", newline="")  # noqa: SIM115 (closed by close())
        self._writer = csv.DictWriter(self._file, columns)
        self._writer.writeheader()
        self._file.flush()
        self._mirrors = [_mirror(name, self.output_dir) for name in report_to if name != "none"]

    def record(self, row: dict) -> dict:
        """Write ``row`` (a dict column -> value; missing columns stay empty) and return it as kept."""
        self._check_columns(row, "record")
        if self._file.closed:
            raise ValueError(f"RunLog.record after close ({self.path})")
        row = dict(row)
        if "wall_s" in self.columns and "wall_s" not in row:
            row["wall_s"] = round(time.perf_counter() - self.started, 1)
        self.rows.append(row)
        self._writer.writerow({k: self._format(v) for k, v in row.items()})
        self._file.flush()
        if self._mirrors:
            split, step = row.get("split", "all"), row.get("step", len(self.rows) - 1)
            scalars = {
                f"{split}/{k}": v
                for k, v in row.items()
                if k not in ("split", "step") and _number(v) is not None
            }
            for mirror in self._mirrors:
                mirror.log(scalars, step)
        return row

    def _format(self, value: object) -> object:
        if not isinstance(value, float):
            return value
        return (
            round(value, self.digits) if self.significant is None else float(f"{value:.{self.significant}g}")
        )

    def print_row(
        self,
        row: dict,
        formats: dict[str, str],
        *,
        write: Callable[[str], object] = _print,
    ) -> str:
        """One console line: ``formats`` maps a column to a ``str.format`` template of its value (e.g.
        ``{"return": "return {:+.3f}"}``), in order; columns the row lacks are left out. Parts are joined
        by " | " and passed to ``write`` (``print``, or a progress bar's ``write``); returns the line."""
        self._check_columns(formats, "print_row")
        line = " | ".join(template.format(row[k]) for k, template in formats.items() if k in row)
        write(line)
        return line

    def split(self, name: str) -> list[dict]:
        """The recorded rows whose ``split`` column is ``name`` ("all": the rows without one), in order."""
        return [r for r in self.rows if r.get("split", "all") == name]

    def splits(self) -> list[str]:
        """The ``split`` values of the recorded rows ("all" for rows without one), in order of first
        appearance."""
        return list(dict.fromkeys(r.get("split", "all") for r in self.rows))

    def plot(
        self,
        keys: Sequence[str],
        *,
        titles: Sequence[str] | None = None,
        title: str = "",
        labels: dict[str, str] | None = None,
        filename: str = "learning_curve.png",
    ) -> Path:
        """One panel per column in ``keys`` against ``step``, one line per split (``labels`` renames a
        split in the legend); saved as ``output_dir/filename``, which is returned."""
        self._check_columns(["step", *keys], "plot")
        if titles is not None and len(titles) != len(keys):
            raise ValueError(f"plot: {len(titles)} titles for {len(keys)} keys")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        labels = labels or {}
        fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 4), squeeze=False)
        for i, (ax, key) in enumerate(zip(axes[0], keys)):
            for j, name in enumerate(self.splits()):
                rows = [r for r in self.split(name) if _number(r.get(key)) is not None]
                style = ".-" if j == 0 else "s--"
                ax.plot(
                    [r["step"] for r in rows], [r[key] for r in rows], style, label=labels.get(name, name)
                )
            ax.set_title(titles[i] if titles else key.replace("_", " "))
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
        if self.splits():
            axes[0][0].legend()
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        path = self.output_dir / filename
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path

    def summarize(
        self,
        formats: dict[str, str],
        *,
        write: Callable[[str], object] = _print,
    ) -> list[str]:
        """For every split with two rows or more: each column of ``formats`` (column -> format spec, e.g.
        ``{"return": "+.3f"}``) at the split's first and last row; then the wall time. Each line is passed
        to ``write``; returns the lines."""
        self._check_columns(["step", *formats], "summarize")
        lines = []
        for name in self.splits():
            rows = self.split(name)
            if len(rows) >= 2:
                a, b = rows[0], rows[-1]
                changes = ", ".join(
                    f"{k.replace('_', ' ')} {a.get(k, float('nan')):{spec}} -> {b.get(k, float('nan')):{spec}}"
                    for k, spec in formats.items()
                )
                lines.append(f"{name}: step {a['step']} -> {b['step']}: {changes}")
        lines.append(f"wall time {(time.perf_counter() - self.started) / 60:.1f} min")
        for line in lines:
            write(line)
        return lines

    def close(self) -> None:
        self._file.close()
        for mirror in self._mirrors:
            mirror.close()
        self._mirrors = []

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def _check_columns(self, keys: Iterable[str], where: str) -> None:
        unknown = [k for k in keys if k not in self.columns]
        if unknown:
            raise ValueError(f"RunLog.{where}: unknown column(s) {unknown}; the columns are {self.columns}")


def _number(value) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class _TensorBoard:
    def __init__(self, output_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(output_dir / "tensorboard"))

    def log(self, scalars: dict[str, float], step: int) -> None:
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class _WandB:
    def __init__(self, output_dir: Path) -> None:
        import wandb

        # the process-wide run, which the Trainer's own WandbCallback (report_to="wandb") logs to as well
        self.run = wandb.run or wandb.init(dir=str(output_dir), name=output_dir.name)

    def log(self, scalars: dict[str, float], step: int) -> None:
        # rows of different splits share steps (evaluations between training steps): the step is a value
        self.run.log({**scalars, "step": step})

    def close(self) -> None:
        self.run.finish()


def _mirror(name: str, output_dir: Path):
    mirrors = {"tensorboard": _TensorBoard, "wandb": _WandB}
    if name not in mirrors:
        raise ValueError(f"RunLog report_to: {name!r} is not one of {sorted(mirrors)} (or 'none')")
    return mirrors[name](output_dir)

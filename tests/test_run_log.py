"""gem_adapters.runtime.run_log: the metrics CSV reads back as written, the plot is a PNG, bad columns fail."""

from __future__ import annotations

import csv

import pytest

from gem_adapters.runtime.run_log import RunLog

COLUMNS = ["split", "step", "wall_s", "return", "success_rate", "loss"]


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_numbers_written_are_the_numbers_read_back(tmp_path):
    rows = [
        {"split": "eval", "step": 0, "return": -0.0625, "success_rate": 0.1875},
        {"split": "train", "step": 1, "return": 0.25, "success_rate": 0.5, "loss": 1.23456789},
        {"split": "train", "step": 2, "return": 0.5, "success_rate": 0.75, "loss": float("nan")},
        {"split": "eval", "step": 2, "return": 0.3125, "success_rate": 0.375},
    ]
    with RunLog(tmp_path / "run", COLUMNS) as log:
        for row in rows:
            kept = log.record(row)
            assert kept["wall_s"] >= 0 and "wall_s" not in row  # filled in on a copy
            assert read_csv(log.path)[-1]["step"] == str(row["step"])  # flushed row by row
    back = read_csv(tmp_path / "run" / "metrics.csv")
    assert list(back[0]) == COLUMNS
    assert [r["split"] for r in back] == ["eval", "train", "train", "eval"]
    for written, read in zip(rows, back):
        assert int(read["step"]) == written["step"]
        assert float(read["return"]) == written["return"]
        assert float(read["success_rate"]) == written["success_rate"]
    assert float(back[1]["loss"]) == 1.2346  # rounded to 4 decimals in the file ...
    assert log.rows[1]["loss"] == 1.23456789  # ... kept exact in memory
    assert back[0]["loss"] == "" and back[2]["loss"] == "nan"
    assert [r["step"] for r in log.split("eval")] == [0, 2] and log.splits() == ["eval", "train"]


def test_plot_and_summary(tmp_path, capsys):
    log = RunLog(tmp_path, COLUMNS)
    for step, value in enumerate([0.0, 0.25, 0.5]):
        log.record({"split": "train", "step": step, "return": value, "success_rate": value})
    log.record({"split": "eval", "step": 2, "return": 0.5, "success_rate": 0.5})
    log.close()
    path = log.plot(["success_rate", "return"], title="test run", labels={"eval": "eval (fixed seeds)"})
    assert path == tmp_path / "learning_curve.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000
    lines = log.summarize({"success_rate": ".2f", "return": "+.3f"})
    assert lines[0] == "train: step 0 -> 2: success rate 0.00 -> 0.50, return +0.000 -> +0.500"
    assert len(lines) == 2 and lines[1].startswith("wall time")  # eval has one row: no change line
    assert capsys.readouterr().out.splitlines() == lines


def test_rows_without_a_split_are_one_series(tmp_path):
    with RunLog(tmp_path, ["step", "loss"]) as log:
        for step, loss in [(1, 2.0), (2, 1.5)]:
            log.record({"step": step, "loss": loss})
    assert log.splits() == ["all"] and len(log.split("all")) == 2
    assert log.summarize({"loss": ".1f"}, write=lambda _: None)[0] == "all: step 1 -> 2: loss 2.0 -> 1.5"
    assert log.plot(["loss"]).stat().st_size > 1000


def test_print_row_formats_the_given_columns(tmp_path):
    with RunLog(tmp_path, COLUMNS) as log:
        row = log.record({"split": "eval", "step": 3, "return": 0.5})
        written = []
        line = log.print_row(
            row,
            {"split": "{:<5}", "step": "step {:4d}", "return": "return {:+.3f}", "loss": "loss {:.3f}"},
            write=written.append,
        )
    assert line == "eval  | step    3 | return +0.500" and written == [line]  # no loss in the row: left out


def test_bad_columns_raise_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="at least one column"):
        RunLog(tmp_path, [])
    with pytest.raises(ValueError, match=r"given twice: \['step'\]"):
        RunLog(tmp_path, ["step", "return", "step"])
    log = RunLog(tmp_path, COLUMNS)
    with pytest.raises(ValueError, match=r"RunLog.record: unknown column\(s\) \['reward'\]; the columns are"):
        log.record({"step": 1, "reward": 0.5})
    with pytest.raises(ValueError, match=r"RunLog.plot: unknown column\(s\) \['accuracy'\]"):
        log.plot(["accuracy"])
    with pytest.raises(ValueError, match=r"RunLog.print_row: unknown column\(s\) \['rew'\]"):
        log.print_row({"step": 1}, {"rew": "{}"})
    with pytest.raises(ValueError, match="2 titles for 1 keys"):
        log.plot(["return"], titles=["a", "b"])
    log.close()
    with pytest.raises(ValueError, match="after close"):
        log.record({"step": 1})
    assert read_csv(log.path) == []  # the rejected rows were not written


def test_rows_are_mirrored_to_tensorboard_and_wandb(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    wandb = pytest.importorskip("wandb")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    rows = [
        {"split": "eval", "step": 0, "return": -0.25},
        {"split": "train", "step": 1, "return": 0.5, "loss": 0.125},
        {"split": "eval", "step": 1, "return": 0.75},
    ]
    log = RunLog(tmp_path, COLUMNS, report_to=["tensorboard", "wandb"])
    for row in rows:
        log.record(row)
    summary = dict(wandb.run.summary)
    log.close()
    assert summary["eval/return"] == 0.75 and summary["train/loss"] == 0.125 and summary["step"] == 1
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("eval/return")] == [(0, -0.25), (1, 0.75)]
    assert [(e.step, e.value) for e in events.Scalars("train/loss")] == [(1, 0.125)]
    assert "eval/split" not in events.Tags()["scalars"] and "eval/wall_s" in events.Tags()["scalars"]
    with pytest.raises(ValueError, match="not one of"):
        RunLog(tmp_path / "other", COLUMNS, report_to=["mlflow"])


def test_significant_digits_keep_small_values(tmp_path):
    """A learning rate decaying to 1e-7 keeps its digits (``digits`` decimals would write 0.0)."""
    path = tmp_path / "runs" / "seed0.csv"
    with RunLog(path.parent, ["step", "lr", "loss"], filename=path.name, significant=6) as log:
        log.record({"step": 1, "lr": 2.5e-4, "loss": 1.23456789})
        log.record({"step": 2, "lr": 1.234567891e-7, "loss": float("nan")})
        assert log.rows[1]["lr"] == 1.234567891e-7  # kept unrounded
    rows = read_csv(path)
    assert [r["lr"] for r in rows] == ["0.00025", "1.23457e-07"] and rows[0]["loss"] == "1.23457"
    assert rows[1]["loss"] == "nan"

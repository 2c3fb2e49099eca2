"""Rows taking turns in live processes: blocks, the cut the report makes again, and a failing runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring.interleave import LiveRow, take_turns
from yolo_optimize.evaluation.measuring.measure import MIN_RUNS, MeasureJob, Timing
from yolo_optimize.evaluation.run_statistics import BLOCK_S, blocks


def job(folder: Path, pixels: Path, batch_sizes: tuple[int, ...] = (1, 2)) -> MeasureJob:
    return MeasureJob(folder, Manifest.read(folder), pixels, Timing(batch_sizes, 0.0, 1), predict=False)


def test_two_live_rows_take_turns_and_each_block_is_one_block_of_the_reports_cut(small_artifacts: Path,
                                                                                   tmp_path: Path) -> None:
    """Each turn adds one block of at least BLOCK_S per row (the progress callback sees each turn once);
    run_statistics.blocks cuts the samples into exactly those blocks again, so the fast-state statistic judges the
    blocks that were run; each process reports its own memory and load."""
    pixels = tmp_path / "images.npy"
    np.save(pixels, np.random.default_rng(0).integers(0, 256, (2, 640, 640, 3), np.uint8))
    folders = [small_artifacts / "yolov5n" / name for name in ("onnx-fp32", "openvino-fp32")]
    rows = [LiveRow(job(folder, pixels)) for folder in folders]
    assert not any(row.error for row in rows)
    shown: dict[int, list[int]] = {1: [], 2: []}
    for batch, turns in shown.items():
        take_turns(rows, batch, 3, turns.append)
        assert turns[:3] == [0, 1, 2]
    for row in rows:
        found = row.finish()
        assert found is not None
        measurement, predictions = found
        assert predictions is None and measurement.peak_rss_mb > 100 and measurement.load_s > 0
        for result in measurement.batches:
            assert result.latency is not None and result.throughput_ips
            cut = blocks(result.latency.samples_ms)
            assert len(cut) == len(shown[result.batch]), (result.batch, [len(block) for block in cut])
            assert all(sum(block) >= BLOCK_S * 1e3 for block in cut)


def test_a_runtime_that_cannot_load_its_file_marks_its_row_and_ends_its_process(small_artifacts: Path,
                                                                                tmp_path: Path) -> None:
    broken = tmp_path / "onnx-fp32"
    source = small_artifacts / "yolov5n" / "onnx-fp32"
    broken.mkdir()
    for path in source.iterdir():
        (broken / path.name).write_bytes(path.read_bytes()[:100] if path.suffix == ".onnx" else path.read_bytes())
    pixels = tmp_path / "images.npy"
    np.save(pixels, np.zeros((1, 640, 640, 3), np.uint8))
    row = LiveRow(job(broken, pixels, (1,)))
    assert row.error.startswith("could not load: "), row.error
    assert row.block(1) is None  # a failed row ignores its turns
    assert row.finish() is None


def test_turns_go_on_until_every_row_has_its_minimum_of_runs(small_artifacts: Path, tmp_path: Path) -> None:
    """One turn asked for, but a block of 0.2 s holds fewer than MIN_RUNS runs at batch 8: turns are added until
    the row has them, and the blocks are still whole."""
    pixels = tmp_path / "images.npy"
    np.save(pixels, np.random.default_rng(0).integers(0, 256, (8, 640, 640, 3), np.uint8))
    row = LiveRow(job(small_artifacts / "yolov5n" / "onnx-fp32", pixels, (8,)))
    shown: list[int] = []
    take_turns([row], 8, 1, shown.append)
    found = row.finish()
    assert found is not None
    samples = found[0].batches[0].latency.samples_ms  # type: ignore[union-attr]  # latency is None only for a failed row
    assert len(samples) >= MIN_RUNS and len(shown) == len(blocks(samples)) > 1


@pytest.mark.parametrize("how", ["hangs", "dies"])
def test_a_row_whose_process_hangs_or_dies_is_marked_and_the_others_go_on(small_artifacts: Path, tmp_path: Path,
                                                                            how: str) -> None:
    """One process stopped (SIGSTOP: a runtime stuck forever) or killed (SIGKILL, by another hand than the kernel's
    out-of-memory killer) after it loaded: its row is 'timed out' (and its process ended) or 'crashed'; the other row
    keeps taking its turns."""
    import os
    import signal

    pixels = tmp_path / "images.npy"
    np.save(pixels, np.zeros((1, 640, 640, 3), np.uint8))
    stuck, healthy = (LiveRow(job(small_artifacts / "yolov5n" / name, pixels, (1,)))
                      for name in ("onnx-fp32", "openvino-fp32"))
    stuck.timeout_s = healthy.timeout_s = 5  # once loaded: a slow host's imports and compile may take longer
    os.kill(stuck.pid, signal.SIGSTOP if how == "hangs" else signal.SIGKILL)  # type: ignore[arg-type]  # the pid of a started process is an int
    take_turns([stuck, healthy], 1, 2, lambda turn: None)
    expected = ("timed out: no answer in 5 s (the process was stopped)" if how == "hangs" else
                "crashed: the process was killed by SIGKILL")
    assert stuck.error == expected and stuck.finish() is None
    assert not stuck._process.is_alive()
    found = healthy.finish()
    assert not healthy.error and found and len(found[0].batches[0].latency.samples_ms) >= MIN_RUNS  # type: ignore[union-attr]  # latency is None only for a failed row


def test_a_row_whose_parent_closes_its_pipe_ends_quietly(small_artifacts: Path, tmp_path: Path,
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    """What an interrupted evaluation does to its rows as it ends: the process finds nobody to answer and exits 0,
    printing nothing (no 'Process SpawnProcess-N:' traceback on the user's terminal)."""
    pixels = tmp_path / "images.npy"
    np.save(pixels, np.zeros((1, 640, 640, 3), np.uint8))
    row = LiveRow(job(small_artifacts / "yolov5n" / "onnx-fp32", pixels, (1,)))
    row._conn.close()
    row._process.join(timeout=60)
    assert row._process.exitcode == 0
    assert "Process" not in capfd.readouterr().err

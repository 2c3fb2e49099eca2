"""Manifests: every file hashed, tampering detected, publishing is all-or-nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from yolo_optimize.artifact import (
    MANIFEST,
    Manifest,
    host_id,
    process_state,
    publish,
    publish_if_absent,
    read_valid,
    show,
    staging_dir,
    sweep_leftovers,
    verify_files,
)


def test_manifest_lists_sha256_of_every_file_and_tool_versions(built: Path) -> None:
    manifest = Manifest.read(built / "openvino-fp32")
    assert set(manifest.files) == {"yolov5n_openvino_model/yolov5n.xml", "yolov5n_openvino_model/yolov5n.bin"}
    assert all(len(f["sha256"]) == 64 for f in manifest.files.values())
    assert {"openvino", "yolo-optimize"} <= set(manifest.tool_versions)
    assert manifest.build_seconds > 0 and manifest.cache_key and manifest.schema_version == 1


def test_tampered_file_is_detected(built: Path, tmp_path: Path) -> None:
    copy = tmp_path / "onnx-fp32"
    shutil.copytree(built / "onnx-fp32", copy)
    with open(copy / "yolov5n.onnx", "r+b") as handle:
        handle.seek(1000)
        handle.write(b"\x00\x01\x02")
    assert verify_files(copy, Manifest.read(copy)) == "sha256 mismatch for yolov5n.onnx"
    assert read_valid(copy) is None


def test_a_cached_check_trusts_an_unwritten_file_by_its_stamp_and_hashes_every_other(tmp_path: Path) -> None:
    """A file written since its manifest (any write moves its modification time) or copied (another inode) is hashed
    again, so tampering is caught without --verify; only a write that also puts the old time back passes the cheap
    check, and a full check (--verify) catches that too. Hard-linked views share the stamp."""
    folder = tmp_path / "node"
    _manifest_folder(folder, "weights" * 1000)
    model = folder / "model.bin"
    assert Manifest.read(folder).files["model.bin"]["stamp"] == [model.stat().st_ino, model.stat().st_mtime_ns]
    assert read_valid(folder, full=False) is not None
    view = tmp_path / "view"
    assert show(folder, view, Manifest.read(folder).cache_key) is None and read_valid(view, full=False) is not None
    copied = shutil.copytree(folder, tmp_path / "copy")  # same bytes and times, another inode: hashed, still valid
    assert read_valid(copied, full=False) is not None
    stamp = model.stat()
    model.write_text("tampered" * 875)  # the same size
    assert read_valid(folder, full=False) is None, "a write moves the stamp: hashed again and caught"
    os.utime(model, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # the old time put back by hand
    assert read_valid(folder, full=False) is not None, "what --verify is for"
    assert read_valid(folder) is None and verify_files(folder, Manifest.read(folder)) == "sha256 mismatch for model.bin"


def test_publish_replaces_the_old_folder_whole(tmp_path: Path) -> None:
    final = tmp_path / "node"
    final.mkdir()
    (final / "old.txt").write_text("old")
    staging = staging_dir(final)
    (staging / "new.txt").write_text("new")
    publish(staging, final)
    assert [p.name for p in final.iterdir()] == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["node"]


def _manifest_folder(folder: Path, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.bin").write_text(text)
    Manifest("node", "stage", "m", "onnx", "fp32", "model.bin", text, {}, {}, {}, {}).write(folder)


KILLED_PUBLISH = """
import os, sys
from pathlib import Path
from tests.test_artifact import _manifest_folder
from yolo_optimize import artifact
step, final = int(sys.argv[1]), Path(sys.argv[2])
staging = artifact.staging_dir(final)
_manifest_folder(staging, "new")
calls = 0
def replace_or_die(*args, real=os.replace):
    global calls
    calls += 1
    if calls == step:
        os._exit(9)  # killed before this step: nothing after it runs
    real(*args)
artifact.os.replace = replace_or_die
artifact.shutil.rmtree = lambda *args, **kwargs: os._exit(9)
artifact.publish(staging, final)
"""


@pytest.mark.parametrize(("step", "left"), [(1, "old"), (2, None), (3, "new")])
def test_a_kill_at_each_step_of_publish_leaves_old_or_new_and_is_swept(tmp_path: Path, step: int,
                                                                      left: str | None) -> None:
    """Publish's steps: move the old folder aside, move the new one in, delete the old one."""
    final = tmp_path / "node"
    _manifest_folder(final, "old")
    died = subprocess.run([sys.executable, "-c", KILLED_PUBLISH, str(step), str(final)], cwd=Path(__file__).parents[1])
    assert died.returncode == 9, died.stderr
    shown = read_valid(final)
    assert (shown.cache_key if shown else None) == left
    leftovers = [p for p in tmp_path.iterdir() if p != final]
    assert leftovers and all(p.name.startswith((".tmp-node-", ".old-node-")) for p in leftovers)
    assert sorted(sweep_leftovers(tmp_path)) == sorted(leftovers)
    assert [p.name for p in tmp_path.iterdir()] == (["node"] if left else [])


def test_leftovers_of_a_live_process_are_kept(tmp_path: Path) -> None:
    staging = staging_dir(tmp_path / "node")  # this process is alive: a concurrent build's staging
    assert sweep_leftovers(tmp_path) == [] and staging.is_dir()


def test_leftovers_of_a_zombie_are_swept(tmp_path: Path) -> None:
    """A killed worker nobody has reaped yet (as in containers whose init does not reap) is dead."""
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while process_state(child.pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    leftover = tmp_path / f".tmp-node-{host_id()}-{child.pid}-0badc0de"
    leftover.mkdir()
    try:
        assert sweep_leftovers(tmp_path) == [leftover] and not leftover.exists()
    finally:
        child.wait()


def test_another_machines_leftovers_are_its_own_to_judge(tmp_path: Path) -> None:
    """On a store several machines share, a pid here says nothing of a folder staged on another machine."""
    no_such_pid = 2**22 + 7  # above the largest pid_max Linux allows
    elsewhere = tmp_path / f".tmp-node-{'f' * len(host_id())}-{no_such_pid}-0badc0de"
    here = tmp_path / f".old-node-{host_id()}-{no_such_pid}-0badc0de"
    elsewhere.mkdir()
    here.mkdir()
    assert sweep_leftovers(tmp_path) == [here] and elsewhere.is_dir()


def test_a_second_publisher_of_a_key_finds_it_published_and_leaves_it(tmp_path: Path) -> None:
    final = tmp_path / ".store" / "node" / "key"
    first, second = staging_dir(final), staging_dir(final)
    _manifest_folder(first, "first")
    _manifest_folder(second, "second")
    assert publish_if_absent(first, final) and not publish_if_absent(second, final)
    assert Manifest.read(final).cache_key == "first" and second.is_dir()


def test_show_publishes_a_copy_whose_edits_never_reach_the_store_and_skips_an_up_to_date_one(tmp_path: Path) -> None:
    stored, view = tmp_path / ".store" / "node" / "k", tmp_path / "node"
    _manifest_folder(stored, "k1")
    assert show(stored, view, "k1") is None and read_valid(view, "k1", full=False) is not None
    assert (view / "model.bin").stat().st_ino != (stored / "model.bin").stat().st_ino
    inode = (view / "model.bin").stat().st_ino
    assert show(stored, view, "k1") is None and (view / "model.bin").stat().st_ino == inode, "left as it was"
    with open(view / "model.bin", "r+b") as handle:  # a tool editing the shipped file in place
        handle.write(b"XX")
    assert read_valid(stored, "k1") is not None, "the store keeps its own bytes"


def edited_in_place(path: Path) -> None:
    """What `dd conv=notrunc` then `touch -r` does: bytes changed (inverted, so they surely differ), size and
    modification time kept: only a full check can tell."""
    facts = path.stat()
    middle = facts.st_size // 2
    with open(path, "r+b") as handle:
        handle.seek(middle)
        chunk = handle.read(min(4096, middle))
        handle.seek(middle)
        handle.write(bytes(byte ^ 0xFF for byte in chunk))
    os.utime(path, ns=(facts.st_atime_ns, facts.st_mtime_ns))


@pytest.mark.parametrize(("damage", "full", "found"), [
    (edited_in_place, True, "sha256 mismatch for model.bin"),
    (lambda path: path.write_bytes(path.read_bytes()[:10]), False, "size mismatch for model.bin (10 bytes, 1000"),
    (Path.unlink, False, "missing file model.bin"),
    (lambda path: (path.parent / MANIFEST).unlink(), False, "manifest.json missing or unreadable"),
])
def test_show_repairs_a_damaged_view_from_the_store_and_says_what_was_wrong(
        tmp_path: Path, damage: Callable[[Path], object], full: bool, found: str) -> None:
    stored, view = tmp_path / ".store" / "node" / "k", tmp_path / "node"
    _manifest_folder(stored, "k1" * 500)
    show(stored, view, "k1" * 500)
    damage(view / "model.bin")
    if full:
        assert show(stored, view, "k1" * 500) is None, "a stamp check trusts an edit that kept size and time"
    assert show(stored, view, "k1" * 500, full=full).startswith(found)  # type: ignore[union-attr]  # show() returns None when nothing matches
    assert read_valid(view, "k1" * 500) is not None and show(stored, view, "k1" * 500, full=True) is None


def test_show_with_replace_publishes_again_a_view_that_verifies(tmp_path: Path) -> None:
    stored, view = tmp_path / ".store" / "node" / "k", tmp_path / "node"
    _manifest_folder(stored, "k1")
    show(stored, view, "k1")
    inode = (view / "model.bin").stat().st_ino
    assert show(stored, view, "k1", replace=True) is None
    assert (view / "model.bin").stat().st_ino != inode and read_valid(view, "k1") is not None


WRITE_REPORT = """
import sys
from pathlib import Path
from yolo_optimize.artifact import written_whole
with written_whole(Path(sys.argv[1]), last="results.json") as staging:
    (staging / "matrix.md").write_text("second run")
    (staging / "results.json").write_text("second run")
"""


def test_a_run_moves_its_files_in_only_while_no_other_run_writing_the_same_place_does(tmp_path: Path) -> None:
    """Two evaluations into one --out: while one moves its report in (here: its lock held by this test), the other
    waits, so that no report is ever half one run's and half the other's; then it moves its files in."""
    import fcntl

    out = tmp_path / "report"
    out.mkdir()
    (out / "results.json").write_text("first run")
    held = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    second = subprocess.Popen([sys.executable, "-c", WRITE_REPORT, str(out)], cwd=Path(__file__).parents[1])
    try:
        time.sleep(3)
        assert second.poll() is None and (out / "results.json").read_text() == "first run"
        assert not (out / "matrix.md").exists()
    finally:
        os.close(held)
    assert second.wait(timeout=60) == 0
    assert (out / "results.json").read_text() == (out / "matrix.md").read_text() == "second run"

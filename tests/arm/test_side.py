"""The ARM options refused in one line, before any work, where the ARM side is not ready or cannot be used."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import WEIGHTS, optimize


def test_check_on_without_the_arm_side_is_one_line_naming_what_is_missing_and_the_setup(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = optimize("build", WEIGHTS, "--out", out, "--targets", "ncnn", "--check-on", "cortex-a76",
                   env={"YOLO_OPTIMIZE_ARM_HOME": str(tmp_path / "no-arm")})
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0].startswith("error: --check-on needs the ARM side, and ") and "sudo optimize arm-setup" in lines[0]
    assert not out.exists()


def test_an_unknown_core_and_a_cluster_build_are_refused(tmp_path: Path) -> None:
    unknown = optimize("build", WEIGHTS, "--out", tmp_path, "--check-on", "cortex-a99")
    assert unknown.returncode == 2 and "cortex-a72 (Raspberry Pi 4)" in unknown.stderr, unknown.stderr
    ray = optimize("build", WEIGHTS, "--out", tmp_path, "--check-on", "cortex-a72", "--executor", "ray")
    assert ray.returncode == 2 and "build with --executor local" in ray.stderr, ray.stderr

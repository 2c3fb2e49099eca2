"""A profile's page from a handmade profile: what it says when the host's speed changed around the profiles, and the
files ``write_profile`` leaves beside the runner's trace (the measured profiles are tests/evaluation/measuring/
test_profiling.py's)."""

from __future__ import annotations

import json
from pathlib import Path

from yolo_optimize.evaluation.profiles import PROFILE_SCHEMA, ArtifactProfile, Breakdown, LayerAttempt, ThreadPoint
from yolo_optimize.evaluation.reporting.profile_page import profile_markdown, write_profile
from yolo_optimize.host.energy import Energy
from yolo_optimize.runtime.layers import LayerTime


def profile(attempts: list[LayerAttempt], reported: int) -> ArtifactProfile:
    """A two-layer profile of ``attempts``, ``reported`` the one it reports."""
    layers = [LayerTime("conv1", "Conv", 3.0, "fp32"), LayerTime("act1", "Sigmoid", 1.0, "fp32")]
    stages = {"read": 0.001, "prepare": 0.001, "infer": 0.004, "postprocess": 0.001}
    return ArtifactProfile(PROFILE_SCHEMA, "yolov5n", "onnx-fp32", "fp32", 1, 5.0, 4.0, 4.5, attempts, reported,
                           layers, {"Conv": 3.0, "Sigmoid": 1.0}, [], [], 0.0, None, "not measured: onnxruntime fp32",
                           "trace.json", "", [Breakdown(1, stages, {k: 0.25 for k in stages}, 0.007, 142.0, 250.0)],
                           [ThreadPoint(1, 5.0, 200.0)], Energy(None, [], "no RAPL"))


def test_the_page_says_when_the_hosts_speed_changed_around_every_profile() -> None:
    unsteady = [LayerAttempt(5.0, 7.0, 4.0, 4.5), LayerAttempt(5.0, 6.0, 4.0, 4.5)]
    page = profile_markdown(profile(unsteady, 1))
    assert "the host's speed changed around each of 2 profiles (this one's brackets differ by 20%)" in page
    assert "per-layer sum 4.00 ms (89% of the profiled pass)" in page and "| Conv | 3.000 | 75.0% |" in page
    steady_last = profile([unsteady[0], LayerAttempt(5.0, 5.1, 4.0, 4.5)], 1)
    assert "; profiled 2 times, the host's speed changed around the earlier ones" in profile_markdown(steady_last)


def test_write_profile_writes_the_json_and_the_page_and_names_the_trace(tmp_path: Path) -> None:
    made = profile([LayerAttempt(5.0, 5.0, 4.0, 4.5)], 0)
    written = write_profile(made, tmp_path)
    assert written == [tmp_path / "profile.json", tmp_path / "profile.md", tmp_path / "trace.json"]
    assert json.loads(written[0].read_text())["attempts"][0]["layers_ms"] == 4.0
    assert written[1].read_text() == profile_markdown(made)

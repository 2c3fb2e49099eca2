"""``optimize eval --profile`` and ``optimize profile``: model facts against measured peaks, the roofline, per-layer
time with traces, the end-to-end breakdown, thread scaling and energy, for real artifacts in their runtimes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import VAL_DATA, brief, eval_args, optimize, written_matrix
from tests.workers import alone
from yolo_optimize.evaluation.measuring.profiling import thread_counts

RUNTIMES = {"pytorch": "torch", "torchscript": "torch", "onnx": "onnxruntime", "openvino": "openvino"}


@pytest.fixture(scope="module")
def profiled(small_artifacts: Path, tmp_path_factory: pytest.TempPathFactory, machine_cache: dict[str, str],
             request: pytest.FixtureRequest) -> Path:
    """onnx-fp32, openvino-fp32 and the baseline evaluated with --profile at batch 1 and 2 (speed only), while no
    other test runs (the tests read utilization of the measured peaks and per-layer times against their pass); the
    report folder."""
    out = tmp_path_factory.mktemp("profiled")
    with alone(request):
        result = optimize(*eval_args(small_artifacts, out, "--max-images", "8", "--min-time", "0.2", "--repeats",
                                     "1", "--batch-sizes", "1,2", "--no-end-to-end", "--no-accuracy", "--profile"),
                          env=machine_cache)
    assert result.returncode == 0, brief(result)
    return out


def test_every_row_is_explained_by_its_gflops_and_its_utilization_of_the_measured_peak(profiled: Path) -> None:
    """Achieved GOP/s = GFLOPs x images/s; utilization of the peak of the precision it runs in, never above 1."""
    results = json.loads((profiled / "results.json").read_text())
    limits = results["machine_limits"]
    assert limits and limits["threads"] == results["settings"]["threads"]
    for line in written_matrix(profiled):
        runtime = RUNTIMES[line.artifact.split("-")[0]]
        assert line.gflops_per_image == pytest.approx(4.47, abs=0.02), line.artifact
        assert line.peak_of == f"{runtime} fp32"
        assert line.peak_gops == max(p["gops"] for p in limits["peaks"]
                                     if p["runtime"] == runtime and p["executed"] == "fp32")
        for batch in (1, 2):
            cells = line.at(batch)
            assert cells.achieved_gops == pytest.approx(4.469 * cells.throughput_ips, rel=0.01)
            assert 0 < cells.utilization <= 1.0, (line.artifact, batch, cells.achieved_gops, line.peak_gops)
            assert cells.intensity > 0 and cells.bound in ("compute", "memory")
        assert line.at(2).intensity > line.at(1).intensity, "weights are read once per batch"
    markdown = (profiled / "matrix.md").read_text()
    assert "b1 util." in markdown and "GFLOPs" in markdown and "e2e img/s" not in markdown  # --no-end-to-end
    assert (profiled / "roofline.svg").read_text().lstrip().startswith("<?xml")
    assert (profiled / "roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("artifact", ["onnx-fp32", "openvino-fp32", "pytorch-fp32"])
def test_per_layer_times_sum_to_the_profiled_pass_and_name_the_hotspots(profiled: Path, artifact: str) -> None:
    """The forward time brackets the reported profile, taken again while the host's speed changed around it; the
    layers account for the passes they were timed in, within their clocks' noise (a profiled session runs slower
    than the deployed one by the profiler's bookkeeping, by as much as 1.4x on some hosts, so that ratio is
    reported, not bounded tightly)."""
    folder = profiled / "profiles" / "yolov5n" / artifact
    profile = json.loads((folder / "profile.json").read_text())
    attempts, reported = profile["attempts"], profile["reported_attempt"]
    spread = [max(a["forward_before_ms"], a["forward_after_ms"]) / min(a["forward_before_ms"], a["forward_after_ms"])
              for a in attempts]
    assert 1 <= len(attempts) <= 4 and all(x > 1.1 for x in spread[:-1]), ("retaken only when it changed", attempts)
    assert spread[-1] <= 1.1 or len(attempts) == 4, ("stopped at the first steady attempt or the limit", attempts)
    assert reported == spread.index(min(spread)), ("the attempt whose brackets agree best", reported, attempts)
    assert attempts[reported]["layers_ms"] == profile["layers_ms"], (reported, attempts)
    brackets = sorted((attempts[reported]["forward_before_ms"], attempts[reported]["forward_after_ms"]))
    assert brackets[0] <= profile["forward_ms"] <= brackets[1], (brackets, profile["forward_ms"])
    assert sorted(p.name for p in folder.iterdir()) == ["profile.json", "profile.md", "trace.json"], "one trace"
    # at most 1.25: OpenVINO's per-node clocks summed to 1.04x the pass once on a host shared with a sampling profiler,
    # and 1.13x once, alone in a two-worker run (ab9bc74:bench/results/avx2/suite-xdist-be6d409.log); counting a layer
    # twice (TorchScript's own forward scope once was) doubles the sum assert 0.75 <= profile["layers_ms"] /
    # profile["profiled_pass_ms"] <= 1.25, attempts
    assert 0.5 <= profile["profiled_pass_ms"] / profile["forward_ms"] <= 2, ("the same model, profiled", attempts)
    assert f"per-layer sum {profile['layers_ms']:.2f} ms" in (folder / "profile.md").read_text()
    assert len(profile["hotspots"]) == 10 and profile["hotspots"][0]["ms"] >= profile["hotspots"][-1]["ms"]
    assert all(h["executed"] == "fp32" for h in profile["hotspots"])
    assert next(iter(profile["by_kind_ms"])) in ("Conv", "Convolution", "aten::conv2d"), "convolutions lead"
    trace = json.loads((profiled / "profiles" / "yolov5n" / artifact / profile["trace"]).read_text())
    events = trace if isinstance(trace, list) else trace["traceEvents"]
    assert len(events) > 100 and all("ts" in e and "name" in e for e in events)


@pytest.mark.parametrize("artifact", ["onnx-fp32", "openvino-fp32", "pytorch-fp32"])
def test_every_convolution_has_its_operations_and_its_utilization_of_the_measured_peak(profiled: Path,
                                                                                      artifact: str) -> None:
    """Each runtime's graph shapes give each convolution's operations: together they are the model's GFLOPs."""
    profile = json.loads((profiled / "profiles" / "yolov5n" / artifact / "profile.json").read_text())
    limits = json.loads((profiled / "results.json").read_text())["machine_limits"]
    runtime = RUNTIMES[artifact.split("-")[0]]
    peak = max(p["gops"] for p in limits["peaks"] if p["runtime"] == runtime and p["executed"] == "fp32")
    assert profile["convolution_gflops"] == pytest.approx(4.47, abs=0.03), "yolov5n at 640, batch 1"
    assert profile["peak_of"] == f"{runtime} fp32"
    rates = profile["convolutions"]
    assert len(rates) >= 60 and [r["ms"] for r in rates] == sorted((r["ms"] for r in rates), reverse=True)
    for rate in rates:
        assert rate["achieved_gops"] == pytest.approx(rate["gflops"] / rate["ms"] * 1e3, rel=0.01)
        assert rate["utilization"] == pytest.approx(rate["achieved_gops"] / peak, abs=1e-3)
    overall = profile["convolution_gflops"] / sum(r["ms"] for r in rates) * 1e3 / peak
    assert profile["convolution_utilization"] == pytest.approx(overall, abs=1e-3)
    # The peak is measured once, at the run's start (LIMIT_ROUNDS), and a host may switch to a 1.4-1.7x faster state
    # by the time the convolutions are profiled: they measured 1.05-1.07x of it in two runs (3d84e82, and 7c80b0b), some
    # single convolutions up to 1.19x. Above 1.25 the operations or the times are counted wrong, not the host.
    assert 0 < profile["convolution_utilization"] <= 1.25
    profile_page = profiled / "profiles" / "yolov5n" / artifact / "profile.md"
    assert "| convolution | type | GFLOPs |" in profile_page.read_text()


def test_the_breakdown_parts_sum_to_the_end_to_end_time(profiled: Path) -> None:
    for artifact in ("pytorch-fp32", "onnx-fp32", "openvino-fp32"):
        profile = json.loads((profiled / "profiles" / "yolov5n" / artifact / "profile.json").read_text())
        assert [b["batch"] for b in profile["breakdown"]] == [1, 2]
        for part in profile["breakdown"]:
            stages = part["seconds_per_image"]
            assert set(stages) == {"read", "prepare", "infer", "postprocess"} and all(v > 0 for v in stages.values())
            assert abs(sum(stages.values()) / part["end_to_end_s_per_image"] - 1) <= 0.1, part
            assert part["end_to_end_ips"] < part["infer_ips"]


def test_threads_are_scaled_up_to_the_usable_cpus_and_energy_is_measured_wherever_it_can_be(profiled: Path) -> None:
    """Energy: measured (J/image > 0) exactly where RAPL package counters are readable, else the reason they are not,
    as this machine gives it."""
    from yolo_optimize.host.cpu import usable_cpus
    from yolo_optimize.host.energy import package_domains

    profile = json.loads((profiled / "profiles" / "yolov5n" / "onnx-fp32" / "profile.json").read_text())
    assert [t["threads"] for t in profile["threads"]] == thread_counts(usable_cpus())
    assert all(t["throughput_ips"] > 0 and t["latency_p50_ms"] > 0 for t in profile["threads"])
    energy, (domains, reason) = profile["energy"], package_domains()
    if domains:
        assert energy["joules_per_image"] > 0 and energy["domains"] and not energy["unavailable"], energy
    else:
        assert energy["joules_per_image"] is None and energy["unavailable"] == reason
    assert "Energy:" in (profiled / "profiles" / "yolov5n" / "onnx-fp32" / "profile.md").read_text()


def test_thread_counts_double_up_to_the_cores() -> None:
    assert thread_counts(1) == [1] and thread_counts(2) == [1, 2] and thread_counts(6) == [1, 2, 4, 6]


def test_profile_command_writes_one_artifacts_profile(small_artifacts: Path, tmp_path: Path,
                                                     machine_cache: dict[str, str]) -> None:
    result = optimize("profile", small_artifacts / "yolov5n" / "onnx-fp32", "--data", VAL_DATA, "--images", "4",
                      "--largest-batch", "2", "--out", tmp_path / "prof", env=machine_cache)
    assert result.returncode == 0, brief(result)
    assert {p.name for p in (tmp_path / "prof").iterdir()} == {"profile.json", "profile.md", "trace.json"}
    assert "| hotspot |" in result.stdout
    bad = optimize("profile", small_artifacts / "yolov5n", "--out", tmp_path / "bad")
    assert bad.returncode == 2 and "is not an artifact folder" in bad.stderr

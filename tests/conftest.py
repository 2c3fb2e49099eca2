"""Shared fixtures: the real assets, and one real build of yolov5n reused by the whole session."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.durations import longest_first
from tests.workers import ALONE, SHARED, made_once, turns, worker_name

if TYPE_CHECKING:
    from yolo_optimize.artifact import Manifest
    from yolo_optimize.building.build_result import BuildResult
    from yolo_optimize.building.stage import StageContext
    from yolo_optimize.evaluation.results import MatrixRow, Report

ASSETS = Path(os.environ.get("YOLO_OPTIMIZE_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))
WEIGHTS = ASSETS / "weights" / "yolov5n.pt"
VAL_DATA = ASSETS / "coco_val128"
CALIB_DATA = ASSETS / "coco128"
BUILD_TARGETS = ("torchscript", "onnx", "openvino")


def pytest_configure(config: pytest.Config) -> None:
    """The test process is ours, like the CLI's: the tools stay offline and out of $HOME (the package no longer does
    this on import). Every command and API call of the run, in every xdist worker (they inherit it), shares one
    fresh cache (XDG_CACHE_HOME): this machine's limits, which builds of bf16 and int8 read, are measured once
    (``machine_cache``, in LIMIT_ROUNDS)."""
    from yolo_optimize.host.environment import configure

    configure()
    if not worker_name():
        os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="yolo-optimize-test-cache-")
    else:
        # two workers' processes share the cores: PyTorch's OpenMP threads then spin away the time the other's need
        # (yolov5n's 2-thread forward beside another: 4.6x slower spinning, 1.6x sleeping;
        # bench/archive/test_suite_time/README.md)
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


# Fixtures that build or evaluate real models (minutes): a test using one is slow. `pytest -m "not slow"` runs the
# rest (unit tests on real runtimes and small real graphs) in about five minutes.
SLOW_FIXTURES = {"built", "built_int8", "built_uint8", "built_edge", "edge_evaluated", "built_edge_int8",
                 "edge_int8_evaluated", "evaluated", "small_artifacts", "machine_cache", "profiled", "limits"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    longest_first(items)  # with --no-loadscope-reorder, the order the workers take the modules in


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Each test in its turn (tests/workers.py): alone where it is marked so, beside the other worker's otherwise. A
    run of tests marked alone keeps its turn from the first to the last, so that the other worker does not start a
    long test between two of them (each would wait for it to end)."""
    mine = turns(item.config)
    mine.keep(_turn_of(item))
    try:
        return (yield)
    finally:
        if not (nextitem is not None and _turn_of(item) == _turn_of(nextitem) == ALONE):
            mine.drop()


def _turn_of(item: pytest.Item) -> int:
    return ALONE if item.get_closest_marker("alone") else SHARED


def pytest_sessionstart(session: pytest.Session) -> None:
    if not WEIGHTS.is_file():
        raise pytest.UsageError(f"test assets missing: {WEIGHTS} (set YOLO_OPTIMIZE_ASSETS to the assets folder)")


@dataclass
class Run:
    """A finished command: what subprocess.run returns, and for a build the typed result it wrote (``--result``)."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    build: BuildResult | None = None  # None: not a build, or one refused or interrupted before writing it


def optimize(*args: str | Path, env: dict[str, str] | None = None, timeout: float = 900) -> Run:
    """Run the CLI exactly as a user would, in its own process; a build also writes its typed result (``--result``),
    which the tests read instead of the console's table."""
    from yolo_optimize.building.build_result import BuildResult

    command = [sys.executable, "-m", "yolo_optimize", *map(str, args)]
    with tempfile.TemporaryDirectory(prefix="yolo-optimize-result-") as folder:
        result_file = Path(folder) / "result.json"
        if args[:1] == ("build",) and not {"--help", "--result"} & set(args):
            command += ["--result", str(result_file)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "YOLO_OPTIMIZE_OFFLINE": "1", **(env or {})})
        built = BuildResult.from_json(result_file.read_text()) if result_file.is_file() else None
    return Run(command, done.returncode, done.stdout, done.stderr, built)


def brief(result: Run | subprocess.CompletedProcess[str]) -> str:
    """What a failed command said, short enough to read when a session fixture fails every test that uses it."""
    failed = [line for line in result.stdout.splitlines() if " failed" in line or "error" in line.lower()]
    return "\n".join([f"exit {result.returncode}", *failed[:10], *result.stderr.strip().splitlines()[-10:]])


def statuses(run: Run) -> dict[str, str]:
    """node -> status, from the build's typed result."""
    assert run.build is not None, f"the build wrote no result: {brief(run)}"
    return run.build.statuses()


def build_args(out: Path, *extra: str | Path) -> list[str | Path]:
    return ["build", WEIGHTS, "--out", out, "--parity-data", VAL_DATA, *extra]


@pytest.fixture(scope="session")
def home_dir(request: pytest.FixtureRequest) -> Path:
    """An empty $HOME for the session build: nothing may be written into it."""
    return made_once(request, "home", lambda _: None)


@pytest.fixture(scope="session")
def built(request: pytest.FixtureRequest, home_dir: Path) -> Path:
    """torchscript, onnx, openvino x fp32, fp16 of the pretrained yolov5n; returns its model folder."""
    def make(out: Path) -> None:
        result = optimize(*build_args(out, "--targets", ",".join(BUILD_TARGETS), "--precisions", "fp32,fp16"),
                          env={"HOME": str(home_dir)})
        assert result.returncode == 0, brief(result)

    return made_once(request, "artifacts", make) / "yolov5n"


def eval_args(root: Path, out: Path, *extra: str | Path) -> list[str | Path]:
    return ["eval", root, "--data", VAL_DATA, "--out", out, *extra]


def written_matrix(report: Path) -> list[MatrixRow]:
    """The matrix an eval wrote into ``report``'s results.json, read back typed (every field checked)."""
    from yolo_optimize.evaluation.results import MatrixRow
    from yolo_optimize.evaluation.results_json import from_json

    return from_json(list[MatrixRow], json.loads((report / "results.json").read_text())["matrix"], "matrix")


LIMIT_ROUNDS = 2  # the suite's machine limits: two rounds instead of five (a minute saved; the peaks read alike)


@pytest.fixture(scope="session")
def machine_cache(request: pytest.FixtureRequest) -> dict[str, str]:
    """The environment of the session's cache once it holds this machine's limits, measured once, while no other
    test runs (in LIMIT_ROUNDS; a build that needs them first would measure five rounds)."""
    env = {"XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]}

    def measure(_: Path) -> None:
        result = optimize("info", "--rounds", str(LIMIT_ROUNDS), env=env)
        assert result.returncode == 0, brief(result)

    made_once(request, "machine-limits", measure, alone=True)
    return env


@pytest.fixture(scope="session", autouse=True)
def limits_before_the_builds(request: pytest.FixtureRequest) -> None:
    """Under xdist a build that found no limits would measure them beside the other worker's tests: where the run
    holds a slow test, they are measured first, alone."""
    if worker_name() and any(item.get_closest_marker("slow") for item in request.session.items):
        request.getfixturevalue("machine_cache")


EVALUATED = ("onnx-fp32", "onnx-fp16", "openvino-fp32")  # each runtime, and stored FP16 beside its FP32 sibling


@pytest.fixture(scope="session")
def evaluated(built: Path, request: pytest.FixtureRequest) -> Path:
    """EVALUATED and the baseline evaluated on a subset (24 images) at batch 1 and 2, twice per artifact, while no
    other test runs (tests read ratios of its timings, such as each row's end-to-end share); the report folder."""
    def make(folder: Path) -> None:
        result = optimize(*eval_args(_copied(built, EVALUATED, folder), folder / "report", "--max-images", "24",
                                     "--min-time", "0.2", "--repeats", "2", "--batch-sizes", "1,2"))
        assert result.returncode == 0, brief(result)

    return made_once(request, "evaluated", make, alone=True) / "report"


def _copied(built: Path, artifacts: tuple[str, ...], folder: Path) -> Path:
    """A root holding a copy of these artifacts of the session build and its build records (the baseline's)."""
    import shutil

    root = folder / "artifacts"
    for part in (*artifacts, ".cache/load"):
        shutil.copytree(built / part, root / "yolov5n" / part)
    return root


@pytest.fixture(scope="session")
def small_artifacts(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of onnx-fp32 and openvino-fp32 (plus the build records) that tests may break."""
    return _copied(built, ("onnx-fp32", "openvino-fp32"), tmp_path_factory.mktemp("small"))


QUICK_EVAL = ("--no-accuracy", "--no-end-to-end", "--min-time", "0", "--repeats", "1", "--batch-sizes", "1")


INT8_ARGS = ("--calib-data", CALIB_DATA, "--calib-images", "16", "--gate-images", "24", "--max-map-drop", "3")


@pytest.fixture(scope="session")
def built_int8(built: Path, request: pytest.FixtureRequest, machine_cache: dict[str, str]) -> Path:
    """INT8 ONNX, OpenVINO and AOTInductor, the BF16 IR and package (where the CPU has bf16), built on a copy of the
    session build (small calibration/gate sets)."""
    import shutil

    def make(out: Path) -> None:
        shutil.copytree(built.parent, out, dirs_exist_ok=True)
        result = optimize(*build_args(out, "--targets", "aoti,onnx,openvino", "--precisions", "fp32,bf16,int8",
                                      *INT8_ARGS))
        assert result.returncode == 0, brief(result)

    return made_once(request, "artifacts-int8", make) / "yolov5n"


EDGE_SIZE = 320


@pytest.fixture(scope="session")
def built_edge(request: pytest.FixtureRequest) -> Path:
    """The pretrained yolov5n at 320 as NCNN FP32 and FP16 and an ExecuTorch program; its model folder."""
    import yolo_optimize as yo

    def make(out: Path) -> None:
        yo.build(WEIGHTS, targets=["ncnn", "executorch"], precisions=["fp32", "fp16"], imgsz=[EDGE_SIZE],
                 parity_data=VAL_DATA, out=out)

    return made_once(request, "artifacts-edge", make) / "yolov5n"


def arm_side_missing() -> str | None:
    """Why this machine cannot check on an emulated ARM core (None: it can); CI prepares it (.ci/run)."""
    from yolo_optimize.arm.side import ArmSide

    return ArmSide.configured().missing()


CHECKED_ON = "cortex-a76"  # built_edge_int8's files are also checked there where the ARM side is ready


@pytest.fixture(scope="session")
def built_edge_int8(request: pytest.FixtureRequest) -> Path:
    """The pretrained yolov5n as ExecuTorch and NCNN FP32 and INT8 files at 640 (INT8_ARGS' small calibration and
    gate sets), in one build, also checked on CHECKED_ON where the ARM side is ready; its model folder. At 640, not
    the edge fixture's 320: parity's agreement counts detections, and at 320 four images hold too few for the INT8
    floor to separate a sound file from noise (0.57-0.64 seen there for ExecuTorch)."""
    check_on = () if arm_side_missing() else ("--check-on", CHECKED_ON)

    def make(out: Path) -> None:
        result = optimize(*build_args(out, "--targets", "executorch,ncnn", "--precisions", "int8", *INT8_ARGS,
                                      *check_on))
        assert result.returncode == 0, brief(result)

    return made_once(request, "artifacts-edge-int8", make) / "yolov5n"


def parity_context(built: Path, out: Path) -> StageContext:
    """What a parity check of an artifact of the model folder ``built`` (or a copy of it in ``out``) is given: the
    model's parity reference."""
    from yolo_optimize.artifact import Manifest, store_folder
    from yolo_optimize.building.stage import StageContext
    from yolo_optimize.checkpoint import resolve_source

    reference = Manifest.read(built / "onnx-fp32").parents["reference"]
    return StageContext(resolve_source(str(WEIGHTS)), out, {"reference": store_folder(built, "reference", reference)},
                        "cpu", 2)


def one_weight_scale_times_8(onnx_file: Path) -> None:
    """Multiply the weight scale of an INT8 ONNX file's middle quantized convolution by 8, as a faulty quantizer could
    leave it."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(onnx_file))
    weights = {i.name for i in model.graph.initializer if len(i.dims) == 4}
    dequantized = [n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in weights]
    scale = next(i for i in model.graph.initializer if i.name == dequantized[len(dequantized) // 2].input[1])
    scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) * np.float32(8), scale.name))
    onnx.save(model, str(onnx_file))


def assert_gated_yolov5n_int8(manifest: Manifest) -> None:
    """An INT8 file of ``built_edge_int8``: gated on INT8_ARGS' 24 held-out images, the Detect head (3 of yolov5n's 60
    convolutions) in float, parity passed at the INT8 tolerance, "runs in" saying so."""
    gate, parity = manifest.info["gate"], manifest.parity
    assert gate["passed"] and gate["drop_points"] <= 3 and gate["gate_images"] == 24, gate
    assert not set(gate["images"]["gated"]) & set(gate["images"]["calibrated"])
    assert manifest.info["kept_in_float"] == ["model.model.24"] and manifest.info["int8_convolutions"] == [57, 60]
    assert parity and parity["passed"] and parity["tolerance"]["precision"] == "int8"
    assert parity["executed_precision"] == "int8+fp32 (57 of 60 convolutions in int8)"


@pytest.fixture(scope="session")
def edge_int8_evaluated(built_edge_int8: Path, request: pytest.FixtureRequest) -> Report:
    """The two INT8 files of ``built_edge_int8`` evaluated beside the baseline on 32 coco_val128 images at batch 1:
    the report, as every worker reads it back."""
    import yolo_optimize as yo
    from yolo_optimize.evaluation.reporting.report import load_report

    def make(folder: Path) -> None:
        root = _copied(built_edge_int8, ("executorch-int8", "ncnn-int8"), folder)
        yo.evaluate(root, data=VAL_DATA, batch_sizes=[1], max_images=32, min_time=0, repeats=1, end_to_end=False,
                    out=folder / "report")

    return load_report(made_once(request, "edge-int8-evaluated", make) / "report")


@pytest.fixture(scope="session")
def edge_evaluated(built_edge: Path, request: pytest.FixtureRequest) -> Report:
    """``built_edge`` evaluated beside the baseline on 32 images at batch 1 and 2: the report, as every worker reads
    it back."""
    import yolo_optimize as yo
    from yolo_optimize.evaluation.reporting.report import load_report

    def make(folder: Path) -> None:
        yo.evaluate(built_edge.parent, data=VAL_DATA, batch_sizes=[1, 2], max_images=32, min_time=0, repeats=1,
                    out=folder / "report")

    return load_report(made_once(request, "edge-evaluated", make) / "report")


@functools.cache
def _mount_namespace() -> tuple[str, ...] | None:
    """How this machine gives a command a private mount namespace where it may mount a tmpfs (root: unshare -m;
    otherwise a user namespace, unshare -r -m), or None where neither works."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        for prefix in (("unshare", "-m"), ("unshare", "-r", "-m")):
            try:
                probe = subprocess.run([*prefix, "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {folder}"],
                                       capture_output=True, timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if probe.returncode == 0:
                return prefix
    return None


LEFT_MARK = "--- left on the small disk ---"


def on_a_small_disk(folder: Path, kilobytes: int, *args: str | Path) -> tuple[subprocess.CompletedProcess[str],
                                                                            dict[str, int]]:
    """``python *args`` with ``folder`` a file system of ``kilobytes`` (a tmpfs in a mount namespace of its own, gone
    when the command ends): its result (stdout without the listing) and what it left there (path -> bytes); skipped,
    saying why, where no namespace can be made."""
    prefix = _mount_namespace()
    if prefix is None:
        pytest.skip("no mount namespace here (unshare -m and unshare -r -m both refused): a full disk cannot be made")
    folder.mkdir(parents=True, exist_ok=True)
    script = (f'mount -t tmpfs -o size={kilobytes}k tmpfs "$0" || exit 99; "$@"; code=$?; echo "{LEFT_MARK}"; '
              f'find "$0" -mindepth 1 -printf "%P %s\\n"; exit $code')
    result = subprocess.run([*prefix, "sh", "-c", script, str(folder), sys.executable, *map(str, args)],
                            capture_output=True, text=True, timeout=900,
                            env={**os.environ, "YOLO_OPTIMIZE_OFFLINE": "1"})
    assert result.returncode != 99, result.stderr
    output, _, listing = result.stdout.partition(LEFT_MARK)
    left = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in listing.strip().splitlines()}
    return subprocess.CompletedProcess(result.args, result.returncode, output, result.stderr), left

"""A format and two execution providers added from outside the package, one row each: registered under the
``yolo_optimize.formats`` entry point group from this module alone, then planned, built, parity-checked, measured and
recommended with no package file edited.

The format, ``onnx-ort``, is ONNX Runtime's own offline graph optimization of the ``onnx-fp32`` file, saved as a
new ``.onnx`` file and run by the ONNX Runtime runner. The providers are runtime configurations of ``onnx``
(``runs="onnx"``): ``onnx-cpu`` pins ONNX Runtime's CPU provider, ``onnx-openvino`` its OpenVINO provider, which
this onnxruntime lacks, so its rows show why they are skipped."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import VAL_DATA, WEIGHTS
from tests.workers import alone
from yolo_optimize.building.request import BuildRequest
from yolo_optimize.building.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.reporting.report import environment
from yolo_optimize.formats import ONNXRUNTIME, OPENVINO, Format, Runtime, Step, format_named, formats, targets_help
from yolo_optimize.limits.peaks import measured_runtimes
from yolo_optimize.metadata import ArtifactMetadata, artifact_metadata
from yolo_optimize.runtime.runners.onnxruntime import OnnxRuntimeRunner

HERE = __name__  # the module every row names: spawned build and measuring processes import it by this name


@dataclass(frozen=True)
class OrtOptimizedConfig:
    imgsz: int
    precision: str  # what an artifact's stage config carries: its manifest's precision
    level: str = "ORT_ENABLE_EXTENDED"  # fusions that stay portable across CPUs (ALL would bind it to this one)


class OrtOptimized(Stage):
    """ONNX Runtime's offline optimization of an ONNX file: the optimized graph, saved with the file's metadata."""

    name = "ort-optimize"
    inputs = (SOURCE, REFERENCE)
    tools = ("onnx", "onnxruntime")
    target = "onnx-ort"
    config: OrtOptimizedConfig

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> OrtOptimized:
        return cls(OrtOptimizedConfig(request.imgsz, precision))

    def run(self, ctx: StageContext) -> StageOutput:
        import onnx
        import onnxruntime as ort

        from yolo_optimize.optimize.onnx_io import save_onnx

        entry = format_named(self.target).entry_for(ctx.source.model_id)
        options = ort.SessionOptions()
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, self.config.level)
        options.optimized_model_filepath = str(ctx.out_dir / entry)
        ort.InferenceSession(str(ctx.entry(SOURCE)), options, providers=["CPUExecutionProvider"])
        metadata = artifact_metadata(ArtifactMetadata.of(ctx.manifest(SOURCE)), target=self.target,
                                     precision=self.config.precision, imgsz=self.config.imgsz)
        save_onnx(onnx.load(str(ctx.out_dir / entry)), ctx.out_dir / entry, metadata)
        return StageOutput(entry=entry, metadata=metadata.to_dict())


class PinnedCpuRunner(OnnxRuntimeRunner):
    execution_providers = ("CPUExecutionProvider",)


class PinnedOpenVinoRunner(OnnxRuntimeRunner):
    execution_providers = ("OpenVINOExecutionProvider", "CPUExecutionProvider")


ORT_RUNNER = "yolo_optimize.runtime.runners.onnxruntime:OnnxRuntimeRunner"
ROWS = (
    Format(target="onnx-ort", entry="{model}_ort.onnx", precisions=("fp32",), runner=ORT_RUNNER, runtime=ONNXRUNTIME,
           snippet="import onnxruntime as ort\n"
           "session = ort.InferenceSession(\"{path}\")  # already optimized offline\n"
           "outputs = session.run(None, {{session.get_inputs()[0].name: images}})[0]  # images: {input}",
           steps=(Step(precision="fp32", stage=f"{HERE}:OrtOptimized", parent="onnx-fp32"),)),
    Format(target="onnx-cpu", entry="{model}.onnx", precisions=("fp32", "fp16", "int8"),
           runner=f"{HERE}:PinnedCpuRunner", runtime=ONNXRUNTIME,
           snippet="import onnxruntime as ort\n"
           "session = ort.InferenceSession(\"{path}\", providers=[\"CPUExecutionProvider\"])", runs="onnx"),
    Format(target="onnx-openvino", entry="{model}.onnx", precisions=("fp32", "fp16", "int8"),
           runner=f"{HERE}:PinnedOpenVinoRunner", runtime=OPENVINO,
           snippet="import onnxruntime as ort\n"
           "session = ort.InferenceSession(\"{path}\", providers=[\"OpenVINOExecutionProvider\"])", runs="onnx"),
)


# A row whose step names a parent no row makes
BROKEN = (Format(target="onnx-broken", entry="{model}.onnx", precisions=("fp32",), runner=ORT_RUNNER,
                 runtime=ONNXRUNTIME,
                 steps=(Step(precision="fp32", stage=f"{HERE}:OrtOptimized", parent="onnx-fp64"),)),)


# A runtime configuration whose runtime is the plugin's own distribution, with kernels for optimize info
OWN_RUNTIME = (Format(target="onnx-own", entry="{model}.onnx", precisions=("fp32",), runner=ORT_RUNNER,
                      runtime=Runtime(package="yolo-optimize-test-plugin",
                                      kernels="yolo_optimize.limits.onnxruntime_kernels"),
                      runs="onnx"),)


def install(rows: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows of this module named ``rows`` installed as another package would register them: a distribution's
    entry point on sys.path (which spawned processes inherit)."""
    dist = tmp_path / "plugin" / "yolo_optimize_test_plugin-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: yolo-optimize-test-plugin\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(f"[yolo_optimize.formats]\nrows = {HERE}:{rows}\n")
    monkeypatch.syspath_prepend(str(dist.parent))
    formats.cache_clear()


@pytest.fixture
def registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    install("ROWS", tmp_path, monkeypatch)
    yield
    monkeypatch.undo()
    formats.cache_clear()


def test_a_registered_step_made_from_a_node_no_row_makes_is_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install("BROKEN", tmp_path, monkeypatch)
    try:
        with pytest.raises(UserError, match="format 'onnx-broken': its fp32 step is made from 'onnx-fp64', which no "
                                            "format's step makes"):
            formats()
    finally:
        monkeypatch.undo()
        formats.cache_clear()


def test_a_registered_rows_runtime_is_listed_in_every_report_and_its_peaks_are_measured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's package list and optimize info's runtimes are read from the table, registered rows included."""
    install("OWN_RUNTIME", tmp_path, monkeypatch)
    try:
        packages = environment(1)["packages"]
        assert packages["yolo-optimize-test-plugin"] == "0" and list(packages)[:4] == [
            "yolo-optimize", "torch", "onnxruntime", "openvino"]
        assert {"ncnn", "executorch", "tensorrt", "torch-tensorrt"} <= packages.keys()
        assert measured_runtimes() == {"torch": "yolo_optimize.limits.torch_kernels",
                                       "onnxruntime": "yolo_optimize.limits.onnxruntime_kernels",
                                       "openvino": "yolo_optimize.limits.openvino_kernels",
                                       "yolo-optimize-test-plugin": "yolo_optimize.limits.onnxruntime_kernels"}
    finally:
        monkeypatch.undo()
        formats.cache_clear()


def test_registered_rows_join_the_table_and_the_help_and_the_plan(registered: None) -> None:
    from yolo_optimize.building.pipeline import plan
    from yolo_optimize.checkpoint import resolve_source

    assert {"onnx-ort", "onnx-cpu", "onnx-openvino"} <= formats().keys() and "onnx-ort" in targets_help()
    assert "onnx-cpu" not in targets_help(), "a runtime configuration builds nothing"
    request = BuildRequest(source=resolve_source(str(WEIGHTS)), targets=("onnx-ort",), precisions=("fp32",),
                           imgsz=640, batch_sizes=(1,), opset=18, device="cpu", parity_images=())
    nodes = {node.name: node for node in plan(request)}
    assert nodes["onnx-ort-fp32"].parents == ("onnx-fp32", "reference") and nodes["onnx-ort-fp32"].requested
    assert nodes["onnx-fp32"].parents == ("onnx-export", "reference") and not nodes["onnx-fp32"].requested


def test_a_registered_format_and_providers_are_built_checked_measured_and_recommended(
        registered: None, built: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The session build's yolov5n (its ONNX nodes cached) gains onnx-ort-fp32, built and parity-checked in spawned
    processes; the evaluation measures it and the onnx file once more per provider row, each a row of its own."""
    import yolo_optimize as yo

    out = tmp_path / "artifacts"
    shutil.copytree(built.parent, out, ignore=shutil.ignore_patterns("torchscript-*", "openvino-*", "onnx-fp16"))
    build = yo.build(WEIGHTS, targets=["onnx-ort"], precisions=["fp32"], parity_data=VAL_DATA, out=out)
    statuses = build.statuses()
    assert (statuses["onnx-ort-fp32"], statuses["onnx-fp32"]) == ("built", "cached")
    assert (out / "yolov5n" / "onnx-ort-fp32" / "yolov5n_ort.onnx").is_file()

    # alone: its pick is ONNX Runtime over PyTorch eager, and beside the other worker eager can measure faster (the
    # build above reads no speed, so it runs beside the other worker's tests)
    with alone(request):
        report = yo.evaluate(out, data=VAL_DATA, batch_sizes=[1], max_images=8, min_time=0, repeats=1,
                             end_to_end=False)
    rows = {row.name: row for row in report.rows}
    assert {name for name, row in rows.items() if row.measurements and not row.error} == {
        "pytorch-fp32", "onnx-fp32", "onnx-cpu-fp32", "onnx-ort-fp32"}
    assert "has no OpenVINOExecutionProvider" in rows["onnx-openvino-fp32"].skipped
    assert rows["onnx-cpu-fp32"].entry == rows["onnx-fp32"].entry, "a provider row runs the same file"
    maps = [rows[name].accuracy.map50_95 for name in ("onnx-fp32", "onnx-cpu-fp32", "onnx-ort-fp32")]
    assert max(maps) - min(maps) < 0.005, maps
    best = yo.recommend(report, max_map_drop=1.0, batch_size=1)
    assert set(best.recommendation.excluded) == {"onnx-openvino-fp32"}, "the registered rows are candidates"
    onnx_rows = {"onnx-fp32", "onnx-cpu-fp32", "onnx-ort-fp32"}  # which of them is fastest is this run's noise
    assert best.artifact in onnx_rows, f"PyTorch eager picked over ONNX Runtime: {best.artifact}"
    assert f'"{best.path}"' in best.load_snippet
